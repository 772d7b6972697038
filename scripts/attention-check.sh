#!/usr/bin/env bash
# Lesson 9 (attention) on the lent GPU machine in one call: build fusionlab and the GPU tests,
# run the attention GPU tests, benchmark the flash levels (2: mma.sync, 3: the Hopper kernel)
# against PyTorch's SDPA (default backend = cuDNN on an H100, and FlashAttention-2) in the same
# call, bf16, cold L2, causal, B T = 16K, T = 512 .. 8K, d = 64 and 128 (scripts/attention-table.py
# prints the ratios), the flash kernels' phase timelines, compute-sanitizer (memcheck, racecheck,
# synccheck) on the flash levels at the tests' small odd shapes, and Nsight Compute on one
# launch of level 3. Each stage is bounded; later ones are skipped when the call's time runs low
# (FL_ATTN_BUDGET seconds, 300 by default). Logs under $OUT (8 files at most come back).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
start=$(date +%s)
left() { echo $(( ${FL_ATTN_BUDGET:-300} - ($(date +%s) - start) )); }
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
source scripts/common.sh
unpack_carried_debs
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(date -u +%FT%TZ)"
build=build-gpu
if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" \
         -DCMAKE_PREFIX_PATH="$prefix/usr" &&
       cmake --build "$build" -j"$(nproc)" --target fusionlab fusionlab_gpu_tests; } \
       > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
log "build done at $(( $(date +%s) - start )) s"
obj=$(find "$build" -name 'flash_wgmma.cu.o' | head -1)
[[ -n $obj ]] && log "flash_wgmma SASS: $(cuobjdump -sass "$obj" 2>/dev/null | grep -c HGMMA) HGMMA, $(cuobjdump -sass "$obj" 2>/dev/null | grep -c 'LDL\|STL') LDL/STL"
status=0
app="$build/fusionlab"
tests="$build/tests/fusionlab_gpu_tests"

timeout 120 "$tests" --gtest_filter='*ttention*' > "$OUT/tests.log" 2>&1 || status=1
log "gpu tests: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|actual' "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.txt"

mkdir -p /tmp/attn
for d in 64 128; do
  if (( $(left) > 120 )); then
    timeout 90 python3 scripts/peers.py --lessons attention --precisions bf16 --peers sdpa \
      --sizes 512,1K,2K,4K,8K --inner $d --reps 10 --out /tmp/attn/peers-$d.json \
      >> "$OUT/peers.log" 2>&1 || status=1
    timeout 60 "$app" bench --lesson attention --levels 2,3 --precision bf16 --cache cold \
      --sizes 512,1K,2K,4K,8K --inner $d --no-counters --reps 10 --seconds 0.05 \
      --csv /tmp/attn/bench-$d.csv --peers /tmp/attn/peers-$d.json >> "$OUT/bench.txt" 2>&1 ||
      status=1
  fi
done
python3 scripts/attention-table.py --bench /tmp/attn/bench-*.csv --peers /tmp/attn/peers-*.json \
  2>&1 | tee -a "$OUT/summary.txt"

if (( $(left) > 90 )); then
  for d in 64 128; do
    timeout 40 "$app" bench --lesson attention --levels 2,3 --precision bf16 --sizes 4K \
      --inner $d --no-counters --reps 10 --seconds 0.05 --phases \
      --out /tmp/attn/phases-$d.json >> "$OUT/bench.txt" 2>&1 || status=1
  done
  grep -E 'phases:|^ +[A-Za-z/ ]+ +[0-9.]+ us' "$OUT/bench.txt" | tail -20 >> "$OUT/summary.txt"
fi

# Our flash kernels only (levels 2 and 3; FL_TEST_MAX_FLOPS skips the lesson-sized test).
for tool in memcheck racecheck synccheck; do
  if (( $(left) > 50 )); then
    FL_TEST_LEVELS=23 FL_TEST_MAX_FLOPS=5e7 timeout 45 compute-sanitizer --tool $tool \
      --error-exitcode 9 "$tests" --gtest_filter='Attention/AttentionGpu.EveryLevelMatches*/bf16' \
      > /tmp/attn/san-$tool.log 2>&1
    rc=$?
    [[ $rc == 0 ]] || status=1
    { echo "### $tool rc $rc"; cat /tmp/attn/san-$tool.log; } >> "$OUT/sanitizer.log"
    log "compute-sanitizer $tool: rc $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/attn/san-$tool.log | tail -3 | tr '\n' ' ')"
  else
    log "compute-sanitizer $tool: skipped (time)"
  fi
done

if (( $(left) > 35 )) && command -v ncu > /dev/null; then
  timeout $(( $(left) - 5 )) ncu --kernel-name regex:flash_wgmma_kernel --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section LaunchStats \
    "$app" bench --lesson attention --levels 3 --precision bf16 --sizes 4K --inner 64 \
    --no-counters --reps 3 --seconds 0.01 > "$OUT/ncu.txt" 2>&1
  log "ncu: rc $? ($(wc -l < "$OUT/ncu.txt") lines)"
fi
tar czf "$OUT/results.tgz" -C /tmp/attn . 2>/dev/null
rm -f "$OUT/build.log"
log "done at $(( $(date +%s) - start )) s, status $status"
exit $status
