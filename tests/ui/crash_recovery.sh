#!/usr/bin/env bash
# The crash test (docs/RELIABILITY.md, "Nothing lost on a crash"), under Xvfb with the replay
# backend: a window sweeps lesson after lesson by script; once it has journalled measurements, a
# copy of its journal is taken, and a few seconds later the window is killed with SIGKILL,
# mid-sweep. `fusionlab --recover` then reopens the journal, and its script saves the session:
# every measurement of the copy must be in it. Then the same with the journal cut in the middle
# of a record: recovery keeps the records before the cut and says so in one line.
#   crash_recovery.sh FUSIONLAB JOURNAL_CHECK OUTDIR
set -euo pipefail
app="$1"
check="$2"
out="$3"
rm -rf "$out"
mkdir -p "$out/state"
export XDG_STATE_HOME="$out/state"
journals="$out/state/fusionlab/journal"

# Many sweeps: the window is still sweeping when it is killed.
{
  for round in 1 2 3 4; do
    for p in fp32 bf16; do
      echo "precision $p"
      for lesson in relu_scale gelu_scale bias_gelu residual_layernorm scale_mask_softmax \
        layernorm_linear linear_gelu ffn; do
        echo "lesson $lesson"
        echo "sweep"
        echo "wait"
      done
    done
  done
} > "$out/sweep.fls"
printf 'save-session recovered.json\n' > "$out/save.fls"

"$app" --no-gpu --script "$out/sweep.fls" --out-dir "$out" > "$out/window.log" 2>&1 &
pid=$!
journal=""
for _ in $(seq 1 600); do  # up to 60 s for 20 journalled records
  journal=$(ls "$journals"/window-*.journal 2> /dev/null | head -n 1 || true)
  if [[ -n "$journal" ]] && (($(wc -l < "$journal") > 20)); then break; fi
  if ! kill -0 "$pid" 2> /dev/null; then
    echo "crash_recovery: the window ended before it journalled 20 measurements" >&2
    cat "$out/window.log" >&2
    exit 1
  fi
  sleep 0.1
done
[[ -n "$journal" ]] || { echo "crash_recovery: no journal in $journals" >&2; exit 1; }
cp "$journal" "$out/snapshot.journal"
sleep 3  # what was journalled 3 s before the kill must survive it
if ! kill -0 "$pid" 2> /dev/null; then
  echo "crash_recovery: the window finished before the kill; the sweep script is too short" >&2
  exit 1
fi
kill -KILL "$pid"
wait "$pid" 2> /dev/null || true
[[ -f "$journal" ]] || { echo "crash_recovery: the killed window's journal is gone" >&2; exit 1; }
echo "crash_recovery: killed the window mid-sweep; its journal has $(($(wc -l < "$journal") - 1)) records"

"$app" --no-gpu --recover --script "$out/save.fls" --out-dir "$out" > "$out/recover.log" 2>&1
grep -q "reopened [0-9]* measurements" "$out/recover.log" || {
  echo "crash_recovery: --recover did not say what it reopened" >&2
  cat "$out/recover.log" >&2
  exit 1
}
"$check" "$out/snapshot.journal" "$out/recovered.json" 20
[[ ! -f "$journal" ]] || { echo "crash_recovery: the reopened journal was not removed" >&2; exit 1; }
if ls "$journals"/window-*.journal > /dev/null 2>&1; then
  echo "crash_recovery: the recovering window left its own journal behind" >&2
  exit 1
fi

# A journal cut in the middle of a record (the crash came mid-write).
size=$(stat -c %s "$out/snapshot.journal")
last=$(tail -n 1 "$out/snapshot.journal" | wc -c)
cut=$((size - last / 2))
head -c "$cut" "$out/snapshot.journal" > "$journals/window-20260101T000000Z-1.journal"
head -c $((size - last)) "$out/snapshot.journal" > "$out/whole.journal"
rm -f "$out/recovered.json"
"$app" --no-gpu --recover --script "$out/save.fls" --out-dir "$out" > "$out/recover-cut.log" 2>&1
grep -q "was cut short; the [0-9]* measurements before it are recovered" "$out/recover-cut.log" || {
  echo "crash_recovery: a cut journal did not say where it was cut" >&2
  cat "$out/recover-cut.log" >&2
  exit 1
}
"$check" "$out/whole.journal" "$out/recovered.json" 19
echo "crash_recovery: passed"
