#!/usr/bin/env bash
# The portable small-token kernels on the lent GPU machine, in one call: build the GPU tests,
# portable_bench and fusionlab; run the PortableStream tests (and the variant tests), compute-
# sanitizer (memcheck, racecheck, synccheck) on the small shapes, the benchmark against level 1
# (CUPTI chain times, cold, ratios in one run), `fusionlab bench` of levels 1 and 2 with the
# table's choice (on an H100 the Hopper kernels) and with the portable variants forced
# ($FL_PORTABLE_VARIANTS: lesson:launch=variant:sizes ...), and
# Nsight Compute on one FFN and one LayerNorm-Linear launch. Logs under $OUT (at most 8 files).
#   scripts/portable-check.sh      FL_PORTABLE_NCU=0 skips the profile, FL_PORTABLE_APP=0 the app
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source scripts/common.sh
unpack_carried_debs
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } \
  | tee "$OUT/portable.txt"
build=build-gpu
t0=$(date +%s)
if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" \
         -DCMAKE_PREFIX_PATH="$prefix/usr" &&
       cmake --build "$build" -j"$(nproc)" --target fusionlab_gpu_tests portable_bench fusionlab; } \
       > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/portable.txt"
rm -f "$OUT/build.log"
status=0
filter=${FL_PORTABLE_TESTS:-'*PortableStream*:*Variant*'}
timeout 90 "$build/tests/fusionlab_gpu_tests" --gtest_filter="$filter" > "$OUT/tests.log" 2>&1 ||
  status=1
grep -E '^\[  (FAILED|PASSED) |^\[  SKIPPED|Failure|error' "$OUT/tests.log" | head -30 |
  tee -a "$OUT/portable.txt"
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tests/fusionlab_gpu_tests" \
    --gtest_filter='*PortableStream*SmallShapes*' >> "$OUT/sanitizer.log" 2>&1
  rc=$?
  echo "sanitizer $tool: exit $rc, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries so far" \
    | tee -a "$OUT/portable.txt"
  [[ $rc == 0 ]] || status=1
done
timeout 100 "$build/tests/portable_bench" 768 50 2>&1 | tee -a "$OUT/portable.txt"
if [[ ${FL_PORTABLE_APP:-1} == 1 ]]; then
  # The app's own chain times (CUPTI, cold): level 1 against the table's level 2, then forced.
  for prec in bf16 fp32; do
    for lesson in ffn layernorm_linear; do
      timeout 60 "$build/fusionlab" bench --lesson $lesson --levels 1,2 --sizes 1,16,64,256,16K \
        --precision $prec --no-counters > "$OUT/app.txt.tmp" 2>&1
      grep -vE '^  per launch|^GPU|^roof|^timing:|^counters:' "$OUT/app.txt.tmp" >> "$OUT/app.txt"
      for v in ${FL_PORTABLE_VARIANTS:-ffn:ffn_fused=ffn_stream:1,16,64 layernorm_linear:ln_gemm_bias=ln_stream:1,16,64,256}; do
        IFS=: read -r vlesson vforce vsizes <<< "$v"
        [[ $vlesson == "$lesson" ]] || continue
        timeout 60 "$build/fusionlab" bench --lesson $lesson --levels 1,2 --sizes "$vsizes" \
          --precision $prec --no-counters --variant "$vforce" > "$OUT/app.txt.tmp" 2>&1
        grep -vE '^  per launch|^GPU|^roof|^timing:|^counters:' "$OUT/app.txt.tmp" >> "$OUT/app.txt"
      done
    done
  done
  rm -f "$OUT/app.txt.tmp"
fi
if [[ ${FL_PORTABLE_NCU:-1} == 1 ]]; then
  timeout 60 ncu --kernel-name regex:ffn_stream_kernel --launch-skip 30 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section LaunchStats --section SchedulerStats "$build/tests/portable_bench" 768 20 \
    > "$OUT/ncu.txt" 2>&1
  timeout 60 ncu --kernel-name regex:ln_stream_kernel --launch-skip 75 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats "$build/tests/portable_bench" 768 20 2>&1 | grep -v "^portable_bench\|^ffn\|^layernorm" >> "$OUT/ncu.txt"
fi
exit $status
