#!/usr/bin/env bash
# Lesson 9's level 2 (the portable flash kernel) and its variants on the lent GPU machine in one
# call: SDPA's backends (cuDNN, FlashAttention-2, memory-efficient) for bf16 and fp32 while the
# build runs, then every variant of level 2 forced in turn (`bench --variant
# flash_attention=NAME`) at T = 512 .. 8K, d = 64 and 128, bf16 and fp32, the lesson's every
# level once for its peak device memory per level, the attention GPU tests and compute-sanitizer
# memcheck on the flash levels at the tests' small odd shapes. Each stage is bounded; later ones
# are skipped when the call's time runs low (FL_ATTN_BUDGET seconds, 235 by default). Logs under
# $OUT, the CSVs and JSON files in $OUT/results.tgz; `scripts/attention-table.py --bench
# bench-*.csv --peers peers-*.json` (unpacked) prints the table.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
keep=/tmp/attn-variants  # CSVs and JSON files, packed into $OUT/results.tgz at the end
mkdir -p "$keep"
trap 'tar czf "$OUT/results.tgz" -C "$keep" . 2>/dev/null; rm -f "$OUT/build.log"' EXIT
start=$(date +%s)
left() { echo $(( ${FL_ATTN_BUDGET:-235} - ($(date +%s) - start) )); }
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
source scripts/common.sh
unpack_carried_debs
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(date -u +%FT%TZ)"
sizes=512,1K,2K,4K,8K
# SDPA while the build keeps the CPUs busy (the GPU is idle until the build is done).
( timeout 90 python3 scripts/peers.py --lessons attention --precisions bf16,fp32 --peers sdpa \
    --sizes $sizes --inner 64 --reps 10 --out "$keep/peers-64.json" > "$OUT/peers.log" 2>&1
  timeout 50 python3 scripts/peers.py --lessons attention --precisions bf16 --peers sdpa \
    --sizes $sizes --inner 128 --reps 10 --out "$keep/peers-128.json" >> "$OUT/peers.log" 2>&1 ) &
peers=$!
build=build-gpu
if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
         -DCMAKE_PREFIX_PATH="$prefix/usr" &&
       cmake --build "$build" -j"$(nproc)" --target fusionlab fusionlab_gpu_tests; } \
       > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
log "build done at $(( $(date +%s) - start )) s"
app="$build/fusionlab"
tests="$build/tests/fusionlab_gpu_tests"
"$app" lessons --json > "$keep/catalog.json" 2>> "$OUT/summary.txt"
for o in $(find "$build" -name 'flash_mma*.cu.o' -o -name 'attention.cu.o' | sort); do
  echo "$(basename "$o"): $(cuobjdump -res-usage "$o" 2>/dev/null | grep -A1 flash_attention |
    grep -o 'REG:[0-9]*\|STACK:[0-9]*\|LOCAL:[0-9]*' | sort | uniq -c | tr '\n' ' ')" >> "$OUT/summary.txt"
done
wait $peers
log "peers rc $? at $(( $(date +%s) - start )) s"

# Level 2 with each variant forced, d = 64 then 128; fp32 after bf16.
bench() {  # precision, d, variant
  timeout 25 "$app" bench --lesson attention --levels 2 --precision "$1" --cache cold \
    --sizes $sizes --inner "$2" --no-counters --reps 10 --seconds 0.03 \
    --variant "flash_attention=$3" --csv "$keep/bench-$1-$2-$3.csv" >> "$OUT/bench.txt" 2>&1
  log "bench $1 d=$2 $3: rc $?"
}
for v in flash_mma flash_mma_keys128; do bench bf16 64 $v; done
bench bf16 128 flash_mma
for v in flash_mma flash_fp32_tiles; do bench fp32 64 $v; done

# Every level once, for the peak device memory per level (the table after bench's rows).
timeout 40 "$app" bench --lesson attention --precision bf16 --cache cold \
  --sizes 512,1K,2K,4K,8K,16K --inner 64 --no-counters --reps 5 --seconds 0.02 \
  --out "$keep/levels-bf16-64.json" > "$OUT/levels.txt" 2>&1
log "every level: rc $?"
sed -n '/peak device memory/,/per launch/p' "$OUT/levels.txt" | tee -a "$OUT/summary.txt"

timeout $(( $(left) > 80 ? 60 : 40 )) "$tests" \
  --gtest_filter='Attention/AttentionGpu.*:AttentionPhases.*:AttentionMemory.*:AttentionShapes.*' > "$OUT/tests.log" 2>&1
log "gpu tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|actual' "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.txt"

if (( $(left) > 25 )); then
  FL_TEST_LEVELS=2 FL_TEST_MAX_FLOPS=5e7 timeout $(( $(left) - 5 )) compute-sanitizer \
    --tool memcheck --error-exitcode 9 "$tests" \
    --gtest_filter='Attention/AttentionGpu.EveryLevelMatches*/bf16' > "$OUT/memcheck.log" 2>&1
  log "memcheck rc $?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tail -3 | tr '\n' ' ')"
fi
log "done at $(( $(date +%s) - start )) s"
