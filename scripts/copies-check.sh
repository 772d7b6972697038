#!/usr/bin/env bash
# The hidden slice's resident copies stepped by constants (slice::stage_stepped, the plan's)
# against stage() a copy (FL_FFN_SLICE's twelfth number 2) and stepped with W1's lines asked
# into L2 first (3), on the lent GPU in one call (run with a 200 s limit). Builds fusionlab and
# the GPU tests into ../build-port21, then
# FL_COPIES_PASS=1: `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1, 16, 33,
#   64 tokens) the three ways interleaved, the phases at 16 tokens, compute-sanitizer memcheck
#   and racecheck on small shapes of the resident and ring forms, the portable FFN GPU tests;
# FL_COPIES_PASS=2: the portable series re-made (bf16 and fp32, cold, `--choose-as 8.6`, into
#   $OUT/gemm_*_cold.json), then the GPU tests the first pass left.
# FL_COPIES_LIMIT: the seconds the script plans for (192 by default; pass 2 with its tests wants
# ~400: the build ~70 s, HiddenSliceFfnRingForms ~90). After pass 2 the JSONs go over
# assets/recordings/h100-2026-11-27/portable/, then `python3 scripts/perf-tables.py`.
# Logs under $OUT: summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_COPIES_LIMIT:-192}
left() { echo $(( limit - ($(date +%s) - t0) )); }
pass=${FL_COPIES_PASS:-1}
build=../build-port21
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
B="--levels 1,2 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20"
row() {  # name, env (NAME=VALUE), lesson, sizes
  local out
  (( $(left) > 12 )) || { echo "$1: skipped (time)" | tee -a "$S"; return; }
  out=$(env "$2" timeout 30 "$app" bench --lesson "${3:-ffn}" $B --sizes "${4:-1,16,33,64}" 2>&1)
  { echo "--- $1 ($2) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
tests() {  # name, gtest filter, most seconds
  local t=$(( $(left) - 5 < $3 ? $(left) - 5 : $3 ))
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
OLD=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,2
L2=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,3
SMALL='*PortableStream*HiddenSliceFfnWithW2Late*:*PortableStream*HiddenSliceFfnRingSmallShapes*'
if [[ $pass == 1 ]]; then
  for i in 1 2 3; do
    row "stepped-$i" FL_NONE=1
    row "stage-$i" "$OLD"
    [[ $i != 3 ]] && row "l2-$i" "$L2"
  done
  for e in FL_NONE=1 "$OLD"; do
    (( $(left) > 60 )) || break
    { echo "--- phases 16 ($e)"; env "$e" timeout 15 "$app" bench --lesson ffn --levels 2 --sizes 16,64 \
        --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6 --phases 2>&1; } >> "$OUT/phases.txt"
  done
  san memcheck "$SMALL"
  san racecheck "$SMALL"
  tests gpu '*HiddenSlice*:*PortableStream*:*FfnTwoPhase*:-*HiddenSliceFfnRingForms*' 90
else
  for p in bf16 fp32; do
    (( $(left) > 20 )) || { echo "record $p: skipped (time)" | tee -a "$S"; continue; }
    timeout $(( $(left) - 5 )) "$app" bench --lesson layernorm_linear,ffn --sizes 1,4,16,64,256,1K,4K,16K \
      --precision $p --cache cold --choose-as 8.6 --out "$OUT/gemm_${p}_cold.json" > "$OUT/record-$p.log" 2>&1
    echo "record $p: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$S"
  done
  san memcheck "$SMALL"
  san racecheck "$SMALL"
  tests ring-forms '*HiddenSliceFfnRingForms*' 100
  tests gpu '*HiddenSlice*:*PortableStream*:*FfnTwoPhase*:-*HiddenSliceFfnRingForms*' 90
fi
tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls *.log 2>/dev/null) 2>/dev/null && rm -f "$OUT"/*.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
