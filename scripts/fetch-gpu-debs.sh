#!/usr/bin/env bash
# Downloads (here, where apt works) the Debian packages the headless build needs on the GPU
# machine, which has no network: JSON, CLI11 and GoogleTest headers/libraries. They land in the
# git-ignored .debs/ and travel with `carry: [".debs"]`; scripts/gpu-check.sh unpacks them into
# a private prefix. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .debs
cd .debs
for p in nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev; do
  compgen -G "${p}_*.deb" > /dev/null || apt-get download "$p"
done
ls -la
