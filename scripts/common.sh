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
