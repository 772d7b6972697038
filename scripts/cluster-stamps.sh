#!/usr/bin/env bash
# Where the cluster step's time goes, on the lent GPU in one call: this tree built
# (../build-cluster), one cold step at 512 and 2K with FL_DECODE_CLUSTER_STAMPS (the last
# launch's stage times, read by scripts/cluster-stamps.py into $OUT/stamps-*.txt), then the
# step timed with stamps off beside the task list, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-300}
build=../build-cluster
app=$build/fusionlab
plain=(--lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16 --cache cold --no-counters)
gpu_check_build "$build" 200 fusionlab
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
FL_DECODE_CLUSTER_STAMPS=$OUT/st timeout 60 "$app" bench --lesson gpt2_decode \
  --levels 4 --sizes 512,2K --precision bf16 --cache cold --no-counters > "$OUT/stamps-bench.txt" 2>&1
echo "stamps: rc $? $(date -u +%T)" | tee -a "$S"
for c in 512 2048; do
  python3 scripts/cluster-stamps.py "$OUT/st-$c.bin" > "$OUT/stamps-$c.txt" 2>&1
  rm -f "$OUT/st-$c.bin"
done
for round in 1 2; do
  gpu_check_row "list-$round" FL_NONE=1 40 "${plain[@]}" --variant megakernel=task_list
  gpu_check_row "cluster-$round" FL_NONE=1 40 "${plain[@]}"
done
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
