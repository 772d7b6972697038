#!/bin/sh
# File safety of the command line ("Files", "Every reader checks the file first"), one
# case per ctest (tests/CMakeLists.txt): each runs `fusionlab` against a planted file fault and
# asserts the exit status, the one line on stderr, and that no file in its folder changed except
# the expected output.
#
#   file_safety.sh FUSIONLAB RECORDING_FOLDER WORK_FOLDER CASE
#
# Exit 0: passed; 1: failed (the reason on stderr); 77: skipped (ctest SKIP_RETURN_CODE), with
# the reason.
set -u
fusionlab=$1
recording=$2
work=$3
case_name=$4
dir="$work/$case_name"
rm -rf "$dir"
mkdir -p "$dir"
one_file="$recording/elementwise_fp32_cold.json"

failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}

# The folder's entries with their type, link target and content checksum.
snapshot() {
  (cd "$1" && find . -mindepth 1 | sort | while read -r entry; do
    if [ -L "$entry" ]; then
      echo "$entry link $(readlink "$entry")"
    elif [ -f "$entry" ]; then
      echo "$entry file $(cksum < "$entry")"
    elif [ -d "$entry" ]; then
      echo "$entry folder"
    else
      echo "$entry special $(stat -c %F "$entry")"
    fi
  done)
}

# expect EXIT REGEX COMMAND...: runs COMMAND (60 s at most: a FIFO must not hang it), checks its
# exit status and that stderr is one line matching REGEX (grep -E).
expect() {
  want_exit=$1
  want_regex=$2
  shift 2
  timeout 60 "$@" > "$dir.stdout" 2> "$dir.stderr" < /dev/null
  got_exit=$?
  echo "\$ $*" >&2
  echo "exit $got_exit; stderr:" >&2
  cat "$dir.stderr" >&2
  [ "$got_exit" = "$want_exit" ] || fail "exit status $got_exit, expected $want_exit"
  lines=$(wc -l < "$dir.stderr")
  [ "$lines" = 1 ] || fail "stderr has $lines lines, expected 1"
  grep -Eq -- "$want_regex" "$dir.stderr" || fail "stderr does not match: $want_regex"
}

unchanged_since() {
  now=$(snapshot "$dir")
  [ "$now" = "$1" ] || fail "the folder changed:
--- before
$1
--- after
$now"
}

case "$case_name" in
  output_is_input)
    # An export onto its own input, even with --force, and by another name (a symlink).
    cp "$one_file" "$dir/rec.json"
    ln -s rec.json "$dir/alias.json"
    before=$(snapshot "$dir")
    expect 1 "^fusionlab export-trace: cannot write .*/rec\.json: it is a file this command is reading; write to another name$" \
      "$fusionlab" export-trace "$dir/rec.json" -o "$dir/rec.json" --force
    expect 1 "^fusionlab export-csv: cannot write .*/alias\.json: it is a file this command is reading" \
      "$fusionlab" export-csv "$dir" -o "$dir/alias.json" --force
    unchanged_since "$before"
    ;;
  output_device)
    # /dev/null and a device node of our own (root can make one; a rename as root would replace it).
    if mknod "$dir/null" c 1 3 2> /dev/null; then node="$dir/null"; else node=/dev/null; fi
    before=$(snapshot "$dir")
    for out in /dev/null "$node"; do
      expect 1 "^fusionlab export-csv: cannot write .*: it is a device, not a regular file, so it is never replaced \(not even with --force\)$" \
        "$fusionlab" export-csv "$recording" -o "$out" --force
      [ -c "$out" ] || fail "$out is no longer a device"
    done
    unchanged_since "$before"
    ;;
  output_fifo)
    mkfifo "$dir/fifo"
    before=$(snapshot "$dir")
    expect 1 "^fusionlab export-trace: cannot write .*/fifo: it is a FIFO \(named pipe\), not a regular file" \
      "$fusionlab" export-trace "$recording" -o "$dir/fifo" --force
    unchanged_since "$before"
    ;;
  output_folder)
    mkdir "$dir/sub"
    before=$(snapshot "$dir")
    expect 1 "^fusionlab export-csv: cannot write .*/sub: it is a folder; give a file name$" \
      "$fusionlab" export-csv "$recording" -o "$dir/sub" --force
    unchanged_since "$before"
    ;;
  output_symlink)
    # Written through to the file the link points at; the link stays a link.
    echo old > "$dir/real.csv"
    ln -s real.csv "$dir/link.csv"
    expect 0 "^wrote .*/link\.csv: [0-9]+ rows$" "$fusionlab" export-csv "$one_file" -o "$dir/link.csv" --force
    [ -L "$dir/link.csv" ] || fail "link.csv is no longer a symlink"
    [ "$(readlink "$dir/link.csv")" = real.csv ] || fail "link.csv points elsewhere"
    head -n 1 "$dir/real.csv" | grep -q '^lesson,size,' || fail "real.csv does not hold the CSV"
    [ "$(ls -A "$dir" | wc -l)" = 2 ] || fail "other files appeared: $(ls -A "$dir")"
    # A link to nothing is refused and creates nothing.
    ln -s nowhere.csv "$dir/dangling.csv"
    before=$(snapshot "$dir")
    expect 1 "symbolic link to a file that does not exist" \
      "$fusionlab" export-csv "$one_file" -o "$dir/dangling.csv" --force
    unchanged_since "$before"
    ;;
  input_not_a_file)
    # Readers check first: a FIFO must not hang, a device must not be read forever.
    mkfifo "$dir/pipe.json"
    mkdir "$dir/empty"
    before=$(snapshot "$dir")
    expect 1 "^fusionlab export-csv: .*/pipe\.json: a FIFO \(named pipe\), not a session file$" \
      "$fusionlab" export-csv "$dir/pipe.json" -o "$dir/out.csv"
    expect 1 "^fusionlab export-csv: /dev/zero: a device, not a session file$" \
      "$fusionlab" export-csv /dev/zero -o "$dir/out.csv"
    expect 1 "^fusionlab export-trace: .*/empty: a folder with no \.json session files$" \
      "$fusionlab" export-trace "$dir/empty" -o "$dir/out.json"
    unchanged_since "$before"
    ;;
  stdout_full)
    # -o - onto a full device: one line naming standard output, exit 1.
    expect 1 "^fusionlab export-csv: cannot write to standard output: the disk is full" \
      sh -c "exec \"\$0\" export-csv \"\$1\" -o - > /dev/full" "$fusionlab" "$one_file"
    ;;
  full_disk)
    # A real full disk: a 64 KiB tmpfs in a private mount namespace (needs CAP_SYS_ADMIN or user
    # namespaces); the old trace survives, no temporary file is left, the line names the output.
    if ! unshare -m sh -c "mount -t tmpfs -o size=64k tmpfs \"$dir\"" 2> /dev/null; then
      echo "SKIP: cannot mount a small tmpfs here (unshare -m; mount -t tmpfs)" >&2
      exit 77
    fi
    unshare -m sh -c '
      dir=$1; fusionlab=$2; recording=$3
      mount -t tmpfs -o size=64k tmpfs "$dir" || exit 3
      echo "old trace" > "$dir/t.json"
      timeout 60 "$fusionlab" export-trace "$recording" -o "$dir/t.json" --force 2> "$dir.stderr"
      echo "exit $?" > "$dir.exit"
      cat "$dir/t.json" > "$dir.after"
      ls -A "$dir" > "$dir.list"
    ' sh "$dir" "$fusionlab" "$recording"
    cat "$dir.stderr" >&2
    [ "$(cat "$dir.exit")" = "exit 1" ] || fail "$(cat "$dir.exit"), expected exit 1"
    grep -Eq "^fusionlab export-trace: cannot write .*/t\.json: the disk is full" "$dir.stderr" ||
      fail "stderr does not say the disk is full naming t.json"
    grep -q "tmp-" "$dir.stderr" && fail "stderr names the temporary file"
    [ "$(wc -l < "$dir.stderr")" = 1 ] || fail "stderr is not one line"
    [ "$(cat "$dir.after")" = "old trace" ] || fail "the old file changed"
    [ "$(cat "$dir.list")" = "t.json" ] || fail "files left behind: $(cat "$dir.list")"
    ;;
  readonly_folder)
    if [ "$(id -u)" = 0 ]; then
      echo "SKIP: running as root, where a folder's permissions do not stop writes" >&2
      exit 77
    fi
    echo old > "$dir/t.json"
    chmod 555 "$dir"
    before=$(snapshot "$dir")
    expect 1 "cannot write .*/t\.json: the folder .* is not writable" \
      "$fusionlab" export-trace "$recording" -o "$dir/t.json" --force
    unchanged_since "$before"
    chmod 755 "$dir"
    ;;
  screenshot_no_overwrite)
    # --screenshot keeps an existing file unless --force; never a device. Checked before any
    # window opens, so no display is needed.
    echo "my picture" > "$dir/shot.png"
    before=$(snapshot "$dir")
    expect 1 "^fusionlab: .*/shot\.png already exists; pass --force to overwrite it$" \
      env -u DISPLAY -u WAYLAND_DISPLAY "$fusionlab" --no-gpu --screenshot "$dir/shot.png"
    expect 1 "^fusionlab: cannot write /dev/null: it is a device" \
      env -u DISPLAY -u WAYLAND_DISPLAY "$fusionlab" --no-gpu --screenshot /dev/null --force
    unchanged_since "$before"
    ;;
  script_not_a_file)
    mkfifo "$dir/pipe.fls"
    mkdir "$dir/folder.fls"
    before=$(snapshot "$dir")
    expect 1 "^fusionlab: .*/pipe\.fls: a FIFO \(named pipe\), not a script$" \
      env -u DISPLAY -u WAYLAND_DISPLAY "$fusionlab" --script "$dir/pipe.fls" --out-dir "$dir"
    expect 1 "^fusionlab: .*/folder\.fls: a folder, not a script$" \
      env -u DISPLAY -u WAYLAND_DISPLAY "$fusionlab" --script "$dir/folder.fls" --out-dir "$dir"
    unchanged_since "$before"
    ;;
  *)
    echo "file_safety.sh: unknown case $case_name" >&2
    exit 1
    ;;
esac
exit $failed
