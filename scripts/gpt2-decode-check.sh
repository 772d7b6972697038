#!/usr/bin/env bash
# Lesson 11 (gpt2_decode) on the GPU machine in one call: build (scripts/gpu-check.sh's build
# stage), the lesson's GPU tests, the comparison with Hugging Face transformers' GPT2Model,
# compute-sanitizer memcheck / racecheck / synccheck on the megakernel at a small
# configuration, the CUPTI tests (every level's records; every level's counters, 205 launches
# at level 0), PyTorch's decode step of the same shapes (scripts/pytorch_decode.py, a peer
# file), and `bench` at cache 512 and 2K (bf16, 1 token, cold, counters on, the peers beside)
# in the same call. Logs under $OUT; a short summary last.
#   FL_DECODE_STAGES=variants,tests,cupti,pytorch,bench,transformers,sanitizer (default: all but
#   variants, in this order; variants: the megakernel's copy options timed one change at a time,
#   FL_DECODE_VARIANTS=apart|spread|lastproj|burst|l2|rows for the other sets; focus: the
#   megakernel's own tests, FL_DECODE_FOCUS a gtest filter, instead of every Gpt2DecodeGpu test)
#   FL_DECODE_BUILD=DIR: build only fusionlab and fusionlab_gpu_tests, into DIR (outside the
#   carried folder, so that a warm machine keeps it), instead of gpu-check.sh's whole build.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
LOGS=/tmp/gpt2-decode-logs  # tarred into $OUT at the end ($OUT brings back at most 8 files)
rm -rf "$LOGS" && mkdir -p "$LOGS"
stages=${FL_DECODE_STAGES:-tests,cupti,pytorch,bench,transformers,sanitizer}
stage() { [[ ",$stages," == *",$1,"* ]]; }
sum() { echo "$*" | tee -a "$OUT/decode-summary.txt"; }
[[ -n "${FL_DECODE_APPEND:-}" ]] || : > "$OUT/decode-summary.txt"
if [[ -n "${FL_DECODE_BUILD:-}" ]]; then
  source scripts/common.sh
  unpack_carried_debs
  build=$FL_DECODE_BUILD
  t0=$(date +%s)
  { cmake -S . -B "$build" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$prefix/usr" &&
    cmake --build "$build" -j16 --target fusionlab fusionlab_gpu_tests; } > "$LOGS/build.txt" 2>&1 ||
    { tail -40 "$LOGS/build.txt"; exit 1; }
  sum "build: $(( $(date +%s) - t0 )) s; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ)"
else
  FL_STAGES=none scripts/gpu-check.sh > "$LOGS/build.txt" 2>&1 || { tail -40 "$LOGS/build.txt"; exit 1; }
  build=build-gpu
fi
tests=$build/tests/fusionlab_gpu_tests
if stage variants; then
  # The megakernel's copy options against each other and level 3, one change at a time, with
  # each variant's task-record breakdown at cache 512 (Gpt2DecodeGpu.MegakernelVariants).
  t0=$(date +%s)
  FL_DECODE_VARIANTS=${FL_DECODE_VARIANTS:-1} timeout ${FL_DECODE_VARIANTS_SECONDS:-90} "$tests" \
    --gtest_filter='Gpt2DecodeGpu.MegakernelVariants' > "$LOGS/variants.log" 2>&1
  sum "variants rc=$? ($(( $(date +%s) - t0 )) s)"
  grep -E '^cache|timeline|tasks: mean|chain|  stage |last-ending task|probes|Failure|Expected|Which is|rel ' \
    "$LOGS/variants.log" | head -200 | tee -a "$OUT/decode-summary.txt"
fi
if stage focus; then
  t0=$(date +%s)
  timeout ${FL_DECODE_FOCUS_SECONDS:-60} "$tests" --gtest_filter="${FL_DECODE_FOCUS:-Gpt2DecodeGpu.MegakernelSmall}" > "$LOGS/focus.log" 2>&1
  sum "focus rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)|^\[       OK' "$LOGS/focus.log" | tr '\n' ' ')"
  grep -E 'Failure|FAILED|Expected|Which is|rel error' "$LOGS/focus.log" | head -40 | tee -a "$OUT/decode-summary.txt"
fi
if stage tests; then
  t0=$(date +%s)
  timeout ${FL_DECODE_TEST_SECONDS:-150} "$tests" --gtest_filter='Gpt2DecodeGpu.*' > "$LOGS/decode-tests.log" 2>&1
  sum "tests rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/decode-tests.log" | tr '\n' ' ')"
  t0=$(date +%s)
  timeout ${FL_DECODE_CATALOG_SECONDS:-60} "$tests" --gtest_filter='Catalog/LessonGpu.*gpt2*' >> "$LOGS/decode-tests.log" 2>&1
  sum "catalog tests rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/decode-tests.log" | tail -1)"
  grep -E 'Failure|FAILED|error|Expected|Which is|rel error|megakernel at|tasks: mean|chain|  stage |last-ending task|probes' "$LOGS/decode-tests.log" | head -80 | tee -a "$OUT/decode-summary.txt"
fi
if stage cupti; then
  timeout 90 "$tests" --gtest_filter='CuptiTiming.EveryLessonAndLevelGetsItsRecords:CuptiCounters.ALongChainIsCountedLaunchByLaunch' > "$LOGS/cupti.log" 2>&1
  sum "cupti rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/cupti.log" | tr '\n' ' ')"
  grep -E 'Failure|Expected|Which is|gpt2' "$LOGS/cupti.log" | head -20 | tee -a "$OUT/decode-summary.txt"
fi
peers=()
if stage pytorch; then
  timeout 120 python3 scripts/pytorch_decode.py --caches 512,2048 --reps 30 \
    --json "$OUT/pytorch_decode.json" --peers "$OUT/peers-gpt2_decode.json" > "$LOGS/pytorch.txt" 2>&1
  sum "pytorch rc=$?"
  tail -8 "$LOGS/pytorch.txt" | tee -a "$OUT/decode-summary.txt"
  [[ -s "$OUT/peers-gpt2_decode.json" ]] && peers=(--peers "$OUT/peers-gpt2_decode.json")
fi
if stage bench; then
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$OUT/decode-summary.txt"
  date -u +%FT%TZ | tee -a "$OUT/decode-summary.txt"
  # Counters on (the recording's counter phase, 205 launches at level 0) and the task records
  # (--phases); should the counter phase fail, the timings again without it.
  timeout 120 "$build/fusionlab" bench --lesson gpt2_decode --sizes 512,2K --precision bf16 \
    --cache cold --phases "${peers[@]}" --out "$OUT/gpt2_decode_bench.json" > "$LOGS/bench.txt" 2>&1
  rc=$?
  sum "bench rc=$rc"
  grep -v 'per launch\|level [0-9] L[0-9]' "$LOGS/bench.txt" | head -60 | tee -a "$OUT/decode-summary.txt"
  if [[ $rc != 0 ]]; then
    timeout 90 "$build/fusionlab" bench --lesson gpt2_decode --sizes 512,2K --precision bf16 \
      --cache cold --no-counters "${peers[@]}" > "$LOGS/bench-no-counters.txt" 2>&1
    sum "bench --no-counters rc=$?"
    grep -v 'per launch\|level [0-9] L[0-9]' "$LOGS/bench-no-counters.txt" | head -40 | tee -a "$OUT/decode-summary.txt"
  fi
fi
if stage transformers; then
  timeout 240 bash tests/gpu/gpt2_transformers.sh "$tests" /tmp/gpt2-transformers > "$LOGS/transformers.log" 2>&1
  sum "transformers rc=$?"
  grep -E 'gpt2_transformers|Error|error' "$LOGS/transformers.log" | tail -12 | tee -a "$OUT/decode-summary.txt"
fi
if stage sanitizer && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck synccheck; do
    t0=$(date +%s)
    FL_DECODE_SMALL=1 timeout ${FL_DECODE_SANITIZER_SECONDS:-40} compute-sanitizer --tool $tool \
      --error-exitcode 9 "$tests" --gtest_filter="${FL_DECODE_SANITIZE:-Gpt2DecodeGpu.MegakernelSmall}" \
      > "$LOGS/sanitizer-$tool.log" 2>&1
    sum "sanitizer $tool rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$LOGS/sanitizer-$tool.log" | tr '\n' ' ')"
  done
  for tool in ${FL_DECODE_COPY_TOOLS-memcheck synccheck}; do  # the copy timings' instance (one token, 23 keys)
    t0=$(date +%s)
    FL_DECODE_SMALL=1 timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 "$tests" \
      --gtest_filter='Gpt2DecodeGpu.MegakernelCopyTimings' > "$LOGS/sanitizer-copies-$tool.log" 2>&1
    sum "sanitizer $tool, copy timings rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$LOGS/sanitizer-copies-$tool.log" | tr '\n' ' ')"
  done
  cat "$LOGS"/sanitizer-*.log > "$LOGS/sanitizer.log"; rm -f "$LOGS"/sanitizer-*.log
fi
tar czf "$OUT/decode-logs.tar.gz" -C "$LOGS" .
