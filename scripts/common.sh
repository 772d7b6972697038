# Shared by the scripts: finds the CUDA toolkit and the local GPU, unpacks the carried .debs.
# Source it; it defines nothing but variables and functions.

# Puts nvcc on PATH when the toolkit is installed but not on PATH (/usr/local/cuda/bin) and sets
# CUDACXX; returns 1 when there is no toolkit.
locate_cuda() {
  if ! command -v nvcc > /dev/null; then
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
      if [[ -x "$d/nvcc" ]]; then export PATH="$d:$PATH"; break; fi
    done
  fi
  command -v nvcc > /dev/null || return 1
  export CUDACXX=${CUDACXX:-$(command -v nvcc)}
}

# locate_cuda, or exit with one line saying what to install.
find_cuda() {
  if ! locate_cuda; then
    echo "error: the CUDA toolkit (nvcc) was not found; install it (e.g. Debian's nvidia-cuda-toolkit or NVIDIA's cuda-toolkit package) and retry" >&2
    exit 1
  fi
}

# PATH without the CUDA toolkit's folders, for the replay-only build (nothing can find nvcc).
path_without_cuda() {
  local out="" dir
  local IFS=:
  for dir in $PATH; do
    [[ "${dir,,}" == *cuda* ]] && continue
    out+="${out:+:}$dir"
  done
  echo "$out"
}

# CMake arguments that compile through ccache when it is installed (nothing otherwise);
# `ccache_args host` leaves out the CUDA compiler's (for the replay-only build).
ccache_args() {
  if command -v ccache > /dev/null; then
    echo -n "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    [[ "${1:-}" == host ]] || echo -n " -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
    echo
  fi
}

# The local GPU's architecture (e.g. 90), or the default 90 when there is no GPU.
local_cuda_arch() {
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  if [[ "$cc" =~ ^[0-9]+$ ]]; then echo "$cc"; else echo 90; fi
}

build_jobs() { nproc 2>/dev/null || echo 2; }

# The lent GPU machine has CMake and CUDA but not the packages the headless build links (they
# travel as .debs/, fetched by scripts/fetch-gpu-debs.sh): unpacks every .debs/*.deb into
# /tmp/fusionlab-deps and sets `prefix` to it (configure with -DCMAKE_PREFIX_PATH="$prefix/usr").
# Run from the repository root.
unpack_carried_debs() {
  prefix=/tmp/fusionlab-deps
  if compgen -G ".debs/*.deb" > /dev/null; then
    mkdir -p "$prefix"
    local f
    for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
  fi
}

# The start of a one-call GPU check (scripts/*-check.sh, ring-profile.sh, two-phase-verify.sh),
# run from the repository root: $OUT made (./out when unset), S its summary file opened with the
# GPU and the time, nvcc on PATH, the carried .debs unpacked (`prefix`), t0 the start.
gpu_check_begin() {
  OUT=${OUT:-$PWD/out}
  mkdir -p "$OUT"
  S="$OUT/summary.txt"
  export PATH=$PATH:/usr/local/cuda/bin
  unpack_carried_debs
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee "$S"
  t0=$(date +%s)
}

# gpu_check_build BUILD_DIR SECONDS TARGET...: the headless build for sm_90 against the carried
# packages (after gpu_check_begin), the build limited to SECONDS. A worktree copy carries no
# recordings, and the tests' CMake wants a folder named by a date, so one is made if none is
# there. The log stays in $OUT only when the build fails; then the script exits.
gpu_check_build() {
  local build=$1 seconds=$2
  shift 2
  [[ -d assets/recordings ]] || mkdir -p assets/recordings/h100-2026-11-27
  if ! { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
           -DCMAKE_PREFIX_PATH="$prefix/usr" &&
         timeout "$seconds" cmake --build "$build" -j16 --target "$@"; } > "$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log"
    echo "BUILD FAILED" | tee -a "$S"
    exit 1
  fi
  rm -f "$OUT/build.log"
}

# ---- the one-call A/B checks' steps (after gpu_check_begin and gpu_check_build) ----
# They read `limit` (the seconds the script plans for, counted from t0), `app` (the fusionlab
# binary) and `G` (the GPU test binary).

# Seconds left of `limit`.
gpu_check_left() { echo $(( limit - ($(date +%s) - t0) )); }

# gpu_check_row NAME ENV RESERVE BENCH_ARG...: `$app bench BENCH_ARG...` with ENV (NAME=VALUE
# words, e.g. "FL_NONE=1" for none) in at most 30 s, unless fewer than RESERVE seconds are left
# (then a "skipped" line); the output appended to $OUT/bench.txt under a "--- NAME" line, its
# table's rows as one line of $S.
gpu_check_row() {
  local name=$1 env_words=$2 reserve=$3 out
  shift 3
  (( $(gpu_check_left) > reserve )) || { echo "$name: skipped (time)" | tee -a "$S"; return; }
  # shellcheck disable=SC2086  # ENV is a list of NAME=VALUE words
  out=$(env $env_words timeout 30 "$app" bench "$@" 2>&1)
  { echo "--- $name ($env_words $*) $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$name: $(echo "$out" | grep -E '^ *[0-9]+K? ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}

# gpu_check_phases NAME ENV RESERVE BENCH_ARG...: the same run with --phases, appended to
# $OUT/phases.txt (nothing in $S).
gpu_check_phases() {
  local name=$1 env_words=$2 reserve=$3
  shift 3
  (( $(gpu_check_left) > reserve )) || return 0
  # shellcheck disable=SC2086
  { echo "--- phases $name ($env_words $*)"; env $env_words timeout 20 "$app" bench "$@" --phases 2>&1; } \
    >> "$OUT/phases.txt"
}

# gpu_check_lane NAME ENV FILTER [SANITIZER]: the GPU tests matching FILTER (with ENV, NAME=VALUE
# words) in the background until 4 s before `limit`, under compute-sanitizer's SANITIZER tool
# (memcheck, racecheck, synccheck) when given; the log is $OUT/NAME.log. Call `wait`, then
# gpu_check_lanes_summary with the same names.
gpu_check_lane() {
  local name=$1 env_words=$2 filter=$3 tool=${4:-} t
  t=$(( $(gpu_check_left) - 4 ))
  local run=(stdbuf -oL)
  [[ -n $tool ]] && run=(compute-sanitizer --tool "$tool" --error-exitcode 9)
  # shellcheck disable=SC2086
  env $env_words timeout "$t" "${run[@]}" "$G" --gtest_filter="$filter" > "$OUT/$name.log" 2>&1 &
}

# gpu_check_lanes_summary NAME...: a line of $S a lane (tests passed, gtest's verdict, the
# sanitizer's summary, failed tests), then the logs tarred into $OUT/logs.tgz.
gpu_check_lanes_summary() {
  local f
  for f in "$@"; do
    echo "$f: $(grep -cE '^\[       OK' "$OUT/$f.log") ok, $(grep -E '^\[  (FAILED|PASSED)|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$f.log" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')" |
      tee -a "$S"
  done
  tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls ./*.log 2>/dev/null) 2>/dev/null && rm -f "$OUT"/*.log
}
