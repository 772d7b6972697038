#!/usr/bin/env bash
# A second process runs kernels on the GPU during a `bench` (docs/RELIABILITY.md, "Whose GPU was
# it"): every measurement taken meanwhile is marked shared (in the session and in bench's table);
# the same bench alone afterwards is not.
#   shared_gpu.sh FUSIONLAB OUTDIR
set -euo pipefail
app="$1"
out="$2"
rm -rf "$out"
mkdir -p "$out"

# The other process: gelu_scale at 64M elements for ~20 s a level, no counters.
"$app" bench --lesson gelu_scale --sizes 64M --seconds 20 --reps 100000 --no-counters \
  > "$out/other.txt" 2>&1 &
other=$!
trap 'kill "$other" 2> /dev/null || true' EXIT
sleep 6  # past its start-up, into its timed repetitions
kill -0 "$other" || { echo "shared_gpu: the other process ended early" >&2; cat "$out/other.txt"; exit 1; }
"$app" bench --lesson relu_scale --sizes 1M,4M --no-counters --out "$out/shared.json" \
  > "$out/shared.txt" 2>&1
kill -0 "$other" || { echo "shared_gpu: the other process ended before the bench did" >&2; exit 1; }
kill "$other"
wait "$other" 2> /dev/null || true
"$app" bench --lesson relu_scale --sizes 1M,4M --no-counters --out "$out/alone.json" \
  > "$out/alone.txt" 2>&1
cat "$out/shared.txt"

measured=$(grep -c '"level_name"' "$out/shared.json")
shared=$(grep -cE '"gpu_other_processes": [1-9]' "$out/shared.json" || true)
alone=$(grep -cE '"gpu_other_processes": 0' "$out/alone.json" || true)
echo "shared_gpu: $shared of $measured measurements marked shared with the other process running;"\
  "$alone of $(grep -c '"level_name"' "$out/alone.json") unmarked alone"
((measured == 4 && shared == measured)) || { echo "shared_gpu: not every measurement was marked" >&2; exit 1; }
grep -q "GPU shared" "$out/shared.txt" || { echo "shared_gpu: bench's table has no mark" >&2; exit 1; }
grep -q "other process had work on this GPU" "$out/shared.txt" || { echo "shared_gpu: no sentence" >&2; exit 1; }
((alone == 4)) || { echo "shared_gpu: measurements alone were marked" >&2; exit 1; }
! grep -q "GPU shared" "$out/alone.txt" || { echo "shared_gpu: bench alone shows a mark" >&2; exit 1; }
echo "shared_gpu: passed"
