#!/usr/bin/env bash
# One device call for the copy-timing measurements (stage_wait_bench's L2 rows; the megakernel's
# copy timings at one token, timed and checked). Logs under $OUT. MODE=1 (call 1) or 2.
set -uo pipefail
T0=$(date +%s)
left() { echo $(( ${BUDGET:-225} - ($(date +%s) - T0) )); }
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT" assets/recordings/h100-2026-11-27
source scripts/common.sh
unpack_carried_debs
B=../build-mega17
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader; date -u +%FT%TZ; } | tee "$OUT/summary.txt"
cmake -S . -B $B -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$prefix/usr" > "$OUT/build.log" 2>&1 &&
  cmake --build $B -j16 --target fusionlab_gpu_tests stage_wait_bench >> "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; echo BUILD FAILED; exit 1; }
echo "build $(( $(date +%s) - T0 )) s" | tee -a "$OUT/summary.txt"
tests=$B/tests/fusionlab_gpu_tests
cuobjdump -res-usage $B/CMakeFiles/fusionlab_kernels.dir/kernels/gpt2_decode/megakernel.cu.o 2>&1 |
  grep -A1 'megakernelILb' | grep -oE 'megakernelILb[0-9]ELb[0-9]E|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste -sd' ' | tee -a "$OUT/summary.txt"
for step in ${STEPS:-bench variants timings unit}; do
  [[ $(left) -gt 15 ]] || { echo "skip $step (time)" | tee -a "$OUT/summary.txt"; continue; }
  t=$(date +%s)
  case $step in
    bench) timeout $(( $(left) < 60 ? $(left) : 60 )) $B/tests/stage_wait_bench 25 > "$OUT/stage_wait.txt" 2>&1 ;;
    variants) FL_DECODE_VARIANTS=l2 timeout $(( $(left) < 90 ? $(left) : 90 )) $tests \
        --gtest_filter='Gpt2DecodeGpu.MegakernelVariants' > "$OUT/variants.log" 2>&1 ;;
    timings) timeout $(( $(left) < 70 ? $(left) : 70 )) stdbuf -oL $tests \
        --gtest_filter='Gpt2DecodeGpu.MegakernelCopyTimings:Gpt2DecodeGpu.MegakernelOneToken:Gpt2DecodeGpu.MegakernelSmall' > "$OUT/timings.log" 2>&1 ;;
    memcheck|synccheck) FL_DECODE_SMALL=1 timeout $(( $(left) < 45 ? $(left) : 45 )) compute-sanitizer --tool $step --error-exitcode 9 $tests \
        --gtest_filter='Gpt2DecodeGpu.MegakernelCopyTimings' > "$OUT/$step.log" 2>&1 ;;
    unit) cmake --build $B -j16 --target fusionlab_unit_tests >> "$OUT/build.log" 2>&1 &&
        timeout 20 $B/tests/fusionlab_unit_tests --gtest_filter='Gpt2DecodeTasks.*' > "$OUT/unit.log" 2>&1 ;;
  esac
  echo "$step rc=$? $(( $(date +%s) - t )) s" | tee -a "$OUT/summary.txt"
done
grep -E '^\[  (PASSED|FAILED)|Failure|ERROR SUMMARY' "$OUT"/*.log 2>/dev/null | head -30 | tee -a "$OUT/summary.txt"
grep -E '^cache' "$OUT/variants.log" 2>/dev/null | tee -a "$OUT/summary.txt"
