#!/usr/bin/env bash
# Builds everything and runs the tests that need no GPU: CPU unit tests, command-line tests, UI
# tests under Xvfb, fuzz and packaging tests (full build, with CUDA); then the libFuzzer targets
# for a short fixed time (clang, tests/fuzz/libfuzzer); then the replay-only build
# (FUSIONLAB_CUDA=OFF, with no CUDA compiler reachable) and its tests, including the proof that it
# used no CUDA; then the sm_70 (Volta) compile check with a CUDA 12 toolchain from PyPI.
# Installs what it needs first; safe to run again. `.ci/run` calls exactly this.
#   FUSIONLAB_SKIP_SM70=1 scripts/test.sh          skips the sm_70 compile check
#   FUSIONLAB_SKIP_REPLAY_ONLY=1 scripts/test.sh   skips the replay-only build
#   FUSIONLAB_SKIP_LIBFUZZER=1 scripts/test.sh     skips the libFuzzer short run
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/common.sh"
start=$SECONDS
stage() { echo "=== test.sh: $1 ($((SECONDS - start)) s so far)"; }

"$root/scripts/setup-deps.sh"
find_cuda
jobs=$(build_jobs)

stage "full build (CUDA)"
build="$root/build-test"
# shellcheck disable=SC2046  # ccache_args is a list of words
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DFUSIONLAB_CUDA=ON $(ccache_args)
cmake --build "$build" -j"$jobs"
stage "full build: tests"
(cd "$build" && ctest -LE gpu --output-on-failure -j"$jobs")

if [[ "${FUSIONLAB_SKIP_LIBFUZZER:-0}" != 1 ]]; then
  # Coverage-guided fuzzing (tests/fuzz/libfuzzer, a clang project of its own): every target
  # replays its corpus and regressions, then fuzzes for 20 s (docs/RELIABILITY.md, "Fuzzing").
  stage "libFuzzer targets (clang, 20 s each)"
  fuzz_build="$root/build-test-libfuzzer"
  launcher=()
  command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root/tests/fuzz/libfuzzer" -B "$fuzz_build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
    "${launcher[@]}"
  cmake --build "$fuzz_build" -j"$jobs"
  (cd "$fuzz_build" && ctest -L fuzz --output-on-failure -j"$jobs")
fi

if [[ "${FUSIONLAB_SKIP_REPLAY_ONLY:-0}" != 1 ]]; then
  stage "replay-only build (no CUDA)"
  replay="$root/build-test-replay"
  # CUDACXX unset and the toolkit's folders off PATH; the build asks for no CUDA compiler anyway,
  # and scripts/check-replay-only.sh (a test of this build) proves none was used.
  no_cuda=(env -u CUDACXX -u CUDA_PATH -u CUDA_HOME PATH="$(path_without_cuda)")
  # shellcheck disable=SC2046
  "${no_cuda[@]}" cmake -S "$root" -B "$replay" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFUSIONLAB_CUDA=OFF $(ccache_args host)
  "${no_cuda[@]}" cmake --build "$replay" -j"$jobs"
  stage "replay-only build: tests"
  (cd "$replay" && "${no_cuda[@]}" ctest -LE gpu --output-on-failure -j"$jobs")
fi

if [[ "${FUSIONLAB_SKIP_SM70:-0}" != 1 ]]; then
  stage "sm_70 compile check"
  "$root/scripts/compile-check-sm70.sh"
fi
stage "done"
