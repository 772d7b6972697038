#!/usr/bin/env bash
# Checks that the C++/CUDA sources follow .clang-format (Google style, 100 columns): lists the
# files clang-format would change and exits 1 if there are any. Two ctests: format_check, and
# format_check_can_fail (a badly formatted file must be caught).
#   scripts/check-format.sh          check every source file git tracks (or, outside a git
#                                    checkout, every one under app/ kernels/ viz/ tests/)
#   scripts/check-format.sh --fix    reformat them in place
#   scripts/check-format.sh FILE...  check only these files
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fix=0
given=()
for arg in "$@"; do
  if [[ "$arg" == --fix ]]; then fix=1; else given+=("$(realpath "$arg")"); fi
done
if ! command -v clang-format > /dev/null; then
  echo "check-format: clang-format is not installed (scripts/setup-deps.sh installs it)" >&2
  exit 1
fi
cd "$root"
files=()
if ((${#given[@]} > 0)); then
  files=("${given[@]}")
else
  patterns=('app/*.cpp' 'app/*.h' 'app/*.cu' 'kernels/*.cpp' 'kernels/*.h' 'kernels/*.cu'
            'kernels/*.cuh' 'viz/*.cpp' 'viz/*.h' 'tests/*.cpp' 'tests/*.h' 'tests/*.cu')
  mapfile -t files < <(git ls-files "${patterns[@]}" 2> /dev/null || true)
  if ((${#files[@]} == 0)); then
    mapfile -t files < <(find app kernels viz tests -type f \( -name '*.cpp' -o -name '*.h' \
      -o -name '*.cu' -o -name '*.cuh' \) | sort)
  fi
fi
if ((fix)); then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]} > 0)); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files do not follow .clang-format" \
       "(scripts/check-format.sh --fix reformats them):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
