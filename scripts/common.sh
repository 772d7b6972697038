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
