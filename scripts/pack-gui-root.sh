#!/usr/bin/env bash
# Packs the GUI runtime for the GPU machine into .gui-pack/ (git-ignored): the packages of
# .gui-debs/ (scripts/fetch-gui-debs.sh) unpacked, trimmed of documentation, headers and static
# libraries, as one root.tar.xz (~51 MB against ~58 MB of .debs), plus the stripped window binary
# build-gui/fusionlab as fusionlab.xz (~2 MB). A device call carries at most 64 MiB in all,
# tracked files included, which the .debs and the binary no longer fit beside.
#
#   scripts/pack-gui-root.sh             after scripts/fetch-gui-debs.sh and a GUI build
#
# On the GPU machine (one device call, carry [".gui-pack"]):
#   xz -dc .gui-pack/fusionlab.xz > /tmp/fusionlab && chmod +x /tmp/fusionlab
#   export LD_LIBRARY_PATH=/usr/local/cuda/lib64 FL_GUI_DEBS=$PWD/.gui-pack FL_GUI_APP=/tmp/fusionlab
#   source scripts/gpu-gui-env.sh && /tmp/fusionlab --script docs/examples/lecture.fls --out-dir /tmp/lecture
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
debs=$repo/.gui-debs pack=$repo/.gui-pack app=$repo/build-gui/fusionlab
compgen -G "$debs/*.deb" > /dev/null || { echo "pack-gui-root: no .deb files in $debs (run scripts/fetch-gui-debs.sh)" >&2; exit 1; }
[[ -x $app ]] || { echo "pack-gui-root: no $app (build the GUI first)" >&2; exit 1; }
grep -qx '/.gui-pack/' "$repo/.git/info/exclude" 2> /dev/null || echo '/.gui-pack/' >> "$repo/.git/info/exclude"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "$debs"/*.deb; do dpkg -x "$f" "$work/root"; done
rm -rf "$work"/root/usr/share/{doc,man,locale,lintian,bug,info} "$work/root/usr/include"
find "$work/root" -name '*.a' -delete
mkdir -p "$pack"
tar -C "$work/root" -cf - . | xz -9 -T0 > "$pack/root.tar.xz.tmp" && mv "$pack/root.tar.xz.tmp" "$pack/root.tar.xz"
strip -o "$work/fusionlab" "$app"
xz -9 -T0 -c "$work/fusionlab" > "$pack/fusionlab.xz.tmp" && mv "$pack/fusionlab.xz.tmp" "$pack/fusionlab.xz"
ls -la "$pack"
