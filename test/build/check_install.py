#!/usr/bin/python3
"""Install ferry into a temporary prefix and use it as a user would, through pkg-config only.

Usage: check_install.py BUILDDIR SOURCEDIR

1. `meson install -C BUILDDIR --destdir TMP --no-rebuild` (the build must be complete: the test
   suite builds everything before it runs).
2. The usual places under the prefix: bin/ferryrun, include/ferry/*.hpp and nccl.h, libdir's
   libferry.so, ferry's NCCL home <libdir>/ferry/nccl/{lib/libnccl.so.2,include/nccl.h}, and
   ferry.pc and nccl.pc in <libdir>/pkgconfig.
3. examples/allreduce_example.cpp compiles with `pkg-config --cflags --libs ferry` and runs at 2
   ranks under the installed ferryrun.
4. A C program compiles with `pkg-config --cflags --libs nccl`, runs at 1 rank with no
   LD_LIBRARY_PATH, and the libnccl.so.2 it loaded is the installed one (not the build tree's, nor
   another NCCL on the loader's path).
pkg-config reads the installed .pc files with prefix redefined to TMP/<prefix>.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

C_PROGRAM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <nccl.h>

int main(void) {
  int version = 0;
  ncclUniqueId id;
  ncclComm_t comm;
  float x[4] = {1, 2, 3, 4};
  if (ncclGetVersion(&version) != ncclSuccess || ncclGetUniqueId(&id) != ncclSuccess) return 1;
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 2;
  if (ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess || x[3] != 4) return 3;
  if (ncclCommDestroy(comm) != ncclSuccess) return 4;
  Dl_info info;
  if (!dladdr((void*)ncclGetVersion, &info)) return 5;
  printf("version %d from %s\n", version, info.dli_fname);
  return 0;
}
"""

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def run(cmd, env=None, cwd=None):
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(cmd)[:300], r.returncode, (r.stderr or r.stdout).strip()[-800:]))
    return r


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for tool in ("pkg-config", "cc", "c++"):
        if shutil.which(tool) is None:
            print("%s not found: skipped" % tool)
            return 77
    options = json.loads(subprocess.run(["meson", "introspect", build, "--buildoptions"], check=True,
                                        capture_output=True, text=True).stdout)
    opt = {o["name"]: o["value"] for o in options}
    tmp = tempfile.mkdtemp(prefix="ferry-install-")
    try:
        r = run(["meson", "install", "-C", build, "--destdir", tmp, "--no-rebuild", "--quiet"])
        if r.returncode != 0:
            return 1
        prefix = tmp + opt["prefix"]
        libdir = os.path.join(prefix, opt["libdir"])
        expected = [os.path.join(prefix, opt["bindir"], "ferryrun"),
                    os.path.join(prefix, opt["includedir"], "ferry", "comm.hpp"),
                    os.path.join(prefix, opt["includedir"], "ferry", "ferry.hpp"),
                    os.path.join(prefix, opt["includedir"], "ferry", "nccl.h"),
                    os.path.join(libdir, "libferry.so"),
                    os.path.join(libdir, "ferry", "nccl", "lib", "libnccl.so.2"),
                    os.path.join(libdir, "ferry", "nccl", "lib", "libnccl.so"),
                    os.path.join(libdir, "ferry", "nccl", "include", "nccl.h"),
                    os.path.join(libdir, "pkgconfig", "ferry.pc"),
                    os.path.join(libdir, "pkgconfig", "nccl.pc")]
        for path in expected:
            if not os.path.exists(path):
                fail("not installed: " + os.path.relpath(path, tmp))
        if failures:
            return 1

        # A user's shell: no build tree on the loader's path, pkg-config reading the installed files.
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        env["PKG_CONFIG_PATH"] = os.path.join(libdir, "pkgconfig")

        def flags(package):
            r = run(["pkg-config", "--define-variable=prefix=" + prefix, "--cflags", "--libs", package], env=env)
            return r.stdout.split()

        work = os.path.join(tmp, "work")
        os.makedirs(work)
        example = os.path.join(work, "allreduce_example")
        r = run(["c++", os.path.join(source, "examples", "allreduce_example.cpp"), "-o", example] + flags("ferry"),
                env=env)
        if r.returncode == 0:
            # libferry has no rpath in ferry.pc (a /usr or /usr/local prefix is on the loader's path).
            run_env = dict(env, LD_LIBRARY_PATH=libdir)
            r = run([os.path.join(prefix, opt["bindir"], "ferryrun"), "-n", "2", example], env=run_env)
            print(r.stdout.strip())
            if r.returncode == 0 and r.stdout.count("verified") != 2:
                fail("allreduce_example did not verify on both ranks: " + r.stdout.strip()[-400:])

        c_source = os.path.join(work, "nccl_client.c")
        with open(c_source, "w", encoding="utf-8") as f:
            f.write(C_PROGRAM)
        c_program = os.path.join(work, "nccl_client")
        r = run(["cc", "-std=c11", c_source, "-o", c_program] + flags("nccl"), env=env)
        if r.returncode == 0:
            r = run([c_program], env=env)
            print(r.stdout.strip())
            loaded = r.stdout.split(" from ")[-1].strip()
            installed = os.path.join(libdir, "ferry", "nccl", "lib")
            if r.returncode == 0 and os.path.realpath(os.path.dirname(loaded)) != os.path.realpath(installed):
                fail("the C program loaded %s, not the installed %s" % (loaded, installed))
        print("%d failure(s)" % len(failures))
        return 1 if failures else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
