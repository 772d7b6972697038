#!/usr/bin/env bash
# The measurement's own fidelity on the lent GPU machine: builds the headless targets,
# runs the `gpu` tests, then measures with `fusionlab bench --compare-timers` at a cold size
# >= 4x L2 and at an L2-resident size, so that the figures in docs/PERFORMANCE.md can be checked:
#   - CUPTI kernel durations against CUDA events on the same launches (target +-5%),
#   - DRAM bytes read per launch against the textbook bytes read (target +-3% at >= 4x L2),
#   - DRAM bytes read + written per chain against the textbook total (target +-3%),
# plus the same sizes with kernel replay instead of user replay, with CUDA events only (no CUPTI)
# and with CUPTI timing but no range profiler, to see what each costs.
#
#   scripts/gpu-fidelity.sh        results under $OUT (or ./out): at most 6 files
#
# Like gpu-check.sh: header-only and test dependencies come as .deb files in .debs/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: > "$summary"
log() { echo "== $*" | tee -a "$summary"; }

source scripts/common.sh
unpack_carried_debs
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}
log "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
  --format=csv,noheader 2>&1 | head -1); sm_$arch; $(date -u +%FT%TZ)"
log "nvcc: $(nvcc --version 2>&1 | tail -1); profiling admin-only: \
$(grep -h RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null || echo unknown); user $(id -un)"

build=build-gpu
t0=$(date +%s)
if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" \
         -DCMAKE_PREFIX_PATH="$prefix/usr" && cmake --build "$build" -j"$(nproc)"; } \
       > /tmp/fusionlab-build.log 2>&1; then
  tail -60 /tmp/fusionlab-build.log > "$OUT/build-failed.log"
  log "BUILD FAILED (see build-failed.log)"
  exit 1
fi
log "build: $(( $(date +%s) - t0 )) s; $(readelf -d "$build/fusionlab" | grep -E 'cupti|RUNPATH' | tr -s ' ' | tr '\n' ';')"

status=0
t0=$(date +%s)
(cd "$build" && ctest -L gpu --timeout 300 --output-on-failure) > "$OUT/gpu-tests.log" 2>&1 || status=1
log "gpu tests ($(( $(date +%s) - t0 )) s): $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1)"
grep -E '^\s*[0-9]+ - .*\(Failed|Timeout|SEGFAULT|Exception' "$OUT/gpu-tests.log" | head -20 >> "$summary"

results=/tmp/fusionlab-fidelity
rm -rf "$results" && mkdir -p "$results"
bench_txt="$OUT/bench.txt"
: > "$bench_txt"
bench() {  # NAME LESSON SIZES [more bench options]
  local name=$1 lesson=$2 sizes=$3
  shift 3
  local t=$(date +%s)
  { echo "################ $name: fusionlab bench --lesson $lesson --sizes $sizes $*"
    "$build/fusionlab" bench --lesson "$lesson" --sizes "$sizes" --out "$results/$name.json" \
      --csv "$results/$name.csv" "$@" 2> "$results/$name.err" || { status=1; cat "$results/$name.err"; }
    echo "($(( $(date +%s) - t )) s)"
  } >> "$bench_txt"
}
# Cold, >= 4x L2 (gelu_scale 64M fp32 = 256 MiB per tensor; 256K rows x 768 = 768 MiB) and
# L2-resident (1M elements = 4 MiB; 1365 rows x 768 = 4 MiB).
bench gelu_cold gelu_scale 64M,1M --compare-timers
bench rln_cold residual_layernorm 256K,1365 --compare-timers
bench gelu_trace_all_runtime gelu_scale 64M,1M --compare-timers --trace-all-runtime-apis
if [[ -n "${FL_FIDELITY_QUICK:-}" ]]; then  # the two tables and the tracing variant only
  tar -C "$results" -czf "$OUT/sessions.tar.gz" .
  log "bench (quick): $(grep -c '^################' "$bench_txt") runs"
  cat "$summary"
  exit $status
fi
bench gelu_cold_kernel_replay gelu_scale 64M,1M --counter-replay kernel
bench rln_cold_kernel_replay residual_layernorm 256K,1365 --counter-replay kernel
bench gelu_events_only gelu_scale 64M,1M --timer events --no-counters
bench rln_events_only residual_layernorm 256K,1365 --timer events --no-counters
bench gelu_cupti_no_profiler gelu_scale 64M,1M --no-counters --compare-timers
bench gelu_keep_profiler gelu_scale 64M,1M,16M --keep-profiler-enabled --compare-timers
bench gelu_warm gelu_scale 1M,64M --cache warm --compare-timers
bench rln_warm residual_layernorm 1365 --cache warm --compare-timers
tar -C "$results" -czf "$OUT/sessions.tar.gz" .
log "bench: $(grep -c '^################' "$bench_txt") runs, $(grep -c 'error' "$bench_txt") error lines"

echo
cat "$summary"
exit $status
