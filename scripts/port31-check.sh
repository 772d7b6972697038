#!/usr/bin/env bash
# The exchange's down product with its index math worked out during the group's barrier
# (ffn_hidden_slice_exchange_down.cuh; the plan's at 49-64 bf16 tokens on 16 warps, as an RTX card
# plans it) against the form before (FL_FFN_EX_DOWN=0: ex_down's general loop after h lands) on
# the lent GPU in one call (run with a 190 s limit). Builds fusionlab and the GPU tests into
# ../build-port31; the exchange's tests and the ring tests that run the plan's default first
# (nothing in the environment: the exchange is the plan's at 64 tokens), then `fusionlab bench
# --choose-as 8.6` (bf16, cold, levels 1 and 2 at 16, 48 and 64 tokens) both forms interleaved
# three times, the phases at 64 tokens each way; then, nothing timed, the ring tests with the new
# form, compute-sanitizer memcheck and racecheck on the small exchange test, in parallel.
# Logs under $OUT: summary.txt first.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port31
gpu_check_build "$build" 125 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
command -v cuobjdump > /dev/null &&
  cuobjdump --dump-resource-usage "$build/CMakeFiles/fusionlab_kernels.dir/kernels/ffn/ffn_hidden_slice.cu.o" 2>&1 |
  grep -A1 "exchange" | grep -o "REG:[0-9]* STACK:[0-9]*" | tr '\n' ' ' | sed 's/^/regs (exchange 8, 16, 16 before): /' >> "$S"
echo >> "$S"
declare -A FORM=([ahead]=FL_NONE=1 [before]=FL_FFN_EX_DOWN=0)
# The default's tests first (not timed): whether the form is right before its timings count.
timeout 40 "$G" --gtest_filter='*PortableStream*HiddenSliceFfnRingExchange*:*PortableStream*HiddenSliceFfnRingAsAnRtxCard*' > "$OUT/quick.log" 2>&1
echo "quick: $(grep -cE '^\[       OK' "$OUT/quick.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/quick.log" | tr '\n' ' ')" | tee -a "$S"
B=(--lesson ffn --levels 1,2 --sizes "${FL_P31_SIZES:-16,48,64}" --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
P=(--lesson ffn --levels 2 --sizes 64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for i in 1 2 3; do
  for n in ahead before; do gpu_check_row "$n-$i" "${FORM[$n]}" 40 "${B[@]}"; done
  if [[ $i == 1 ]]; then
    for n in ahead before; do gpu_check_phases "$n" "${FORM[$n]}" 40 "${P[@]}"; done
  fi
done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
gpu_check_lane ring FL_NONE=1 '*PortableStream*HiddenSliceFfnRing*'
gpu_check_lane san-memcheck FL_NONE=1 '*PortableStream*HiddenSliceFfnRingExchange/*' memcheck
gpu_check_lane san-racecheck FL_NONE=1 '*PortableStream*HiddenSliceFfnRingExchange/*' racecheck
wait
gpu_check_lanes_summary ring san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
