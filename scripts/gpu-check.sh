#!/usr/bin/env bash
# The one script for the lent GPU machine (see docs/GPU_MACHINE.md). Builds the headless targets
# there, runs the `gpu` tests, compute-sanitizer on small sizes, measures the copy roof and runs
# the gelu_scale benchmark. Full logs go under $OUT (or ./out); a short table is printed last.
#
#   scripts/gpu-check.sh             everything
#   FL_BENCH_SIZES=1K,1M scripts/gpu-check.sh   other bench sizes
#
# The GPU machine has nvcc, CMake and ninja but no network: header-only and test dependencies
# travel as Debian .deb files in .debs/ (scripts/fetch-gpu-debs.sh) and are unpacked to a prefix.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
rm -f "$OUT/sanitizer.log" "$OUT/live-gui.png"

prefix=/tmp/fusionlab-deps
if compgen -G ".debs/*.deb" > /dev/null; then
  mkdir -p "$prefix"
  for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
fi

arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}
log "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
  --format=csv,noheader 2>&1 | head -1); building for sm_$arch; $(date -u +%FT%TZ)"

build=build-gpu
t0=$(date +%s)
if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" \
         -DCMAKE_PREFIX_PATH="$prefix/usr" && cmake --build "$build" -j"$(nproc)"; } \
       > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"
  log "BUILD FAILED (see build.log)"
  exit 1
fi
log "build: $(( $(date +%s) - t0 )) s"
rm -f "$OUT/build.log"  # kept only when the build fails: $OUT brings back at most 8 files

status=0
(cd "$build" && ctest -L gpu --output-on-failure) > "$OUT/gpu-tests.log" 2>&1 || status=1
log "gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1)"

if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    # Every level of every lesson, fp32 and bf16, at the gpu tests' small random odd sizes.
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tests/fusionlab_gpu_tests" \
      --gtest_filter='Catalog/*' \
      > /tmp/sanitizer-$tool.log 2>&1 || status=1
    { echo "### $tool"; cat /tmp/sanitizer-$tool.log; } >> "$OUT/sanitizer.log"
    log "compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/sanitizer-$tool.log | tail -1)"
  done
fi

# The benchmark: the tutorial's sizes, the default shapes, and working sets >= 4x L2.
# Elementwise lessons take elements; row-wise lessons take rows (C = 768, or 512 keys).
bench() {  # NAME LESSONS SIZES [more bench options]
  local name=$1 lessons=$2 sizes=$3
  shift 3
  "$build/fusionlab" bench --lesson "$lessons" --sizes "$sizes" --out "$results/$name.json" \
    --csv "$results/$name.csv" "$@" > "$results/$name.txt" 2> "$results/$name.err" || status=1
  grep -v -E '^  per launch|^ +[0-9]+[KMG]? +level|^GPU|^roof|^timing:|^counters:|^  counter phase' "$results/$name.txt" >> "$OUT/bench.txt"
}
results=/tmp/fusionlab-results
rm -rf "$results" && mkdir -p "$results"
: > "$OUT/bench.txt"
# A grid of sizes per lesson: these sessions are also the recordings the app replays without a
# GPU (assets/recordings/), so every lesson, every level, fp32 and bf16 cold, fp32 warm.
elementwise=${FL_ELEMENTWISE_SIZES:-1K,4K,16K,64K,256K,1M,4M,16M,64M}
rows=${FL_ROW_SIZES:-2,16,128,1365,4K,16K,64K,256K}
softmax=${FL_SOFTMAX_SIZES:-2,16,128,2K,16K,192K,512K}
for run in fp32:cold bf16:cold fp32:warm; do
  precision=${run%:*} cache=${run#*:}
  tag=${precision}_$cache
  bench "elementwise_$tag" "${FL_ELEMENTWISE_LESSONS:-relu_scale,gelu_scale}" "$elementwise" --precision $precision --cache $cache
  bench "rows768_$tag" bias_gelu,residual_layernorm "$rows" --precision $precision --cache $cache
  bench "softmax_$tag" scale_mask_softmax "$softmax" --precision $precision --cache $cache
done
head -3 "$results/elementwise_fp32_cold.txt" >> "$OUT/summary.txt"

# How fast the engine answers a dragged slider (the window's settings).
"$build/fusionlab" latency > "$results/latency.txt" 2>&1 || status=1
cat "$results/latency.txt" >> "$OUT/summary.txt"

# The window, live, under Xvfb: only when the GUI build and its packages were carried.
if [[ -x build-gui/fusionlab && -d .gui-debs ]]; then
  if source scripts/gpu-gui-env.sh > "$results/gui.log" 2>&1; then
    timeout 300 build-gui/fusionlab --screenshot "$OUT/live-gui.png" >> "$results/gui.log" 2>&1 || status=1
    fl_gui_stop
  else
    status=1
  fi
  log "GUI live screenshot: $(ls -la "$OUT/live-gui.png" 2>&1 | cut -c1-120)"
  tail -3 "$results/gui.log" >> "$OUT/summary.txt"
fi
cat "$results"/*.txt > "$results/bench-full.txt"
tar -C "$results" -czf "$OUT/results.tar.gz" .

echo
cat "$OUT/bench.txt"
echo
cat "$OUT/summary.txt"
exit $status
