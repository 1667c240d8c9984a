#!/usr/bin/env python3
"""Checks the include layering of edgelm's library folders (docs/architecture.md, "Layering").

    scripts/check_includes.py [ROOT]    # ROOT: the repository (default: this script's parent's)
    scripts/check_includes.py --self-test

Prints one line per include that breaks a rule, `file:line: <folder> may not include <path>`,
and exits 1 when there is any; exits 0 with a one-line summary otherwise. The rules (what each
library folder may include):

    core/               core/
    backends/<name>/    core/, backends/<name>/ (a backend never sees another one)
    backends/ (itself)  core/, backends/ (the registry, which builds every backend by name)
    eviction/           core/, eviction/
    models/             core/, models/ (a model knows the Backend interface alone)
    runtime/            core/, eviction/, models/, runtime/, backends/registry.h (never a concrete
                        backend): generation, sampling, backend scheduling
    eval/               what runtime/ may, and runtime/, eval/: perplexity, eviction quality, parity
    kernels/            kernels/
    bin/, tests/        anything

A folder that may not include a backend may not name its namespace in code either (`cpu::`,
`opencl::`: a forward declaration needs no include), and the OpenCL API headers (<CL/...>,
<clblast...>) belong to backends/opencl/ alone. Comments and string literals are skipped.
Project headers are included by their path from the repository root ("core/tensor.h"); a quoted
include that is a path from the including file's folder is resolved from there, and one that
names no file of the repository is reported too. Python 3 standard library only; --self-test
checks the checker on a small tree made in a temporary folder.
"""

import os
import re
import sys
import tempfile

LIBRARY_FOLDERS = ("core", "backends", "eviction", "models", "runtime", "eval", "kernels")
SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".inc", ".cl")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
OPENCL_API = re.compile(r"^(CL/|clblast)")


def allowed_prefixes(path):
    """The include prefixes a library file may use (a prefix ending in '/' is a folder)."""
    parts = path.split("/")
    top = parts[0]
    if top == "backends":
        if len(parts) == 2:  # backends/registry.*
            return ("core/", "backends/")
        return ("core/", "backends/" + parts[1] + "/")
    return {
        "core": ("core/",),
        "eviction": ("core/", "eviction/"),
        "models": ("core/", "models/"),
        "runtime": ("core/", "eviction/", "models/", "runtime/", "backends/registry.h"),
        "eval": ("core/", "eviction/", "models/", "runtime/", "eval/", "backends/registry.h"),
        "kernels": ("kernels/",),
    }[top]


def rule_folder(path):
    """How a violation names the folder whose rule it breaks: 'backends/cpu/', 'models/'."""
    parts = path.split("/")
    if parts[0] == "backends" and len(parts) > 2:
        return "backends/" + parts[1] + "/"
    return parts[0] + "/"


def source_files(root):
    for folder in LIBRARY_FOLDERS:
        for directory, subfolders, names in os.walk(os.path.join(root, folder)):
            subfolders.sort()
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    full = os.path.join(directory, name)
                    yield os.path.relpath(full, root).replace(os.sep, "/")


def code_lines(root, path):
    """(line number, the line's code, the line as written) for every line. The code has comments
    removed and the contents of string and character literals (raw strings too) blanked, so that
    neither a commented-out #include nor text in a message counts."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as source:
        text = source.read()
    code = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            code.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text.startswith('R"', i) and re.search(r"(^|\W)(u8|u|U|L)?$", text[max(0, i - 3):i]):
            open_paren = text.find("(", i + 2)
            closing = ")" + text[i + 2:open_paren] + '"'
            end = text.find(closing, open_paren)
            end = n if end < 0 else end + len(closing)
            code.append('R"' + re.sub(r"[^\n]", " ", text[i + 2:end - 1]) + '"')
            i = end
        elif c in "\"'" and not (c == "'" and i and re.match(r"[0-9A-Fa-f]", text[i - 1])):
            j = i + 1  # a quote after a hex digit is a digit separator (1'000)
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            closed = j < n and text[j] == c
            code.append(c + re.sub(r"[^\n]", " ", text[i + 1:min(j, n)]) + (c if closed else ""))
            i = j + 1 if closed else j
        else:
            code.append(c)
            i += 1
    written = text.split("\n")
    for number, line in enumerate("".join(code).split("\n"), 1):
        yield number, line, written[number - 1]


def resolve(root, path, target):
    """The repository path a quoted include names, or None when it names no file of the tree."""
    if target.split("/")[0] in LIBRARY_FOLDERS + ("bin", "tests"):
        candidate = os.path.normpath(target)
    else:
        candidate = os.path.normpath(os.path.join(os.path.dirname(path), target))
    candidate = candidate.replace(os.sep, "/")
    if candidate.startswith("../") or not os.path.isfile(os.path.join(root, candidate)):
        return None
    return candidate


def violations(root):
    """(message lines, sorted by file and line; number of files checked)."""
    backends_dir = os.path.join(root, "backends")
    backends = sorted(name for name in os.listdir(backends_dir)
                      if os.path.isdir(os.path.join(backends_dir, name))) if os.path.isdir(
                          backends_dir) else []
    names_backend = re.compile(r"\b(%s)::(\w+)" % "|".join(backends)) if backends else None
    found = []
    checked = 0
    for path in source_files(root):
        checked += 1
        allowed = allowed_prefixes(path)
        folder = rule_folder(path)
        for number, code, written in code_lines(root, path):
            where = "%s:%d: " % (path, number)
            # A backend's namespace (cpu::, opencl::) outside its folder names the backend as
            # surely as its header does (a forward declaration needs no include).
            for match in names_backend.finditer(code) if names_backend else ():
                if not any("backends/%s/" % match.group(1) == p or p == "backends/"
                           for p in allowed):
                    found.append(where + "%s may not name the %s backend (%s)" %
                                 (folder, match.group(1), match.group(0)))
            if not INCLUDE.match(code):
                continue
            match = INCLUDE.match(written)
            delimiter, target = match.group(1), match.group(2)
            if delimiter == "<":
                if OPENCL_API.match(target) and not path.startswith("backends/opencl/"):
                    found.append(where + "%s may not include <%s>" % (folder, target))
                continue
            included = resolve(root, path, target)
            if included is None:
                found.append(where + '"%s" names no file of the repository (include project '
                             "headers by their path from the root)" % target)
            elif not any(included == p or (p.endswith("/") and included.startswith(p))
                         for p in allowed):
                found.append(where + "%s may not include %s" % (folder, included))
    found.sort(key=lambda line: (line.split(":")[0], int(line.split(":")[1])))
    return found, checked


def check(root):
    found, checked = violations(root)
    for line in found:
        print(line)
    if found:
        print("check_includes: %d line(s) break the layering (docs/architecture.md)" %
              len(found), file=sys.stderr)
        return 1
    print("check_includes: %d files, layering holds" % checked)
    return 0


def self_test():
    """Builds a small tree with one include of each kind, allowed and not, and compares the
    violations found with the expected list."""
    files = {
        "core/tensor.h": '#include "core/dtype.h"\n#include <vector>\n',
        "core/dtype.h": '#include "models/llama.h"\n',
        "backends/cpu/cpu.h": '#include "core/tensor.h"\n#include "backends/gpu/gpu.h"\n',
        "backends/gpu/gpu.h": '#include <CL/cl.h>\n#include "backends/gpu/../cpu/cpu.h"\n',
        "eviction/policy.h": '#include "core/tensor.h"\n#include "eviction/missing.h"\n',
        "eviction/manager.h": '/*\n#include "models/llama.h"\n*/\n#include "models/llama.h"\n',
        "models/llama.h": ('#include "eviction/policy.h"\n#include "backends/registry.h"\n'
                           '// #include "backends/cpu/cpu.h"\n#include "backends/cpu/cpu.h"\n'),
        "models/loader.cpp": ('#include <CL/cl.h>\n#include "bin/tool.h"\n'
                              'const char* a = "/* cpu::x";  // cpu::CpuBackend\n'
                              'const char* b = R"x(")" cpu::y)x"; gpu::Queue* q;\n'
                              "int c = 1'000; /* gpu::\n cpu:: */ cpu::CpuBackend* d;\n"),
        "backends/registry.cpp": ('#include "backends/cpu/cpu.h"\n#include "backends/gpu/gpu.h"\n'
                                  "cpu::Cpu* cpu; gpu::Gpu* gpu;\n"),
        "backends/cpu/portable/ref.cpp": ('#include "../cpu.h"\n#include "backends/registry.cpp"\n'
                                          "cpu::Cpu* a; gpu::Gpu* b;\n"),
        "kernels/attention.cl": '#include "kernels/common.cl"\n#include "core/dtype.h"\n',
        "kernels/common.cl": "",
        "backends/registry.h": "",
        "runtime/session.h": ('#include "eviction/policy.h"\n#include "backends/registry.h"\n'
                              '#include "models/llama.h"\n#include "eval/parity.h"\n'),
        "eval/parity.h": '#include "runtime/session.h"\n#include "backends/cpu/cpu.h"\n',
        "bin/tool.h": '#include "backends/cpu/cpu.h"\n#include <CL/cl.h>\n',
        "tests/test.cpp": '#include "backends/gpu/gpu.h"\n',
    }
    expected = [
        "backends/cpu/cpu.h:2: backends/cpu/ may not include backends/gpu/gpu.h",
        "backends/cpu/portable/ref.cpp:2: backends/cpu/ may not include backends/registry.cpp",
        "backends/cpu/portable/ref.cpp:3: backends/cpu/ may not name the gpu backend (gpu::Gpu)",
        "backends/gpu/gpu.h:1: backends/gpu/ may not include <CL/cl.h>",
        "backends/gpu/gpu.h:2: backends/gpu/ may not include backends/cpu/cpu.h",
        "core/dtype.h:1: core/ may not include models/llama.h",
        "eval/parity.h:2: eval/ may not include backends/cpu/cpu.h",
        "eviction/manager.h:4: eviction/ may not include models/llama.h",
        'eviction/policy.h:2: "eviction/missing.h" names no file of the repository (include '
        "project headers by their path from the root)",
        "kernels/attention.cl:2: kernels/ may not include core/dtype.h",
        "models/llama.h:1: models/ may not include eviction/policy.h",
        "models/llama.h:2: models/ may not include backends/registry.h",
        "models/llama.h:4: models/ may not include backends/cpu/cpu.h",
        "models/loader.cpp:1: models/ may not include <CL/cl.h>",
        "models/loader.cpp:2: models/ may not include bin/tool.h",
        "models/loader.cpp:4: models/ may not name the gpu backend (gpu::Queue)",
        "models/loader.cpp:6: models/ may not name the cpu backend (cpu::CpuBackend)",
        "runtime/session.h:4: runtime/ may not include eval/parity.h",
    ]
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as out:
                out.write(text)
        found, checked = violations(root)
        clean_root = os.path.join(root, "clean")
        os.makedirs(os.path.join(clean_root, "core"))
        with open(os.path.join(clean_root, "core", "a.h"), "w", encoding="utf-8") as out:
            out.write('#include "core/a.h"\n')
        clean, _ = violations(clean_root)
    failures = []
    if found != expected:
        failures.append("found:\n  " + "\n  ".join(found) + "\nexpected:\n  " +
                        "\n  ".join(expected))
    if checked != 15:
        failures.append("checked %d library files, expected 15" % checked)
    if clean:
        failures.append("a clean tree reported: " + "; ".join(clean))
    if failures:
        print("check_includes self-test FAILED\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print("check_includes self-test: %d violations found as expected" % len(expected))
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print("usage: check_includes.py [ROOT] | --self-test", file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))
    if not os.path.isdir(os.path.join(root, "core")):
        print("check_includes: %s has no core/ folder (not an edgelm checkout)" % root,
              file=sys.stderr)
        return 2
    return check(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
