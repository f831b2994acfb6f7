#!/usr/bin/env python3
"""Include boundaries: every #include "..." in ferry's sources checked against the layer table.

  check_layers.py [ROOT]

ROOT is the source tree (default: two folders up from this file). Prints one line per include that
breaks a rule -- file, line, included path, the rule -- and exits 1; exits 0 when there is none.
Before reading the tree it checks the table itself against includes that must be refused, so a
table edited into allowing everything fails too.

The table below is the one place the layers are written down (docs/ARCHITECTURE.md shows it):

    include/ferry/{status,types,call}.hpp the public types, usable by every layer
    base/                                 status, log, config, data types, deadlines
    kernels/, transports/                 on base; never each other
    collectives/                          on kernels and transports
    runtime/                              on all of the above and the whole public API
    nccl/                                 the public API and runtime/nccl_support.hpp only
    strategies/, bench/, tools/, python/  on the runtime and below; never each other
    examples/                             the public API only

Inside transports/, one backend's folder (shm/, tcp/, ucx/, ...) never includes another's: what two
share moves down into transports/ itself. runtime/bootstrap/ (the rendezvous store) sits on base only.
"""
import os
import re
import sys

# Components, matched by the longest path prefix (relative to the root, '/' separated). A header of
# include/ferry is named in #include lines without "include/".
COMPONENTS = [
    ("include/ferry/status.hpp", "public-types"),
    ("include/ferry/types.hpp", "public-types"),
    ("include/ferry/call.hpp", "public-types"),  # one call as data: types.hpp and the stream type only
    ("include/ferry/", "public"),
    ("base/", "base"),
    ("kernels/", "kernels"),
    ("transports/", "transports"),
    ("collectives/", "collectives"),
    ("runtime/bootstrap/", "bootstrap"),
    ("runtime/nccl_support.hpp", "nccl-support"),
    ("runtime/", "runtime"),
    ("nccl/", "nccl"),
    ("strategies/", "strategies"),
    ("bench/", "bench"),
    ("tools/", "tools"),
    ("python/", "python"),
    ("examples/", "examples"),
]

_BELOW_RUNTIME = {"public-types", "base", "kernels", "transports", "collectives"}
_RUNTIME = _BELOW_RUNTIME | {"public", "bootstrap", "runtime", "nccl-support"}

# What each component may include (besides itself), with the rule's words for the error line.
ALLOWED = {
    "public-types": ({"public-types"}, "the public types include nothing of ferry's but each other"),
    "public": ({"public-types"}, "the public API includes only the public API"),
    "base": ({"public-types"}, "base is the ground layer: the public types only"),
    "kernels": ({"public-types", "base"}, "kernels sit on base only"),
    "transports": ({"public-types", "base"}, "transports sit on base only"),
    "collectives": ({"public-types", "base", "kernels", "transports"}, "collectives sit on kernels and transports"),
    "bootstrap": ({"public-types", "base"}, "runtime/bootstrap sits on base only"),
    "runtime": (_RUNTIME, "the runtime sits on collectives and below"),
    "nccl-support": (_RUNTIME, "the runtime sits on collectives and below"),
    "nccl": ({"public-types", "public", "nccl-support"},
             "nccl/ is a client of the public API: include/ferry and runtime/nccl_support.hpp only"),
    "strategies": (_RUNTIME, "strategies sit on the runtime; never on bench, tools, python or nccl"),
    "bench": (_RUNTIME, "bench sits on the runtime; never on strategies, tools, python or nccl"),
    "tools": (_RUNTIME, "tools sit on the runtime; never on strategies, bench, python or nccl"),
    "python": (_RUNTIME, "python sits on the runtime; never on strategies, bench, tools or nccl"),
    "examples": ({"public-types", "public"}, "examples use the public API only"),
}

# Includes of files the build generates (they are not in the tree): the component that owns them.
GENERATED = {
    "collectives/cuda/kernel_figures.hpp": "collectives",  # launch_fit.py header
}

# Known exceptions: (including file, included path) -> why it is allowed. Keep it empty: fix a
# violation by moving what two share down instead.
EXCEPTIONS = {}

SCANNED = ["include/ferry", "base", "kernels", "transports", "collectives", "runtime", "nccl", "strategies", "bench",
           "tools", "python", "examples"]
SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cpp", ".cu", ".cuh", ".def", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

# Includes the table must refuse (including file, included path); checked before the tree.
MUST_REFUSE = [
    ("base/log.cpp", "runtime/topology.hpp"),
    ("base/log.cpp", "ferry/comm.hpp"),
    ("kernels/host/reduce.cpp", "transports/transport.hpp"),
    ("transports/shm/shm_transport.cpp", "transports/tcp/tcp_wire.hpp"),
    ("transports/ucx/ucx_transport.cpp", "collectives/op.hpp"),
    ("collectives/ring.cpp", "runtime/tuner.hpp"),
    ("runtime/bootstrap/socket.cpp", "runtime/topology.hpp"),
    ("runtime/tuner.cpp", "nccl/ops.hpp"),
    ("nccl/ops.cpp", "runtime/cuda/cuda_api.hpp"),
    ("nccl/ops.cpp", "base/log.hpp"),
    ("bench/ferry_perf.cpp", "strategies/ddp.hpp"),
    ("tools/ferryrun.cpp", "bench/size_arg.hpp"),
    ("examples/allreduce_example.cpp", "runtime/comm_impl.hpp"),
]


def component(path):
    best = None
    for prefix, name in COMPONENTS:
        if (path == prefix or path.startswith(prefix)) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, name)
    return best[1] if best else None


def backend(path):
    """The transports backend folder a path lies in (shm, tcp, ...), or None."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "transports" else None


def layer_name(path):
    """A path's component for error lines; a transports backend by its folder."""
    if path in GENERATED:
        return GENERATED[path]
    b = backend(path)
    return "transports/" + b if b else component(path)


def resolve(root, src, inc):
    """The tree path an include names: beside the including file first (as the compiler looks), then
    from the root, then the public include folder, then the generated headers. None: not found."""
    here = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if os.path.isfile(os.path.join(root, here)):
        return here
    if os.path.isfile(os.path.join(root, inc)):
        return os.path.normpath(inc)
    if os.path.isfile(os.path.join(root, "include", inc)):
        return "include/" + os.path.normpath(inc)
    if inc in GENERATED:
        return inc
    return None


def verdict(src, target):
    """None when src may include target (both tree paths), else the rule broken."""
    if (src, target) in EXCEPTIONS:
        return None
    mine = component(src)
    theirs = GENERATED.get(target) or component(target)
    if mine is None or theirs is None:
        return "outside the layer table (add the folder to check_layers.py)"
    if mine == theirs:
        a, b = backend(src), backend(target)
        if a and b and a != b:
            return "transport backends never include each other: move what they share into transports/"
        return None
    allowed, rule = ALLOWED[mine]
    return None if theirs in allowed else rule


def check_table():
    errors = []
    for src, inc in MUST_REFUSE:
        target = "include/" + inc if inc.startswith("ferry/") else inc
        if verdict(src, target) is None:
            errors.append("check_layers.py: the table lets %s include \"%s\"; it must not" % (src, inc))
    return errors


def sources(root):
    for top in SCANNED:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def check_tree(root):
    errors = []
    files = 0
    includes = 0
    for src in sources(root):
        files += 1
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                includes += 1
                inc = m.group(1)
                target = resolve(root, src, inc)
                if target is None:
                    errors.append('%s:%d: #include "%s": not found in the tree (a generated header? add it to '
                                  'GENERATED)' % (src, number, inc))
                    continue
                rule = verdict(src, target)
                if rule:
                    errors.append('%s:%d: #include "%s": %s may not include %s: %s' % (
                        src, number, inc, layer_name(src), layer_name(target), rule))
    return errors, files, includes


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    root = os.path.abspath(root)
    errors = check_table()
    tree_errors, files, includes = check_tree(root)
    errors += tree_errors
    for e in errors:
        print(e)
    if errors:
        print("check_layers: %d include(s) break the layer table (test/build/check_layers.py)" % len(errors))
        return 1
    print("check_layers: %d files, %d includes, all within the layer table (%d known exceptions)" % (
        files, includes, len(EXCEPTIONS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
