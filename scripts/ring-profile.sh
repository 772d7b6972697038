#!/usr/bin/env bash
# The portable FFN at 16 and 64 bf16 tokens on the lent GPU, in one call (run with a 200 s limit):
# builds fusionlab (and, with FL_RING_PASS=2, the GPU tests) into ../build-ring; then
# `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at FL_RING_SIZES, 1,16,33,64 by
# default) with the ring's K split among warps (the plan's) and without (FL_FFN_SLICE's eleventh
# number 2), interleaved; the phases at 16 and 64 tokens.
# FL_RING_PASS=1 (default): Nsight Compute (ncu --set full, source counters) on the hidden slice
# at 64 tokens both ways and at 16 tokens, and on ffn_two_phase forced at 64; the reports as text
# (details page; SASS with per-instruction samples as CSV) in $OUT/ncu.tgz. (Its first run,
# 2026-11-27 09:43 UTC, compared x asked into L2 ahead of the ring in this place: no change.)
# FL_RING_PASS=2: compute-sanitizer memcheck and racecheck on the ring's small shapes, the
# portable FFN GPU tests, the benches again. Logs under $OUT in priority order (a call that runs
# out of time still brings back what ran): summary.txt, bench.txt, phases.txt, ncu.tgz, *.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_RING_LIMIT:-190}
left() { echo $(( limit - ($(date +%s) - t0) )); }
pass=${FL_RING_PASS:-1}
build=${FL_RING_BUILD_DIR:-../build-ring}
targets="fusionlab"
[[ $pass == 2 ]] && targets="fusionlab fusionlab_gpu_tests"
gpu_check_build "$build" 150 $targets
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
sizes=${FL_RING_SIZES:-1,16,33,64}
B="--levels 1,2 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6"
row() {  # name, env (NAME=VALUE), extra bench arguments (may be empty)
  local out
  (( $(left) > 12 )) || { echo "$1: skipped (time)" | tee -a "$S"; return; }
  out=$(env "$2" timeout 30 "$app" bench --lesson ffn $B --sizes "$sizes" ${3:-} 2>&1)
  { echo "--- $1 ($2 ${3:-}) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
phases() {  # name, env, sizes, extra bench arguments
  (( $(left) > 10 )) || return
  { echo "--- phases $1 ($2 ${4:-})"; env "$2" timeout 20 "$app" bench --lesson ffn --levels 2 \
      --sizes "$3" --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6 --phases \
      ${4:-} 2>&1; } >> "$OUT/phases.txt"
}
NCU="$OUT/ncu"
mkdir -p "$NCU"
profile() {  # name, kernel regex, env, tokens, extra bench arguments
  (( $(left) > 25 )) || { echo "ncu $1: skipped (time)" | tee -a "$S"; return; }
  env "$3" timeout $(( $(left) - 5 )) ncu --set full --import-source no -k "regex:$2" \
    --launch-count 1 -f -o "/tmp/$1" "$app" bench --lesson ffn --levels 2 --sizes "$4" \
    --precision bf16 --cache cold --no-counters --reps 1 --choose-as 8.6 ${5:-} \
    > "$NCU/$1.run.txt" 2>&1
  echo "ncu $1: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$S"
  ncu --import "/tmp/$1.ncu-rep" --page details > "$NCU/$1.details.txt" 2>&1
  ncu --import "/tmp/$1.ncu-rep" --page source --csv --print-source sass > "$NCU/$1.sass.csv" 2>&1
  tar czf "$OUT/ncu.tgz" -C "$NCU" .
}
OFF=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,2
TP="--variant ffn_fused=ffn_two_phase"
row split FL_NONE=1
row unsplit "$OFF"
row split-again FL_NONE=1
row unsplit-again "$OFF"
phases 64-split FL_NONE=1 64
phases 64-unsplit "$OFF" 64
phases 33-split FL_NONE=1 33
if [[ $pass == 1 ]]; then
  phases 16 FL_NONE=1 16
  profile slice64-unsplit ffn_hidden_slice_kernel "$OFF" 64
  profile slice16 ffn_hidden_slice_kernel FL_NONE=1 16
  profile slice64-split ffn_hidden_slice_kernel FL_NONE=1 64
  profile two-phase64 ffn_two_phase_kernel FL_FFN_TWO_PHASE=0,0,0,99 64 "$TP"
else
  tests() {  # name, gtest filter, most seconds
    local t=$(( $(left) - 25 < $3 ? $(left) - 25 : $3 ))
    (( t > 10 )) || { echo "$1: skipped (time)" | tee -a "$S"; return; }
    stdbuf -oL timeout "$t" "$build/tests/fusionlab_gpu_tests" --gtest_filter="$2" > "$OUT/$1.log" 2>&1
    echo "$1: exit $?; $(grep -cE '^\[       OK' "$OUT/$1.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/$1.log" | tr '\n' ' ')" |
      tee -a "$S"
  }
  san() {  # tool, gtest filter
    (( $(left) > 30 )) || { echo "$1: skipped (time)" | tee -a "$S"; return; }
    timeout 40 compute-sanitizer --tool "$1" --error-exitcode 9 "$build/tests/fusionlab_gpu_tests" \
      --gtest_filter="$2" > "$OUT/san-$1.log" 2>&1
    echo "$1 ($2): exit $?, $(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$OUT/san-$1.log") clean summaries, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/san-$1.log" | tr '\n' ' ')" |
      tee -a "$S"
  }
  san memcheck '*PortableStream*HiddenSliceFfnRingSmallShapes*'
  san racecheck '*PortableStream*HiddenSliceFfnRingSmallShapes*'
  tests ring '*PortableStream*HiddenSliceFfnRing*' 40
  tests gpu '*PortableStream*:*Variant*:*FfnTwoPhase*:Catalog/*ffn*:-*HiddenSliceFfnRing*' 90
fi
row split-3 FL_NONE=1
row unsplit-3 "$OFF"
row two-phase FL_FFN_TWO_PHASE=0,0,0,99 "$TP"
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
