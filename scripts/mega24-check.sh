#!/usr/bin/env bash
# The megakernel's first layers on the lent GPU, one call (run with a 190 s limit): this tree
# built (../build-mega24: fusionlab and the GPU tests), then
#   bench: `fusionlab bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16
#     --cache cold --no-counters`, three rounds of the lesson's form, FL_DECODE_WARM_PAGES=1 and
#     FL_DECODE_FIRST_COPIES_FIRST=1 interleaved (DecodeArgs: the start's two measurements);
#   probes: level 4 with --phases --out at 512 and 2K with FL_DECODE_PROBE_DUMP, so that the
#     kept records' launch (cold L2) leaves every task's probe stamps beside its records
#     (workspace.cuh), the lesson's form first;
#   tests (in the time left): MegakernelSmall, MegakernelOneToken, MegakernelRecordsEveryTask and
#     MegakernelOnAPartialGrid with both measurements on, the same without, and compute-sanitizer
#     memcheck / racecheck / synccheck on MegakernelSmall (FL_DECODE_SMALL=1) with both on (on
#     2026-11-27 the build took 74-120 s of the 190 and racecheck over 70 s).
# Logs under $OUT, summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-184}
build=../build-mega24
app=$build/fusionlab
G=$build/tests/fusionlab_gpu_tests
both="FL_DECODE_WARM_PAGES=1 FL_DECODE_FIRST_COPIES_FIRST=1"
ab=(--lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16 --cache cold --no-counters)

gpu_check_build "$build" 140 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
cuobjdump -res-usage "$app" 2>/dev/null | grep -A1 'megakernel' |
  grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste -sd' ' | head -c 300 >> "$S"
echo >> "$S"

round() {
  gpu_check_row "base-$1" FL_NONE=1 30 "${ab[@]}"
  gpu_check_row "warm-$1" FL_DECODE_WARM_PAGES=1 30 "${ab[@]}"
  gpu_check_row "first-$1" FL_DECODE_FIRST_COPIES_FIRST=1 30 "${ab[@]}"
}
probes() {  # NAME ENV: the kept records' launch with its probe stamps
  (( $(gpu_check_left) > 25 )) || { echo "probes $1: skipped (time)" | tee -a "$S"; return; }
  # shellcheck disable=SC2086
  env $2 FL_DECODE_PROBE_DUMP="$OUT/p/probes-$1" timeout 25 "$app" bench --lesson gpt2_decode \
    --levels 4 --sizes 512,2K --precision bf16 --cache cold --no-counters --phases \
    --out "$OUT/p/$1.json" > "$OUT/p/$1.txt" 2>&1
  echo "probes $1 rc=$? $(date -u +%T): $(ls "$OUT/p" | grep -c "probes-$1")" | tee -a "$S"
}
mkdir -p "$OUT/p"
round 1
round 2
round 3
probes base FL_NONE=1
lanes=(core-both core-base)
mk='Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelOneToken'
mk+=':Gpt2DecodeGpu.MegakernelRecordsEveryTask:Gpt2DecodeGpu.MegakernelOnAPartialGrid'
gpu_check_lane core-both "$both" "$mk"
gpu_check_lane core-base FL_NONE=1 "$mk"
for tool in memcheck racecheck synccheck; do
  gpu_check_lane "san-small-$tool" "FL_DECODE_SMALL=1 $both" 'Gpt2DecodeGpu.MegakernelSmall' $tool
  lanes+=("san-small-$tool")
done
wait
gpu_check_lanes_summary "${lanes[@]}"
tar czf "$OUT/probes.tgz" -C "$OUT/p" . && rm -rf "$OUT/p"
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
