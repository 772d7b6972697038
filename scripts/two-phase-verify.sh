#!/usr/bin/env bash
# The portable two-phase FFN's second call (kernels/ffn/ffn_two_phase.cu), after the first
# (scripts/two-phase-check.sh) measured its phase 1 at ~14 us whatever the ring's depth: builds
# fusionlab and the GPU tests into ../build-two-phase; the FfnTwoPhase GPU tests (odd shapes
# against the fp64 reference) with the ring's K order rotated a block and not (the plan's);
# `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1-64 tokens) of the table's
# choice, of two_phase forced at 99 KiB (rotated and not), its phases and 32-column up tiles;
# compute-sanitizer memcheck and racecheck on the tests' small shapes, the Variant tests and a
# second pass of the table's choice against two_phase. Logs under $OUT, in priority order.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
build=${FL_TP_BUILD_DIR:-../build-two-phase}
gpu_check_build "$build" 170 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
B="--lesson ffn --levels 1,2 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6"
TP="--variant ffn_fused=ffn_two_phase"
row() {  # name, sizes, env (NAME=VALUE ...), extra bench arguments (may be empty)
  local out
  out=$(env $3 timeout 40 "$build/fusionlab" bench $B --sizes "$2" ${4:-} 2>&1)
  { echo "--- $1 ($3 ${4:-}) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ +[0-9.]+ KiB' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
  echo "$out" | grep -E 'median over blocks' | sed 's/^ */  /' | tee -a "$S"
}
tests() {  # name, gtest filter, env
  env $3 stdbuf -oL timeout 60 "$build/tests/fusionlab_gpu_tests" --gtest_filter="$2" > "$OUT/$1.log" 2>&1
  echo "$1: exit $?; $(grep -cE '^\[       OK' "$OUT/$1.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/$1.log" | tr '\n' ' ')" |
    tee -a "$S"
}
san() {  # tool
  timeout 60 compute-sanitizer --tool "$1" --error-exitcode 9 "$build/tests/fusionlab_gpu_tests" \
    --gtest_filter='FfnTwoPhase.SmallShapes' >> "$OUT/sanitizer.log" 2>&1
  echo "$1: exit $?, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries so far" |
    tee -a "$S"
}
tests tests 'FfnTwoPhase.*' FL_FFN_TWO_PHASE_ROTATE=1
row slice 1,4,16,32,64 FL_NONE=1
row two_phase 1,4,16,32,64 "FL_FFN_TWO_PHASE=0,0,0,99 FL_FFN_TWO_PHASE_ROTATE=1" "$TP"
row two_phase-unrotated 1,4,16,32,64 "FL_FFN_TWO_PHASE=0,0,0,99 FL_FFN_TWO_PHASE_ROTATE=2" "$TP"
echo "benches: $(( $(date +%s) - t0 )) s" | tee -a "$S"
row two_phase-phases 1,16,64 "FL_FFN_TWO_PHASE=0,0,0,99 FL_FFN_TWO_PHASE_ROTATE=1" "$TP --phases"
row up32 1,16,64 "FL_FFN_TWO_PHASE=0,0,0,99 FL_FFN_TWO_PHASE_UP_COLS=32" "$TP --phases"
FL_FFN_TWO_PHASE_ROTATE=1 san memcheck
FL_FFN_TWO_PHASE_ROTATE=1 san racecheck
tests tests-unrotated 'FfnTwoPhase.*' FL_FFN_TWO_PHASE_ROTATE=2
tests variants '*Variant*' FL_NONE=1
row slice-again 1,4,16,32,64 FL_NONE=1
row two_phase-again 1,4,16,32,64 "FL_FFN_TWO_PHASE=0,0,0,99 FL_FFN_TWO_PHASE_ROTATE=1" "$TP"
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
