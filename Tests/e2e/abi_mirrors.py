#!/usr/bin/env python3
"""The Python package copies the C header by hand (ctypes structures and prototypes). This
compares the copies with the header itself, so a field or function added to assetpatch.h without
its mirror fails the test command:
- every struct: a C program built against the header prints each sizeof and offsetof, which
  must equal the ctypes structure's size and each field's offset, field names in order;
- every function: its prototype, read from the header, must map to the restype and argtypes the
  package declares (and the package must declare no function the header lacks).

    abi_mirrors.py HEADER_DIR PYTHON_PACKAGE_DIR WORKDIR"""
import ctypes
import os
import re
import subprocess
import sys

include, package, work = sys.argv[1:4]
sys.path.insert(0, package)
from assetpatch import _ffi  # noqa: E402

header = open(os.path.join(include, "assetpatch.h")).read()
# Comments out: they contain words that look like declarations.
code = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
code = re.sub(r"//[^\n]*", "", code)

# Which ctypes structure mirrors which C struct.
MIRRORS = {"assetpatch_progress": _ffi.Progress, "assetpatch_lifecycle": _ffi.Lifecycle, "assetpatch_source_info": _ffi.SourceInfo,
           "assetpatch_release_info": _ffi.ReleaseInfo, "assetpatch_plugin_info": _ffi.PluginInfo,
           "assetpatch_check_outcome": _ffi.CheckOutcome, "assetpatch_group_info": _ffi.GroupInfo,
           "assetpatch_transport": _ffi.Transport, "assetpatch_events_info": _ffi.EventsInfo}

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok - {name}")
    else:
        failed += 1
        print(f"not ok - {name}" + (f": {detail}" if detail else ""))


# Structs: name -> field names, in order.
structs = {}
for name, body in re.findall(r"typedef struct (\w+) \{(.*?)\} \1;", code, re.S):
    # A field is the last word of its declaration, or a function pointer's name: (*name)(...).
    fields = []
    for decl in body.split(";"):
        m = re.search(r"\(\*\s*(\w+)\)", decl) or re.search(r"(\w+)\s*(?:\[\d+\])?\s*$", decl)
        if decl.strip() and m:
            fields.append(m.group(1))
    structs[name] = fields
check("the header's structs all have a ctypes mirror", set(structs) == set(MIRRORS),
      f"header {sorted(structs)}, mirrors {sorted(MIRRORS)}")

program = ["#include <assetpatch.h>", "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
for name, fields in structs.items():
    program.append(f'    printf("{name} %zu\\n", sizeof({name}));')
    for f in fields:
        program.append(f'    printf("{name}.{f} %zu\\n", offsetof({name}, {f}));')
program += ["    return 0;", "}"]
src = os.path.join(work, "layout.c")
os.makedirs(work, exist_ok=True)
open(src, "w").write("\n".join(program) + "\n")
exe = os.path.join(work, "layout")
subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", f"-I{include}", src, "-o", exe], check=True)
layout = dict(line.rsplit(" ", 1) for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines())

for name, fields in structs.items():
    mirror = MIRRORS.get(name)
    if mirror is None:
        continue
    names = [f[0] for f in mirror._fields_]
    check(f"{name}: ctypes fields in the header's order", names == fields, f"header {fields}, ctypes {names}")
    check(f"{name}: size", ctypes.sizeof(mirror) == int(layout[name]), f"C {layout[name]}, ctypes {ctypes.sizeof(mirror)}")
    wrong = [(f, layout[f"{name}.{f}"], getattr(mirror, f).offset) for f in fields
             if f in names and getattr(mirror, f).offset != int(layout[f"{name}.{f}"])]
    check(f"{name}: every field's offset", not wrong, f"(field, C, ctypes): {wrong}")

# Functions: the C type of each parameter and result, mapped to what ctypes must declare.
c = ctypes
TYPES = {
    "int": c.c_int, "void": None, "size_t": c.c_size_t, "const char *": c.c_char_p, "char *": c.c_char_p,
    "assetpatch_client *": c.c_void_p, "assetpatch_client **": c.POINTER(c.c_void_p), "void *": c.c_void_p,
    "void **": c.POINTER(c.c_void_p), "int64_t *": c.POINTER(c.c_int64), "uint64_t *": c.POINTER(c.c_uint64),
    "size_t *": c.POINTER(c.c_size_t), "int *": c.POINTER(c.c_int), "const char *const *": c.POINTER(c.c_char_p),
    "assetpatch_progress_fn": _ffi.PROGRESS_FN, "assetpatch_log_fn": _ffi.LOG_FN, "assetpatch_event_fn": _ffi.EVENT_FN,
    "uint64_t": c.c_uint64,
    "const void *": c.c_void_p, "assetpatch_transport_response *": c.c_void_p,
    "const assetpatch_transport *": c.POINTER(_ffi.Transport),
    **{f"{n} *": c.POINTER(m) for n, m in MIRRORS.items()},
}


def ctype(decl):
    """The type part of a parameter or result declaration, spaces normalised."""
    decl = re.sub(r"\bASSETPATCH_\w+\b", "", decl)
    decl = re.sub(r"\s+", " ", decl).strip()
    decl = re.sub(r"\s*\*", " *", decl).replace("* *", "**")
    m = re.match(r"^(.*?)(\w+)$", decl)
    if m and m.group(1).strip() and m.group(2) not in ("int", "void", "size_t"):
        decl = m.group(1).strip()  # drop the parameter's name
    return decl


prototypes = {}
no_preprocessor = re.sub(r"^\s*#.*$", "", code, flags=re.M)
for statement in no_preprocessor.split(";"):
    statement = " ".join(statement.split("}")[-1].split("{")[-1].split())  # past struct and enum bodies
    m = re.match(r"^(.*?)\b(assetpatch_\w+)\s*\((.*)\)$", statement)
    if not m or statement.startswith("typedef"):
        continue
    ret, name, params = m.groups()
    args = [] if params.strip() in ("", "void") else [ctype(p) for p in params.split(",")]
    prototypes[name] = (ctype(ret), args)

declared = _ffi.signatures()
check("every function of the header is declared in the Python package, and no other",
      set(prototypes) == set(declared), f"header only {sorted(set(prototypes) - set(declared))}, package only {sorted(set(declared) - set(prototypes))}")


def same(a, b):
    if a is None or b is None:
        return a is b
    return a == b or (hasattr(a, "_type_") and hasattr(b, "_type_") and getattr(a, "_type_") == getattr(b, "_type_")
                      and a.__name__ == b.__name__)


for name, (ret, args) in sorted(prototypes.items()):
    if name not in declared:
        continue
    restype, argtypes = declared[name]
    unknown = [t for t in [ret] + args if t not in TYPES]
    if unknown:
        check(f"{name}: C types known to this test", False, f"unknown {unknown}")
        continue
    want_ret, want_args = TYPES[ret], [TYPES[a] for a in args]
    ok = same(restype, want_ret) and len(argtypes) == len(want_args) and all(same(x, y) for x, y in zip(argtypes, want_args))
    check(f"{name}: restype and argtypes match the prototype", ok, f"header ({ret}; {', '.join(args)})")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
