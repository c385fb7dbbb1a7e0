#!/usr/bin/env python3
"""Facts written once in the header and repeated elsewhere, checked against it: the version
(Python package, pkg-config, the CMake package, the shared object's file name, the CLI) and the
status codes (the Swift core's enum, the Python package's enum, the README's table); and the
README's synopsis of the command-line tool, checked against the tool's own --help.

    consistency.py ROOT PREFIX        closes with "N passed, N failed"
"""
import glob
import os
import re
import subprocess
import sys


def header_facts(root):
    h = open(os.path.join(root, "include", "assetpatch.h")).read()
    parts = {k: int(v) for k, v in re.findall(r"#define ASSETPATCH_VERSION_(MAJOR|MINOR|PATCH) (\d+)", h)}
    string = re.search(r'#define ASSETPATCH_VERSION_STRING "([^"]+)"', h).group(1)
    enum = re.search(r"typedef enum assetpatch_status \{(.*?)\} assetpatch_status;", h, re.S).group(1)
    statuses = {name: int(value) for name, value in re.findall(r"(ASSETPATCH_[A-Z_]+)\s*=\s*(-?\d+)", enum)}
    return parts, string, statuses


def help_of(cli, words):
    """The subcommands and the --options the tool's help lists for `assetpatch WORDS`."""
    text = subprocess.run([cli, *words, "--help"], capture_output=True, text=True).stdout
    options = set(re.findall(r"(--[a-z][a-z0-9-]*)", text)) - {"--help"}
    subs = set()
    if "SUBCOMMANDS:" in text:
        part = text.split("SUBCOMMANDS:", 1)[1]
        subs = {m for m in re.findall(r"^  ([a-z][a-z-]*)\b", part, re.M) if m != "help"}
    return subs, options


def synopsis_checks(readme, cli):
    """Every command of the tool has a line in the README's synopsis, and every option a line
    names is one the command takes (the synopsis need not list every option)."""
    block = re.search(r"## Command-line tool\n\n```text\n(.*?)```", readme, re.S).group(1)
    top, _ = help_of(cli, [])
    commands = set()
    for sub in top:
        inner, options = help_of(cli, [sub])
        commands |= {f"{sub} {s}" for s in inner}
        # A command with subcommands of its own may run alone too (rollout --percent).
        if not inner or options - {"--version"}:
            commands.add(sub)
    lines, current = {}, None
    for line in block.splitlines():
        m = re.match(r"assetpatch ([a-z-]+)(?: ([a-z-]+))?", line)
        if m:
            two = f"{m.group(1)} {m.group(2)}"
            current = two if m.group(2) and two in commands else m.group(1)
            lines.setdefault(current, "")
        if current:
            lines[current] += " " + line
    yield "every command has a line in the README's synopsis", commands <= set(lines), sorted(commands - set(lines))
    for command, text in sorted(lines.items()):
        _, options = help_of(cli, command.split())
        named = set(re.findall(r"(--[a-z][a-z0-9-]*)", text))
        yield f"README synopsis of {command}: its options exist", named <= options, sorted(named - options)


def main():
    root, prefix = sys.argv[1:3]
    parts, version, statuses = header_facts(root)
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(("ok - " if ok else "not ok - ") + name + ("" if ok else f": {detail}"))

    check("header version numbers and string agree", f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}" == version,
          f"{parts} vs {version}")
    py = open(os.path.join(root, "bindings", "python", "assetpatch", "__init__.py")).read()
    py_version = re.search(r'^__version__ = "([^"]+)"', py, re.M).group(1)
    check("Python package version", py_version == version, py_version)
    env = dict(os.environ, PKG_CONFIG_PATH=f"{prefix}/lib/pkgconfig")
    pc = subprocess.run(["pkg-config", "--modversion", "assetpatch"], env=env, capture_output=True, text=True).stdout.strip()
    check("pkg-config version", pc == version, pc)
    cmake = open(os.path.join(prefix, "lib", "cmake", "assetpatch", "assetpatchConfigVersion.cmake")).read()
    check("CMake package version", f'set(PACKAGE_VERSION "{version}")' in cmake, "no PACKAGE_VERSION " + version)
    cli = subprocess.run([os.path.join(prefix, "bin", "assetpatch"), "--version"], capture_output=True, text=True).stdout.strip()
    check("CLI version", cli == version, cli)
    # The file's version grows with every release: ABI.(MAJOR*100+MINOR).PATCH.
    want = f"libassetpatch.so.1.{parts['MAJOR'] * 100 + parts['MINOR']}.{parts['PATCH']}"
    files = [os.path.basename(f) for f in glob.glob(os.path.join(prefix, "lib", "libassetpatch.so.1.*"))]
    check(f"shared object file is {want}", want in files and os.path.realpath(os.path.join(prefix, "lib", "libassetpatch.so.1")).endswith(want),
          files)

    swift = open(os.path.join(root, "Sources", "AssetPatchCore", "Support", "Status.swift")).read()
    cases = {c: int(v) for c, v in re.findall(r"case `?(\w+)`? = (-?\d+)", swift)}
    names = dict(re.findall(r"case \.`?(\w+)`?: \"(ASSETPATCH_[A-Z_]+)\"", swift))
    swift_statuses = {names[c]: v for c, v in cases.items() if c in names}
    check("Swift Status matches the header", swift_statuses == statuses, set(swift_statuses.items()) ^ set(statuses.items()))
    py_types = open(os.path.join(root, "bindings", "python", "assetpatch", "_types.py")).read()
    py_enum = re.search(r"class Status\(enum.IntEnum\):(.*?)\n\n", py_types, re.S).group(1)
    py_statuses = {"ASSETPATCH_" + n: int(v) for n, v in re.findall(r"(\w+) = (-?\d+)", py_enum)}
    check("Python Status matches the header", py_statuses == statuses, set(py_statuses.items()) ^ set(statuses.items()))
    readme = open(os.path.join(root, "README.md")).read()
    table = {name: int(code) for code, name in re.findall(r"^\| *(-?\d+) *\| *`(ASSETPATCH_[A-Z_]+)` *\|", readme, re.M)}
    check("README status table matches the header", table == statuses, set(table.items()) ^ set(statuses.items()))

    for name, ok, detail in synopsis_checks(readme, os.path.join(prefix, "bin", "assetpatch")):
        check(name, ok, detail)

    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
