#!/usr/bin/env python3
"""Every code block of the README and docs/, taken from the files themselves and checked as
what it claims to be: C and C++ compiled and linked against the installed library with
-Wall -Wextra -Werror (and the -f options a C++ block's fence names), Swift compiled against AssetPatchKit, Python compiled (interactive sessions line by line), JSON parsed (a
format-1 manifest also read by `assetpatch inspect`), shell parsed by `bash -n` and, for
blocks marked ```sh run, run in a fresh directory with the installed CLI on PATH, CMake
configured and built as a consumer of the installed package, nginx configuration checked by
`nginx -t`. ```text blocks (synopses, layouts) are prose.

    docblocks.py ROOT PREFIX WORK_DIR        closes with "N passed, N failed"
"""
import doctest
import json
import os
import re
import subprocess
import sys

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(root):
    files = [os.path.join(root, "README.md"), os.path.join(root, "bindings", "python", "README.md")]
    files += sorted(os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    for path in files:
        text = open(path).read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            info = m.group(1).split()
            yield os.path.relpath(path, root), line, (info[0] if info else ""), info[1:], m.group(2)


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class Checker:
    def __init__(self, root, prefix, work):
        self.root, self.prefix, self.work = root, prefix, work
        self.env = dict(os.environ, PATH=f"{prefix}/bin:{os.environ['PATH']}",
                        PKG_CONFIG_PATH=f"{prefix}/lib/pkgconfig", LD_LIBRARY_PATH=f"{prefix}/lib")
        self.flags = sh(["pkg-config", "--cflags", "--libs", "assetpatch"], env=self.env, check=True).stdout.split()

    def c(self, src, d, opts):
        path = os.path.join(d, "block.c")
        open(path, "w").write(src)
        link = "int main" in src
        cmd = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", path] + self.flags + (["-o", f"{d}/a.out"] if link else ["-c", "-o", f"{d}/a.o"])
        return sh(cmd, env=self.env)

    def cpp(self, src, d, opts):
        path = os.path.join(d, "block.cpp")
        open(path, "w").write(src)
        link = "int main" in src
        cmd = ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", f"{self.root}/bindings/cpp", path] + self.flags
        cmd += [o for o in opts if o.startswith("-f")]  # ```cpp -fno-exceptions: built as the block says
        cmd += ["-o", f"{d}/a.out"] if link else ["-c", "-o", f"{d}/a.o"]
        return sh(cmd, env=self.env)

    def swift(self, src, d, opts):
        """Compiled (type-checked and lowered: some compiler crashes only show there) against
        AssetPatchKit as built by examples/swift, which the end-to-end run builds first."""
        modules = os.path.join(self.root, "examples", "swift", ".build", "debug", "Modules")
        if not os.path.isdir(modules):
            return subprocess.CompletedProcess([], 1, "", f"{modules} missing: build examples/swift first")
        path = os.path.join(d, "block.swift")
        open(path, "w").write(src)
        cmd = ["swiftc", "-parse-as-library", "-c", "-I", modules, path, "-o", f"{d}/a.o"]
        for m in ("CAssetPatchABI", "CCrypto", "CCurl", "CSystem", "CZlib"):
            cmd += ["-Xcc", f"-fmodule-map-file={self.root}/Sources/{m}/module.modulemap"]
        return sh(cmd, env=self.env)

    def python(self, src, d, opts):
        try:
            if src.lstrip().startswith(">>>"):
                for ex in doctest.DocTestParser().get_examples(src):
                    compile(ex.source, "<block>", "single")
            else:
                compile(src, "<block>", "exec")
        except SyntaxError as e:
            return subprocess.CompletedProcess([], 1, "", f"SyntaxError: {e}")
        return subprocess.CompletedProcess([], 0, "", "")

    def json(self, src, d, opts):
        try:
            obj = json.loads(src)
        except ValueError as e:
            return subprocess.CompletedProcess([], 1, "", f"not JSON: {e}")
        if isinstance(obj, dict) and obj.get("format") == 1 and "archive" in obj:
            path = os.path.join(d, "manifest.json")
            open(path, "w").write(src)
            return sh(["assetpatch", "inspect", path], env=self.env)
        return subprocess.CompletedProcess([], 0, "", "")

    def sh(self, src, d, opts):
        r = sh(["bash", "-n"], input=src)
        if r.returncode != 0 or "run" not in opts:
            return r
        return sh(["bash", "-e"], input=src, cwd=d, env=self.env, timeout=300)

    def cmake(self, src, d, opts):
        open(os.path.join(d, "main.cpp"), "w").write(
            '#include "assetpatch.hpp"\nint main() { return assetpatch::library_version().empty(); }\n')
        open(os.path.join(d, "CMakeLists.txt"), "w").write(
            "cmake_minimum_required(VERSION 3.25)\nproject(block CXX)\nset(CMAKE_CXX_STANDARD 17)\n"
            f"add_executable(app main.cpp)\ntarget_include_directories(app PRIVATE {self.root}/bindings/cpp)\n"
            + src.replace("target_link_libraries(app", "target_link_libraries(app"))
        r = sh(["cmake", "-G", "Ninja", "-S", d, "-B", f"{d}/b", f"-DCMAKE_PREFIX_PATH={self.prefix}"], env=self.env)
        return r if r.returncode else sh(["cmake", "--build", f"{d}/b"], env=self.env)

    def nginx(self, src, d, opts):
        # Certificates the block names are made here, self-signed, so that nginx -t can read them.
        for cert, key in re.findall(r"ssl_certificate\s+(\S+);\s*ssl_certificate_key\s+(\S+);", src):
            local_cert, local_key = f"{d}/{os.path.basename(cert)}", f"{d}/{os.path.basename(key)}"
            sh(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", local_key, "-out", local_cert, "-subj", "/CN=docs", "-days", "1"], check=True)
            src = src.replace(cert, local_cert).replace(key, local_key)
        os.makedirs(f"{d}/logs", exist_ok=True)
        conf = f"{d}/nginx.conf"
        open(conf, "w").write(f"pid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\naccess_log off;\n{src}\n}}\n")
        return sh(["/usr/sbin/nginx", "-t", "-p", d, "-c", conf, "-e", f"{d}/error.log"])


def main():
    root, prefix, work = sys.argv[1:4]
    checker = Checker(root, prefix, work)
    passed = failed = 0
    for n, (path, line, lang, opts, src) in enumerate(blocks(root)):
        if lang == "text":
            continue
        name = f"{path}:{line} ({lang or 'no language'}{' ' + ' '.join(opts) if opts else ''})"
        d = os.path.join(work, f"block{n}")
        os.makedirs(d, exist_ok=True)
        check = getattr(checker, lang, None) if lang else None
        if check is None:
            r = subprocess.CompletedProcess([], 1, "", "no check for this language: mark prose as ```text")
        else:
            r = check(src, d, opts)
        if r.returncode == 0:
            passed += 1
            print(f"ok - {name}")
        else:
            failed += 1
            print(f"not ok - {name}")
            print("    " + (r.stdout + r.stderr).strip().replace("\n", "\n    ")[-3000:])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
