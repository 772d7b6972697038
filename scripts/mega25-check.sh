#!/usr/bin/env bash
# The megakernel's page warm-up (DecodeArgs::warm_pages) on the lent GPU, one call (run with a
# 180 s limit): this tree built (../build-mega25: fusionlab and the GPU tests), then
#   bench: `fusionlab bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16
#     --cache cold --no-counters`, three rounds of the lesson's form, FL_DECODE_WARM_PAGES=1
#     (prefetch.global.L2) and FL_DECODE_WARM_PAGES=2 (16-byte bulk prefetch) interleaved;
#   tests (in the time left, side by side): MegakernelSmall and MegakernelOneToken,
#     MegakernelOnAPartialGrid, with FL_DECODE_WARM_PAGES=1, and compute-sanitizer memcheck on
#     MegakernelSmall (FL_DECODE_SMALL=1) with each form.
# Logs under $OUT, summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-174}
build=../build-mega25
app=$build/fusionlab
G=$build/tests/fusionlab_gpu_tests
ab=(--lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16 --cache cold --no-counters)

gpu_check_build "$build" 125 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
cuobjdump -res-usage "$app" 2>/dev/null | grep -A1 'megakernel' |
  grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste -sd' ' | head -c 300 >> "$S"
echo >> "$S"

for i in 1 2 3; do
  gpu_check_row "base-$i" FL_NONE=1 28 "${ab[@]}"
  gpu_check_row "warm1-$i" FL_DECODE_WARM_PAGES=1 28 "${ab[@]}"
  gpu_check_row "warm2-$i" FL_DECODE_WARM_PAGES=2 28 "${ab[@]}"
done
echo "bench done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
lanes=(core-warm1 grid-warm1 san-warm1 san-warm2)
gpu_check_lane core-warm1 FL_DECODE_WARM_PAGES=1 \
  'Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelOneToken'
gpu_check_lane grid-warm1 FL_DECODE_WARM_PAGES=1 'Gpt2DecodeGpu.MegakernelOnAPartialGrid'
gpu_check_lane san-warm1 "FL_DECODE_SMALL=1 FL_DECODE_WARM_PAGES=1" 'Gpt2DecodeGpu.MegakernelSmall' memcheck
gpu_check_lane san-warm2 "FL_DECODE_SMALL=1 FL_DECODE_WARM_PAGES=2" 'Gpt2DecodeGpu.MegakernelSmall' memcheck
wait
gpu_check_lanes_summary "${lanes[@]}"
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
