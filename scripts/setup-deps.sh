#!/usr/bin/env bash
# Installs the Debian packages Fusion Lab builds and tests with. Idempotent: packages already
# present are left alone and apt-get runs only when something is missing.
#   scripts/setup-deps.sh          everything (GUI, tests, headless UI tests)
#   scripts/setup-deps.sh --headless   only what the FUSIONLAB_GUI=OFF build needs
set -euo pipefail

headless=0
[[ "${1:-}" == "--headless" ]] && headless=1

packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libstb-dev libcli11-dev zlib1g-dev
          libgtest-dev binutils clang-format)
if [[ $headless == 0 ]]; then
  # clang and its runtimes (libFuzzer, the sanitizers): tests/fuzz/libfuzzer, a CI stage.
  packages+=(clang libclang-rt-dev)
  packages+=(libglfw3-dev libimgui-dev python3-glad libgl-dev
             xvfb xauth libgl1-mesa-dri libglx-mesa0 fonts-dejavu-core)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[[ $(id -u) != 0 ]] && sudo="sudo"
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
