#!/usr/bin/env bash
# The exchange's fixed kernel (49-64 bf16 tokens as an RTX card): its up product's forms chosen by
# FL_EX_FORM (0: the form before; 1: the parts' reduce with swizzled rows; 2: the product over its
# two batches unrolled, x's loads without tests; 3: both), three interleaved rounds at 1/16/64
# tokens with level 1, the phases at 64, Nsight Compute on form 3 at 64 tokens (warp states,
# per-instruction samples, shared-memory wavefronts); then the fixed and exchange tests and
# compute-sanitizer memcheck / racecheck on form 3. Run with a 188 s limit.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-183}
build=../build-port34
gpu_check_build "$build" 120 fusionlab
echo "build app: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"; G="$build/tests/fusionlab_gpu_tests"
timeout 100 cmake --build "$build" -j14 --target fusionlab_gpu_tests > "$OUT/build-tests.log" 2>&1 &
bpid=$!
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
P=(--lesson ffn --levels 2 --sizes 64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 3)
FL_EX_FORM=3 timeout 40 "$NCU" --kernel-name regex:exchange --launch-skip 1 --launch-count 1 --clock-control none \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis_Tables \
  -o "$OUT/up" -f "$app" bench "${P[@]}" > "$OUT/ncu-run.log" 2>&1
echo "ncu rc $? $(( $(date +%s) - t0 )) s" | tee -a "$S"
if [[ -f "$OUT/up.ncu-rep" ]]; then
  "$NCU" -i "$OUT/up.ncu-rep" --print-details all > "$OUT/ncu-details.txt" 2>&1
  "$NCU" -i "$OUT/up.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu-source.csv" 2>&1
fi
wait $bpid; echo "build tests rc $? $(( $(date +%s) - t0 )) s" | tee -a "$S"
B=(--lesson ffn --levels 1,2 --sizes 1,16,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
for i in 1 2 3; do
  for v in 0 1 2 3; do gpu_check_row "form$v-$i" "FL_EX_FORM=$v" 62 "${B[@]}"; done
done
for v in 0 1 2 3; do
  gpu_check_phases "form$v" "FL_EX_FORM=$v" 55 --lesson ffn --levels 2 --sizes 64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6
done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
F='*HiddenSliceFfnExchangeFixedAsAnRtxCard*'
gpu_check_lane tests3 FL_EX_FORM=3 "$F:*HiddenSliceFfnFixedAsAnRtxCard*:*HiddenSliceFfnExchange*:*Variant*"
gpu_check_lane mem3 FL_EX_FORM=3 "$F" memcheck
gpu_check_lane race3 FL_EX_FORM=3 "$F" racecheck
gpu_check_lane tests1 FL_EX_FORM=1 "$F"
gpu_check_lane tests2 FL_EX_FORM=2 "$F"
wait
gpu_check_lanes_summary tests3 mem3 race3 tests1 tests2
tar czf "$OUT/ncu.tgz" -C "$OUT" $(cd "$OUT" && ls up.ncu-rep ncu-*.txt ncu-*.csv ncu-run.log build-tests.log 2>/dev/null) 2>/dev/null &&
  rm -f "$OUT"/up.ncu-rep "$OUT"/ncu-*.txt "$OUT"/ncu-*.csv "$OUT"/ncu-run.log "$OUT"/build-tests.log
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
