#!/usr/bin/env bash
# The one script for the lent GPU machine (see docs/GPU_MACHINE.md). Builds the headless targets
# there, runs the `gpu` tests, compute-sanitizer on small sizes, measures the copy roof and runs
# the gelu_scale benchmark. Full logs go under $OUT (or ./out); a short table is printed last.
#
#   scripts/gpu-check.sh             everything (more than one device call's 10 minutes now)
#   FL_STAGES=tests,gemm scripts/gpu-check.sh   only these stages (the build always runs):
#     tests      ctest -L gpu                  sanitizer  compute-sanitizer memcheck + racecheck
#     grid       the recording grid, every lesson (bench --out: assets/recordings)
#     peers      PyTorch's peers of every lesson (scripts/peers.py): $OUT/peers.json
#     gemm       lessons 6-8 at the default shape and a small batch, fp32 and bf16, cold
#     counters   the counter phase's DRAM bytes vs textbook, as shipped and per-request enable
#     latency    `fusionlab latency`
#     degraded   `bench` under Nsight Compute (ncu): CUDA-event timing, no counters, clear notes
#     gui        the window live under Xvfb (needs build-gui/fusionlab and .gui-debs carried)
#   Not in the default list (ask for them by name; docs/RELIABILITY.md, docs/PERFORMANCE.md):
#     tc-profile   Nsight Compute on the two wgmma kernels at 16K tokens (bf16, level 2): speed of
#                  light, memory, warp states, L2 read sectors; $OUT/tc-profile.txt
#     soak         `latency --minutes $FL_SOAK_MINUTES` (30): every lesson, size, level, precision
#                  and cache mode; RSS and GPU memory every $FL_SOAK_SAMPLE_SECONDS (10) s into
#                  $OUT/soak.csv and $OUT/soak.svg
#     cycles       `latency --cycles $FL_SOAK_CYCLES` (8): every lesson, level, precision and
#                  cache mode at $FL_SOAK_SIZES (3) sizes, once a cycle, no cycle starting past
#                  $FL_SOAK_MAX_MINUTES (7); resident memory, heap, GPU memory and CUPTI buffers at
#                  each cycle's end into $OUT/soak-cycles.csv, .svg and .txt
#     window-soak  the window under Xvfb for $FL_WINDOW_SOAK_MINUTES (10) minutes
#                  (scripts/window-soak.sh; the GUI binary as for gui, or $FL_GUI_APP):
#                  $OUT/window-soak.csv and .svg
#
# The GPU machine has nvcc, CMake and ninja but no network: header-only and test dependencies
# travel as Debian .deb files in .debs/ (scripts/fetch-gpu-debs.sh) and are unpacked to a prefix.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
stages=${FL_STAGES:-tests,sanitizer,grid,gemm,counters,latency,degraded,gui}
stage() { [[ ",$stages," == *",$1,"* ]]; }
: > "$OUT/summary.txt"
rm -f "$OUT/sanitizer.log" "$OUT/live-gui.png"

source scripts/common.sh
unpack_carried_debs

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
if stage tests; then
  t0=$(date +%s)
  (cd "$build" && ctest -L gpu --output-on-failure) > "$OUT/gpu-tests.log" 2>&1 || status=1
  log "gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1) ($(( $(date +%s) - t0 )) s)"
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
gemm_grid=${FL_GEMM_GRID:-1,4,16,64,256,1K,4K,16K}
# Attention and its sublayer: sequence length T at 16K tokens (B = 16384 / T), head size 64.
attention_grid=${FL_ATTENTION_GRID:-16,64,256,512,1K,2K,4K,8K,16K}
if stage grid; then
  for run in ${FL_GRID_RUNS:-fp32:cold bf16:cold fp32:warm}; do
    precision=${run%:*} cache=${run#*:}
    tag=${precision}_$cache
    bench "elementwise_$tag" "${FL_ELEMENTWISE_LESSONS:-relu_scale,gelu_scale}" "$elementwise" --precision $precision --cache $cache
    bench "rows768_$tag" bias_gelu,residual_layernorm "$rows" --precision $precision --cache $cache
    bench "softmax_$tag" scale_mask_softmax "$softmax" --precision $precision --cache $cache
    bench "gemm_$tag" layernorm_linear,linear_gelu,ffn "$gemm_grid" --precision $precision --cache $cache
    bench "attention_$tag" attention,attention_residual_layernorm "$attention_grid" --precision $precision --cache $cache
  done
  # Lesson 11 (gpt2_decode): bf16 only, 1 new token, the cache length as the size.
  bench "gpt2_decode_bf16_cold" gpt2_decode "${FL_DECODE_GRID:-16,64,256,512,1K,2K,4K,8K}" --precision bf16 --cache cold
  head -3 "$results/elementwise_fp32_cold.txt" >> "$OUT/summary.txt"
fi

# PyTorch's peers of every lesson (scripts/peers.py) into $OUT/peers.json, the peer file the
# recording folder ships beside the sessions. torch.compile specialises per size, and compiling
# the whole grid one lesson after another takes longer than a device call; so first one process
# per lesson compiles its grid in parallel (one repetition, results thrown away), filling
# Inductor's on-disk caches, and then the timed run, alone on the GPU, finds every kernel
# compiled. Lesson 11's peers (PyTorch's CUDA-graph decode step) come from
# scripts/pytorch_decode.py where it writes a peer file ($OUT/peers-decode.json).
if stage peers; then
  t0=$(date +%s)
  export TORCHINDUCTOR_CACHE_DIR=/tmp/fusionlab-inductor
  lessons=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import peers; print(" ".join(peers.LESSONS))' 2>/dev/null)
  for lesson in $lessons; do
    timeout 300 python3 scripts/peers.py --lessons "$lesson" --reps 1 --peers compile \
      --out "/tmp/fusionlab-warm-$lesson.json" > "$results/peers-warm-$lesson.log" 2>&1 &
  done
  wait
  log "peers: compile warm-up of $(echo $lessons | wc -w) lessons in $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  timeout ${FL_PEERS_TIMEOUT:-420} python3 scripts/peers.py --out "$OUT/peers.json" \
    > "$results/peers.log" 2>&1 || status=1
  log "peers: $(tail -1 "$results/peers.log") ($(( $(date +%s) - t0 )) s)"
  if [[ -f scripts/pytorch_decode.py ]] && grep -q -- "--peers-out" scripts/pytorch_decode.py; then
    timeout 180 python3 scripts/pytorch_decode.py --peers-out "$OUT/peers-decode.json" \
      > "$results/peers-decode.log" 2>&1 || status=1
    log "decode peers: $(tail -1 "$results/peers-decode.log")"
  fi
fi

# Lessons 6-8 at the default shape (16K tokens x 768) and a small batch (64 tokens), >= 50 reps.
if stage gemm; then
  for precision in fp32 bf16; do
    bench "gemm_shapes_${precision}" layernorm_linear,linear_gelu,ffn "${FL_GEMM_SIZES:-64,16K}" --precision $precision --cache cold
  done
  bench "gemm_shapes_tf32" linear_gelu,ffn 16K --precision fp32 --cache cold --allow-tf32
fi

# Our tensor-core rungs (lessons 6 and 8): their GPU tests, then the token sweep in
# bf16 and fp32 (cold), the fused FFN's slice width at 1-64 tokens (FL_FFN_SLICE), and the
# portable weight-streaming rungs against level 1 (portable_bench, cold, ratios in one run).
if stage tc; then
  t0=$(date +%s)
  "$build/tests/fusionlab_gpu_tests" --gtest_filter='Catalog/*layernorm_linear*:Catalog/*ffn*:*PortableStream*' \
    > "$results/tc-tests.log" 2>&1 || status=1
  log "tc gpu tests: $(grep -E '^\[  (PASSED|FAILED)' "$results/tc-tests.log" | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
  grep -E '^\[  FAILED|Failure|error' "$results/tc-tests.log" | head -20 >> "$OUT/summary.txt"
  for precision in bf16 fp32; do
    bench "tc_$precision" layernorm_linear,ffn "${FL_TC_SIZES:-1,16,64,256,1K,4K,16K}" \
      --precision $precision --cache cold --no-counters
  done
  for slice in 32 64; do
    FL_FFN_SLICE=$slice bench "tc_ffn_slice$slice" ffn 1,16,64,256 --precision bf16 --cache cold \
      --no-counters --levels 2
  done
  "$build/tests/portable_bench" 768 50 > "$results/tc-portable.txt" 2>&1 || status=1
  log "portable rungs vs level 1: $results/tc-portable.txt"
fi

# Where the wgmma kernels' time goes (docs/PERFORMANCE.md: neither SM nor L2 looked saturated):
# one launch of each, profiled; the summary keeps the throughput and stall lines.
if stage tc-profile && command -v ncu > /dev/null; then
  : > "$OUT/tc-profile.txt"
  for spec in ffn:ffn_wgmma layernorm_linear:ln_gemm_wgmma; do
    lesson=${spec%%:*} kernel=${spec#*:}
    timeout 240 ncu --kernel-name "regex:$kernel" --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section ComputeWorkloadAnalysis \
      --metrics lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_op_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
      "$build/fusionlab" bench --lesson "$lesson" --sizes 16K --levels 2 --precision bf16 \
      --reps 3 --seconds 0.01 --no-counters >> "$OUT/tc-profile.txt" 2>&1 || status=1
  done
  log "tc-profile: $(grep -cE 'Duration' "$OUT/tc-profile.txt") kernels profiled (tc-profile.txt)"
fi

# The counter phase's fidelity as shipped (profiler enabled once, flush drain), and, for
# comparison, enabled per request: per-chain DRAM bytes against the textbook and wall time.
if stage counters; then
  for mode in keep:"" fresh:--fresh-profiler; do
    tag=${mode%%:*} flag=${mode#*:}
    for spec in gelu_scale:1M,16M,64M residual_layernorm:1365,64K,256K; do
      lesson=${spec%%:*} sizes=${spec#*:}
      FL_TRACE_PHASES=1 "$build/fusionlab" bench --lesson "$lesson" --sizes "$sizes" --reps 5 \
        --seconds 0.02 $flag --csv "$results/counters_${tag}_flush_$lesson.csv" \
        > /dev/null 2> "$results/counters_${tag}_flush_$lesson.err" || status=1
    done
  done
  python3 scripts/counter-drain-table.py "$results" > "$results/counters.txt" 2>&1 || status=1
  cat "$results/counters.txt" >> "$OUT/summary.txt"
fi

# How fast the engine answers a dragged slider (the window's settings).
if stage latency; then
  "$build/fusionlab" latency > "$results/latency.txt" 2>&1 || status=1
  cat "$results/latency.txt" >> "$OUT/summary.txt"
fi

# The soak (bounded memory): the live engine for FL_SOAK_MINUTES, memory sampled.
if stage soak; then
  minutes=${FL_SOAK_MINUTES:-30}
  timeout "$(awk -v m="$minutes" 'BEGIN { print int(m * 60) + 300 }')" "$build/fusionlab" latency \
    --minutes "$minutes" --sample-seconds "${FL_SOAK_SAMPLE_SECONDS:-10}" \
    --soak-csv "$OUT/soak.csv" --soak-svg "$OUT/soak.svg" > "$results/soak.txt" 2>&1 || status=1
  log "soak ($minutes min): $(grep -E '^soak:|failed:' "$results/soak.txt" | tr '\n' ' ' | cut -c1-600)"
fi

# The soak in cycles (docs/RELIABILITY.md, "Bounded memory"): memory at each cycle's end.
if stage cycles; then
  max=${FL_SOAK_MAX_MINUTES:-7}
  timeout "$(awk -v m="$max" 'BEGIN { print int(m * 60 * 1.5) + 120 }')" "$build/fusionlab" latency \
    --cycles "${FL_SOAK_CYCLES:-8}" --sizes-per-lesson "${FL_SOAK_SIZES:-3}" --max-minutes "$max" \
    --soak-csv "$OUT/soak-cycles.csv" --soak-svg "$OUT/soak-cycles.svg" \
    > "$OUT/soak-cycles.txt" 2>&1 || status=1
  log "soak in cycles: $(grep -E '^soak:' "$OUT/soak-cycles.txt" | tr '\n' ' ' | cut -c1-600)"
fi

# The window soak: the window live under Xvfb, dragged through every lesson and view.
gui_app=${FL_GUI_APP:-build-gui/fusionlab}
if stage window-soak; then
  if [[ -x $gui_app ]] && { [[ -d .gui-debs ]] || [[ -n ${FL_GUI_DEBS:-} ]]; } &&
     source scripts/gpu-gui-env.sh > "$results/window-soak-env.log" 2>&1; then
    minutes=${FL_WINDOW_SOAK_MINUTES:-10}
    FL_SOAK_PLOTTER="$build/fusionlab" scripts/window-soak.sh "$gui_app" "$minutes" /tmp/window-soak \
      > "$results/window-soak.txt" 2>&1 || status=1
    cp /tmp/window-soak/window-soak.csv /tmp/window-soak/window-soak.svg "$OUT/" 2> /dev/null
    cp /tmp/window-soak/window-soak.log "$results/" 2> /dev/null
    log "window soak ($minutes min): $(tail -4 "$results/window-soak.txt" | tr '\n' ' ' | cut -c1-600)"
    fl_gui_stop
  else
    status=1
    log "window soak: no GUI binary ($gui_app) or GUI packages, or Xvfb did not start (window-soak-env.log)"
  fi
fi

# A degraded mode on real hardware: with Nsight Compute attached, CUPTI belongs to it, so the
# app must time with CUDA events and say that counters are not measured (no crash, results).
# ncu profiles nothing here (no kernel matches), it only holds CUPTI.
if stage degraded && command -v ncu > /dev/null; then
  timeout 240 ncu --target-processes all --kernel-name regex:^no_such_kernel$ "$build/fusionlab" \
    bench --lesson gelu_scale --sizes 1M --reps 5 --seconds 0.05 > "$results/degraded.txt" 2>&1
  rc=$?
  if [[ $rc == 0 ]] && grep -q "timed with CUDA events" "$results/degraded.txt" &&
     grep -q "performance counters, so DRAM and L2 bytes are not measured" "$results/degraded.txt" &&
     grep -qE "^ +1M .*x " "$results/degraded.txt"; then
    log "degraded (under ncu): timed with CUDA events, counters not measured, results printed"
  else
    status=1
    log "degraded (under ncu) FAILED: rc $rc; see degraded.txt in results"
  fi
fi

# compute-sanitizer last: it is the slowest stage (FL_SANITIZER_FILTER narrows it).
# racecheck instruments every shared-memory access, and under it one cuBLASLt GEMM takes minutes
# (on 2026-11-22 a racecheck of lessons 6-8 did not finish in 9 minutes). So the GEMM lessons
# are race-checked in a second run that instruments only our kernels (cuBLASLt's are not ours
# to fix), at short rows; every other lesson is checked whole.
sanitize() {  # TOOL LOG-TAG GTEST-FILTER [compute-sanitizer options...]
  local tool=$1 tag=$2 filter=$3
  shift 3
  # Each run is bounded (FL_SANITIZER_TIMEOUT seconds) so one slow run cannot take the call.
  timeout "${FL_SANITIZER_TIMEOUT:-420}" compute-sanitizer --tool "$tool" "$@" --error-exitcode 9 \
    "$build/tests/fusionlab_gpu_tests" --gtest_filter="$filter" > /tmp/sanitizer-$tag.log 2>&1
  local rc=$?
  [[ $rc == 124 ]] && echo "TIMED OUT after ${FL_SANITIZER_TIMEOUT:-420} s" >> /tmp/sanitizer-$tag.log
  [[ $rc != 0 ]] && status=1
  { echo "### $tag"; cat /tmp/sanitizer-$tag.log; } >> "$OUT/sanitizer.log"
  log "compute-sanitizer $tag: rc $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|TIMED OUT|tests? ran|PASSED|FAILED' /tmp/sanitizer-$tag.log | tail -4 | tr '\n' ' ')"
}
if stage sanitizer && command -v compute-sanitizer > /dev/null; then
  gemm='Catalog/*layernorm_linear*:Catalog/*linear_gelu*:Catalog/*ffn*'
  export FL_TEST_MAX_FLOPS=${FL_TEST_MAX_FLOPS:-5e7}
  for tool in ${FL_SANITIZER_TOOLS:-memcheck racecheck}; do
    if [[ $tool != racecheck ]]; then
      sanitize "$tool" "$tool" "${FL_SANITIZER_FILTER:-Catalog/*}"
    else
      sanitize racecheck racecheck "${FL_SANITIZER_FILTER:-Catalog/*:-$gemm}"
      # Our kernels only, short rows. fp32: every level. bf16: cuBLASLt's bf16 GEMMs make
      # racecheck itself fail ("Internal Sanitizer Error: failed to handle a hardware exception",
      # H200, CUDA 13.0, 2026-11-22; memcheck runs them clean), so there only the levels made of
      # our kernels run (FL_TEST_LEVELS=2: the LayerNorm-prologue GEMM and the on-chip FFN).
      local_kernels="regex=ffn_fused|ffn_cluster|ffn_small|ffn_wgmma|ln_gemm_wgmma|ln_gemm_bias|ln_gemm_cluster|check_rows|row_kernel|bias_op|elementwise"
      FL_TEST_MAX_INNER=256 FL_TEST_MAX_FLOPS=5e6 sanitize racecheck racecheck-gemm-fp32 \
        "${gemm//\*:/_fp32:}_fp32" --kernel-name "$local_kernels"
      FL_TEST_LEVELS=2 FL_TEST_MAX_INNER=256 FL_TEST_MAX_FLOPS=5e6 sanitize racecheck \
        racecheck-gemm-bf16 'Catalog/*layernorm_linear_bf16:Catalog/*ffn_bf16' --kernel-name "$local_kernels"
    fi
  done
fi

# The window, live, under Xvfb: only when the GUI build and its packages were carried.
if stage gui && [[ -x build-gui/fusionlab && -d .gui-debs ]]; then
  if source scripts/gpu-gui-env.sh > "$results/gui.log" 2>&1; then
    timeout 300 build-gui/fusionlab --screenshot "$OUT/live-gui.png" >> "$results/gui.log" 2>&1 || status=1
    # The lecture script against the live backend: its figures come back as one archive.
    rm -rf /tmp/lecture && t0=$(date +%s)
    if timeout 400 build-gui/fusionlab --script docs/examples/lecture.fls --out-dir /tmp/lecture \
         >> "$results/gui.log" 2>&1; then
      log "lecture script live: $(ls /tmp/lecture | wc -l) outputs in $(( $(date +%s) - t0 )) s"
    else
      status=1
      log "lecture script live FAILED (see gui.log in results)"
    fi
    if timeout 300 build-gui/fusionlab --script docs/examples/gemm.fls --out-dir /tmp/lecture/gemm \
         >> "$results/gui.log" 2>&1; then
      log "gemm script live: $(ls /tmp/lecture/gemm | wc -l) outputs"
    else
      status=1
      log "gemm script live FAILED (see gui.log in results)"
    fi
    tar -C /tmp -czf "$OUT/lecture-live.tar.gz" lecture 2>/dev/null
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
