#!/usr/bin/env bash
# Builds Fusion Lab for this machine's GPU (sm_90 when there is none) and starts it.
# Installs the Debian packages it needs first; safe to run again. Arguments go to fusionlab,
# e.g. `scripts/run.sh --screenshot shot.png` or `scripts/run.sh bench --sizes 1K,16M`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/common.sh"

"$root/scripts/setup-deps.sh"
find_cuda
arch=${FUSIONLAB_CUDA_ARCH:-$(local_cuda_arch)}
build="$root/build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch"
cmake --build "$build" -j"$(build_jobs)" --target fusionlab
exec "$build/fusionlab" "$@"
