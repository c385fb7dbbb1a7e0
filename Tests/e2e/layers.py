#!/usr/bin/env python3
"""The core's folders are layers (docs/architecture.md): a file may use the types of its own
folder and of the folders below it, never of one above. This reads Sources/AssetPatchCore,
finds each top-level type's folder (struct, class, enum, protocol, actor, typealias) and every use of a
type in another folder (comments and string literals left out; an `extension T` is a use of T),
and prints each upward use with its file, line and type.

    layers.py ROOT [--edges]      closes with "N upward references"; exit 1 when N > 0 (Tests/e2e/run.sh)
"""
import os
import re
import sys

# Lowest first. Publish is a side branch: it may use only these three.
ORDER = ["Support", "Archive", "Manifest", "Resolve", "Plan", "Store", "Transfer", "Plugins", "Update", "Client"]
SIDE = {"Publish": {"Support", "Archive", "Manifest"}}

DECL = re.compile(r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:package|public|private|fileprivate|internal|final|indirect|open)\s+)*"
                  r"(?:struct|class|enum|protocol|actor|typealias)\s+([A-Z]\w*)", re.M)
IDENT = re.compile(r"\b([A-Z]\w*)\b")


def strip(text):
    """The source with comments and string literals blanked (line numbers kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('"""', i):
            j = text.find('"""', i + 3)
            j = n if j < 0 else j + 3
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def rank(folder):
    return ORDER.index(folder) if folder in ORDER else None


def allowed(user, used):
    if user == used:
        return True
    if user in SIDE:
        return used in SIDE[user]
    if used in SIDE:
        return False  # nothing in the client's layers uses the publisher
    return rank(used) is not None and rank(user) is not None and rank(used) < rank(user)


def main():
    root = sys.argv[1]
    core = os.path.join(root, "Sources", "AssetPatchCore")
    files = {}
    for d, _, names in os.walk(core):
        for name in names:
            if name.endswith(".swift"):
                path = os.path.join(d, name)
                folder = os.path.relpath(path, core).split(os.sep)[0]
                files[path] = (folder, strip(open(path).read()))
    home = {}
    for path, (folder, text) in files.items():
        for m in DECL.finditer(text):
            home.setdefault(m.group(1), folder)
    upward, edges = [], {}
    for path, (folder, text) in sorted(files.items()):
        for lineno, line in enumerate(text.splitlines(), 1):
            for m in IDENT.finditer(line):
                used = home.get(m.group(1))
                if used is None or used == folder:
                    continue
                edges[(folder, used)] = edges.get((folder, used), 0) + 1
                if not allowed(folder, used):
                    upward.append(f"{os.path.relpath(path, root)}:{lineno}: {folder} uses {m.group(1)} ({used})")
    if "--edges" in sys.argv:
        for (a, b), n in sorted(edges.items()):
            print(f"{a} -> {b}: {n}{'' if allowed(a, b) else '  UPWARD'}")
    for u in upward:
        print(u)
    print(f"{len(upward)} upward references")
    return 1 if upward else 0


if __name__ == "__main__":
    sys.exit(main())
