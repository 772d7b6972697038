#!/usr/bin/env bash
# What the megakernel's release waits on (the probe of model.h's kStampNextCopy and
# kStampReleaseFrom), on the lent GPU in one call (run with a 170 s limit): this tree built
# (../build-mega26: fusionlab and the GPU tests), then
#   probes: `fusionlab bench --lesson gpt2_decode --levels 4 --sizes 512,2K --precision bf16
#     --cache cold --phases` with FL_DECODE_PROBE_DUMP, beside `fusionlab lessons --tasks` at
#     both sizes, tarred into probe.tgz (scripts/decode-probe-dump.py --release reads them);
#   plain: `--levels 3,4 --sizes 512,2K --precision bf16 --cache cold --no-counters` (probes off);
#   tests: MegakernelSmall and MegakernelRecordsEveryTask.
# Logs under $OUT, summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-164}
build=../build-mega26
app=$build/fusionlab
G=$build/tests/fusionlab_gpu_tests
plain=(--lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16 --cache cold --no-counters)

gpu_check_build "$build" 115 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
cuobjdump -res-usage "$app" 2>/dev/null | grep -A1 'megakernel' |
  grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste -sd' ' | head -c 300 >> "$S"
echo >> "$S"

mkdir -p "$OUT/probe"
for c in 512 2048; do "$app" lessons --tasks gpt2_decode --sms 132 --cache $c > "$OUT/probe/tasks-$c.txt"; done
FL_DECODE_PROBE_DUMP=$OUT/probe/probe timeout 30 "$app" bench --lesson gpt2_decode --levels 4 \
  --sizes 512,2K --precision bf16 --cache cold --phases > "$OUT/probe/bench-phases.txt" 2>&1
echo "probes: rc $? $(ls "$OUT/probe" | tr '\n' ' ') $(date -u +%T)" | tee -a "$S"
for c in 512 2048; do
  python3 scripts/decode-probe-dump.py "$OUT/probe/probe-$c.bin" "$OUT/probe/tasks-$c.txt" \
    --release > "$OUT/probe/release-$c.txt" 2>&1
  grep '^all' "$OUT/probe/release-$c.txt" | sed "s/^/$c /" >> "$S"
done
tar -czf "$OUT/probe.tgz" -C "$OUT" probe && rm -rf "$OUT/probe"
gpu_check_row plain-1 FL_NONE=1 24 "${plain[@]}"
lanes=(tests)
gpu_check_lane tests FL_NONE=1 'Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelRecordsEveryTask'
wait
gpu_check_lanes_summary "${lanes[@]}"
gpu_check_row plain-2 FL_NONE=1 12 "${plain[@]}"
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
