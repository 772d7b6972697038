#!/usr/bin/env bash
# The hidden slice's 9-16-token RTX plan (99 KiB, bf16, C = 768) as its own kernel with the plan's
# fields as constants (FL_FFN_SLICE_FIXED=1, kernels/ffn/ffn_hidden_slice_fixed.h: 3,208 SASS
# instructions against the plan's kernel's 10,104, the hot path after W2 lands in one run of
# code) against the plan's kernel, on the lent GPU in one call (run with a 190 s limit). Builds
# fusionlab and the GPU tests into ../build-slice-fixed, then `fusionlab bench --choose-as 8.6`
# (bf16, cold, levels 1 and 2 at 1, 9 and 16 tokens; 1 token runs the plan's kernel either way)
# the two forms interleaved three times, the phases at 16 tokens once each; then, nothing
# timed, HiddenSliceFfnFixedAsAnRtxCard and the other RTX-card hidden-slice tests with the
# fixed kernel allowed, and compute-sanitizer memcheck and racecheck on the fixed test, in
# parallel. Logs under $OUT: summary.txt first.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-slice-fixed
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 1,9,16 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
declare -A FORM=([plan]=FL_FFN_SLICE_FIXED=0 [fixed]=FL_FFN_SLICE_FIXED=1)
for i in 1 2 3; do
  for n in plan fixed; do gpu_check_row "$n-$i" "${FORM[$n]}" 60 "${B[@]}"; done
done
P=(--lesson ffn --levels 2 --sizes 16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for n in plan fixed; do gpu_check_phases "$n" "${FORM[$n]}" 45 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
FIXED='*PortableStream*HiddenSliceFfnFixedAsAnRtxCard*'
gpu_check_lane fixed FL_FFN_SLICE_FIXED=1 "$FIXED:*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnW2EarlyAsAnRtxCard*:*HiddenSliceFfnMatchesReferenceAtOddShapes*"
gpu_check_lane san-memcheck FL_FFN_SLICE_FIXED=1 "$FIXED" memcheck
gpu_check_lane san-racecheck FL_FFN_SLICE_FIXED=1 "$FIXED" racecheck
wait
gpu_check_lanes_summary fixed san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
