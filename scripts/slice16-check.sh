#!/usr/bin/env bash
# The hidden slice at 16 tokens: x's and W2's resident copies one column a thread, the sum's
# shuffle offset worked out ahead and the grid barrier's arrival an acq_rel atomic (the plan's)
# against all three as before (FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,4,2,2), on the lent GPU in one
# call (run with a 200 s limit). Builds fusionlab and the GPU tests into ../build-port22, then
# `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1, 16, 64 tokens) the two ways
# interleaved three times, the phases at 16 tokens once each way; then, nothing timed, the GPU
# tests (*HiddenSlice*:*PortableStream*, HiddenSliceFfnRingForms apart) and compute-sanitizer
# memcheck and racecheck on the small shapes, all in parallel.
# Logs under $OUT: summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-194}
build=../build-port22
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 1,16,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
OLD=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,4,2,2
for i in 1 2 3; do
  gpu_check_row "new-$i" FL_NONE=1 70 "${B[@]}"
  gpu_check_row "old-$i" "$OLD" 70 "${B[@]}"
done
P=(--lesson ffn --levels 2 --sizes 16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
gpu_check_phases new FL_NONE=1 60 "${P[@]}"
gpu_check_phases old "$OLD" 60 "${P[@]}"
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
SMALL='*PortableStream*HiddenSliceFfnWithW2Late*:*PortableStream*HiddenSliceFfnRingSmallShapes*'
gpu_check_lane ring-forms FL_NONE=1 '*HiddenSliceFfnRingForms*'
gpu_check_lane gpu FL_NONE=1 '*HiddenSlice*:*PortableStream*:-*HiddenSliceFfnRingForms*'
gpu_check_lane san-memcheck FL_NONE=1 "$SMALL" memcheck
gpu_check_lane san-racecheck FL_NONE=1 "$SMALL" racecheck
wait
gpu_check_lanes_summary ring-forms gpu san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
