#!/usr/bin/env bash
# The hidden slice as an RTX card plans it (99 KiB, 1-16 bf16 tokens, w2_during_up), on the lent
# GPU in one call (run with a 190 s limit): the plan's form (W1's columns asked for before x's
# rows, w1_first) against x's rows first (FL_FFN_SLICE's eighteenth number 2) and, by name in
# FL_P25_FORMS, W2's last rows past x and W1 asked for right after them (early: sixteenth number
# 1) or once x and W1 are in (after: 3; both: with W1 first). Builds fusionlab and the GPU tests
# into ../build-port25, then `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1,
# 16, 64 tokens; 64 is the ring form, the same every way) the forms interleaved three times, the
# phases at 16 tokens once each; then, nothing timed, the GPU tests and compute-sanitizer memcheck
# and racecheck on the forms' shapes (HiddenSliceFfnW2EarlyAsAnRtxCard), in parallel.
# Logs under $OUT: summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port25
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 1,16,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
F=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0
declare -A FORM=([plan]=FL_NONE=1 [xfirst]=$F,0,0,2 [after]=$F,3,0,2 [both]=$F,3,0,1 [early]=$F,1,0,2)
NAMES=(${FL_P25_FORMS:-plan xfirst})
for i in 1 2 3; do
  for n in "${NAMES[@]}"; do gpu_check_row "$n-$i" "${FORM[$n]}" 75 "${B[@]}"; done
done
P=(--lesson ffn --levels 2 --sizes 16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for n in "${NAMES[@]}"; do gpu_check_phases "$n" "${FORM[$n]}" 60 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
SMALL='*PortableStream*HiddenSliceFfnW2EarlyAsAnRtxCard*'
gpu_check_lane rtx "${FORM[both]}" '*HiddenSliceFfnW2EarlyAsAnRtxCard*:*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnWithW2Late*'
gpu_check_lane gpu FL_NONE=1 '*HiddenSlice*:*PortableStream*:-*HiddenSliceFfnRingForms*:*EarlyAsAnRtx*:*SliceFfnAsAnRtx*:*WithW2Late*'
gpu_check_lane gpu2 FL_NONE=1 '*FfnTwoPhase*:Catalog/*ffn*'
gpu_check_lane san-memcheck FL_NONE=1 "$SMALL" memcheck
gpu_check_lane san-racecheck FL_NONE=1 "$SMALL" racecheck
wait
gpu_check_lanes_summary rtx gpu gpu2 san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
