#!/usr/bin/python3
"""ABI check of ferry's libnccl.so.2.

Usage: abi_check.py LIBNCCL TEST_PROGRAM [NCCL_HEADER]

1. The soname is libnccl.so.2 and the library exports only nccl* / pnccl* symbols.
2. It exports exactly REQUIRED, each with its pnccl* twin at the same address (NCCL's layout: the
   pnccl* name is the definition, nccl* a weak alias), and ferry/nccl.h declares exactly those.
3. With NVIDIA's nccl.h present (/usr/local/cuda/include/nccl.h), every function it declares is
   exported by ferry (and REQUIRED lists it): a program built against it finds every symbol.
4. With NVIDIA's library present (/usr/local/cuda/lib64/libnccl.so.2), every function it exports
   is either REQUIRED (and ferry has it) or listed in ABSENT with the reason ferry lacks it.
5. The C test program, linked against libnccl.so.2 only, loads with LD_BIND_NOW=1 (every symbol
   it uses resolves at load time).
"""
import os
import re
import subprocess
import sys

# Every host function of NCCL 2.28.9's nccl.h, which ferry declares and implements.
REQUIRED = {
    # library
    "ncclGetVersion", "ncclGetErrorString", "ncclGetLastError", "ncclGetUniqueId", "ncclResetDebugInit",
    # communicators
    "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommInitAll", "ncclCommSplit",
    "ncclCommShrink", "ncclCommFinalize", "ncclCommRevoke", "ncclCommDestroy", "ncclCommAbort",
    "ncclCommGetAsyncError", "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank",
    # memory, registration and windows
    "ncclMemAlloc", "ncclMemFree", "ncclCommRegister", "ncclCommDeregister",
    "ncclCommWindowRegister", "ncclCommWindowDeregister",
    # reductions
    "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy",
    # collectives, point to point, groups
    "ncclAllReduce", "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
    "ncclAlltoAll", "ncclGather", "ncclScatter", "ncclSend", "ncclRecv",
    "ncclGroupStart", "ncclGroupEnd", "ncclGroupSimulateEnd",
}

# Exported by NVIDIA's NCCL 2.28 but not by ferry: the device API of nccl_device.h (host functions
# that set up kernels communicating by themselves; docs/NCCL.md lists them as a later step) and an
# internal symbol.
ABSENT = {
    "ncclDevCommCreate": "2.28 device API (nccl_device.h): kernels that communicate by themselves",
    "ncclDevCommDestroy": "2.28 device API",
    "ncclTeamWorld": "2.28 device API", "ncclTeamLsa": "2.28 device API", "ncclTeamRail": "2.28 device API",
    "ncclTeamRankToLsa": "2.28 device API", "ncclTeamRankToWorld": "2.28 device API",
    "ncclLsaBarrierCreateRequirement": "2.28 device API",
    "ncclGinBarrierCreateRequirement": "2.28 device API",
    "ncclLLA2ACalcSlots": "2.28 device API", "ncclLLA2ACreateRequirement": "2.28 device API",
    "ncclResetDebugInitInternal": "internal to NVIDIA's library (not in nccl.h)",
}

NVIDIA_HEADER = "/usr/local/cuda/include/nccl.h"
NVIDIA_LIB = "/usr/local/cuda/lib64/libnccl.so.2"

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def exports(lib):
    """{name: (type letter, address)} of the defined dynamic symbols."""
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            table[parts[2]] = (parts[1], parts[0])
    return table


def soname(lib):
    out = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    m = re.search(r"Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else None


def header_functions(path):
    text = open(path, encoding="utf-8").read()
    return set(re.findall(r"^(?:ncclResult_t|const char\*|void)\s+(nccl\w+)\(", text, re.M))


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    lib, program = sys.argv[1], sys.argv[2]
    header = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "ferry", "nccl.h")

    if soname(lib) != "libnccl.so.2":
        fail("soname of %s is %s, expected libnccl.so.2" % (lib, soname(lib)))

    ours = exports(lib)
    stray = sorted(n for n in ours if not n.startswith(("nccl", "pnccl")))
    if stray:
        fail("exports beyond the C API: " + ", ".join(stray[:20]))
    names = {n for n in ours if n.startswith("nccl")}
    if names != REQUIRED:
        fail("exported nccl* functions differ from REQUIRED: missing %s, extra %s"
             % (sorted(REQUIRED - names), sorted(names - REQUIRED)))
    for n in sorted(REQUIRED & names):
        twin = ours.get("p" + n)
        if twin is None:
            fail("p%s is not exported" % n)
        elif twin[1] != ours[n][1]:
            fail("%s and p%s have different addresses" % (n, n))
    declared = header_functions(header)
    if declared != REQUIRED:
        fail("ferry/nccl.h declares %s beyond REQUIRED and lacks %s"
             % (sorted(declared - REQUIRED), sorted(REQUIRED - declared)))
    print("ferry exports %d functions, each as nccl* and pnccl*" % len(names))

    if os.path.exists(NVIDIA_HEADER):
        theirs = header_functions(NVIDIA_HEADER)
        missing = sorted(n for n in theirs if n not in ours or "p" + n not in ours)
        if missing:
            fail("functions of %s that ferry does not export (with pnccl twin): %s" % (NVIDIA_HEADER, missing))
        if theirs - REQUIRED:
            fail("REQUIRED lacks functions of %s: %s" % (NVIDIA_HEADER, sorted(theirs - REQUIRED)))
        print("NVIDIA's %s declares %d functions; ferry exports %d of them"
              % (NVIDIA_HEADER, len(theirs), len(theirs) - len(missing)))
    else:
        print("note: %s not found; comparison with NVIDIA's header skipped" % NVIDIA_HEADER)

    if os.path.exists(NVIDIA_LIB):
        theirs = {n for n in exports(NVIDIA_LIB) if n.startswith("nccl")}
        unknown = sorted(theirs - REQUIRED - set(ABSENT))
        if unknown:
            fail("NVIDIA's library exports functions this check does not classify: " + ", ".join(unknown))
        missing = sorted(REQUIRED - theirs)
        if missing:
            fail("REQUIRED lists functions NVIDIA's library lacks: " + ", ".join(missing))
        print("NVIDIA's %s: %d functions; %d required (all present), %d deliberately absent"
              % (NVIDIA_LIB, len(theirs), len(theirs & REQUIRED), len(theirs & set(ABSENT))))
        for n in sorted(theirs & set(ABSENT)):
            print("  absent %-32s %s" % (n, ABSENT[n]))
    else:
        print("note: %s not found; comparison with NVIDIA's exports skipped" % NVIDIA_LIB)

    # Loading with every symbol bound at once: usage error (exit 2) means the loader was satisfied.
    env = dict(os.environ, LD_BIND_NOW="1")
    run = subprocess.run([program], env=env, capture_output=True, text=True, timeout=30)
    if run.returncode != 2 or "usage" not in run.stderr:
        fail("%s under LD_BIND_NOW=1 exited %d: %s" % (program, run.returncode, run.stderr.strip()[:500]))
    else:
        print("%s loads with LD_BIND_NOW=1" % os.path.basename(program))
    needed = subprocess.run(["readelf", "-d", program], check=True, capture_output=True, text=True).stdout
    ferry_libs = re.findall(r"Shared library: \[(lib(?:ferry|nccl)[^\]]*)\]", needed)
    if ferry_libs != ["libnccl.so.2"]:
        fail("%s should link libnccl.so.2 only, links %s" % (program, ferry_libs))

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
