#!/usr/bin/env bash
# The exchange's 49-64-token RTX plan (99 KiB, bf16, C = 768, 16 warps) as its own kernel instance
# with the plan's fields as constants (FL_FFN_EX_FIXED=1, the default; kernels/ffn/
# ffn_hidden_slice_fixed.h's ffn_slice_fix_rtx64) against the general exchange kernel
# (FL_FFN_EX_FIXED=0), on the lent GPU in one call (run with a 185 s limit). Builds fusionlab and
# the GPU tests into ../build-ex-fixed; HiddenSliceFfnExchangeFixedAsAnRtxCard first (not timed:
# whether the form is right before its timings count), then `fusionlab bench --choose-as 8.6`
# (bf16, cold, levels 1 and 2 at 1, 16, 49 and 64 tokens; only 49 and 64 run the exchange) the two
# forms interleaved three times, the phases at 64 tokens once each; then, nothing timed, the
# fixed test with the exchange and ring RTX-card tests, and compute-sanitizer memcheck and
# racecheck on the fixed test, in parallel. Logs under $OUT: summary.txt first.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-181}
build=../build-ex-fixed
gpu_check_build "$build" 135 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
command -v cuobjdump > /dev/null &&
  cuobjdump --dump-resource-usage "$build/CMakeFiles/fusionlab_kernels.dir/kernels/ffn/ffn_hidden_slice.cu.o" 2>&1 |
  grep -A1 "exchange" | grep -o "REG:[0-9]* STACK:[0-9]*" | tr '\n' ' ' | sed 's/^/regs (exchange kernels): /' >> "$S"
echo >> "$S"
FIXED='*PortableStream*HiddenSliceFfnExchangeFixedAsAnRtxCard/*'
timeout 20 "$G" --gtest_filter="$FIXED" > "$OUT/quick.log" 2>&1
echo "quick: $(grep -cE '^\[       OK' "$OUT/quick.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/quick.log" | tr '\n' ' ')" | tee -a "$S"
B=(--lesson ffn --levels 1,2 --sizes 1,16,49,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
P=(--lesson ffn --levels 2 --sizes 64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
declare -A FORM=([general]=FL_FFN_EX_FIXED=0 [fixed]=FL_FFN_EX_FIXED=1)
for i in 1 2 3; do
  for n in general fixed; do gpu_check_row "$n-$i" "${FORM[$n]}" 25 "${B[@]}"; done
done
for n in general fixed; do gpu_check_phases "$n" "${FORM[$n]}" 15 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
gpu_check_lane tests FL_NONE=1 "$FIXED:*PortableStream*HiddenSliceFfnRingExchange*:*PortableStream*HiddenSliceFfnRingAsAnRtxCard*"
gpu_check_lane san-memcheck FL_NONE=1 "$FIXED" memcheck
gpu_check_lane san-racecheck FL_NONE=1 "$FIXED" racecheck
wait
gpu_check_lanes_summary tests san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
