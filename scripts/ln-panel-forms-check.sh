#!/usr/bin/env bash
# ln_panel's forms (bf16, `--choose-as 8.6`) on the lent GPU in one call (run with a 200 s limit):
# the plan's (FL_LN_PANEL_FORM 11) against every bit (123: the bias ahead, the split-K multiplies
# by address, and x's and W's copies by two halves of the warps, the first normalizing x while W
# lands) and 59 (the first two alone). Builds fusionlab and the GPU tests into ../build-port23,
# then `fusionlab bench` (cold, levels 1 and 2, 1-256 tokens) the forms interleaved (FL_ROUNDS
# rounds, 3 by default), the phases at 64 tokens once each way, with the hidden-slice FFN's rows
# and phases at 16 (FL_FFN_OFF: an FL_FFN_SLICE form to set beside the plan's); then, nothing
# timed, the GPU tests (sharded) and compute-sanitizer memcheck and racecheck on the small
# shapes (the LN's with FL_LN_PANEL_FORM=123), in parallel. Logs under $OUT: summary.txt first.
# The 2026-11-27 12:40 UTC call (docs/PERFORMANCE.md) ran it with 123 as the plan's and a
# hidden-slice form since removed as FL_FFN_OFF's other side.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-194}
left() { echo $(( limit - ($(date +%s) - t0) )); }
build=../build-port23
gpu_check_build "$build" 130 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
B="--levels 1,2 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20"
row() {  # name, env (NAME=VALUE), lesson, sizes
  local out
  (( $(left) > ${FL_TEST_RESERVE:-62} )) || { echo "$1: skipped (time)" | tee -a "$S"; return; }
  out=$(env "$2" timeout 20 "$app" bench --lesson "$3" $B --sizes "$4" 2>&1)
  { echo "--- $1 ($2) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | head -5 | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
phases() {  # name, env, lesson, size
  (( $(left) > ${FL_TEST_RESERVE:-62} )) || return
  { echo "--- phases $1 ($2)"; env "$2" timeout 12 "$app" bench --lesson "$3" --levels 2 --sizes "$4" \
      --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6 --phases 2>&1; } >> "$OUT/phases.txt"
}
OFF=${FL_FFN_OFF:-FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,4,2,2}
for i in $(seq 1 "${FL_ROUNDS:-3}"); do
  row "ffn-plan-$i" FL_NONE=1 ffn 1,16,64
  row "ffn-off-$i" "$OFF" ffn 1,16,64
  row "ln-123-$i" FL_LN_PANEL_FORM=123 layernorm_linear 1,4,16,64,256
  row "ln-plan-$i" FL_NONE=1 layernorm_linear 1,4,16,64,256
done
row "ln-59" FL_LN_PANEL_FORM=59 layernorm_linear 1,4,16,64,256
phases ffn16-plan FL_NONE=1 ffn 16
phases ffn16-off "$OFF" ffn 16
phases ln64-123 FL_LN_PANEL_FORM=123 layernorm_linear 64
phases ln64-plan FL_NONE=1 layernorm_linear 64
grep -E "median over blocks" "$OUT/phases.txt" | tee -a "$S"
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
t=$(( $(left) - 4 ))
G="$build/tests/fusionlab_gpu_tests"
FFN='*HiddenSlice*:*PortableStream*:-*HiddenSliceFfnRingForms*:*FfnStreamForms*'
for i in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i stdbuf -oL timeout "$t" "$G" --gtest_filter="$FFN" > "$OUT/gpu$i.log" 2>&1 &
done
stdbuf -oL timeout "$t" "$G" --gtest_filter='Variants.PanelLayerNorm*:Catalog/*layernorm_linear*' > "$OUT/ln.log" 2>&1 &
SMALL_FFN='*PortableStream*HiddenSliceFfnWithW2Late*:*PortableStream*HiddenSliceFfnRingSmallShapes*'
SMALL_LN='Variants.PanelLayerNormLinearSmallShapes'
for tool in memcheck racecheck; do
  timeout "$t" compute-sanitizer --tool $tool --error-exitcode 9 "$G" --gtest_filter="$SMALL_FFN" > "$OUT/san-ffn-$tool.log" 2>&1 &
  FL_LN_PANEL_FORM=123 timeout "$t" compute-sanitizer --tool $tool --error-exitcode 9 "$G" \
    --gtest_filter="$SMALL_LN" > "$OUT/san-ln-$tool.log" 2>&1 &
done
wait
for f in gpu0 gpu1 ln san-ffn-memcheck san-ffn-racecheck san-ln-memcheck san-ln-racecheck; do
  echo "$f: $(grep -cE '^\[       OK' "$OUT/$f.log") ok, $(grep -E '^\[  (FAILED|PASSED)|ERROR SUMMARY|RACECHECK SUMMARY|^\[  FAILED  \] [A-Z]' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$S"
done
tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls *.log 2>/dev/null) 2>/dev/null && rm -f "$OUT"/*.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
