#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/libfuzzer, docs/RELIABILITY.md "Fuzzing") at once, in
# the background at low priority, for a fixed time, then prints per target the executions, the
# coverage reached (cov: edges, ft: features), the corpus and whatever it found.
#   scripts/fuzz.sh --minutes 60                 every target for an hour (the documented run)
#   scripts/fuzz.sh --seconds 30 --targets session,script
#   scripts/fuzz.sh --minutes 30 --build build-libfuzzer --nice 19
# Builds build-libfuzzer/ (clang++, -fsanitize=fuzzer,address,undefined) first. New inputs go to
# <build>/corpus/<target>/, logs to <build>/fuzz-logs/<target>.log, and any crash, leak or timeout
# input to <build>/artifacts/<target>/; exits 1 when a target found one. Keep such an input as a
# regression: copy it into tests/fuzz/corpus/<target>/regressions/ (the ctests replay it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

seconds=3600
targets=""
build="$root/build-libfuzzer"
niceness=19
while (($#)); do
  case "$1" in
    --minutes) seconds=$(($2 * 60)); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --targets) targets=${2//,/ }; shift 2 ;;
    --build) build=$(realpath -m "$2"); shift 2 ;;
    --nice) niceness=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz.sh: --minutes/--seconds take a whole number of at least 1" >&2
  exit 2
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root/tests/fuzz/libfuzzer" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  "${launcher[@]}" >/dev/null
nice -n "$niceness" cmake --build "$build"

if [[ -z "$targets" ]]; then
  targets=$(find "$build" -maxdepth 1 -type f -executable -name 'fuzz_*' -printf '%f\n' |
    sed 's/^fuzz_//' | sort | tr '\n' ' ')
fi
corpus="$root/tests/fuzz/corpus"
mkdir -p "$build/fuzz-logs"
declare -A pids
for t in $targets; do
  [[ -x "$build/fuzz_$t" ]] || { echo "fuzz.sh: no target '$t' in $build" >&2; exit 2; }
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t" "$corpus/$t/regressions"
  max_len=$(grep -oP "fl_fuzz_target\($t \K[0-9]+" "$root/tests/fuzz/libfuzzer/CMakeLists.txt")
  nice -n "$niceness" "$build/fuzz_$t" -max_total_time="$seconds" -max_len="$max_len" \
    -timeout=20 -rss_limit_mb=2048 -dict="$root/tests/fuzz/libfuzzer/dicts/$t.dict" \
    -artifact_prefix="$build/artifacts/$t/" -print_final_stats=1 \
    "$build/corpus/$t" "$corpus/$t" "$corpus/$t/regressions" >"$build/fuzz-logs/$t.log" 2>&1 &
  pids[$t]=$!
done
echo "fuzz.sh: $(wc -w <<<"$targets") targets for ${seconds} s at nice $niceness; logs in $build/fuzz-logs/"

status=0
printf '%-10s %6s %12s %9s %7s %7s %8s %s\n' target rc executions exec/s cov ft corpus found
for t in $targets; do
  rc=0
  wait "${pids[$t]}" || rc=$?
  log="$build/fuzz-logs/$t.log"
  execs=$(grep -oP 'stat::number_of_executed_units:\s+\K[0-9]+' "$log" | tail -1 || true)
  speed=$(grep -oP 'stat::average_exec_per_sec:\s+\K[0-9]+' "$log" | tail -1 || true)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(grep -oP 'cov: \K[0-9]+' <<<"$last" || true)
  ft=$(grep -oP 'ft: \K[0-9]+' <<<"$last" || true)
  units=$(grep -oP 'corp: \K[0-9]+' <<<"$last" || true)
  found=$(find "$build/artifacts/$t" -type f | wc -l)
  printf '%-10s %6s %12s %9s %7s %7s %8s %s\n' "$t" "$rc" "${execs:-?}" "${speed:-?}" \
    "${cov:-?}" "${ft:-?}" "${units:-?}" "$found"
  if ((rc != 0 || found > 0)); then
    status=1
    grep -E 'ERROR|SUMMARY|property failed|Test unit written' "$log" | head -5 | sed 's/^/    /'
  fi
done
exit $status
