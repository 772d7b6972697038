#!/usr/bin/env bash
# The MLP reading proj's flagged shares (MegakernelOptions::proj_shares) on the lent GPU in one
# call (run with a 190 s limit): build the GPU tests into ../build-mega20, then, alone on the GPU,
# Gpt2DecodeGpu.MegakernelVariants with FL_DECODE_VARIANTS=shares (the lesson's form, + the
# shares, the lesson's again; CUDA events, median of 50, cold, at cache 512 and 2K, with the
# timeline's breakdown and the probes); then, nothing timed, lanes side by side (FL_MEGA20_LANES:
# `new` the shares' own test and compute-sanitizer memcheck / racecheck / synccheck on it at
# FL_DECODE_SMALL=1; `shares` the test alone; `owed` the Gpt2DecodeGpu tests not run on a GPU
# since the fixture's refactor; `default` EveryLevelMatchesTheCpuReference, MegakernelSmall with
# MegakernelOneToken, the one-token part of MegakernelOnAPartialGrid and the sanitizers on
# MegakernelSmall, each its own lane). Logs under $OUT: summary.txt
# first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-184}
build=../build-mega20
gpu_check_build "$build" 130 fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
G="$build/tests/fusionlab_gpu_tests"
FL_DECODE_VARIANTS=shares timeout ${FL_MEGA20_TIME_SECONDS:-45} stdbuf -oL "$G" \
  --gtest_filter='Gpt2DecodeGpu.MegakernelVariants' > "$OUT/variants.txt" 2>&1
echo "variants rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
grep -E '^cache|timeline|tasks: mean|chain|  stage |last-ending task|Failure|Expected|Which is|rel ' \
  "$OUT/variants.txt" | head -80 | tee -a "$S"
lanes=()
IFS=, read -ra sets <<< "${FL_MEGA20_LANES:-new,owed}"
for set in "${sets[@]}"; do
  case $set in
    shares)
      gpu_check_lane shares FL_NONE=1 'Gpt2DecodeGpu.MegakernelProjShares'
      lanes+=(shares) ;;
    new)
      gpu_check_lane shares FL_NONE=1 'Gpt2DecodeGpu.MegakernelProjShares'
      for tool in memcheck racecheck synccheck; do
        gpu_check_lane "san-shares-$tool" FL_DECODE_SMALL=1 'Gpt2DecodeGpu.MegakernelProjShares' $tool
        lanes+=("san-shares-$tool")
      done
      lanes+=(shares) ;;
    owed)
      gpu_check_lane owed-a FL_NONE=1 'Gpt2DecodeGpu.MegakernelQkvWords:Gpt2DecodeGpu.MegakernelStartsWithoutRoom'
      gpu_check_lane owed-b FL_NONE=1 'Gpt2DecodeGpu.MegakernelCopyTimings'
      gpu_check_lane owed-c FL_NONE=1 'Gpt2DecodeGpu.MegakernelOneToken:Gpt2DecodeGpu.MegakernelSpreadOnAPartialGrid'
      gpu_check_lane owed-d FL_NONE=1 'Gpt2DecodeGpu.MegakernelLastSplitProj*'
      lanes+=(owed-a owed-b owed-c owed-d) ;;
    default)
      gpu_check_lane every FL_NONE=1 'Gpt2DecodeGpu.EveryLevelMatchesTheCpuReference'
      gpu_check_lane small FL_NONE=1 'Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelOneToken'
      gpu_check_lane grid-one FL_DECODE_ONE_TOKEN_GRIDS=1 'Gpt2DecodeGpu.MegakernelOnAPartialGrid'
      for tool in memcheck racecheck synccheck; do
        gpu_check_lane "san-small-$tool" FL_DECODE_SMALL=1 'Gpt2DecodeGpu.MegakernelSmall' $tool
        lanes+=("san-small-$tool")
      done
      lanes+=(every small grid-one) ;;
  esac
done
wait
gpu_check_lanes_summary "${lanes[@]}"
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
