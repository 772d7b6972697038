#!/usr/bin/env bash
# Builds Fusion Lab for this machine's GPU (sm_90 when there is none) and starts it.
# Installs the Debian packages it needs first; safe to run again. Arguments go to fusionlab,
# e.g. `scripts/run.sh --screenshot shot.png` or `scripts/run.sh bench --sizes 1K,16M`.
# Without the CUDA toolkit (no nvcc) it builds and starts the replay-only app in build-replay/,
# which shows the shipped recordings but cannot measure (docs/DEVELOPING.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/common.sh"

"$root/scripts/setup-deps.sh"
if locate_cuda; then
  arch=${FUSIONLAB_CUDA_ARCH:-$(local_cuda_arch)}
  build="$root/build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSIONLAB_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch"
else
  echo "run.sh: no CUDA toolkit (nvcc) found: building the replay-only app, which replays the" \
       "shipped recordings but cannot measure a GPU; install the CUDA toolkit for the full app" >&2
  build="$root/build-replay"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSIONLAB_CUDA=OFF
fi
cmake --build "$build" -j"$(build_jobs)" --target fusionlab
exec "$build/fusionlab" "$@"
