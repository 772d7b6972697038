#!/usr/bin/env bash
# Attention reading qkv words (MegakernelOptions::qkv_words) on the GPU machine in one call:
# build fusionlab_gpu_tests (and what FL_WORDS_TARGETS adds) into ../build-words, then the stages
# of FL_WORDS_STAGES in order (logs and a summary under $OUT):
#   correct: Gpt2DecodeGpu.MegakernelQkvWords, and compute-sanitizer memcheck / synccheck /
#            racecheck on it at FL_DECODE_SMALL=1, side by side (FL_WORDS_TOOLS);
#   time:    Gpt2DecodeGpu.MegakernelVariants with FL_DECODE_VARIANTS=words (the form before,
#            qkv words, the form before again; CUDA events, median of 50, cold) at 512 and 2K;
#   tests:   every Gpt2DecodeGpu test and the task list's unit tests, side by side with the
#            sanitizers on MegakernelSmall (the lesson's form);
#   words:   MegakernelQkvWords alone;
#   rest:    racecheck on MegakernelQkvWords (FL_DECODE_SMALL=1) beside the lesson's megakernel
#            tests (FL_WORDS_REST, a gtest filter);
#   bench:   fusionlab bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K, bf16, cold.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
sum() { echo "$*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
source scripts/common.sh
unpack_carried_debs
build=../build-words
t0=$(date +%s)
{ cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$prefix/usr" &&
  cmake --build "$build" -j16 --target fusionlab_gpu_tests ${FL_WORDS_TARGETS:-}; } > "$OUT/build.txt" 2>&1 ||
  { tail -40 "$OUT/build.txt"; exit 1; }
sum "build: $(( $(date +%s) - t0 )) s; $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader); $(date -u +%FT%TZ)"
tests=$build/tests/fusionlab_gpu_tests
stages=${FL_WORDS_STAGES:-correct,time}
sanitize() {  # tool filter log
  FL_DECODE_SMALL=1 timeout ${FL_WORDS_SAN_SECONDS:-60} compute-sanitizer --tool "$1" --error-exitcode 9 \
    "$tests" --gtest_filter="$2" > "$3" 2>&1
  echo "sanitizer $1 on $2 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$3" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
for stage in ${stages//,/ }; do
  t0=$(date +%s)
  case $stage in
    correct)
      for tool in ${FL_WORDS_TOOLS:-memcheck synccheck}; do
        sanitize $tool Gpt2DecodeGpu.MegakernelQkvWords "$OUT/san-$tool.log" &
      done
      timeout ${FL_WORDS_TEST_SECONDS:-60} "$tests" --gtest_filter='Gpt2DecodeGpu.MegakernelQkvWords' > "$OUT/words-test.log" 2>&1
      sum "words test rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)' "$OUT/words-test.log" | tr '\n' ' ')"
      grep -E 'Failure|Expected|Which is|rel error|rel ' "$OUT/words-test.log" | head -30 | tee -a "$OUT/summary.txt"
      wait
      sum "correct stage: $(( $(date +%s) - t0 )) s" ;;
    time)
      FL_DECODE_VARIANTS=words timeout ${FL_WORDS_TIME_SECONDS:-70} "$tests" \
        --gtest_filter='Gpt2DecodeGpu.MegakernelVariants' > "$OUT/variants.log" 2>&1
      sum "variants rc=$? ($(( $(date +%s) - t0 )) s)"
      grep -E '^cache|timeline|tasks: mean|chain|  stage |last-ending task|probes|Failure|Expected|Which is|rel ' \
        "$OUT/variants.log" | head -120 >> "$OUT/summary.txt" ;;
    tests)
      for tool in ${FL_WORDS_TOOLS:-memcheck synccheck racecheck}; do
        sanitize $tool Gpt2DecodeGpu.MegakernelSmall "$OUT/san-small-$tool.log" &
      done
      [[ -x $build/tests/fusionlab_unit_tests ]] && timeout 30 $build/tests/fusionlab_unit_tests \
        --gtest_filter='Gpt2DecodeTasks.*' > "$OUT/unit.log" 2>&1
      sum "unit rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/unit.log" 2>/dev/null | tr '\n' ' ')"
      timeout ${FL_WORDS_TEST_SECONDS:-150} "$tests" --gtest_filter='Gpt2DecodeGpu.*' > "$OUT/decode-tests.log" 2>&1
      sum "Gpt2DecodeGpu.* rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)|^\[       OK' "$OUT/decode-tests.log" | tr '\n' ' ' | cut -c1-1500)"
      grep -E 'Failure|Expected|Which is' "$OUT/decode-tests.log" | head -20 | tee -a "$OUT/summary.txt"
      wait ;;
    words)  # the words' own test alone (side by side with the sanitizers it ran past 45 s)
      timeout ${FL_WORDS_TEST_SECONDS:-45} stdbuf -oL "$tests" --gtest_filter='Gpt2DecodeGpu.MegakernelQkvWords' > "$OUT/words-test.log" 2>&1
      sum "words test rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)' "$OUT/words-test.log" | tr '\n' ' ')"
      grep -E 'Failure|Expected|Which is|rel error|rel ' "$OUT/words-test.log" | head -40 >> "$OUT/summary.txt" ;;
    rest)  # racecheck on the words' test beside the lesson's other megakernel tests
      sanitize racecheck Gpt2DecodeGpu.MegakernelQkvWords "$OUT/san-racecheck.log" &
      timeout ${FL_WORDS_REST_SECONDS:-70} stdbuf -oL "$tests" --gtest_filter="${FL_WORDS_REST:-Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelOneToken:Gpt2DecodeGpu.MegakernelProjReadsRows:Gpt2DecodeGpu.MegakernelOnAPartialGrid}" > "$OUT/decode-tests.log" 2>&1
      sum "tests rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)|^\[       OK|^\[  FAILED' "$OUT/decode-tests.log" | tr '\n' ' ' | cut -c1-1500)"
      grep -E 'Failure|Expected|Which is' "$OUT/decode-tests.log" | head -20 | tee -a "$OUT/summary.txt"
      wait ;;
    bench)
      timeout ${FL_WORDS_BENCH_SECONDS:-60} "$build/fusionlab" bench --lesson gpt2_decode --levels 3,4 \
        --sizes 512,2K --precision bf16 --cache cold --no-counters > "$OUT/bench.txt" 2>&1
      sum "bench rc=$? ($(( $(date +%s) - t0 )) s)"
      grep -v 'per launch\|level [0-9] L[0-9]' "$OUT/bench.txt" | head -40 >> "$OUT/summary.txt" ;;
  esac
done
sum "end $(date -u +%FT%TZ)"
