#!/usr/bin/env python3
"""Launch-fit figures of ferry's CUDA kernels: ptxas's registers, stack, spills and shared memory.

  launch_fit.py update [--nvcc NVCC] [--jobs N]
      Compile every kernel source to PTX (compute_80, the oldest architecture of -Dcuda-arch=all),
      run `ptxas -v` over that PTX for every architecture of `all` (sm_80, sm_90, sm_100), and
      write collectives/cuda/kernel_figures.json: the figures of every kernel entry, the PTX's
      hash and the toolkit. Run it after changing any kernel (a few minutes: ptxas is slow).
  launch_fit.py check [--nvcc NVCC]
      Exit 1 when kernel_figures.json's PTX hash is not that of the sources now (the figures are
      older than the kernels: run update). What CI runs where the build leaves the hash out
      (-Dlaunch-fit-check=false, ./run test's build/).
  launch_fit.py header --json FILE --out FILE [--nvcc NVCC]
      Write the C++ header the build uses (kernel_figures.hpp): the figures, the hash they were
      made from and, when nvcc is given, the hash of the PTX the sources give now. The unit test
      test_launch_fit fails when the two differ (stale figures) and when any kernel cannot launch.
  launch_fit.py table [--json FILE]
      Print the figures as a table.

Only facts of the toolchain are used: `nvcc --ptx` and `ptxas -v` output lines.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JSON = os.path.join(HERE, "kernel_figures.json")
# Every .cu file with a __global__ function, and the architectures of -Dcuda-arch=all.
SOURCES = ["collectives/cuda/kernels.cu", "kernels/cuda/reduce_copy_kernel.cu"]
PTX_ARCH = "compute_80"
ARCHES = ["sm_80", "sm_90", "sm_100"]
NVCC_FLAGS = ["-std=c++20", "--expt-relaxed-constexpr", "-DFERRY_HAVE_CUDA=1", "-O3"]


def ptx_of(nvcc, source, out):
    cmd = [nvcc, "-I" + ROOT, "-I" + os.path.join(ROOT, "include"), "-arch=" + PTX_ARCH, "--ptx"] + NVCC_FLAGS
    subprocess.run(cmd + ["-o", out, os.path.join(ROOT, source)], check=True)
    with open(out) as f:
        return f.read()


def ptx_hash(texts):
    """Hash of the PTX, without what depends on where the checkout is: comment lines (paths, build
    ids), location directives, and the path hash nvcc puts in anonymous namespaces' names."""
    h = hashlib.sha256()
    for text in texts:
        for line in text.splitlines():
            s = line.strip()
            if s.startswith("//") or s.startswith(".file") or s.startswith(".loc"):
                continue
            line = re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N__x_", line)
            h.update(line.encode() + b"\n")
    return h.hexdigest()[:16]


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def short_name(demangled):
    """'void ns::k<float, Op>(args)' -> 'ns::k<float, Op>'."""
    s = demangled.replace("(anonymous namespace)", "{anon}")
    if s.startswith("void "):
        s = s[5:]
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return s[:i]
    return s


def max_threads(ptx):
    """Entry -> .maxntid x (0 when absent)."""
    res = {}
    for m in re.finditer(r"\.entry\s+(\S+?)\s*\((.*?)\)\s*(.*?)\{", ptx, re.S):
        n = re.search(r"\.maxntid\s+(\d+)", m.group(3))
        res[m.group(1)] = int(n.group(1)) if n else 0
    return res


def ptxas_figures(ptxas, ptx_file, arch):
    r = subprocess.run([ptxas, "-arch=" + arch, "-O3", "-v", ptx_file, "-o", os.devnull],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ptxas -arch={arch} {ptx_file} failed:\n{r.stderr[-2000:]}")
    figures, entry, props = {}, None, None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for '(\S+)'", line)
        if m:
            entry = m.group(1)
            figures[entry] = {"arch": m.group(2), "registers": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0,
                              "shared": 0}
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and props in figures:
            figures[props]["spill_stores"] = int(m.group(2))
            figures[props]["spill_loads"] = int(m.group(3))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and entry in figures:
            f = figures[entry]
            f["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            f["shared"] = int(s.group(1)) if s else 0
            s = re.search(r"(\d+) bytes cumulative stack size", line)
            f["stack"] = int(s.group(1)) if s else 0
    return figures


def toolkit(nvcc):
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+)", out)
    return m.group(1) if m else "unknown"


def find_nvcc(given):
    if given:
        return given
    for c in ("/usr/local/cuda/bin/nvcc",):
        if os.access(c, os.X_OK):
            return c
    sys.exit("launch_fit.py: nvcc not found (pass --nvcc)")


def update(args):
    nvcc = find_nvcc(args.nvcc)
    ptxas = os.path.join(os.path.dirname(nvcc), "ptxas")
    with tempfile.TemporaryDirectory() as tmp:
        texts, files = [], []
        for i, src in enumerate(SOURCES):
            out = os.path.join(tmp, f"{i}.ptx")
            texts.append(ptx_of(nvcc, src, out))
            files.append(out)
        jobs = [(f, a, t) for f, t in zip(files, texts) for a in ARCHES]
        with concurrent.futures.ThreadPoolExecutor(args.jobs or os.cpu_count()) as pool:
            results = list(pool.map(lambda j: (j, ptxas_figures(ptxas, j[0], j[1])), jobs))
    kernels = []
    for (ptx_file, arch, text), figures in results:
        bounds = max_threads(text)
        names = list(figures)
        for raw, dem in zip(names, demangle(names)):
            f = figures[raw]
            kernels.append({"arch": arch, "kernel": short_name(dem), "registers": f["registers"], "stack": f["stack"],
                            "spill_stores": f["spill_stores"], "spill_loads": f["spill_loads"], "shared": f["shared"],
                            "max_threads": bounds.get(raw, 0)})
    kernels.sort(key=lambda k: (k["kernel"], int(k["arch"][3:])))
    doc = {"generated_by": "collectives/cuda/launch_fit.py update", "toolkit": toolkit(nvcc), "ptx_arch": PTX_ARCH,
           "arches": ARCHES, "sources": SOURCES, "ptx_hash": ptx_hash(texts), "kernels": kernels}
    with open(JSON, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"launch_fit.py: {len(kernels)} kernel figures for {', '.join(ARCHES)} -> {os.path.relpath(JSON, ROOT)}")
    print_table(doc)


def check(args):
    nvcc = find_nvcc(args.nvcc)
    with open(JSON) as f:
        doc = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        now = ptx_hash([ptx_of(nvcc, src, os.path.join(tmp, f"{i}.ptx")) for i, src in enumerate(SOURCES)])
    if now != doc["ptx_hash"]:
        sys.exit(f"launch_fit.py: the kernels changed since kernel_figures.json was made (PTX hash {now}, figures of "
                 f"{doc['ptx_hash']}): run `python3 collectives/cuda/launch_fit.py update`, commit the JSON")
    print(f"launch_fit.py: kernel_figures.json is that of the kernels (PTX hash {now})")


def header(args):
    with open(args.json) as f:
        doc = json.load(f)
    now = "none"
    if args.nvcc:
        with tempfile.TemporaryDirectory() as tmp:
            texts = [ptx_of(args.nvcc, src, os.path.join(tmp, f"{i}.ptx")) for i, src in enumerate(SOURCES)]
        now = ptx_hash(texts)
    lines = ["// Generated by collectives/cuda/launch_fit.py header from kernel_figures.json: do not edit.",
             "#pragma once", "", '#include "collectives/cuda/launch_fit.hpp"', "",
             "namespace ferry::gpu {", "",
             "/// ptxas -v figures of every kernel entry for every architecture of -Dcuda-arch=all.",
             "inline constexpr KernelFigures kKernelFigures[] = {"]
    for k in doc["kernels"]:
        lines.append(f'    {{"{k["arch"]}", "{k["kernel"]}", {k["registers"]}, {k["stack"]}, {k["spill_stores"]}, '
                     f'{k["spill_loads"]}, {k["shared"]}, {k["max_threads"]}}},')
    lines += ["};",
              f'inline constexpr const char* kFiguresToolkit = "{doc["toolkit"]}";',
              f'inline constexpr const char* kFiguresPtxHash = "{doc["ptx_hash"]}";',
              "/// The hash of the PTX the sources give with this build's nvcc (\"none\" without nvcc).",
              f'inline constexpr const char* kCurrentPtxHash = "{now}";', ""]
    emu = next((k for k in doc["kernels"] if k["kernel"].endswith("collectiveKernel") and k["arch"] == "sm_90"), None)
    lines.append("/// The figures the emulation launches by: the collective kernel on sm_90.")
    if emu:
        lines.append(f'inline constexpr KernelFigures kEmulatedFigures = {{"{emu["arch"]}", "{emu["kernel"]}", '
                     f'{emu["registers"]}, {emu["stack"]}, {emu["spill_stores"]}, {emu["spill_loads"]}, '
                     f'{emu["shared"]}, {emu["max_threads"]}}};')
    else:
        lines.append('inline constexpr KernelFigures kEmulatedFigures = {"", "", 0, 0, 0, 0, 0, 0};')
    lines += ["", "}  // namespace ferry::gpu", ""]
    text = "\n".join(lines)
    if not os.path.exists(args.out) or open(args.out).read() != text:
        with open(args.out, "w") as f:
            f.write(text)


def print_table(doc):
    print(f"# ptxas {doc['toolkit']} over {doc['ptx_arch']} PTX (hash {doc['ptx_hash']})")
    print(f"{'kernel':<60} {'arch':<7} {'regs':>5} {'stack':>6} {'spill st/ld':>12} {'smem':>5} {'bounds':>6}")
    for k in doc["kernels"]:
        print(f"{k['kernel'][:60]:<60} {k['arch']:<7} {k['registers']:>5} {k['stack']:>6} "
              f"{str(k['spill_stores']) + '/' + str(k['spill_loads']):>12} {k['shared']:>5} {k['max_threads']:>6}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("update")
    u.add_argument("--nvcc")
    u.add_argument("--jobs", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("--nvcc")
    h = sub.add_parser("header")
    h.add_argument("--json", required=True)
    h.add_argument("--out", required=True)
    h.add_argument("--nvcc", default="")
    t = sub.add_parser("table")
    t.add_argument("--json", default=JSON)
    args = ap.parse_args()
    if args.cmd == "update":
        update(args)
    elif args.cmd == "check":
        check(args)
    elif args.cmd == "header":
        header(args)
    else:
        with open(args.json) as f:
            print_table(json.load(f))


if __name__ == "__main__":
    main()
