#!/usr/bin/env bash
# The hidden slice's W1 packed (FL_FFN_W1_PACKED; kernels/ffn/ffn_hidden_slice.h) on the lent
# GPU, in one call: builds fusionlab and the GPU tests into ../build-port16; the hidden slice's
# GPU tests with W1 packed; `fusionlab bench --choose-as 8.6` (levels 1 and 2, cold, 1-64 tokens)
# with W1's columns and packed, bf16 then fp32; compute-sanitizer memcheck and racecheck on the
# small shapes, packed. Logs under $OUT, in priority order. FL_WP_BUILD=0: the build there;
# FL_WP_SAN=0: no sanitizers.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
build=../build-port16
if [[ ${FL_WP_BUILD:-1} == 1 ]]; then
  gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
fi
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
tests() {  # name, gtest filter, timeout
  FL_FFN_W1_PACKED=1 stdbuf -oL timeout "$3" "$build/tests/fusionlab_gpu_tests" \
    --gtest_filter="$2" > "$OUT/$1.log" 2>&1
  echo "$1: exit $?; $(grep -cE '^\[       OK' "$OUT/$1.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/$1.log" | tr '\n' ' ') $(( $(date +%s) - t0 )) s" |
    tee -a "$S"
}
row() {  # name, precision, sizes, FL_FFN_W1_PACKED
  local out
  out=$(FL_FFN_W1_PACKED=$4 timeout 40 "$build/fusionlab" bench --lesson ffn --levels 1,2 \
    --precision "$2" --cache cold --choose-as 8.6 --no-counters --sizes "$3" 2>&1)
  { echo "--- $1 $(date -u +%T)"; echo "$out"; } >> "$OUT/bench.txt"
  echo "$1: $(echo "$out" | grep -E '^ *[0-9]+ ' | tr -s ' ' | tr '\n' '|')" | tee -a "$S"
}
san() {  # tool, gtest filter
  FL_FFN_W1_PACKED=1 timeout 50 compute-sanitizer --tool "$1" --error-exitcode 9 \
    "$build/tests/fusionlab_gpu_tests" --gtest_filter="$2" >> "$OUT/sanitizer.log" 2>&1
  echo "$1: exit $?, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries so far" |
    tee -a "$S"
}
tests slice '*PortableStream*HiddenSlice*' ${FL_WP_TEST_S:-50}
row bf16-columns bf16 1,4,16,32,64 0
row bf16-packed bf16 1,4,16,32,64 1
row fp32-columns fp32 1,4,16 0
row fp32-packed fp32 1,4,16 1
row bf16-columns-again bf16 1,16,64 0
row bf16-packed-again bf16 1,16,64 1
if [[ ${FL_WP_SAN:-1} == 1 ]]; then
  small='*PortableStream*HiddenSliceFfnRingSmallShapes*:*PortableStream*HiddenSliceFfnExactRowsSmall*'
  san memcheck "$small"
  san racecheck "*PortableStream*HiddenSliceFfnRingSmallShapes*"
fi
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
