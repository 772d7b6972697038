#!/usr/bin/env bash
# gemmcore's one device call: build, tests, sanitizer, ladder, level 1 vs forced tops, ncu.
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
prefix=/tmp/fusionlab-deps; mkdir -p $prefix; for f in .debs/*.deb; do dpkg -x "$f" $prefix; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee "$S"
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSIONLAB_GUI=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$prefix/usr" > "$OUT/build.log" 2>&1 &&
cmake --build build-gpu -j16 --target gemm_ladder_bench fusionlab_gpu_tests fusionlab >> "$OUT/build.log" 2>&1
echo "build rc $? in $(( $(date +%s) - t0 )) s" | tee -a "$S"
grep -E "error|spill" "$OUT/build.log" | head -20 >> "$S"
B=build-gpu
timeout 45 $B/tests/gemm_ladder_bench 9 > "$OUT/ladder.txt" 2>&1; echo "ladder rc $?" >> "$S"
timeout 60 $B/tests/fusionlab_gpu_tests --gtest_filter='GemmLadder.*:GemmCore.*:Variants.*' > "$OUT/tests.log" 2>&1
echo "tests rc $?" >> "$S"; grep -E '^\[  (FAILED|PASSED)|Failure|error' "$OUT/tests.log" | head -30 >> "$S"
for L in "layernorm_linear ln_gemm_bias=ln_mma" "ffn ffn_fused=ffn_tiles"; do
  set -- $L
  for p in bf16 fp32; do
    timeout 40 $B/fusionlab bench --lesson $1 --levels 1,2 --sizes 1K,16K --precision $p \
      --no-counters --variant $2 2>&1 | grep -vE '^  per launch|^roof|^counters:' >> "$OUT/app.txt"
  done
done
echo "app done $(( $(date +%s) - t0 )) s" >> "$S"
timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/fusionlab_gpu_tests \
  --gtest_filter='GemmCore.SmallShapesForTheSanitizer' > "$OUT/sanitizer.log" 2>&1
echo "memcheck rc $? $(grep -c 'ERROR SUMMARY: 0 errors' $OUT/sanitizer.log)" >> "$S"
$B/fusionlab lessons --json > "$OUT/catalog.json" 2>&1
timeout 40 ncu --kernel-name regex:ln_gemm_mma_kernel --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
  $B/fusionlab bench --lesson layernorm_linear --levels 2 --sizes 16K --precision bf16 --reps 3 \
  --no-counters --variant ln_gemm_bias=ln_mma > "$OUT/ncu.txt" 2>&1
echo "end $(( $(date +%s) - t0 )) s" >> "$S"
