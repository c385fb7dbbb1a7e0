#!/usr/bin/env bash
# Installs what building and testing assetpatch needs on Debian/Ubuntu (as root), and checks
# for it otherwise. Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail

# Build: the C/C++ compilers and headers, libcurl, zlib and libcrypto headers, pkg-config,
# CMake with Ninja. Tests: nginx, curl, openssl, the zippers whose archives the tests read
# (Info-ZIP zip/unzip, bsdtar, 7z), and python3 with venv (a bare Debian has no pip, and
# PEP 668 keeps pip out of the system Python).
packages=(gcc g++ libc6-dev libcurl4-openssl-dev zlib1g-dev libssl-dev pkg-config cmake ninja-build binutils
          nginx-light curl openssl unzip zip libarchive-tools p7zip-full python3 python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "assetpatch needs these Debian packages: ${missing[*]} (run as root or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The package starts a system nginx on port 80; the tests run their own.
  if command -v service >/dev/null; then service nginx stop >/dev/null 2>&1 || true; fi
fi
# Varnish, for the cache suite's Varnish test: installed where the package is available, skipped
# otherwise (the test says so).
if [[ $(id -u) -eq 0 ]] && ! dpkg-query -W -f='${Status}' varnish 2>/dev/null | grep -q "install ok installed"; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends varnish >/dev/null 2>&1 \
    || echo "varnish is not installable here; its cache test will be skipped"
fi
command -v swift >/dev/null || [[ -x /opt/swift/usr/bin/swift ]] || { echo "Swift 6 toolchain not found (expected on PATH or at /opt/swift)" >&2; exit 1; }
