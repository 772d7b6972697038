#!/bin/sh
# Fails if the binary needs libcuda (the driver library) directly or through a dependency.
# Usage: check_no_libcuda.sh BINARY
set -eu
bin="$1"
needed=$(readelf -d "$bin" | grep NEEDED || true)
echo "$needed"
if echo "$needed" | grep -q 'libcuda\.so'; then
  echo "FAIL: $bin lists libcuda.so as NEEDED" >&2
  exit 1
fi
if ldd "$bin" 2>/dev/null | grep -q 'libcuda\.so'; then
  echo "FAIL: $bin pulls in libcuda.so through a dependency" >&2
  exit 1
fi
echo "OK: $bin does not depend on libcuda"
