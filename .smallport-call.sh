#!/usr/bin/env bash
# One device call: build, CPU + GPU tests of the portable kernels, sanitizer, benchmarks.
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"; S=$OUT/summary.txt
prefix=/tmp/fusionlab-deps; mkdir -p $prefix
for f in .debs/*.deb; do dpkg -x "$f" $prefix; done
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u +%FT%TZ; } | tee $S
t0=$(date +%s); B=build-gpu
if ! { cmake -S . -B $B -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH=$prefix/usr && timeout 150 cmake --build $B -j16 --target fusionlab \
    fusionlab_gpu_tests fusionlab_unit_tests portable_bench; } > $OUT/build.log 2>&1; then
  tail -60 $OUT/build.log; exit 1
fi
echo "build $(( $(date +%s) - t0 )) s" | tee -a $S
$B/fusionlab lessons --json > $OUT/catalog.json 2>&1
timeout 20 $B/tests/fusionlab_unit_tests --gtest_filter='Variants*:StreamPlan*:CatalogData*' > $OUT/unit.log 2>&1
echo "unit rc=$?" | tee -a $S; grep -E '^\[  (FAILED|PASSED)' $OUT/unit.log | head -8 | tee -a $S
timeout 60 $B/tests/fusionlab_gpu_tests --gtest_filter='*PortableStream*:*Variant*' > $OUT/tests.log 2>&1
echo "gpu tests rc=$?" | tee -a $S; grep -E '^\[  (FAILED|PASSED|SKIPPED)|Failure|error' $OUT/tests.log | head -20 | tee -a $S
echo "elapsed $(( $(date +%s) - t0 )) s" | tee -a $S
timeout 20 $B/tests/portable_bench 768 20 > $OUT/bench.txt 2>&1; echo "portable_bench rc=$?" >> $S
run_app() { timeout 25 $B/fusionlab bench --levels 1,2 --no-counters --reps 20 "$@" 2>&1 | grep -vE '^GPU|^roof|^counters:' >> $OUT/bench.txt; }
run_app --lesson ffn --sizes 1,16,64 --precision bf16 --variant ffn_fused=ffn_hidden_slice --phases
run_app --lesson layernorm_linear --sizes 1,16,64,256 --precision bf16 --variant ln_gemm_bias=ln_stream
run_app --lesson ffn --sizes 1,16 --precision fp32 --variant ffn_fused=ffn_hidden_slice
run_app --lesson layernorm_linear --sizes 1,16 --precision fp32 --variant ln_gemm_bias=ln_stream
run_app --lesson layernorm_linear --sizes 1,16,64,256 --precision bf16 --variant ln_gemm_bias=ln_panel
echo "elapsed $(( $(date +%s) - t0 )) s" | tee -a $S
for tool in memcheck racecheck; do
  timeout 35 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/fusionlab_gpu_tests \
    --gtest_filter='*PortableStream*SmallShapes*' > $OUT/sanitizer-$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' $OUT/sanitizer-$tool.log) clean" | tee -a $S
done
echo "elapsed $(( $(date +%s) - t0 )) s" | tee -a $S
