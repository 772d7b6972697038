#!/usr/bin/env bash
# The portable two-phase FFN (kernels/ffn/ffn_two_phase.cu) on the lent GPU, in one call: builds
# fusionlab and the GPU tests into ../build-two-phase, runs `fusionlab bench --choose-as 8.6`
# (bf16, cold, levels 1 and 2: the table's choice, then the two-phase kernel and the hidden slice
# forced, and FL_FFN_TWO_PHASE tunings), the FfnTwoPhase GPU tests, compute-sanitizer memcheck and
# racecheck on their small shapes, and Nsight Compute on both kernels at 64 tokens. Logs under
# $OUT; FL_TP_NCU=0 skips the profile.
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
build=../build-two-phase
# The worktree copy carries no recordings; the tests' CMake wants a folder named by a date.
[[ -d assets/recordings ]] || mkdir -p assets/recordings/h100-2026-11-27
if ! { cmake -S . -B $build -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
         -DCMAKE_PREFIX_PATH="$prefix/usr" &&
       timeout 170 cmake --build $build -j16 --target fusionlab fusionlab_gpu_tests; } > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; echo "BUILD FAILED" | tee -a "$S"; exit 1
fi
rm -f "$OUT/build.log"
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
B="--lesson ffn --levels 1,2 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6"
row() {  # name, sizes, env, extra args
  local out
  out=$(env $3 timeout 40 $build/fusionlab bench $B --sizes "$2" $4 2>&1)
  echo "--- $1 ($3 $4) $(date -u +%T)" >> "$OUT/bench.txt"
  echo "$out" >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
# The table's choice as sm_86 (99 KiB a block): the two-phase kernel, then with it switched off
# (the hidden slice's plans, as shipped).
row "two_phase" 1,4,16,32,64 FL_NONE=1
row "slice" 1,4,16,32,64 FL_FFN_TWO_PHASE=off
echo "benches: $(( $(date +%s) - t0 )) s" | tee -a "$S"
stdbuf -oL timeout 60 $build/tests/fusionlab_gpu_tests --gtest_filter='FfnTwoPhase.*' > "$OUT/tests.log" 2>&1
echo "tests: exit $?; $(grep -cE '^\[       OK' "$OUT/tests.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/tests.log" | tr '\n' ' ')" | tee -a "$S"
san() {  # tool
  timeout 60 compute-sanitizer --tool $1 --error-exitcode 9 $build/tests/fusionlab_gpu_tests \
    --gtest_filter='FfnTwoPhase.SmallShapes' >> "$OUT/sanitizer.log" 2>&1
  echo "$1: exit $?, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries so far" | tee -a "$S"
}
san memcheck
if [[ ${FL_TP_NCU:-1} == 1 ]]; then
  for v in ffn_two_phase ffn_hidden_slice; do
    [[ $v == ffn_hidden_slice ]] && export FL_FFN_TWO_PHASE=off
    timeout 45 ncu -k regex:"${v}_kernel" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats $build/fusionlab bench --lesson ffn --levels 2 \
      --sizes 64 --precision bf16 --cache cold --no-counters --reps 3 --choose-as 8.6 \
      > "$OUT/ncu.tmp" 2>&1
    { echo "--- ncu $v"; grep -vE '^==PROF==' "$OUT/ncu.tmp" | grep -A200 "${v}_kernel" | head -150; } >> "$OUT/ncu.txt"
    echo "ncu $v: $(( $(date +%s) - t0 )) s" | tee -a "$S"
  done
  rm -f "$OUT/ncu.tmp"
  unset FL_FFN_TWO_PHASE
fi
for t in ${FL_TP_TUNINGS:-0,0,1 4,0,0 0,32,0}; do
  row "two_phase[$t]" 16,64 FL_FFN_TWO_PHASE=$t
done
san racecheck
stdbuf -oL timeout 60 $build/tests/fusionlab_gpu_tests --gtest_filter='*Variant*' > "$OUT/variants.log" 2>&1
echo "variant tests: exit $?; $(grep -cE '^\[       OK' "$OUT/variants.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/variants.log" | tr '\n' ' ')" | tee -a "$S"
row "two_phase-again" 1,4,16,32,64 FL_NONE=1
row "slice-again" 1,4,16,32,64 FL_FFN_TWO_PHASE=off
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
