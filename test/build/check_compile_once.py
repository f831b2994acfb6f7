#!/usr/bin/env python3
"""Each source file is compiled once per build tree: tests link the library of the layer they test.

Reads the build tree's meson-info/intro-targets.json (what `meson introspect --targets` prints), counts
the compile commands of every source over all targets, prints the counts and fails on a source
compiled by more than one target, unless it is a deliberate variant listed below.

    check_compile_once.py BUILD_DIR SOURCE_ROOT
"""
import collections
import json
import os
import re
import sys

# Sources compiled twice on purpose, each with its reason. A source built once by nvcc and once under
# the SIMT emulation has two names (x.cu and x_emu.cpp), so it needs no entry.
DELIBERATE_VARIANTS = {
    "test/collectives/test_gpu_emu.cpp": "the same cases under the SIMT emulation and, with -DFERRY_TEST_ON_GPU, on a GPU",
    "test/nccl/client_228.c": "one NCCL client compiled against ferry's nccl.h and against NVIDIA's (ABI check)",
}


def compile_counts(build_dir, source_root):
    with open(os.path.join(build_dir, "meson-info", "intro-targets.json")) as f:
        targets = json.load(f)
    counts = collections.defaultdict(list)
    for t in targets:
        for group in t.get("target_sources", []):
            sources = list(group.get("sources", []))
            # A unity target (unity=on) compiles generated files that include its sources.
            for gen in group.get("generated_sources", []):
                if re.search(r"-unity\d+\.\w+$", gen):
                    with open(gen) as f:
                        sources += re.findall(r'^#include\s*[<"]([^>"]+)[>"]', f.read(), re.M)
            for src in sources:
                path = os.path.relpath(os.path.realpath(src), os.path.realpath(source_root))
                if path.startswith(".."):
                    continue  # outside the project (none today)
                counts[path].append(f'{t["name"]} ({group.get("language", "?")})')
    return counts


def main():
    build_dir, source_root = sys.argv[1], sys.argv[2]
    counts = compile_counts(build_dir, source_root)
    histogram = collections.Counter(len(v) for v in counts.values())
    print(f"{len(counts)} sources, {sum(len(v) for v in counts.values())} compile commands; "
          + ", ".join(f"{n} source(s) compiled {k}x" for k, n in sorted(histogram.items())))
    bad = []
    for path, where in sorted(counts.items()):
        if len(where) < 2:
            continue
        reason = DELIBERATE_VARIANTS.get(path)
        print(f"  {path}: {len(where)} compiles, in {', '.join(where)}" + (f" (variant: {reason})" if reason else ""))
        if reason is None:
            bad.append(path)
    for path in DELIBERATE_VARIANTS:
        if len(counts.get(path, [])) < 2:
            print(f"  {path}: listed as a variant, compiled {len(counts.get(path, []))}x (fine; drop it from the list "
                  "if it stays so)")
    if bad:
        print(f"FAIL: {len(bad)} source(s) compiled more than once: link the library of their layer instead "
              "(or list a deliberate variant in test/build/check_compile_once.py, with its reason)")
        return 1
    print("OK: every source compiled once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
