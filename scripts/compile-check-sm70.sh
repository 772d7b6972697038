#!/usr/bin/env bash
# Compile-checks fusionlab_kernels, fusionlab_measure (and links fusionlab) for sm_70 (Volta)
# with a CUDA 12 toolkit from PyPI. CUDA 13 (/usr/local/cuda) can no longer target sm_70.
#
#   scripts/compile-check-sm70.sh        no GPU needed; safe to run again (reuses what it made)
#
# Why clang: no CUDA 12 wheel on PyPI carries the nvcc driver. nvidia-cuda-nvcc-cu12 (every
# version, 12.0.76 to 12.9.86) ships only ptxas, libnvvm, libdevice and the crt headers; cicc,
# cudafe++, fatbinary and nvlink are not in any cu12 wheel. So this script builds with:
#   front end + host code   clang++-19 (Debian bookworm's `clang-19` package, CUDA mode)
#   CUDA headers            12.9 (nvidia-cuda-runtime-cu12, -cccl-cu12, crt/ from -nvcc-cu12)
#   PTX -> sm_70 SASS       ptxas 12.9 (nvidia-cuda-nvcc-cu12)
#   fatbin packaging        libnvfatbin 12.9 (nvidia-nvfatbin-cu12), behind a `fatbinary` shim
#   runtime                 libcudart_static 12.9 (nvidia-cuda-runtime-cu12)
#   CUPTI                   12.9 headers and libcupti.so.12 (nvidia-cuda-cupti-cu12); the Range
#                           Profiler API (cupti_range_profiler.h) exists since 12.6 Update 2
# CMake (3.25) drives the build with CMAKE_CUDA_COMPILER_ID=Clang. Its Clang-CUDA support wants
# an nvcc in the toolkit only to read the toolkit's version and root, so the assembled toolkit
# has a stub `nvcc` that answers exactly those two questions and refuses anything else.
# The project's nvcc-only flags (-Xcompiler=..., --expt-relaxed-constexpr) are translated by
# the `clang-cuda` wrapper: clang treats constexpr functions as host+device already.
#
# Made here (all git-ignored): .venv-cuda12/ (the venv and, inside it, cuda12-root/, the
# assembled toolkit) and build-sm70/.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$repo/.venv-cuda12"
root="$venv/cuda12-root"
build="$repo/build-sm70"
clang_pkg=clang-19
clangxx=clang++-19

# Newest CUDA 12 wheels (12.9 Update 1). Must stay >= 12.6.77 (12.6 Update 2).
wheels=(
  nvidia-cuda-nvcc-cu12==12.9.86
  nvidia-cuda-runtime-cu12==12.9.79
  nvidia-cuda-cccl-cu12==12.9.27
  nvidia-nvfatbin-cu12==12.9.82
  nvidia-cuda-cupti-cu12==12.9.79
  nvidia-cublas-cu12==12.9.1.4    # cuBLASLt for lessons 6-8 (a 580 MB wheel; headers + libs)
  nvidia-cuda-cuobjdump==13.5.37  # no cu12 build exists; only lists the fatbins (cross-check)
)

step() { echo "compile-check-sm70: $*"; }
fail() { echo "compile-check-sm70: FAILED: $*" >&2; exit 1; }
trap 'echo "compile-check-sm70: FAILED (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

t0=$SECONDS

# ---- 1. Debian packages: the headless build's deps, and clang-19 -----------------------------
if [[ -f "$repo/scripts/setup-deps.sh" ]]; then
  bash "$repo/scripts/setup-deps.sh" --headless || fail "scripts/setup-deps.sh --headless failed"
fi
if ! command -v "$clangxx" >/dev/null 2>&1; then
  step "installing $clang_pkg (Debian)"
  sudo=""
  [[ $(id -u) != 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || fail "apt-get update failed"
  $sudo apt-get install -y -qq --no-install-recommends "$clang_pkg" >/dev/null ||
    fail "apt-get install $clang_pkg failed"
fi
command -v "$clangxx" >/dev/null || fail "$clangxx not on PATH after installing $clang_pkg"
command -v cmake >/dev/null || fail "cmake not found"
command -v python3 >/dev/null || fail "python3 not found"

# ---- 2. the venv with the CUDA 12 wheels (reused when the pins are unchanged) -----------------
stamp="$venv/.fusionlab-wheels"
want_stamp=$(printf '%s\n' "${wheels[@]}")
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  step "creating venv $venv with $(command -v python3) ($(python3 --version 2>&1))"
  rm -rf "$venv"
  python3 -m venv "$venv" || fail "python3 -m venv $venv failed"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want_stamp" ]]; then
  step "pip install ${wheels[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${wheels[@]}" ||
    fail "pip install of the CUDA 12 wheels failed"
  printf '%s\n' "$want_stamp" >"$stamp"
else
  step "venv up to date ($venv)"
fi
sp=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
nv="$sp/nvidia"
for d in cuda_nvcc/bin/ptxas cuda_nvcc/nvvm/libdevice cuda_nvcc/include/crt cuda_runtime/include \
         cuda_runtime/lib/libcudart_static.a cuda_cccl/include nvfatbin/lib/libnvfatbin.so.12 \
         cuda_cupti/include/cupti_range_profiler.h cuda_cupti/lib/libcupti.so.12 \
         cublas/include/cublasLt.h cublas/lib/libcublasLt.so.12 cu13/bin/cuobjdump; do
  [[ -e "$nv/$d" ]] || fail "wheel file missing: $nv/$d (delete $venv and rerun)"
done

# ---- 3. assemble a toolkit root from the wheels (symlinks; rebuilt every run, it is cheap) ----
rm -rf "$root.tmp"
mkdir -p "$root.tmp"/{bin,include,lib64,nvvm}
ln -s "$nv/cuda_nvcc/bin/ptxas" "$root.tmp/bin/ptxas"
ln -s "$nv/cuda_nvcc/nvvm/libdevice" "$root.tmp/nvvm/libdevice"
for inc in "$nv/cuda_runtime/include" "$nv/cuda_nvcc/include" "$nv/cuda_cccl/include" \
           "$nv/cuda_cupti/include" "$nv/cublas/include"; do
  for f in "$inc"/*; do
    name=$(basename "$f")
    [[ -e "$root.tmp/include/$name" ]] && fail "two wheels both ship include/$name"
    ln -s "$f" "$root.tmp/include/$name"
  done
done
for f in "$nv/cuda_runtime/lib"/* "$nv/cuda_cupti/lib"/* "$nv/cublas/lib"/*; do ln -s "$f" "$root.tmp/lib64/"; done
ln -s libcublasLt.so.12 "$root.tmp/lib64/libcublasLt.so"
ln -s libcublas.so.12 "$root.tmp/lib64/libcublas.so"
ln -s libcudart.so.12 "$root.tmp/lib64/libcudart.so"
ln -s libcupti.so.12 "$root.tmp/lib64/libcupti.so"  # libnvperf_host/target sit beside it
cuda_version=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$root.tmp/include/cuda.h")
ptxas_version=$("$root.tmp/bin/ptxas" --version | sed -n 's/.*\(V[0-9.]*\)$/\1/p')
[[ -n "$cuda_version" && -n "$ptxas_version" ]] || fail "cannot read the CUDA 12 version"
((cuda_version >= 12060)) || fail "CUDA headers are $cuda_version, need >= 12.6"

# fatbinary: clang calls `fatbinary -64 --create OUT --image=profile=sm_NN|compute_NN,file=F`;
# libnvfatbin 12.9 does the packing (and rejects a cubin whose ELF arch is not the one named).
cat >"$root.tmp/bin/fatbinary" <<EOF
#!$venv/bin/python
"""fatbinary stand-in over libnvfatbin (CUDA 12 ships no fatbinary wheel). Made by
scripts/compile-check-sm70.sh; understands only what clang passes."""
import ctypes, sys
lib = ctypes.CDLL("$nv/nvfatbin/lib/libnvfatbin.so.12")
lib.nvFatbinGetErrorString.restype = ctypes.c_char_p
def check(r, what):
    if r != 0:
        sys.exit("fatbinary(nvfatbin): %s: %s" % (what, lib.nvFatbinGetErrorString(r).decode()))
out, images = None, []
args = iter(sys.argv[1:])
for a in args:
    if a == "--create": out = next(args)
    elif a.startswith("--create="): out = a.split("=", 1)[1]
    elif a.startswith("--image="):
        kv = dict(p.split("=", 1) for p in a[len("--image="):].split(","))
        images.append((kv["profile"], kv["file"]))
    elif a in ("-64", "--64", "-cuda", "--cuda"): pass
    else: sys.exit("fatbinary(nvfatbin): unsupported argument %r" % a)
if not out or not images: sys.exit("fatbinary(nvfatbin): need --create and --image")
h = ctypes.c_void_p()
opts = (ctypes.c_char_p * 1)(b"-64")
check(lib.nvFatbinCreate(ctypes.byref(h), opts, 1), "create")
for profile, path in images:
    data = open(path, "rb").read()
    kind, arch = profile.split("_", 1)
    ident = path.rsplit("/", 1)[-1].encode()
    if kind == "sm":
        check(lib.nvFatbinAddCubin(h, data, len(data), arch.encode(), ident), "add cubin " + path)
    elif kind == "compute":
        data += b"\0"
        check(lib.nvFatbinAddPTX(h, data, len(data), arch.encode(), ident, b""), "add PTX " + path)
    else: sys.exit("fatbinary(nvfatbin): unknown profile %r" % profile)
size = ctypes.c_size_t()
check(lib.nvFatbinSize(h, ctypes.byref(size)), "size")
buf = ctypes.create_string_buffer(size.value)
check(lib.nvFatbinGet(h, buf), "get")
open(out, "wb").write(buf.raw)
lib.nvFatbinDestroy(ctypes.byref(h))
EOF
chmod +x "$root.tmp/bin/fatbinary"

# nvcc stub: CMake's Clang-CUDA support runs `nvcc -v __cmake_determine_cuda` (for TOP=) and
# `nvcc --version` (for the toolkit version), in CMakeDetermineCUDACompiler and FindCUDAToolkit.
cat >"$root.tmp/bin/nvcc" <<EOF
#!/usr/bin/env bash
# Not nvcc: CUDA 12's wheels carry no nvcc driver. Answers only CMake's two toolkit questions.
case "\${1:-}" in
  --version) echo "nvcc stub over the CUDA 12 wheels (clang-19 compiles)"
             echo "Cuda compilation tools, release ${ptxas_version:1:4}, $ptxas_version" ;;
  -v) echo "#\$ TOP=$root"; echo "#\$ NVVMIR_LIBRARY_DIR=$root/nvvm/libdevice" ;;
  *) echo "nvcc stub ($root/bin/nvcc): not a compiler; build CUDA with $root/bin/clang-cuda" >&2
     exit 1 ;;
esac
EOF
chmod +x "$root.tmp/bin/nvcc"

# clang-cuda: clang++-19 with the CUDA 12 root, translating the nvcc-only flags in CMakeLists.
cat >"$root.tmp/bin/clang-cuda" <<EOF
#!/usr/bin/env bash
args=()
while ((\$#)); do
  case "\$1" in
    -Xcompiler=*) IFS=, read -ra xs <<<"\${1#-Xcompiler=}"; args+=("\${xs[@]}") ;;
    -Xcompiler) shift; IFS=, read -ra xs <<<"\$1"; args+=("\${xs[@]}") ;;
    --expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda) ;;
    *) args+=("\$1") ;;
  esac
  shift
done
exec $(command -v "$clangxx") --cuda-path=$root -Wno-unknown-cuda-version "\${args[@]}"
EOF
chmod +x "$root.tmp/bin/clang-cuda"

rm -rf "$root"
mv "$root.tmp" "$root"

clang_version=$("$clangxx" --version | head -1)
step "toolkit: CUDA $((cuda_version / 1000)).$((cuda_version % 1000 / 10)) headers, ptxas $ptxas_version, from the wheels in $venv"
step "compiler: $clang_version (CUDA front end; there is no CUDA 12 nvcc on PyPI)"

# ---- 4. configure (a cache made with another compiler or toolkit is thrown away) -------------
cache="$build/CMakeCache.txt"
if [[ -f "$cache" ]] && ! grep -qxE "CMAKE_CUDA_COMPILER:[A-Z]+=$root/bin/clang-cuda" "$cache"; then
  step "removing $build (configured with another compiler)"
  rm -rf "$build"
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[[ -f "$cache" ]] && generator=()  # keep whatever generator the existing cache has
step "configuring $build"
mkdir -p "$build"
cmake -S "$repo" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DFUSIONLAB_GUI=OFF -DFUSIONLAB_TESTS=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=70 \
  -DCMAKE_CUDA_COMPILER="$root/bin/clang-cuda" \
  -DCUDAToolkit_ROOT="$root" \
  >"$build/configure.log" 2>&1 || { tail -40 "$build/configure.log" >&2; fail "cmake configure failed (log: $build/configure.log)"; }
grep -q "CMAKE_CUDA_COMPILER_TOOLKIT_VERSION \"12\." "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake ||
  fail "CMake did not pick the CUDA 12 toolkit"

# ---- 5. build ----------------------------------------------------------------------------------
step "building fusionlab_kernels fusionlab_measure fusionlab for sm_70"
if ! cmake --build "$build" --target fusionlab_kernels fusionlab_measure fusionlab -j "$(nproc)" \
     2>&1 | tee "$build/build.log"; then
  # Rules clang enforces and nvcc does not: not a Volta problem, but they stop this check.
  if grep -q 'initialization is not supported for __shared__ variables' "$build/build.log"; then
    echo "compile-check-sm70: hint: clang rejects a __shared__ variable whose type has default" \
         "member initializers (nvcc silently skips them); declare raw storage instead, e.g." \
         "'alignas(T) __shared__ unsigned char buf[N * sizeof(T)];' + reinterpret_cast<T*>." >&2
  fi
  fail "build failed (compiler errors above; log: $build/build.log)"
fi

# ---- 6. verify: every CUDA object of both libraries holds sm_70 SASS and nothing newer -------
step "checking the fatbins in the static libraries"
"$venv/bin/python" - "$build/libfusionlab_kernels.a" "$build/libfusionlab_measure.a" <<'EOF' ||
"""Lists the cubins (ELF) and PTX of each object's .nv_fatbin; fails unless every object with
device code has an sm_70 cubin and no cubin or PTX for another architecture."""
import struct, sys

def members(path):
    data = open(path, "rb").read()
    if not data.startswith(b"!<arch>\n"): sys.exit("%s: not an ar archive" % path)
    pos, names = 8, b""
    while pos + 60 <= len(data):
        hdr = data[pos:pos + 60]
        name, size = hdr[:16].decode().strip(), int(hdr[48:58])
        body = data[pos + 60:pos + 60 + size]
        if name == "//": names = body
        elif name.startswith("/") and name[1:].isdigit():
            off = int(name[1:]); yield names[off:names.index(b"\n", off)].decode().rstrip("/"), body
        elif name not in ("/", "/SYM64/"): yield name.rstrip("/"), body
        pos += 60 + size + (size & 1)

def section(elf, wanted):
    if elf[:4] != b"\x7fELF" or elf[4] != 2: return None
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    def sh(i): return struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        nm, _, _, _, off, size = sh(i)
        end = elf.index(b"\0", stroff + nm)
        if elf[stroff + nm:end].decode() == wanted: return elf[off:off + size]
    return None

def fatbin_entries(blob):
    pos = 0
    while pos + 16 <= len(blob):
        magic, _, hsize, fsize = struct.unpack_from("<IHHQ", blob, pos)
        if magic != 0xBA55ED50: pos += 8; continue
        e, end = pos + hsize, pos + hsize + fsize
        while e < end:
            kind, _, ehsize, esize = struct.unpack_from("<HHIQ", blob, e)
            arch, = struct.unpack_from("<I", blob, e + 28)
            yield {1: "ptx", 2: "elf"}.get(kind, "kind%d" % kind), arch
            e += ehsize + esize
        pos = end

bad, seen = [], 0
for lib in sys.argv[1:]:
    for name, body in members(lib):
        fb = section(body, ".nv_fatbin")
        if fb is None: continue
        entries = sorted(set(fatbin_entries(fb)))
        seen += 1
        print("  %s(%s): %s" % (lib.rsplit("/", 1)[-1], name,
              ", ".join("%s sm_%d" % e for e in entries) or "EMPTY fatbin"))
        if ("elf", 70) not in entries or any(a != 70 for _, a in entries):
            bad.append(name)
if seen == 0: sys.exit("no object with device code (.nv_fatbin) found")
if bad: sys.exit("objects without sm_70-only device code: " + ", ".join(bad))
print("  %d objects with device code, each with an sm_70 cubin" % seen)
EOF
  fail "sm_70 check of the static libraries failed"
cuobjdump="$nv/cu13/bin/cuobjdump"
step "cross-check: cuobjdump --list-elf ($("$cuobjdump" --version | tail -1))"
for lib in "$build/libfusionlab_kernels.a" "$build/libfusionlab_measure.a"; do
  out=$("$cuobjdump" --list-elf "$lib" 2>&1) || fail "cuobjdump --list-elf $lib failed: $out"
  grep '^ELF file' <<<"$out" | sed "s|^|  ${lib##*/}: |"
  grep -q '\.sm_70\.cubin$' <<<"$out" || fail "cuobjdump lists no sm_70 cubin in $lib"
  ! grep '^ELF file' <<<"$out" | grep -qv '\.sm_70\.cubin$' ||
    fail "cuobjdump lists a cubin for another architecture in $lib"
done
[[ -x "$build/fusionlab" ]] || fail "fusionlab was not linked"

step "OK in $((SECONDS - t0)) s: fusionlab_kernels, fusionlab_measure and fusionlab built for sm_70 with CUDA $((cuda_version / 1000)).$((cuda_version % 1000 / 10)) ($ptxas_version ptxas) and $clang_version"
