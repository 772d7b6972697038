#!/usr/bin/env bash
# Proves that a replay-only build (FUSIONLAB_CUDA=OFF) used no CUDA: no CUDA compiler configured,
# no CUDA include folder or nvcc in any compile command, no CUDA, CUPTI or cuBLAS header (nor a
# .cuh of ours) among the headers the compiler actually read (Ninja's dependency log), and no
# CUDA library or CUDA runtime symbol in the binary. The test `replay_only_uses_no_cuda` runs it.
#   scripts/check-replay-only.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check-replay-only.sh BUILD_DIR}
problems=0
fail() { echo "check-replay-only: $*" >&2; problems=$((problems + 1)); }

cache="$build/CMakeCache.txt"
[[ -f "$cache" ]] || { echo "check-replay-only: $cache not found" >&2; exit 1; }
grep -q '^FUSIONLAB_BUILT_WITH_CUDA:INTERNAL=OFF$' "$cache" || fail "$cache is not a replay-only build (FUSIONLAB_BUILT_WITH_CUDA is not OFF)"
if compiler=$(grep '^CMAKE_CUDA_COMPILER:' "$cache"); then
  [[ "$compiler" == *NOTFOUND* || "$compiler" == *=  ]] || fail "a CUDA compiler is configured: $compiler"
fi

commands="$build/compile_commands.json"
[[ -s "$commands" ]] || { echo "check-replay-only: $commands not found (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)" >&2; exit 1; }
files=$(grep -c '"file"' "$commands")
if grep -Eiq 'nvcc|/cuda[^"/]*/(include|bin)|targets/[a-z0-9_-]+-linux/include|\.cu"' "$commands"; then
  fail "compile commands use CUDA: $(grep -Eio '[^ "]*(nvcc|cuda[^ "]*/include|\.cu")[^ "]*' "$commands" | sort -u | head -3 | tr '\n' ' ')"
fi

headers=0
if [[ -f "$build/build.ninja" ]]; then
  deps=$(cd "$build" && ninja -t deps)
  headers=$(grep -c '^    ' <<< "$deps" || true)
  (( headers > 0 )) || fail "Ninja's dependency log is empty: build first"
  cuda_headers=$(grep '^    ' <<< "$deps" | grep -Ei 'cuda|cupti|cublas|nvperf|\.cuh$' | sort -u || true)
  [[ -z "$cuda_headers" ]] || fail "CUDA headers were read: $(head -3 <<< "$cuda_headers" | tr -s ' \n' ' ')"
else
  echo "check-replay-only: not a Ninja build, the headers read are not checked" >&2
fi

binary="$build/fusionlab"
[[ -x "$binary" ]] || { echo "check-replay-only: $binary not built" >&2; exit 1; }
needed=$(readelf -d "$binary" | grep NEEDED || true)
if grep -Eiq 'cuda|cupti|cublas|nvperf' <<< "$needed"; then fail "fusionlab links $(grep -Eio 'lib(cuda|cupti|cublas|nvperf)[^]]*' <<< "$needed" | tr '\n' ' ')"; fi
symbols=$(nm "$binary" 2>/dev/null || true)
[[ -n "$symbols" ]] || fail "nm could not read $binary's symbols"
if grep -Eq ' [TtUuWw] (cuda[A-Z]|cupti[A-Z]|cublas)' <<< "$symbols"; then
  fail "fusionlab holds CUDA runtime, CUPTI or cuBLAS symbols"
fi

if (( problems > 0 )); then exit 1; fi
echo "check-replay-only: no CUDA used: $files compile commands, $headers headers read, $(wc -l <<< "$needed") libraries linked, $(wc -l <<< "$symbols") symbols, none of them CUDA"
