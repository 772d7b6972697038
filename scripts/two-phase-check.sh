#!/usr/bin/env bash
# The portable two-phase FFN (kernels/ffn/ffn_two_phase.cu) on the lent GPU, in one call: builds
# fusionlab and the GPU tests into ../build-two-phase; first the FfnTwoPhase GPU tests, then
# `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1-64 tokens) of the table's
# choice and of the two-phase kernel forced and planned with 99 KiB a block (FL_FFN_TWO_PHASE's
# fourth number); then its phases at 16 and 64 tokens, FL_FFN_TWO_PHASE tunings, Nsight Compute
# on both kernels at 64 tokens, compute-sanitizer memcheck and racecheck on the tests' small
# shapes, the Variant tests and a second pass of the benchmarks. Logs under $OUT, in priority
# order (a call that runs out of time still brings back what ran). FL_TP_BUILD=0 uses the build
# already there; FL_TP_NCU=0 skips the profile; FL_TP_TUNINGS lists the tunings.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
build=${FL_TP_BUILD_DIR:-../build-two-phase}
if [[ ${FL_TP_BUILD:-1} == 1 ]]; then
  gpu_check_build "$build" 170 fusionlab fusionlab_gpu_tests
fi
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
B="--lesson ffn --levels 1,2 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6"
TP="--variant ffn_fused=ffn_two_phase"
row() {  # name, sizes, env (NAME=VALUE), extra bench arguments (may be empty)
  local out
  out=$(env "$3" timeout 40 "$build/fusionlab" bench $B --sizes "$2" ${4:-} 2>&1)
  { echo "--- $1 ($3 ${4:-}) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
san() {  # tool
  timeout 60 compute-sanitizer --tool "$1" --error-exitcode 9 "$build/tests/fusionlab_gpu_tests" \
    --gtest_filter='FfnTwoPhase.SmallShapes' >> "$OUT/sanitizer.log" 2>&1
  echo "$1: exit $?, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries so far" |
    tee -a "$S"
}
tests() {  # name, gtest filter
  stdbuf -oL timeout 60 "$build/tests/fusionlab_gpu_tests" --gtest_filter="$2" > "$OUT/$1.log" 2>&1
  echo "$1: exit $?; $(grep -cE '^\[       OK' "$OUT/$1.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/$1.log" | tr '\n' ' ')" |
    tee -a "$S"
}
ncu_at_64() {  # name, kernel regex, env, extra bench arguments
  env "$3" timeout 45 ncu -k regex:"$2" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats "$build/fusionlab" bench --lesson ffn --levels 2 \
    --sizes 64 --precision bf16 --cache cold --no-counters --reps 3 --choose-as 8.6 ${4:-} \
    > "$OUT/ncu.tmp" 2>&1
  { echo "--- ncu $1"; grep -vE '^==PROF==' "$OUT/ncu.tmp" | grep -A200 "$2" | head -150; } >> "$OUT/ncu.txt"
  rm -f "$OUT/ncu.tmp"
  echo "ncu $1: $(( $(date +%s) - t0 )) s" | tee -a "$S"
}
# First the kernel's correctness, then level 1 vs the table's choice (the hidden slice) vs the
# two-phase kernel forced and planned at 99 KiB, each row with level 1 in the same process.
tests tests 'FfnTwoPhase.*'
row slice 1,4,16,32,64 FL_NONE=1
row two_phase 1,4,16,32,64 FL_FFN_TWO_PHASE=0,0,0,99 "$TP"
echo "benches: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Each block's phases (thread 0's marks) at 16 and 64 tokens: where the microseconds go.
FL_FFN_TWO_PHASE=0,0,0,99 timeout 40 "$build/fusionlab" bench --lesson ffn --levels 2 --sizes 16,64 \
  --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6 --phases $TP > "$OUT/phases.txt" 2>&1
echo "phases: exit $?, $(wc -l < "$OUT/phases.txt") lines" | tee -a "$S"
for t in ${FL_TP_TUNINGS:-0,0,1,99 4,0,0,99 2,0,0,99 0,32,0,99 0,16,0,99 0,0,0,0}; do
  row "two_phase[$t]" 1,16,64 "FL_FFN_TWO_PHASE=$t" "$TP"
done
if [[ ${FL_TP_NCU:-1} == 1 ]]; then
  ncu_at_64 two_phase ffn_two_phase_kernel FL_FFN_TWO_PHASE=0,0,0,99 "$TP"
fi
san memcheck
if [[ ${FL_TP_NCU:-1} == 1 ]]; then
  ncu_at_64 slice ffn_hidden_slice_kernel FL_NONE=1
fi
san racecheck
tests variants '*Variant*'
row slice-again 1,4,16,32,64 FL_NONE=1
row two_phase-again 1,4,16,32,64 FL_FFN_TWO_PHASE=0,0,0,99 "$TP"
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
