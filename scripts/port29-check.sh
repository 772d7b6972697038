#!/usr/bin/env bash
# The hidden slice's ring form as an RTX card plans it (99 KiB, 33-64 bf16 tokens, ring_direct)
# on the lent GPU in one call (run with a 190 s limit): a share of y a block (FL_FFN_SLICE's
# twentieth number 2: `shares`; in the 2026-11-27 calls the plan's, run as `plan`) against h
# exchanged in groups of blocks (ffn_hidden_slice_exchange.cuh; the twentieth number 1: groups of
# 8 at C = 768, 12 shares, the plan's now on 16 warps; 4: groups of 4, 24 shares); 16 tokens
# (the resident form, untouched) in the same rows. Builds fusionlab and the GPU tests into
# ../build-port29; the exchange's own GPU tests first (a quick look that it is right), then
# `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1, 16, 33, 48 and 64 tokens) the
# forms interleaved (16 warps at 33-48 once: ex16; W2's tile all after the up product: exlate,
# FL_FFN_SLICE's sixteenth number 2), the phases at 33 and 64 tokens once each;
# then, nothing timed, the hidden-slice GPU tests with the exchange forced and with the plan's
# forms, compute-sanitizer memcheck and racecheck on the exchange's tests, in parallel.
# FL_P29_SIZES and FL_P29_FORMS change the rows.
# Logs under $OUT: summary.txt first.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port29
gpu_check_build "$build" 130 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
command -v cuobjdump > /dev/null &&
  cuobjdump --dump-resource-usage "$build/CMakeFiles/fusionlab_kernels.dir/kernels/ffn/ffn_hidden_slice.cu.o" 2>&1 |
  grep -A1 "hidden_slice" | grep -o "REG:[0-9]* STACK:[0-9]*\|LOCAL:[0-9]*" | tr '\n' ' ' | sed 's/^/regs: /' >> "$S"
echo >> "$S"
F=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
declare -A FORM=([plan]=FL_NONE=1 [ex]=$F,1 [ex4]=$F,4 [shares]=$F,2 [ex16]=FL_FFN_SLICE=16${F#FL_FFN_SLICE=0},1
  [exlate]=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,2,0,0,0,1)
# The exchange's tests first (not timed): whether the form is right before its timings count.
env ${FORM[ex]} timeout 30 "$G" --gtest_filter='*HiddenSliceFfnRingExchange*' > "$OUT/quick.log" 2>&1
env ${FORM[exlate]} timeout 20 "$G" --gtest_filter='*HiddenSliceFfnRingExchange/*' > "$OUT/quick2.log" 2>&1
echo "quick exlate: $(grep -cE '^\[       OK' "$OUT/quick2.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/quick2.log" | tr '\n' ' ')" | tee -a "$S"
echo "quick: $(grep -cE '^\[       OK' "$OUT/quick.log") ok, $(grep -E '^\[  (FAILED|PASSED)' "$OUT/quick.log" | tr '\n' ' ')" | tee -a "$S"
B=(--lesson ffn --levels 1,2 --sizes "${FL_P29_SIZES:-1,16,33,48,64}" --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
NAMES=(${FL_P29_FORMS:-shares ex})
for i in 1 2 3; do
  for n in "${NAMES[@]}"; do gpu_check_row "$n-$i" "${FORM[$n]}" 70 "${B[@]}"; done
  [[ $i == 1 ]] && gpu_check_row "ex4-1" "${FORM[ex4]}" 70 "${B[@]}"
  [[ $i == 2 ]] && gpu_check_row "ex16-2" "${FORM[ex16]}" 70 "${B[@]}"
  [[ $i != 2 ]] && gpu_check_row "exlate-$i" "${FORM[exlate]}" 70 "${B[@]}"
done
P=(--lesson ffn --levels 2 --sizes 33,64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for n in shares ex; do gpu_check_phases "$n" "${FORM[$n]}" 45 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
gpu_check_lane exforced "${FORM[ex]}" '*HiddenSliceFfnRingAsAnRtxCard*:*HiddenSliceFfnRingDirect/*:*HiddenSliceFfnRingSmallShapes*:*HiddenSliceFfnRingDirectWide*'
gpu_check_lane planforms "${FORM[plan]}" '*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnMatchesReferenceAtOddShapes*:*HiddenSliceFfnRingAsAnRtxCard*:*HiddenSliceFfnRingDirect/*'
gpu_check_lane san-memcheck "${FORM[ex]}" '*PortableStream*HiddenSliceFfnRingExchange*' memcheck
gpu_check_lane san-racecheck "${FORM[ex]}" '*PortableStream*HiddenSliceFfnRingExchange/*' racecheck
wait
gpu_check_lanes_summary exforced planforms san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
