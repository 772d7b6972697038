#!/usr/bin/env bash
# ln_panel's plan (bf16, `--choose-as 8.6`) on the lent GPU in one call (run with a 190 s
# limit): the plan's form (267: gamma, beta and the bias by cp.async in x's commit group, W's
# slice asked for right behind x's copies) against the form before it (FL_LN_PANEL_FORM=11, W
# once x is in: FL_LN_PANEL_W=1) and the plan's with W once x is in, interleaved FL_ROUNDS rounds
# (4 by default); the plan's on 16 x 72 tiles at 64 tokens once; the phases at 64 tokens each
# way. Builds fusionlab and the GPU tests into ../build-port26. Then, nothing timed, the LN GPU
# tests (the plan's and with W once x is in), the Variants tests, and compute-sanitizer memcheck
# and racecheck on the small shapes both ways, in parallel. Logs under $OUT: summary.txt first.
# The 2026-11-27 15:27 UTC call (docs/PERFORMANCE.md) ran an earlier version of it (forms 11,
# 139, 267, 523 and 907, two bits since removed, interleaved twice); the 15:34 call ran this one
# when W once x is in was the plan's (its rows: FL_NONE then meant W once x is in, and W with x
# was FL_LN_PANEL_W=0).
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
R=${FL_TEST_RESERVE:-62}
LN=(--lesson layernorm_linear --sizes 1,4,16,64,256)
W1="FL_LN_PANEL_W=1"
for i in $(seq 1 "${FL_ROUNDS:-4}"); do
  gpu_check_row "ln-plan-$i" FL_NONE=1 "$R" "${LN[@]}" "${B[@]}"
  gpu_check_row "ln-11-$i" "FL_LN_PANEL_FORM=11 $W1" "$R" "${LN[@]}" "${B[@]}"
  gpu_check_row "ln-w1-$i" "$W1" "$R" "${LN[@]}" "${B[@]}"
done
gpu_check_row "ln-16x72" FL_LN_PANEL=16x72 "$R" --lesson layernorm_linear --sizes 64 "${B[@]}"
gpu_check_phases ln64-plan FL_NONE=1 "$R" --lesson layernorm_linear --sizes 64 "${P[@]}"
gpu_check_phases ln64-11 "FL_LN_PANEL_FORM=11 $W1" "$R" --lesson layernorm_linear --sizes 64 "${P[@]}"
gpu_check_phases ln64-w1 "$W1" "$R" --lesson layernorm_linear --sizes 64 "${P[@]}"
gpu_check_phases ln16-plan FL_NONE=1 "$R" --lesson layernorm_linear --sizes 16 "${P[@]}"
grep -E "^---|median over blocks" "$OUT/phases.txt" | tee -a "$S"
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
LNT='Variants.PanelLayerNorm*:Catalog/*layernorm_linear*:*PortableStream*LayerNorm*:PhasesGpu.LayerNormLinear*'
gpu_check_lane ln-plan FL_NONE=1 "$LNT"
gpu_check_lane ln-w1 "$W1" "$LNT"
gpu_check_lane variants FL_NONE=1 '*Variant*:-Variants.PanelLayerNorm*'
SMALL_LN='Variants.PanelLayerNormLinearSmallShapes'
for tool in memcheck racecheck; do
  gpu_check_lane "san-ln-$tool" FL_NONE=1 "$SMALL_LN" $tool
  gpu_check_lane "san-w1-$tool" "$W1" "$SMALL_LN" $tool
done
wait
gpu_check_lanes_summary ln-plan ln-w1 variants san-ln-memcheck san-ln-racecheck san-w1-memcheck \
  san-w1-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
