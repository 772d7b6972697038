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
rm -f "$OUT/sanitizer.log"

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
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/fusionlab" bench \
      --lesson gelu_scale --sizes 1K,4097,65539 --reps 2 --seconds 0 \
      > /tmp/sanitizer-$tool.log 2>&1 || status=1
    { echo "### $tool"; cat /tmp/sanitizer-$tool.log; } >> "$OUT/sanitizer.log"
    log "compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/sanitizer-$tool.log | tail -1)"
  done
fi

sizes=${FL_BENCH_SIZES:-1K,1M,16M,64M}
"$build/fusionlab" bench --lesson gelu_scale --sizes "$sizes" --cache cold \
  --out "$OUT/gelu_scale_cold.json" --csv "$OUT/gelu_scale_cold.csv" > /tmp/bench-cold.txt 2>&1 || status=1
"$build/fusionlab" bench --lesson gelu_scale --sizes "$sizes" --cache warm --precision bf16 \
  --out "$OUT/gelu_scale_warm_bf16.json" > /tmp/bench-warm.txt 2>&1 || status=1
cat /tmp/bench-warm.txt /tmp/bench-cold.txt > "$OUT/bench.txt"

echo
cat "$OUT/summary.txt"
echo
grep -v -E '^ +[0-9]+[KMG]? +level' /tmp/bench-warm.txt | grep -v -E 'measuring|^  gelu|per launch|^GPU|^roof'
echo
cat /tmp/bench-cold.txt
exit $status
