#!/usr/bin/env bash
# The portable weight-streaming kernels on the lent GPU machine, in one call: build the GPU tests
# and portable_bench, run the PortableStream tests, compute-sanitizer (memcheck, racecheck,
# synccheck) on them, the benchmark against level 1 (cold, ratios in one run), and Nsight
# Compute on one FFN launch at 16 tokens. Logs under $OUT; the benchmark's table is printed last.
#   scripts/portable-check.sh            FL_PORTABLE_NCU=0 skips the profile
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
prefix=/tmp/fusionlab-deps
if compgen -G ".debs/*.deb" > /dev/null; then
  mkdir -p "$prefix"
  for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
fi
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } \
  | tee "$OUT/portable.txt"
build=build-gpu
if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" \
         -DCMAKE_PREFIX_PATH="$prefix/usr" &&
       cmake --build "$build" -j"$(nproc)" --target fusionlab_gpu_tests portable_bench; } \
       > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
status=0
"$build/tests/fusionlab_gpu_tests" --gtest_filter='*PortableStream*' > "$OUT/tests.log" 2>&1 ||
  status=1
tail -5 "$OUT/tests.log" | tee -a "$OUT/portable.txt"
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tests/fusionlab_gpu_tests" \
    --gtest_filter='*PortableStream*' >> "$OUT/sanitizer.log" 2>&1
  rc=$?
  echo "sanitizer $tool: exit $rc, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries so far" \
    | tee -a "$OUT/portable.txt"
  [[ $rc == 0 ]] || status=1
done
if [[ ${FL_PORTABLE_NCU:-1} == 1 ]]; then
  timeout 120 ncu --kernel-name regex:ffn_stream_kernel --launch-skip 30 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section LaunchStats --section SchedulerStats "$build/tests/portable_bench" 768 20 \
    > "$OUT/ncu.txt" 2>&1
  timeout 120 ncu --kernel-name regex:ln_stream_kernel --launch-skip 75 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats "$build/tests/portable_bench" 768 20 2>&1 | grep -v "^portable_bench\|^ffn\|^layernorm" >> "$OUT/ncu.txt"
fi
"$build/tests/portable_bench" 768 50 2>&1 | tee -a "$OUT/portable.txt"
exit $status
