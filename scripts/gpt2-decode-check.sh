#!/usr/bin/env bash
# Lesson 11 (gpt2_decode) on the GPU machine in one call: build (scripts/gpu-check.sh's build
# stage), the lesson's GPU tests, compute-sanitizer memcheck / racecheck / synccheck on the
# megakernel at a small configuration, the catalog-wide CUPTI test, and `bench` at cache 512
# and 2K (bf16, 1 token, cold). Logs under $OUT; a short summary last.
#   FL_DECODE_STAGES=tests,sanitizer,cupti,bench (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
stages=${FL_DECODE_STAGES:-tests,sanitizer,cupti,bench}
stage() { [[ ",$stages," == *",$1,"* ]]; }
FL_STAGES=none scripts/gpu-check.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
build=build-gpu
tests=$build/tests/fusionlab_gpu_tests
sum() { echo "$*" | tee -a "$OUT/decode-summary.txt"; }
: > "$OUT/decode-summary.txt"
if stage tests; then
  t0=$(date +%s)
  timeout ${FL_DECODE_TEST_SECONDS:-150} "$tests" --gtest_filter='Gpt2DecodeGpu.*' > "$OUT/decode-tests.log" 2>&1
  sum "tests rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)' "$OUT/decode-tests.log" | tr '\n' ' ')"
  t0=$(date +%s)
  timeout ${FL_DECODE_CATALOG_SECONDS:-60} "$tests" --gtest_filter='Catalog/LessonGpu.*gpt2*' >> "$OUT/decode-tests.log" 2>&1
  sum "catalog tests rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)' "$OUT/decode-tests.log" | tail -1)"
  grep -E 'Failure|FAILED|error|Expected|Which is|rel error|megakernel at' "$OUT/decode-tests.log" | head -60 | tee -a "$OUT/decode-summary.txt"
fi
if stage sanitizer && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck synccheck; do
    t0=$(date +%s)
    timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 "$tests" \
      --gtest_filter='Gpt2DecodeGpu.MegakernelSmall' > "$OUT/sanitizer-$tool.log" 2>&1
    sum "sanitizer $tool rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/sanitizer-$tool.log" | tr '\n' ' ')"
  done
  cat "$OUT"/sanitizer-*.log > "$OUT/sanitizer.log"; rm -f "$OUT"/sanitizer-*.log
fi
if stage cupti; then
  timeout 60 "$tests" --gtest_filter='CuptiTiming.EveryLessonAndLevelGetsItsRecords' > "$OUT/cupti.log" 2>&1
  sum "cupti rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/cupti.log" | tr '\n' ' ')"
  grep -E 'Failure|Expected|Which is|gpt2' "$OUT/cupti.log" | head -20 | tee -a "$OUT/decode-summary.txt"
fi
if stage bench; then
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$OUT/decode-summary.txt"
  date -u +%FT%TZ | tee -a "$OUT/decode-summary.txt"
  timeout 60 "$build/fusionlab" bench --lesson gpt2_decode --sizes 512,2K --precision bf16 \
    --cache cold --no-counters --out "$OUT/gpt2_decode_bench.json" > "$OUT/bench.txt" 2>&1
  sum "bench rc=$?"
  grep -v '^  per launch\|^ *L[0-9]' "$OUT/bench.txt" | head -60 | tee -a "$OUT/decode-summary.txt"
fi
