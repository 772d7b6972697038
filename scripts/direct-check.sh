#!/usr/bin/env bash
# The hidden slice's ring form with x straight into registers (ring_direct, the plan's, with W2's
# last rows asked for with W1 and x's first two batches of loads before W1's wait), and
# ffn_two_phase's direct up tiles (FL_FFN_TWO_PHASE_DIRECT=1), on the lent GPU in one call (run
# with a 200 s limit). Builds fusionlab and the GPU tests into ../build-port24, then `fusionlab
# bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 33 and 64 tokens): the plan's, x through
# the ring (FL_FFN_SLICE's fifteenth number 2), one batch before W1's wait (seventeenth number 2)
# and ffn_two_phase forced with direct up tiles interleaved three times; ffn_two_phase's ring, 8
# warps and W2 all late (sixteenth number 2) once; phases at 33 and 64 tokens; then, nothing
# timed, the GPU tests
# (*HiddenSlice*:*PortableStream*:*FfnTwoPhase*, HiddenSliceFfnRingForms apart; FL_CHECK_TESTS
# another filter) and compute-sanitizer memcheck and racecheck on the small shapes, in parallel.
# Logs under $OUT: summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-194}
left() { echo $(( limit - ($(date +%s) - t0) )); }
build=../build-port24
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
B="--levels 1,2 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20"
row() {  # name, env (NAME=VALUE ...), extra bench arguments (may be empty)
  local out
  (( $(left) > 85 )) || { echo "$1: skipped (time)" | tee -a "$S"; return; }
  out=$(env $2 timeout 20 "$app" bench --lesson ffn $B --sizes 33,64 ${3:-} 2>&1)
  { echo "--- $1 ($2 ${3:-}) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
OLD=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,2
ONE=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,2
TP="--variant ffn_fused=ffn_two_phase"
TPD="FL_FFN_TWO_PHASE=0,0,0,99 FL_FFN_TWO_PHASE_DIRECT=1"
for i in 1 2 3; do
  row "direct-$i" FL_NONE=1
  row "ring-$i" "$OLD"
  row "direct-one-batch-$i" "$ONE"
  row "two-phase-direct-$i" "$TPD" "$TP"
done
row "two-phase-ring" FL_FFN_TWO_PHASE=0,0,0,99 "$TP"
row "direct-8-warps" FL_FFN_SLICE=8
row "direct-no-w2-early" FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,2
phases() {  # env, extra bench arguments
  (( $(left) > 85 )) || return
  { echo "--- phases 33,64 ($1 ${2:-})"; env $1 timeout 12 "$app" bench --lesson ffn --levels 2 \
      --sizes 33,64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6 --phases \
      ${2:-} 2>&1; } >> "$OUT/phases.txt"
}
phases FL_NONE=1
phases "$ONE"
phases "$TPD" "$TP"
phases FL_FFN_TWO_PHASE=0,0,0,99 "$TP"
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
t=$(( $(left) - 4 ))
G="$build/tests/fusionlab_gpu_tests"
SMALL='*PortableStream*HiddenSliceFfnRingDirect/*:*PortableStream*HiddenSliceFfnRingSmallShapes*:FfnTwoPhase.DirectSmall'
stdbuf -oL timeout "$t" "$G" --gtest_filter='*HiddenSliceFfnRingForms*:*RingDirectWide*' > "$OUT/ring-forms.log" 2>&1 &
stdbuf -oL timeout "$t" "$G" --gtest_filter="${FL_CHECK_TESTS:-*HiddenSlice*:*PortableStream*:*FfnTwoPhase*:-*HiddenSliceFfnRingForms*:*RingDirectWide*}" > "$OUT/gpu.log" 2>&1 &
for tool in memcheck racecheck; do
  timeout "$t" compute-sanitizer --tool $tool --error-exitcode 9 "$G" --gtest_filter="$SMALL" > "$OUT/san-$tool.log" 2>&1 &
done
wait
for f in ring-forms gpu san-memcheck san-racecheck; do
  echo "$f: $(grep -cE '^\[       OK' "$OUT/$f.log") ok, $(grep -E '^\[  (FAILED|PASSED)|ERROR SUMMARY|RACECHECK SUMMARY|^\[  FAILED' "$OUT/$f.log" | sort | uniq -c | tr '\n' ' ')" | tee -a "$S"
done
tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls *.log 2>/dev/null) 2>/dev/null && rm -f "$OUT"/*.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
