#!/usr/bin/env bash
# Lesson 9's fp32 level 2 on the lent GPU machine in one call: SDPA fp32 (its default and its
# memory-efficient backend) while the build runs, the attention GPU tests in fp32 (level 2's
# fp32 variants forced among them), each fp32 variant of level 2 forced in turn (`bench --variant
# flash_attention=NAME`, T = 512 .. 8K, d = 64, cold L2), compute-sanitizer memcheck and
# racecheck on level 2 at the tests' small odd shapes, and the catalog (`lessons --json`).
# Each stage is bounded; later ones are skipped when the call's time runs low (FL_ATTN_BUDGET
# seconds, 190 by default). Logs under $OUT, CSVs and JSON files in $OUT/results.tgz;
# `scripts/attention-table.py --variants --bench bench-*.csv --peers peers-*.json` (unpacked)
# prints the table.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
keep=/tmp/attn-fp32
mkdir -p "$keep"
trap 'tar czf "$OUT/results.tgz" -C "$keep" . 2>/dev/null' EXIT
start=$(date +%s)
left() { echo $(( ${FL_ATTN_BUDGET:-190} - ($(date +%s) - start) )); }
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
source scripts/common.sh
unpack_carried_debs
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(date -u +%FT%TZ)"
sizes=512,1K,2K,4K,8K
variants=${FL_FP32_VARIANTS:-flash_mma flash_fp32_tiles}
( timeout 80 python3 scripts/peers.py --lessons attention --precisions fp32 \
    --peers sdpa,sdpa_efficient --sizes $sizes --inner 64 --reps 10 \
    --out "$keep/peers-fp32-64.json" > "$OUT/peers.log" 2>&1 ) &
peers=$!
build=build-gpu
if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
         -DCMAKE_PREFIX_PATH="$prefix/usr" &&
       cmake --build "$build" -j"$(nproc)" --target fusionlab fusionlab_gpu_tests; } \
       > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
rm -f "$OUT/build.log"
log "build done at $(( $(date +%s) - start )) s"
app="$build/fusionlab"
tests="$build/tests/fusionlab_gpu_tests"
"$app" lessons --json > "$OUT/catalog.json" 2>> "$OUT/summary.txt"
for o in $(find "$build" -name 'flash_fp32_tiles.cu.o' -o -name 'attention.cu.o' | sort); do
  cuobjdump -res-usage "$o" 2>/dev/null | grep -A1 'flash_fp32\|flash_attention_kernel.*FlashArgsIf' |
    grep -o 'Function [^ ]*\|REG:[0-9]*\|STACK:[0-9]*\|LOCAL:[0-9]*' | tr '\n' ' ' >> "$OUT/summary.txt"
  echo >> "$OUT/summary.txt"
done

# Correctness first: every level in fp32 against the fp64 reference (level 2's fp32 variants
# forced in the odd-shape test), the lesson shapes, the refusals.
timeout 50 "$tests" --gtest_filter='Attention/AttentionGpu.*/fp32:AttentionShapes.*' \
  > "$OUT/tests.log" 2>&1
log "gpu tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|actual' "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.txt"

wait $peers
log "peers rc $? at $(( $(date +%s) - start )) s"
for v in $variants; do
  timeout 25 "$app" bench --lesson attention --levels 2 --precision fp32 --cache cold \
    --sizes $sizes --inner 64 --no-counters --reps 10 --seconds 0.03 \
    --variant "flash_attention=$v" --csv "$keep/bench-fp32-64-$v.csv" >> "$OUT/bench.txt" 2>&1
  log "bench fp32 d=64 $v: rc $? at $(( $(date +%s) - start )) s"
done

for tool in memcheck racecheck; do
  (( $(left) > 25 )) || break
  FL_TEST_LEVELS=2 FL_TEST_MAX_FLOPS=5e7 timeout $(( $(left) > 60 ? 45 : $(left) - 8 )) \
    compute-sanitizer --tool $tool --error-exitcode 9 "$tests" \
    --gtest_filter='Attention/AttentionGpu.EveryLevelMatches*/fp32' > "$OUT/$tool.log" 2>&1
  log "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$tool.log" | tail -3 | tr '\n' ' ')"
done
log "done at $(( $(date +%s) - start )) s"
