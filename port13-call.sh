#!/usr/bin/env bash
# device call for port13 (not committed)
set -u
cd "$(dirname "$0")"
source scripts/common.sh; unpack_carried_debs
L=$OUT/port13.log
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } > $L
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$prefix/usr" > $OUT/build.log 2>&1 &&
  timeout 150 cmake --build build-gpu -j16 --target fusionlab fusionlab_unit_tests fusionlab_gpu_tests >> $OUT/build.log 2>&1
rc=$?; echo "build rc $rc $(( $(date +%s) - t0 )) s" >> $L
[[ $rc != 0 ]] && { tail -40 $OUT/build.log >> $L; exit 1; }
rm -f $OUT/build.log
B=build-gpu
timeout 20 $B/tests/fusionlab_unit_tests --gtest_filter='StreamPlan.*:Variants.*' 2>&1 | tail -5 >> $L
timeout 60 stdbuf -oL $B/tests/fusionlab_gpu_tests --gtest_filter='*PortableStream*' > $OUT/gtest.log 2>&1
echo "gtest rc $? $(grep -E 'PASSED|FAILED' $OUT/gtest.log | tr '\n' ' ')" >> $L
timeout 25 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/fusionlab_gpu_tests --gtest_filter='*PortableStream.HiddenSliceFfnRingSmallShapes/bf16' > $OUT/san.log 2>&1
echo "memcheck rc $?" >> $L
timeout 25 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/fusionlab_gpu_tests --gtest_filter='*PortableStream.HiddenSliceFfnRingSmallShapes/bf16' >> $OUT/san.log 2>&1
echo "racecheck rc $?" >> $L
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/san.log >> $L
bench() { echo "### $* $(date -u +%T)" >> $L; timeout 30 stdbuf -oL $B/fusionlab bench --lesson ffn --precision bf16 --cache cold --no-counters --reps 20 --levels 1,2 --choose-as 8.6 "$@" >> $L 2>&1; }
bench --sizes 1,16,17,32,33,64
FL_FFN_SLICE=8 bench --sizes 33,64
FL_FFN_SLICE=0,0,0,1,0,2 bench --sizes 64
FL_FFN_SLICE=0,0,0,1,1 bench --sizes 16,32
bench --sizes 1,16,64
bench --sizes 16,64 --phases
echo "end $(date -u +%T) $(( $(date +%s) - t0 )) s" >> $L
