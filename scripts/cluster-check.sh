#!/usr/bin/env bash
# Level 4's cluster step (kernels/gpt2_decode/cluster_step.cu) on the lent GPU in one call: this
# tree built (../build-cluster: fusionlab and the GPU tests), then
#   tests: Gpt2ClusterStep.* (odd caches against the fp64 reference, three runs each);
#   timing: `fusionlab bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16
#     --cache cold --no-counters`, the table's choice (the cluster step: clusters up to 2K,
#     clusters_long past it), the cluster step with the key passes (--variant
#     megakernel=clusters_long) and the task list (task_list) in turn, three rounds;
#   stamps: one cold step at 512 and 2K with FL_DECODE_CLUSTER_STAMPS (scripts/cluster-stamps.py);
#   sanitizers: memcheck, racecheck and synccheck on Gpt2ClusterStep with FL_DECODE_SMALL=1;
#   FL_CLUSTER_AB="ENV=VALUE ...;ENV=VALUE": more timing rows, one a ;-separated setting;
#   FL_CLUSTER_SIZES (512,2K): the timing's caches; FL_CLUSTER_SAN_CACHE: the sanitizers' (37).
# Logs under $OUT, summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-400}
build=../build-cluster
app=$build/fusionlab
G=$build/tests/fusionlab_gpu_tests
plain=(--lesson gpt2_decode --levels 3,4 --sizes "${FL_CLUSTER_SIZES:-512,2K}" --precision bf16 --cache cold --no-counters)

gpu_check_build "$build" 200 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
cuobjdump -res-usage "$app" 2>/dev/null | grep -A1 'clustered_step' |
  grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+|SHARED:[0-9]+' | paste -sd' ' | head -c 300 >> "$S"
echo >> "$S"
quick=${FL_CLUSTER_QUICK:-}  # set: the test at one cache, two rounds, no sanitizers
${quick:+env FL_DECODE_SMALL=1} timeout 120 "$G" --gtest_filter='Gpt2ClusterStep.*' > "$OUT/tests.log" 2>&1
echo "tests: rc $? $(grep -cE '^\[       OK' "$OUT/tests.log") ok $(grep -E 'rel error' "$OUT/tests.log" | awk '{print $NF}' | sort -g | tail -1) max rel $(date -u +%T)" | tee -a "$S"
grep -E 'FAILED|Failure|error' "$OUT/tests.log" | head -5 >> "$S"
FL_DECODE_CLUSTER_STAMPS=$OUT/st timeout 60 "$app" bench --lesson gpt2_decode \
  --levels 4 --sizes 512,2K --precision bf16 --cache cold --no-counters > "$OUT/stamps-bench.txt" 2>&1
for c in 512 2048; do
  python3 scripts/cluster-stamps.py "$OUT/st-$c.bin" > "$OUT/stamps-$c.txt" 2>&1 && rm -f "$OUT/st-$c.bin"
done
rounds=(1 2 3)
[[ -n $quick ]] && rounds=(1 2)
for round in "${rounds[@]}"; do
  gpu_check_row "list-$round" FL_NONE=1 60 "${plain[@]}" --variant megakernel=task_list
  gpu_check_row "cluster-$round" FL_NONE=1 60 "${plain[@]}"
  gpu_check_row "long-$round" FL_NONE=1 60 "${plain[@]}" --variant megakernel=clusters_long
  IFS=';' read -ra extra <<< "${FL_CLUSTER_AB:-}"
  for ab in "${extra[@]}"; do
    gpu_check_row "cluster-$round-$ab" "$ab" 60 "${plain[@]}"
  done
done
lanes=(memcheck racecheck synccheck)
[[ -n $quick ]] && lanes=()
for tool in "${lanes[@]}"; do
  gpu_check_lane "$tool" "FL_DECODE_SMALL=${FL_CLUSTER_SAN_CACHE:-1}" 'Gpt2ClusterStep.*' "$tool"
done
wait
[[ -n $quick ]] || gpu_check_lanes_summary "${lanes[@]}"
if [[ -n ${FL_CLUSTER_NCU:-} ]]; then  # the cluster step's SASS by warp-stall samples (2K, or the size FL_CLUSTER_NCU names)
  [[ $FL_CLUSTER_NCU == 1 ]] && FL_CLUSTER_NCU=2K
  timeout 150 ncu --kernel-name regex:clustered --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters -o "$OUT/prof" -f "$app" bench \
    --lesson gpt2_decode --levels 4 --sizes "$FL_CLUSTER_NCU" --precision bf16 --cache cold --no-counters --reps 3 \
    > "$OUT/ncu.log" 2>&1
  echo "ncu: rc $? $(date -u +%T)" | tee -a "$S"
  ncu -i "$OUT/prof.ncu-rep" --page source --csv --print-source sass > "$OUT/sass.csv" 2>> "$OUT/ncu.log"
  python3 scripts/ncu-top-sass.py "$OUT/sass.csv" > "$OUT/sass-top.txt" 2>&1
  ncu -i "$OUT/prof.ncu-rep" --page details > "$OUT/ncu-details.txt" 2>&1
  gzip -f "$OUT/sass.csv"; rm -f "$OUT/prof.ncu-rep"
  tail -3 "$OUT/ncu.log" >> "$S"
fi
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
