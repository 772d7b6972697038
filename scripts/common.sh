# Shared by scripts/run.sh and scripts/test.sh: finds the CUDA toolkit and the local GPU.
# Source it; it defines nothing but variables and functions.

# nvcc is often installed but not on PATH (/usr/local/cuda/bin).
find_cuda() {
  if ! command -v nvcc > /dev/null; then
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
      if [[ -x "$d/nvcc" ]]; then export PATH="$d:$PATH"; break; fi
    done
  fi
  if ! command -v nvcc > /dev/null; then
    echo "error: the CUDA toolkit (nvcc) was not found; install it (e.g. Debian's nvidia-cuda-toolkit or NVIDIA's cuda-toolkit package) and retry" >&2
    exit 1
  fi
  export CUDACXX=${CUDACXX:-$(command -v nvcc)}
}

# The local GPU's architecture (e.g. 90), or the default 90 when there is no GPU.
local_cuda_arch() {
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  if [[ "$cc" =~ ^[0-9]+$ ]]; then echo "$cc"; else echo 90; fi
}

build_jobs() { nproc 2>/dev/null || echo 2; }
