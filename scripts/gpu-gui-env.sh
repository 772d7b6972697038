# Source me (bash), from the repo root, on a machine with no X server and no Mesa (the lent GPU
# machine): sets up a private X display with Xvfb and Mesa unpacked from .gui-debs/ (made by
# scripts/fetch-gui-debs.sh), so that `fusionlab --screenshot shot.png` can run there.
#
#   . scripts/gpu-gui-env.sh && build-gui/fusionlab --screenshot shot.png; fl_gui_stop
#
# What it does, needing no network:
#  1. unpacks .gui-debs/*.deb with `dpkg -x` into $FL_GUI_ROOT (default /tmp/fl-guiroot), once:
#     never into /. Carried libraries that the system already has (ld.so cache) are moved aside,
#     except the X/GL/Mesa stack, so the machine's own programs keep their own (newer) libraries.
#  2. exports LD_LIBRARY_PATH (the prefix's lib dirs first; glibc is never carried, so the
#     system's is used), LIBGL_DRIVERS_PATH, __GLX_VENDOR_LIBRARY_NAME (mesa, or $FL_GLX_VENDOR,
#     e.g. FL_GLX_VENDOR=nvidia for the driver's libGLX_nvidia), __EGL_VENDOR_LIBRARY_DIRS,
#     XLOCALEDIR, XKB_CONFIG_ROOT;
#  3. makes xkbcomp reachable where Xvfb runs it (its compiled-in /usr/bin/xkbcomp): a link to a
#     wrapper of the prefix's xkbcomp when /usr/bin/xkbcomp is missing, or, where /usr/bin can't
#     be written, Xvfb runs in its own mount namespace with an overlay on /usr/bin;
#  4. starts the prefix's Xvfb on :$FL_DISPLAY_NUM (99) 1280x720x24, waits (10 s) for its socket,
#     exports DISPLAY, and prints what it uses (Xvfb, libGL, GLX vendor; glxinfo -B if carried).
# fl_gui_stop stops that Xvfb. On failure: returns non-zero after one line "gpu-gui-env: FAILED: why".
# Knobs: FL_GUI_ROOT, FL_GUI_DEBS, FL_DISPLAY_NUM, FL_GLX_VENDOR, FL_GUI_DEDUPE=0 (carry all),
# FL_XKB_MODE=auto|link|overlay|system, FL_XVFB_ARGS (extra Xvfb arguments).

_fl_say() { echo "gpu-gui-env: $*" >&2; }
_fl_fail() { echo "gpu-gui-env: FAILED: $*" >&2; return 1; }

# Libraries always taken from the prefix (one consistent X/GL/Mesa stack), even if the system has them.
_FL_STACK_RE='^lib(GL|GLX|GLdispatch|OpenGL|EGL|GLES|glapi|gbm|LLVM|drm|glfw|stb|X|xcb|xshmfence|xkbfile|Xfont|fontenc|pixman|wayland|sensors)'

_fl_unpack() {
  local debs=$1 root=$2 stamp f n dir lib moved=0 packed=""
  # A pre-unpacked, trimmed root (FL_GUI_DEBS=.gui-pack, made by scripts/pack-gui-root.sh) is
  # smaller to carry than the .debs: the device call carries at most 64 MiB.
  [[ -f $debs/root.tar.xz ]] && packed=$debs/root.tar.xz
  if [[ -n $packed ]]; then
    stamp=$(cksum < "$packed" | cut -d' ' -f1)
  else
    stamp=$(cd "$debs" && ls -1 ./*.deb 2> /dev/null | LC_ALL=C sort | cksum | cut -d' ' -f1)
  fi
  [[ -n $stamp ]] || { _fl_fail "no .deb files in $debs (run scripts/fetch-gui-debs.sh where apt works, and carry .gui-debs)"; return 1; }
  stamp="$stamp dedupe=${FL_GUI_DEDUPE:-1}"
  if [[ -f $root/.fl-guiroot && $(cat "$root/.fl-guiroot") == "$stamp" ]]; then
    _fl_say "prefix $root already unpacked"; return 0
  fi
  [[ -n $packed ]] || command -v dpkg > /dev/null || { _fl_fail "dpkg not found (needed for dpkg -x)"; return 1; }
  if [[ -e $root ]]; then
    if [[ -f $root/.fl-guiroot || -z $(ls -A "$root" 2> /dev/null) ]]; then rm -rf "$root"
    else _fl_fail "$root exists and is not ours (no .fl-guiroot); set FL_GUI_ROOT"; return 1; fi
  fi
  mkdir -p "$root" || { _fl_fail "cannot create $root"; return 1; }
  n=0
  if [[ -n $packed ]]; then
    tar -xJf "$packed" -C "$root" || { _fl_fail "tar -xJf $packed failed"; return 1; }
  else
    for f in "$debs"/*.deb; do
      dpkg -x "$f" "$root" || { _fl_fail "dpkg -x $f failed"; return 1; }
      n=$((n + 1))
    done
  fi
  # Prefer the system's copy of generic libraries (libexpat, libffi, libbsd, libpng, ...): Ubuntu
  # 24.04's are newer, and an older copy first in LD_LIBRARY_PATH could break its own programs
  # (python3's pyexpat needs expat >= 2.6, say). Checked below with ldd; undone if anything breaks.
  if [[ ${FL_GUI_DEDUPE:-1} != 0 ]] && command -v ldconfig > /dev/null; then
    local sys; sys=$(ldconfig -p 2> /dev/null | awk '/x86-64/ {print $1}' | sort -u)
    mkdir -p "$root/shadowed"
    for dir in "$root/usr/lib/x86_64-linux-gnu" "$root/lib/x86_64-linux-gnu"; do
      [[ -d $dir ]] || continue
      for lib in "$dir"/lib*.so.*; do
        [[ -e $lib || -L $lib ]] || continue
        n=${lib##*/}
        [[ $n =~ $_FL_STACK_RE ]] && continue
        if grep -qxF "$n" <<< "$sys"; then
          mv "$lib" "$root/shadowed/" && moved=$((moved + 1))
          # the real file behind the soname link goes too
          for f in "$dir/${n%%.so.*}".so.*; do [[ -e $f ]] && mv "$f" "$root/shadowed/"; done
        fi
      done
    done
    ((moved)) && _fl_say "using the system's copy of: $(ls "$root/shadowed" | grep -E '\.so\.[0-9]+$' | tr '\n' ' ')"
  fi
  echo "$stamp" > "$root/.fl-guiroot"
  _fl_say "unpacked ${packed:-$(ls "$debs"/*.deb | wc -l) packages} into $root"
}

# Prints "missing" libraries of the key ELF files under the current environment; empty when fine.
_fl_ldd_problems() {
  local root=$1 f out
  for f in "$root/usr/bin/Xvfb" "$root/usr/bin/xkbcomp" "$root/usr/lib/x86_64-linux-gnu/dri/swrast_dri.so" \
           "$root/usr/lib/x86_64-linux-gnu/libGLX_mesa.so.0" "$root/usr/lib/x86_64-linux-gnu/libglfw.so.3" \
           "$root/usr/lib/x86_64-linux-gnu/libGL.so.1" "${FL_GUI_APP:-}"; do
    [[ -n $f && -e $f ]] || continue
    out=$(ldd "$f" 2>&1) || true
    grep -E 'not found|No such file' <<< "$out" | sed "s|^[[:space:]]*|${f##*/}: |"
  done
}

_fl_find_lib() { # SONAME: first match in LD_LIBRARY_PATH, then the ld.so cache
  local d
  local IFS=:
  for d in $LD_LIBRARY_PATH; do [[ -n $d && -e $d/$1 ]] && { readlink -f "$d/$1"; return 0; }; done
  ldconfig -p 2> /dev/null | awk -v s="$1" '$1 == s && /x86-64/ {print $NF; exit}'
}

_fl_gui_main() {
  local -  # option changes stay inside: the caller may run under set -euo pipefail
  set +e +u +o pipefail
  local repo debs root disp xvfb xkbdir nvdir d mode problems i glx log
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  debs=${FL_GUI_DEBS:-$repo/.gui-debs}
  root=${FL_GUI_ROOT:-/tmp/fl-guiroot}
  disp=${FL_DISPLAY_NUM:-99}
  [[ -z ${FL_GUI_APP:-} && -x $repo/build-gui/fusionlab ]] && FL_GUI_APP=$repo/build-gui/fusionlab

  _fl_unpack "$debs" "$root" || return 1
  xvfb=$root/usr/bin/Xvfb
  xkbdir=$root/usr/share/X11/xkb
  [[ -x $xvfb ]] || { _fl_fail "no Xvfb in $root (is xvfb in .gui-debs?)"; return 1; }
  [[ -d $xkbdir ]] || { _fl_fail "no XKB data in $xkbdir (xkb-data)"; return 1; }

  # The NVIDIA driver's GLX/EGL vendor libraries, if any (needed for FL_GLX_VENDOR=nvidia).
  nvdir=
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -e $d/libGLX_nvidia.so.0 ]] && { nvdir=$d; break; }
  done
  [[ -z $nvdir ]] && nvdir=$(ldconfig -p 2> /dev/null | awk '/libGLX_nvidia.so.0/ && /x86-64/ {print $NF; exit}' | xargs -r dirname)

  local base="$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu"
  if [[ -z ${_FL_GUI_OLD_LD_LIBRARY_PATH+x} ]]; then export _FL_GUI_OLD_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}; fi
  LD_LIBRARY_PATH=$base
  [[ -n $nvdir && $nvdir != /usr/lib/x86_64-linux-gnu ]] && LD_LIBRARY_PATH+=":$nvdir"
  [[ -n $_FL_GUI_OLD_LD_LIBRARY_PATH ]] && LD_LIBRARY_PATH+=":$_FL_GUI_OLD_LD_LIBRARY_PATH"
  export LD_LIBRARY_PATH
  export LIBGL_DRIVERS_PATH=$root/usr/lib/x86_64-linux-gnu/dri
  export __GLX_VENDOR_LIBRARY_NAME=${FL_GLX_VENDOR:-mesa}
  local egl=
  [[ -d $root/usr/share/glvnd/egl_vendor.d ]] && egl=$root/usr/share/glvnd/egl_vendor.d
  for d in /usr/local/nvidia/share/glvnd/egl_vendor.d /usr/share/glvnd/egl_vendor.d; do
    [[ -d $d ]] && egl=${egl:+$egl:}$d
  done
  [[ -n $egl ]] && export __EGL_VENDOR_LIBRARY_DIRS=$egl
  export XLOCALEDIR=$root/usr/share/X11/locale
  export XKB_CONFIG_ROOT=$xkbdir
  export FL_GUI_ROOT=$root

  if [[ $__GLX_VENDOR_LIBRARY_NAME == nvidia && -z $nvdir ]]; then
    _fl_fail "FL_GLX_VENDOR=nvidia but no libGLX_nvidia.so.0 found (/usr/local/nvidia/lib64, ld.so cache)"; return 1
  fi
  problems=$(_fl_ldd_problems "$root")
  if [[ -n $problems && -d $root/shadowed && -n $(ls -A "$root/shadowed") ]] &&
     { grep -q 'version `' <<< "$problems" || grep -qF -f <(ls "$root/shadowed") <<< "$problems"; }; then
    _fl_say "the system's copies did not fit ($(head -1 <<< "$problems")); using the carried ones"
    mv "$root"/shadowed/* "$root/usr/lib/x86_64-linux-gnu/" 2> /dev/null
    problems=$(_fl_ldd_problems "$root")
  fi
  if [[ -n $problems ]]; then
    _fl_fail "missing libraries: $(tr '\n' ';' <<< "$problems") (the target lacks them: fetch their packages with FL_GUI_EXTRA_PKGS=... scripts/fetch-gui-debs.sh)"; return 1
  fi

  # xkbcomp: Xvfb runs "/usr/bin/xkbcomp" (compiled in; no flag or variable changes it).
  local wrapper=$root/fl-bin/xkbcomp
  mkdir -p "$root/fl-bin"
  cat > "$wrapper" << EOF
#!/bin/sh
# made by gpu-gui-env.sh: the carried xkbcomp with the carried libraries
LD_LIBRARY_PATH=$base\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec $root/usr/bin/xkbcomp "\$@"
EOF
  chmod 755 "$wrapper"
  mode=${FL_XKB_MODE:-auto}
  if [[ $mode == auto ]]; then
    if [[ $(readlink /usr/bin/xkbcomp 2> /dev/null) == "$wrapper" ]]; then mode=link
    elif [[ -x /usr/bin/xkbcomp ]]; then mode=system
    elif ln -sfn "$wrapper" /usr/bin/xkbcomp 2> /dev/null; then mode=link
    else mode=overlay; fi
  elif [[ $mode == link && $(readlink /usr/bin/xkbcomp 2> /dev/null) != "$wrapper" ]]; then
    [[ -e /usr/bin/xkbcomp ]] && { _fl_fail "FL_XKB_MODE=link but /usr/bin/xkbcomp exists"; return 1; }
    ln -sfn "$wrapper" /usr/bin/xkbcomp || { _fl_fail "cannot create /usr/bin/xkbcomp"; return 1; }
  fi

  # Xvfb already running from an earlier source (this shell, or another one: see the lock)? Reuse it.
  if [[ -n ${FL_XVFB_PID:-} ]] && ! kill -0 "$FL_XVFB_PID" 2> /dev/null; then unset FL_XVFB_PID; fi
  if [[ -z ${FL_XVFB_PID:-} && -f /tmp/.X$disp-lock ]]; then
    i=$(tr -dc 0-9 < "/tmp/.X$disp-lock")
    if [[ -n $i ]] && kill -0 "$i" 2> /dev/null; then
      if [[ $(readlink "/proc/$i/exe" 2> /dev/null) == "$xvfb" ]]; then export FL_XVFB_PID=$i
      else _fl_fail "display :$disp is in use by pid $i, not ours (set FL_DISPLAY_NUM, or stop it)"; return 1; fi
    else
      rm -f "/tmp/.X$disp-lock" "/tmp/.X11-unix/X$disp"  # stale lock of a dead server
    fi
  fi
  if [[ -n ${FL_XVFB_PID:-} ]] && kill -0 "$FL_XVFB_PID" 2> /dev/null && [[ -S /tmp/.X11-unix/X$disp ]]; then
    _fl_say "Xvfb already running (pid $FL_XVFB_PID) on :$disp"
  else
    log=/tmp/fl-xvfb-$disp.log
    # shellcheck disable=SC2206
    local args=(":$disp" -screen 0 1280x720x24 -nolisten tcp -noreset -xkbdir "$xkbdir" -fp built-ins ${FL_XVFB_ARGS:-})
    if [[ $mode == overlay ]]; then
      command -v unshare > /dev/null || { _fl_fail "/usr/bin is read-only and unshare is missing: cannot provide /usr/bin/xkbcomp"; return 1; }
      # shellcheck disable=SC2016
      __GLX_VENDOR_LIBRARY_NAME=mesa nohup unshare -m --propagation private sh -c \
        'mount -t overlay fl-xkbcomp -o "lowerdir=$0:/usr/bin" /usr/bin || exit 97; exec "$@"' \
        "$root/fl-bin" "$xvfb" "${args[@]}" > "$log" 2>&1 < /dev/null &
    else
      __GLX_VENDOR_LIBRARY_NAME=mesa nohup "$xvfb" "${args[@]}" > "$log" 2>&1 < /dev/null &
    fi
    export FL_XVFB_PID=$!
    disown "$FL_XVFB_PID" 2> /dev/null || true
    for ((i = 0; i < 100; i++)); do
      [[ -S /tmp/.X11-unix/X$disp ]] && break
      kill -0 "$FL_XVFB_PID" 2> /dev/null || break
      sleep 0.1
    done
    sleep 0.3  # keyboard (xkbcomp) setup comes right after the socket; a failure ends Xvfb
    if ! kill -0 "$FL_XVFB_PID" 2> /dev/null; then
      _fl_fail "Xvfb exited at start (xkb mode $mode): $(grep -v '^$' "$log" | tail -3 | tr '\n' ' ')"; return 1
    fi
    if [[ ! -S /tmp/.X11-unix/X$disp ]]; then
      _fl_fail "Xvfb (pid $FL_XVFB_PID) did not open /tmp/.X11-unix/X$disp within 10 s; log $log"; return 1
    fi
  fi
  export DISPLAY=:$disp

  _fl_say "Xvfb: $xvfb pid $FL_XVFB_PID on $DISPLAY, log /tmp/fl-xvfb-$disp.log, xkbcomp: $mode$([[ $mode == system ]] && echo " (/usr/bin/xkbcomp)")"
  _fl_say "libGL.so.1: $(_fl_find_lib libGL.so.1)  libGLX.so.0: $(_fl_find_lib libGLX.so.0)"
  _fl_say "GLX vendor: $__GLX_VENDOR_LIBRARY_NAME -> $(_fl_find_lib "libGLX_$__GLX_VENDOR_LIBRARY_NAME.so.0")  dri: $LIBGL_DRIVERS_PATH"
  if [[ -x $root/usr/bin/glxinfo.x86_64-linux-gnu ]]; then
    glx=$(timeout 20 "$root/usr/bin/glxinfo.x86_64-linux-gnu" -B 2>&1)
    if grep -q 'OpenGL renderer' <<< "$glx"; then
      _fl_say "glxinfo: $(grep -E 'direct rendering|OpenGL renderer|OpenGL core profile version' <<< "$glx" | sed 's/^ *//' | tr '\n' ';')"
    else
      _fl_fail "the display is up but GLX does not work: $(tail -2 <<< "$glx" | tr '\n' ' ')"; return 1
    fi
  fi
  return 0
}

fl_gui_stop() {
  local -
  set +e +u +o pipefail
  local pid=${FL_XVFB_PID:-} disp=${FL_DISPLAY_NUM:-99} i
  if [[ -n $pid ]] && kill -0 "$pid" 2> /dev/null; then
    kill "$pid" 2> /dev/null
    for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2> /dev/null && kill -9 "$pid" 2> /dev/null
    echo "gpu-gui-env: stopped Xvfb (pid $pid)" >&2
  fi
  rm -f "/tmp/.X$disp-lock" "/tmp/.X11-unix/X$disp" 2> /dev/null
  # the /usr/bin/xkbcomp link, if it is ours
  [[ $(readlink /usr/bin/xkbcomp 2> /dev/null) == "${FL_GUI_ROOT:-/tmp/fl-guiroot}/fl-bin/xkbcomp" ]] && rm -f /usr/bin/xkbcomp
  unset FL_XVFB_PID DISPLAY
  if [[ -n ${_FL_GUI_OLD_LD_LIBRARY_PATH+x} ]]; then
    if [[ -n $_FL_GUI_OLD_LD_LIBRARY_PATH ]]; then export LD_LIBRARY_PATH=$_FL_GUI_OLD_LD_LIBRARY_PATH; else unset LD_LIBRARY_PATH; fi
    unset _FL_GUI_OLD_LD_LIBRARY_PATH
  fi
  return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  echo "gpu-gui-env: source this file (. scripts/gpu-gui-env.sh), don't run it" >&2
  exit 2
fi
_fl_gui_main
