#!/usr/bin/env bash
# Builds everything and runs the tests that need no GPU: CPU unit tests, command-line tests, UI
# tests under Xvfb, and the sm_70 (Volta) compile check with a CUDA 12 toolchain from PyPI.
# Installs what it needs first; safe to run again. `.ci/run` calls exactly this.
#   FUSIONLAB_SKIP_SM70=1 scripts/test.sh   skips the sm_70 compile check
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/common.sh"

"$root/scripts/setup-deps.sh"
find_cuda
build="$root/build-test"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
cmake --build "$build" -j"$(build_jobs)"
(cd "$build" && ctest -LE gpu --output-on-failure -j"$(build_jobs)")

if [[ "${FUSIONLAB_SKIP_SM70:-0}" != 1 ]]; then
  "$root/scripts/compile-check-sm70.sh"
fi
