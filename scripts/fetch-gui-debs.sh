#!/usr/bin/env bash
# Downloads (here, on a Debian 12 machine with apt) the .deb files needed to run Xvfb and a
# GLFW + OpenGL 3.3 core client (fusionlab) with Mesa's software renderer (llvmpipe) on a machine
# that has none of it (the lent GPU machine: Ubuntu 24.04, no network, no X, no Mesa).
# scripts/gpu-gui-env.sh unpacks them there into a private prefix (never into /).
#
#   scripts/fetch-gui-debs.sh [--app ELF]... [--assume-system PKG]... [--dest DIR]
#
# The set is the shared-library closure of the roots below, computed from the ELF files' NEEDED
# entries (readelf), each soname looked up among the needing package's own Depends. Packages that
# every Ubuntu 24.04 has and that must not be overridden (glibc & co., see BASE_PKGS) are left out;
# the sonames expected from the target are written to DEST/SYSTEM_SONAMES.txt, and the packages to
# DEST/MANIFEST.txt. Idempotent: debs are cached in $FL_GUI_DEBS_CACHE (default
# /var/tmp/fl-gui-debs-cache) and copied only when missing; stale debs in DEST are removed.
#
#   --app ELF            also cover the NEEDED libraries of this binary (mapped to packages with
#                        dpkg -S on this machine); default: build-gui/fusionlab when it exists.
#   --assume-system PKG  treat PKG as present on the target (not carried), e.g. to save space.
#   --dest DIR           default: <repo>/.gui-debs
#   --no-glxinfo         leave out mesa-utils-bin (glxinfo, 53 KB), used for diagnostics there.
# Environment: FL_GUI_EXTRA_PKGS="pkg ..." adds roots (their whole closure is carried).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST="$REPO/.gui-debs"
CACHE=${FL_GUI_DEBS_CACHE:-/var/tmp/fl-gui-debs-cache}
LIMIT_MIB=45
APPS=()
ASSUME=()
GLXINFO=1

while (($#)); do
  case "$1" in
    --app) APPS+=("$2"); shift 2 ;;
    --assume-system) ASSUME+=("$2"); shift 2 ;;
    --dest) DEST=$2; shift 2 ;;
    --no-glxinfo) GLXINFO=0; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "fetch-gui-debs: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ((${#APPS[@]} == 0)) && [[ -x "$REPO/build-gui/fusionlab" ]]; then APPS=("$REPO/build-gui/fusionlab"); fi

# Roots. Xvfb + its keymap compiler and data; the GLVND dispatch libraries (libGL/libGLX/libOpenGL:
# CMake's OpenGL::GL links libOpenGL.so.0 + libGLX.so.0); Mesa's GLX vendor, DRI driver and LLVM;
# GLFW and the X libraries GLFW 3.3 dlopens (not in its NEEDED); libstb (fusionlab links -lstb);
# libX11's locale data (XOpenIM).
ROOTS=(xvfb x11-xkb-utils xkb-data libx11-data
       libgl1 libglx0 libglvnd0 libopengl0 libglx-mesa0 libgl1-mesa-dri libglapi-mesa libllvm15
       libglfw3 libx11-6 libxrandr2 libxinerama1 libxcursor1 libxi6 libxxf86vm1 libx11-xcb1
       libxrender1 libxext6 libstb0)
((GLXINFO)) && ROOTS+=(mesa-utils-bin)
# shellcheck disable=SC2206
ROOTS+=(${FL_GUI_EXTRA_PKGS:-})

# Never carried: the base system of any Ubuntu 24.04 (Essential/required there, newer there, and
# overriding them through LD_LIBRARY_PATH would break the machine's own programs). glibc's family
# above all: libc6 must be the target's own, together with its ld.so.
BASE_PKGS=(libc6 libc-bin gcc-12-base libgcc-s1 libstdc++6 libcrypt1
           zlib1g libzstd1 liblzma5 libbz2-1.0 liblz4-1 libtinfo6
           libselinux1 libpcre2-8-0 libsystemd0 libelogind0 libudev1 libgcrypt20 libgpg-error0
           libcap2 libcap-ng0 libaudit1 libaudit-common libacl1 libattr1 libuuid1 libblkid1 libmount1)
BASE_PKGS+=("${ASSUME[@]}")
# Only these ELF files of these packages are used (the rest would pull Xaw/Xt and friends).
declare -A SCOPE=([xvfb]='usr/bin/Xvfb' [x11-xkb-utils]='usr/bin/xkbcomp'
                  [mesa-utils-bin]='usr/bin/glxinfo.*')

declare -A IS_BASE=() SELECTED=() PROVIDED=() SYSTEM=() CPROV=() INDEXED=() DEB=()
for p in "${BASE_PKGS[@]}"; do IS_BASE[$p]=1; done

die() { echo "fetch-gui-debs: $*" >&2; exit 1; }
command -v apt-get > /dev/null && command -v dpkg-deb > /dev/null || die "needs apt-get and dpkg-deb (a Debian machine)"
command -v readelf > /dev/null || die "needs readelf (apt-get install binutils)"
[[ $(dpkg --print-architecture) == amd64 ]] || die "run on an amd64 Debian machine (the GPU machine is x86-64)"
mkdir -p "$CACHE" "$DEST"
WORK=$(mktemp -d /tmp/fl-gui-debs.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

if ! apt-get download --print-uris xvfb 2> /dev/null | grep -q "^'"; then
  echo "fetch-gui-debs: apt lists look empty; running apt-get update" >&2
  apt-get update -qq || die "apt-get update failed"
fi

APT_DEP_FLAGS=(--no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances)
# One apt call each for the whole candidate set (apt takes ~0.6 s a call): direct dependencies
# (DEPS[pkg]="dep ...") and download URIs (URI[pkg]="file size").
declare -A DEPS=() URI=()
while read -r p d; do DEPS[$p]+=" $d"; done < <(
  apt-cache depends --recurse "${APT_DEP_FLAGS[@]}" "${ROOTS[@]}" 2> /dev/null |
    awk '/^[^ ]/ {pkg=$1; print pkg, ""; next}
         /^ +\|?(Pre)?Depends: / {sub(/.*Depends: /,""); print pkg, $0; next}
         /^    [^ :]+$/ {print pkg, $1}' | tr -d '<>')
mapfile -t ALLPKGS < <(printf '%s\n' "${!DEPS[@]}" | grep -v '^$' | sort -u)
while read -r _u f z _; do URI[${f%%_*}]="$f $z"; done < <(
  apt-get download --print-uris "${ALLPKGS[@]}" 2> /dev/null | grep "^'" || true)

# fetch PKG: sets DEB[PKG] to the cached .deb of PKG's candidate version, downloading it if missing.
fetch() {
  local p=$1 line file size
  [[ -n ${DEB[$p]:-} ]] && return
  if [[ -n ${URI[$p]:-} ]]; then line="x ${URI[$p]}"
  else line=$(apt-get download --print-uris "$p" 2> /dev/null | grep "^'" | head -1) || true; fi
  [[ -n $line ]] || die "no downloadable candidate for package '$p'"
  file=$(awk '{print $2}' <<< "$line"); size=$(awk '{print $3}' <<< "$line")
  if [[ ! -s "$CACHE/$file" || $(stat -c %s "$CACHE/$file") != "$size" ]]; then
    (cd "$CACHE" && apt-get download -qq -o APT::Sandbox::User=root "$p" > /dev/null) || die "apt-get download $p failed"
  fi
  [[ -s "$CACHE/$file" ]] || die "download of $p did not produce $file"
  DEB[$p]="$CACHE/$file"
}

# index PKG: records which library file names (sonames) PKG ships, in CPROV.
index() {
  local p=$1 f
  [[ -n ${INDEXED[$p]:-} ]] && return; INDEXED[$p]=1
  if [[ -n ${IS_BASE[$p]:-} ]] && dpkg-query -L "$p" > "$WORK/list" 2> /dev/null; then :; else
    fetch "$p"; dpkg-deb -c "${DEB[$p]}" | awk '{print $6}' | sed 's|^\./|/|' > "$WORK/list"
  fi
  while read -r f; do
    f=${f##*/}; [[ -n ${CPROV[$f]:-} ]] || CPROV[$f]=$p
  done < <(grep -E '/lib/.*\.so(\.|$)' "$WORK/list" | grep -Ev '/lib/.*/.*/')
}

# deps PKG: PKG's direct Depends/Pre-Depends, alternatives and virtual providers included.
deps() {
  if [[ -n ${DEPS[$1]+x} ]]; then printf '%s\n' ${DEPS[$1]} | sort -u; return; fi
  apt-cache depends "${APT_DEP_FLAGS[@]}" "$1" 2> /dev/null |
    awk 'NR>1 && /^ +\|?(Pre)?Depends: / {sub(/.*Depends: /,""); print; next}
         NR>1 && /^    [^ :]+$/ {print $1}' | tr -d '<>' | sed 's/:any$//' | sort -u
}

needed_of_tree() { # DIR [GLOB]: NEEDED sonames of the ELF files under DIR (matching GLOB)
  local dir=$1 glob=${2:-} f
  find "$dir" -type f \( -name '*.so*' -o -path '*/bin/*' -o -path '*/sbin/*' -o -path '*/libexec/*' \) |
    while read -r f; do
      # shellcheck disable=SC2053  # GLOB is a pattern
      [[ -z $glob || ${f#"$dir"/} == $glob ]] || continue
      readelf -d "$f" 2> /dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
    done | sort -u
}

QUEUE=("${ROOTS[@]}")
select_pkg() { [[ -n ${SELECTED[$1]:-} || -n ${IS_BASE[$1]:-} ]] && return; SELECTED[$1]=1; QUEUE+=("$1"); }
for p in "${ROOTS[@]}"; do SELECTED[$p]=1; done

# resolve SONAME NEEDER [DEP-PKGS...]: finds the package that ships SONAME and selects it.
resolve() {
  local s=$1 who=$2 c owner; shift 2
  [[ -n ${PROVIDED[$s]:-} || -n ${SYSTEM[$s]:-} ]] && return
  for c in "$@"; do
    [[ -n ${CPROV[$s]:-} ]] && break
    index "$c"
  done
  owner=${CPROV[$s]:-}
  if [[ -z $owner ]]; then  # not among the direct Depends: ask this machine's dpkg database
    owner=$(dpkg -S "*/$s" 2> /dev/null | grep -E '/lib/(x86_64-linux-gnu/)?[^/]+$' | head -1 | cut -d: -f1) || true
  fi
  if [[ -z $owner ]]; then
    echo "fetch-gui-debs: warning: $s (needed by $who) is in no Debian package here: assumed to come from the target (driver?)" >&2
    SYSTEM[$s]="(target)"; return
  fi
  if [[ -n ${IS_BASE[$owner]:-} ]]; then SYSTEM[$s]=$owner; else select_pkg "$owner"; fi
}

echo "fetch-gui-debs: computing the closure of ${#ROOTS[@]} roots" >&2
declare -A VISITED=()
while ((${#QUEUE[@]})); do
  p=${QUEUE[0]}; QUEUE=("${QUEUE[@]:1}")
  [[ -n ${VISITED[$p]:-} ]] && continue; VISITED[$p]=1
  fetch "$p"; f=${DEB[$p]}; mkdir -p "$WORK/x/$p"; dpkg-deb -x "$f" "$WORK/x/$p"
  index "$p"
  while read -r s; do [[ -n $s ]] && PROVIDED[$s]=$p; done < <(
    find "$WORK/x/$p" \( -type f -o -type l \) -path '*/lib/*' -name '*.so*' -printf '%f\n')
  [[ $(dpkg-deb -f "$f" Architecture) == all ]] && continue
  mapfile -t D < <(deps "$p")
  while read -r s; do
    [[ -n $s ]] && resolve "$s" "$p" "${D[@]}"
  done < <(needed_of_tree "$WORK/x/$p" "${SCOPE[$p]:-}")
done

# The application's own libraries.
for app in "${APPS[@]}"; do
  [[ -f $app ]] || die "--app $app: no such file"
  echo "fetch-gui-debs: covering the libraries of $app" >&2
  while read -r s; do
    [[ -z $s || -n ${PROVIDED[$s]:-} || -n ${SYSTEM[$s]:-} ]] && continue
    resolve "$s" "$(basename "$app")"
  done < <(readelf -d "$app" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  while ((${#QUEUE[@]})); do  # closure of what the app added
    p=${QUEUE[0]}; QUEUE=("${QUEUE[@]:1}")
    [[ -n ${VISITED[$p]:-} ]] && continue; VISITED[$p]=1
    fetch "$p"; f=${DEB[$p]}; mkdir -p "$WORK/x/$p"; dpkg-deb -x "$f" "$WORK/x/$p"; index "$p"
    while read -r s; do [[ -n $s ]] && PROVIDED[$s]=$p; done < <(
      find "$WORK/x/$p" \( -type f -o -type l \) -path '*/lib/*' -name '*.so*' -printf '%f\n')
    mapfile -t D < <(deps "$p")
    while read -r s; do [[ -n $s ]] && resolve "$s" "$p" "${D[@]}"; done < <(needed_of_tree "$WORK/x/$p")
  done
done

# Copy the set into DEST; drop stale debs.
declare -A KEEP=()
total=0
{
  echo "# package version size(bytes) file -- carried for scripts/gpu-gui-env.sh; made by scripts/fetch-gui-debs.sh"
  for p in $(printf '%s\n' "${!SELECTED[@]}" | sort); do
    f=${DEB[$p]}; b=$(basename "$f"); KEEP[$b]=1
    if [[ ! -f "$DEST/$b" ]] || ! cmp -s "$f" "$DEST/$b"; then cp -f "$f" "$DEST/$b"; fi
    sz=$(stat -c %s "$f"); total=$((total + sz))
    echo "$p $(dpkg-deb -f "$f" Version) $sz $b"
  done
} > "$DEST/MANIFEST.txt"
for f in "$DEST"/*.deb; do
  [[ -e $f && -z ${KEEP[$(basename "$f")]:-} ]] && { echo "fetch-gui-debs: removing stale $(basename "$f")" >&2; rm -f "$f"; }
done
{
  echo "# sonames the carried files need from the target system (checked by gpu-gui-env.sh): soname package-here"
  for s in $(printf '%s\n' "${!SYSTEM[@]}" | sort); do echo "$s ${SYSTEM[$s]}"; done
} > "$DEST/SYSTEM_SONAMES.txt"

echo "fetch-gui-debs: ${#SELECTED[@]} packages in $DEST:" >&2
sort -k3 -n -r "$DEST/MANIFEST.txt" | awk '!/^#/ {printf "  %-22s %-26s %8.2f MiB\n", $1, $2, $3/1048576}' >&2
echo "fetch-gui-debs: expected from the target: $(grep -v '^#' "$DEST/SYSTEM_SONAMES.txt" | awk '{print $1}' | tr '\n' ' ')" >&2
mib=$(awk -v t="$total" 'BEGIN{printf "%.1f", t/1048576}')
echo "fetch-gui-debs: total $mib MiB ($total bytes) in ${#SELECTED[@]} .deb files"
if ((total > LIMIT_MIB * 1048576)); then
  echo "fetch-gui-debs: WARNING: over the ${LIMIT_MIB} MiB budget; see --assume-system (e.g. libxml2 libicu72 if the target has libxml2.so.2)" >&2
fi
