#!/usr/bin/env bash
# Installs what building and testing assetpatch needs on Debian/Ubuntu (as root), and checks
# for it otherwise. Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail

packages=(libcurl4-openssl-dev zlib1g-dev libssl-dev pkg-config cmake ninja-build nginx-light unzip zip curl python3)
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
# pytest drives the fault, kill and Python binding tests.
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install -q pytest
command -v swift >/dev/null || [[ -x /opt/swift/usr/bin/swift ]] || { echo "Swift 6 toolchain not found (expected on PATH or at /opt/swift)" >&2; exit 1; }
