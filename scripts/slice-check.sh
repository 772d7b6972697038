#!/usr/bin/env bash
# The hidden-slice FFN's forms on the lent GPU, in one call: builds this tree (fusionlab, the GPU
# tests) and, where ../CMakeLists.txt is another tree (the integration tree the call carries),
# its fusionlab too; then the forced portable FFN tests (fp32, bf16), compute-sanitizer memcheck
# on the small shapes, `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1, 4,
# 16 tokens) for the other tree and each FL_FFN_SLICE form twice, interleaved, the forms'
# phases, and Nsight Compute on each form at one token. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
source scripts/common.sh
export PATH=$PATH:/usr/local/cuda/bin
unpack_carried_debs
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee "$S"
t0=$(date +%s)
other=""
if [[ -f ../CMakeLists.txt && ${FL_SLICE_OTHER:-1} == 1 ]]; then
  other=../build-other
  (cd .. && source scripts/common.sh && unpack_carried_debs &&
   cmake -S . -B build-other -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DCMAKE_PREFIX_PATH="$prefix/usr" > /dev/null && timeout 150 cmake --build build-other -j8 --target fusionlab) \
     > "$OUT/build-other.log" 2>&1 &
fi
if ! { cmake -S . -B build-gpu -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
         -DCMAKE_PREFIX_PATH="$prefix/usr" &&
       timeout 150 cmake --build build-gpu -j12 --target fusionlab fusionlab_gpu_tests; } > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; echo "BUILD FAILED" | tee -a "$S"; exit 1
fi
wait
[[ -x $other/fusionlab ]] || { echo "other build failed: $(tail -3 "$OUT/build-other.log")" | tee -a "$S"; other=""; }
rm -f "$OUT/build.log" "$OUT/build-other.log"
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
B="--lesson ffn --levels 1,2 --sizes 1,4,16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6"
row() {  # name, binary, env
  local out
  out=$(env $3 timeout 40 "$2" bench $B 2>&1)
  echo "--- $1 ($3) $(date -u +%T)" >> "$OUT/bench.txt"
  echo "$out" >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *(1|4|16) ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
for pass in 1 2; do
  [[ -n $other ]] && row "main$pass" "$other/fusionlab" "FL_NONE=1"
  row "w8-$pass" build-gpu/fusionlab "FL_FFN_SLICE=8"
  row "w16-$pass" build-gpu/fusionlab "FL_FFN_SLICE=16"
done
echo "benches: $(( $(date +%s) - t0 )) s" | tee -a "$S"
stdbuf -oL timeout 60 build-gpu/tests/fusionlab_gpu_tests \
  --gtest_filter='*PortableStream*Ffn*:*PortableStream*SmallShapes*' > "$OUT/tests.log" 2>&1
echo "tests: exit $?; $(grep -cE '^\[       OK' "$OUT/tests.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/tests.log" | tr '\n' ' ')" | tee -a "$S"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/fusionlab_gpu_tests \
  --gtest_filter='*PortableStream*SmallShapes*' > "$OUT/sanitizer.log" 2>&1
echo "memcheck: exit $?, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries" | tee -a "$S"
for w in 8 16; do
  FL_FFN_SLICE=$w timeout 30 build-gpu/fusionlab bench --lesson ffn --levels 2 --sizes 1,16 --precision bf16 \
    --cache cold --no-counters --reps 20 --choose-as 8.6 --phases > "$OUT/phases.tmp" 2>&1
  { echo "--- phases w$w"; cat "$OUT/phases.tmp"; } >> "$OUT/phases.txt"
done
rm -f "$OUT/phases.tmp"
echo "phases: $(( $(date +%s) - t0 )) s" | tee -a "$S"
for w in ${FL_SLICE_NCU:-16 8}; do
  FL_FFN_SLICE=$w timeout 45 ncu -k regex:hidden_slice -c 1 --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section LaunchStats build-gpu/fusionlab bench --lesson ffn --levels 2 --sizes 1 \
    --precision bf16 --cache cold --no-counters --reps 3 --choose-as 8.6 > "$OUT/ncu.tmp" 2>&1
  { echo "--- ncu w$w"; grep -vE '^==PROF==' "$OUT/ncu.tmp" | grep -A200 'hidden_slice' | head -120; } >> "$OUT/ncu.txt"
  echo "ncu w$w: $(( $(date +%s) - t0 )) s" | tee -a "$S"
done
rm -f "$OUT/ncu.tmp"
