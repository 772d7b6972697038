#!/usr/bin/env bash
# ln_panel's forms for the 64-token plan (bf16, `--choose-as 8.6`) on the lent GPU in one call
# (run with a 190 s limit): the plan's (FL_LN_PANEL_FORM 11) against the staggered copies (139),
# gamma, beta and the bias by cp.async (267), the rows normalized from registers (523) and all
# three (907), interleaved FL_ROUNDS rounds (2 by default); then 907 with W asked for with x
# (FL_LN_PANEL_W=0) and on 32 x 40 tiles (116 blocks) once; the phases at 64 tokens for 11, 139
# and 907. Builds fusionlab and the GPU tests into ../build-port26. Then, nothing timed, the LN
# GPU tests with the plan's form and with 907, and compute-sanitizer memcheck and racecheck on
# the small shapes with 907, in parallel. Logs under $OUT: summary.txt first.
# FL_FORMS overrides the interleaved forms (words), FL_BEST the form of the extra rows and tests.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port26
gpu_check_build "$build" 140 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--levels 1,2 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
P=(--levels 2 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
R=${FL_TEST_RESERVE:-40}
BEST=${FL_BEST:-907}
LN=(--lesson layernorm_linear --sizes 1,4,16,64,256)
for i in $(seq 1 "${FL_ROUNDS:-2}"); do
  for f in ${FL_FORMS:-11 139 267 523 907}; do
    gpu_check_row "ln-$f-$i" "FL_LN_PANEL_FORM=$f" "$R" "${LN[@]}" "${B[@]}"
  done
done
gpu_check_row "ln-$BEST-w0" "FL_LN_PANEL_FORM=$BEST FL_LN_PANEL_W=0" "$R" "${LN[@]}" "${B[@]}"
gpu_check_row "ln-$BEST-32x40" "FL_LN_PANEL_FORM=$BEST FL_LN_PANEL=32x40" "$R" \
  --lesson layernorm_linear --sizes 16,64 "${B[@]}"
for f in 11 139 "$BEST"; do
  gpu_check_phases "ln64-$f" "FL_LN_PANEL_FORM=$f" "$R" --lesson layernorm_linear --sizes 64 "${P[@]}"
done
grep -E "^---|median over blocks" "$OUT/phases.txt" | tee -a "$S"
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
LNT='Variants.PanelLayerNorm*:Catalog/*layernorm_linear*:*PortableStream*LayerNorm*:PhasesGpu.LayerNormLinear*'
gpu_check_lane ln-plan FL_NONE=1 "$LNT"
gpu_check_lane ln-best "FL_LN_PANEL_FORM=$BEST" "$LNT"
SMALL_LN='Variants.PanelLayerNormLinearSmallShapes'
for tool in memcheck racecheck; do
  gpu_check_lane "san-ln-$tool" "FL_LN_PANEL_FORM=$BEST" "$SMALL_LN" $tool
done
wait
gpu_check_lanes_summary ln-plan ln-best san-ln-memcheck san-ln-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
