#!/usr/bin/env bash
# The portable FFN rings' copy walks (kernels/gemm_core/stage_walk.cuh) on the lent GPU, in one
# call: builds fusionlab and the GPU tests into ../build-walk; then `fusionlab bench --choose-as
# 8.6` (bf16, cold, levels 1 and 2 at 1, 16, 64 tokens) with the ring's walk (the plan's) and with
# stage() every chunk (FL_FFN_SLICE's tenth number 2), interleaved, twice; the two-phase kernel
# forced; the ring's phases at 64 tokens both ways; the ring and two-phase GPU tests;
# compute-sanitizer memcheck and racecheck on their small shapes; then (FL_WALK_PASS=2, or time
# left) the wider GPU tests and the LayerNorm-Linear's portable rungs. Logs under $OUT, in
# priority order (a call that runs out of time still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
build=${FL_WALK_BUILD_DIR:-../build-walk}
gpu_check_build "$build" 170 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
B="--levels 1,2 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6"
row() {  # name, lesson, sizes, env (NAME=VALUE), extra bench arguments (may be empty)
  local out
  out=$(env "$4" timeout 40 "$build/fusionlab" bench --lesson "$2" $B --sizes "$3" ${5:-} 2>&1)
  { echo "--- $1 ($4 ${5:-}) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
tests() {  # name, gtest filter, seconds
  stdbuf -oL timeout "$3" "$build/tests/fusionlab_gpu_tests" --gtest_filter="$2" > "$OUT/$1.log" 2>&1
  echo "$1: exit $?; $(grep -cE '^\[       OK' "$OUT/$1.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/$1.log" | tr '\n' ' ')" |
    tee -a "$S"
}
san() {  # tool, gtest filter
  timeout 60 compute-sanitizer --tool "$1" --error-exitcode 9 "$build/tests/fusionlab_gpu_tests" \
    --gtest_filter="$2" > "$OUT/san-$1.log" 2>&1
  echo "$1 ($2): exit $?, $(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$OUT/san-$1.log") clean summaries, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/san-$1.log" | tr '\n' ' ')" |
    tee -a "$S"
}
STAGE=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,2
TP="--variant ffn_fused=ffn_two_phase"
if [[ ${FL_WALK_PASS:-1} == 1 ]]; then
  row walk ffn 1,16,64 FL_NONE=1
  row stage ffn 1,16,64 "$STAGE"
  row two_phase ffn 1,16,64 FL_FFN_TWO_PHASE=0,0,0,99 "$TP"
  row walk-again ffn 1,16,64 FL_NONE=1
  row stage-again ffn 1,16,64 "$STAGE"
  echo "benches: $(( $(date +%s) - t0 )) s" | tee -a "$S"
  for e in FL_NONE=1 "$STAGE"; do
    { echo "--- phases ($e)"; env "$e" timeout 30 "$build/fusionlab" bench --lesson ffn --levels 2 \
        --sizes 64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6 --phases 2>&1; } \
      >> "$OUT/phases.txt"
  done
  tests ring '*PortableStream*HiddenSliceFfnRing*:FfnTwoPhase.*' 60
  san memcheck '*PortableStream*HiddenSliceFfnRingSmallShapes*:FfnTwoPhase.SmallShapes'
  san racecheck '*PortableStream*HiddenSliceFfnRingSmallShapes*:FfnTwoPhase.SmallShapes'
  echo "pass 1: $(( $(date +%s) - t0 )) s" | tee -a "$S"
fi
tests wide '*PortableStream*:*Variant*:*FfnTwoPhase*:Catalog/*ffn*:Catalog/*layernorm_linear*' 150
row ln layernorm_linear 1,16,64,256 FL_NONE=1
row ln-again layernorm_linear 1,16,64,256 FL_NONE=1
row walk-3 ffn 1,16,64 FL_NONE=1
row stage-3 ffn 1,16,64 "$STAGE"
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
