#!/usr/bin/env bash
# bench/gpu_bundle.sh: build ferry for the GPUs users have (-Dcuda-arch=all: sm_80, sm_90, sm_100 and
# PTX) and pack it into one self-contained tarball that runs on a GPU machine which cannot build
# ferry (no UCX, hwloc, ibverbs or Catch2 packages there). Run it here; there:
#   tar xzf ferry-gpu-bundle.tar.gz && bash ferry-gpu-bundle/gpu_check.sh --bundle ferry-gpu-bundle --out DIR
#
#   bash bench/gpu_bundle.sh [--build DIR] [--out BUNDLE] [--nccl-tests SRC]
#     --build DIR       an existing CUDA build to pack instead (default: configure and build
#                       build-gpu-all with -Dcuda=enabled -Dcuda-arch=all -Dbuildtype=release
#                       -Dwerror=false)
#     --out BUNDLE      the bundle directory (default build-gpu-bundle; BUNDLE.tar.gz next to it)
#     --nccl-tests SRC  nccl-tests sources (a checkout; never part of this repository) to build
#                       against ferry's nccl.h and libnccl.so.2; without it the bundle has none and
#                       gpu_check.sh reports the nccl-tests steps as skipped
#
# Bundle layout:
#   bin/ferry-perf, bin/ferry-gpu-micro, bin/ferryrun    stripped executables
#   bin/ferry-gpu-probe  the preflight: driver, GPU, the kernel's registers and occupancy
#   lib/                 libferry, ferry's libnccl.so.2 and every shared library they load that is
#                        not part of glibc or the CUDA driver (ldd): UCX, hwloc, ibverbs, numa ...
#   lib/ucx/             UCX's transport modules (gpu_check.sh points UCX_MODULE_DIR here)
#   lib/fallback/        libstdc++ and libgcc_s, used only where the machine's are older than needed
#   nccl-tests/          *_perf built against ferry's nccl.h (with --nccl-tests)
#   tests/gpu_tests.tsv  the build's `gpu` suite: NAME <TAB> TIMEOUT <TAB> ENV <TAB> PROGRAM <TAB>
#                        ARGS, run in tests/; ENV is the test's environment (K=V;K=V, - for none);
#                        PROGRAM is ./FILE for ferry's executables, else an interpreter name
#   tests/FILE           each listed test executable, and the build or source files its arguments name
#   gpu_check.sh         a copy of bench/gpu_check.sh
#   kernel_figures.json  ptxas's figures of the kernels (the preflight prints them beside the GPU's)
#   MANIFEST             commit, build options, the newest glibc / libstdc++ symbol versions needed
# gpu_check.sh --bundle sets LD_LIBRARY_PATH=BUNDLE/lib. The binaries link the CUDA runtime
# statically; the driver (libcuda.so.1) must come from the GPU machine.
# Fails when the tarball exceeds 60 MiB (three architectures of device code make the files ~100 MiB).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=""
out="$src/build-gpu-bundle"
nccl_tests=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) [[ $# -ge 2 ]] || { echo "gpu_bundle.sh: --build needs a directory" >&2; exit 2; }; build=$2; shift 2 ;;
    --out) [[ $# -ge 2 ]] || { echo "gpu_bundle.sh: --out needs a directory" >&2; exit 2; }; out=$2; shift 2 ;;
    --nccl-tests) [[ $# -ge 2 && -f $2/src/common.mk ]] ||
                    { echo "gpu_bundle.sh: --nccl-tests needs an nccl-tests checkout (no src/common.mk in '${2:-}')" >&2; exit 2; }
                  nccl_tests=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
start=$SECONDS
if [[ -z $build ]]; then
  build="$src/build-gpu-all"
  export PATH="/usr/local/cuda/bin:$PATH"
  if [[ ! -f $build/build.ninja ]]; then
    # werror off: GCC 12's -O3 false positives (-Wrestrict in std::string's operator+) must not stop
    # a release build; the development builds keep -Werror.
    meson setup "$build" "$src" -Dcuda=enabled -Dcuda-arch=all -Dbuildtype=release -Dpython=disabled \
      -Dwerror=false > /dev/null
  fi
  # Only what the bundle carries: the tools, libnccl and the gpu suite's executables.
  targets=(bench/ferry-perf bench/ferry-gpu-micro bench/ferry-gpu-probe tools/ferryrun
           "$(ninja -C "$build" -t targets all | awk -F: '$1 ~ /^nccl\/libnccl\.so\.[0-9.]+$/ && !t {t = $1} END {print t}')")
  mapfile -t -O ${#targets[@]} targets < <(meson introspect "$build" --tests | /usr/bin/python3 -c '
import json, os, sys
build = sys.argv[1]
for t in json.load(sys.stdin):
    if any(s == "gpu" or s.endswith(":gpu") for s in t.get("suite", [])) and t["cmd"][0].startswith(build):
        print(os.path.relpath(t["cmd"][0], build))' "$build" | sort -u)
  ninja -C "$build" "${targets[@]}" > "$build/bundle-build.log" || { tail -n 30 "$build/bundle-build.log" >&2; exit 1; }
  echo "gpu_bundle.sh: built ${#targets[@]} targets in $build ($((SECONDS - start)) s)"
fi
build=$(cd "$build" && pwd)
for f in bench/ferry-perf bench/ferry-gpu-micro bench/ferry-gpu-probe tools/ferryrun; do
  [[ -x $build/$f ]] || { echo "gpu_bundle.sh: $build/$f is missing: build with -Dcuda=enabled first" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/ucx" "$out/tests"
cp "$build/bench/ferry-perf" "$build/bench/ferry-gpu-micro" "$build/bench/ferry-gpu-probe" "$build/tools/ferryrun" "$out/bin/"
cp "$src/bench/gpu_check.sh" "$src/collectives/cuda/kernel_figures.json" "$out/"
cp -P "$build"/nccl/libnccl.so* "$out/lib/" 2> /dev/null || true

# nccl-tests, built in a scratch copy against ferry's header and library (docs/NCCL.md).
if [[ -n $nccl_tests ]]; then
  nt=$(mktemp -d)
  trap 'rm -rf "$nt"' EXIT
  mkdir -p "$nt/nccl/include" "$nt/nccl/lib"
  cp "$src/include/ferry/nccl.h" "$nt/nccl/include/nccl.h"
  for f in "$build"/nccl/libnccl.so* "$build"/runtime/libferry.so*; do [[ -d $f ]] || cp -P "$f" "$nt/nccl/lib/"; done
  cp -r "$nccl_tests" "$nt/src"
  # H100/H200 machine code and its PTX (which the driver compiles for any newer GPU): one ptxas run
  # per file keeps the bundle under 10 minutes; nccl-tests' kernels are small.
  gencode="-gencode=arch=compute_90,code=[sm_90,compute_90]"
  if make -C "$nt/src" CUDA_HOME=/usr/local/cuda NCCL_HOME="$nt/nccl" NVCC_GENCODE="$gencode" \
       NVLDFLAGS="-L$nt/nccl/lib -L/usr/local/cuda/lib64 -lcudart -lrt -L../build/os -lnccl_test_os -lnccl" \
       -j"$(nproc)" > "$nt/make.log" 2>&1; then
    mkdir -p "$out/nccl-tests"
    cp "$nt"/src/build/*_perf "$out/nccl-tests/"
    echo "gpu_bundle.sh: nccl-tests built: $(ls "$out/nccl-tests" | tr '\n' ' ')"
  else
    tail -n 20 "$nt/make.log" >&2
    echo "gpu_bundle.sh: nccl-tests did not build (log above)" >&2
    exit 1
  fi
fi

# The gpu suite, from Meson's introspection: one line per test, its executable copied.
meson introspect "$build" --tests | python3 -c '
import json, os, shutil, sys
out, build, src = sys.argv[1:4]
lines = ["# NAME\tTIMEOUT\tENV\tFILE\tARGS (written by bench/gpu_bundle.sh)"]
originals, names = [], set()
for t in json.load(sys.stdin):
    if not any(s == "gpu" or s.endswith(":gpu") for s in t.get("suite", [])):
        continue
    exe, args = t["cmd"][0], []
    for a in t["cmd"][1:]:
        if os.path.isfile(a) and (a.startswith(build) or a.startswith(src)):
            shutil.copy(a, os.path.join(out, os.path.basename(a)))
            a = os.path.basename(a)
        args.append(a)
    if exe.startswith(build) or exe.startswith(src):  # built by ferry: copied
        shutil.copy(exe, os.path.join(out, os.path.basename(exe)))
        originals.append(exe)
        exe = "./" + os.path.basename(exe)
    else:  # an interpreter (bash, python3): found on the PATH of the GPU machine
        exe = os.path.basename(exe)
    name = t["name"].replace("\t", " ")
    if name in names:
        sys.exit(f"gpu_bundle.sh: two tests of the gpu suite are named {name!r}: give them distinct names")
    names.add(name)
    # Paths into the build tree (LD_LIBRARY_PATH) and loopback-only settings stay here.
    env = ";".join(f"{k}={v}" for k, v in sorted((t.get("env") or {}).items())
                   if k not in ("UCX_NET_DEVICES", "LD_LIBRARY_PATH")) or "-"
    lines.append("\t".join([name, str(t.get("timeout") or 60), env, exe, " ".join(args)]))
open(os.path.join(out, "gpu_tests.tsv"), "w").write("\n".join(lines) + "\n")
open(os.path.join(out, ".originals"), "w").write("".join(e + "\n" for e in originals))
print(f"gpu suite: {len(lines) - 1} tests")
' "$out/tests" "$build" "$src"

# UCX's modules live beside libucs (its "ucx" directory); the bundle carries them.
ucs=$(ldd "$build/bench/ferry-perf" | awk '/libucs\.so/ {print $3}')
if [[ -n $ucs && -d $(dirname "$ucs")/ucx ]]; then
  for m in "$(dirname "$ucs")"/ucx/*.so.0; do cp -L "$m" "$out/lib/ucx/"; done
fi

# Every shared library the ELF files load, except glibc's own and the CUDA driver.
is_system() {
  case "$(basename "$1")" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libcuda.so*) return 0 ;;
  esac
  return 1
}
elfs() { for f in "$out"/bin/* "$out"/tests/* "$out"/lib/ucx/*.so.0 "$out"/nccl-tests/*; do [[ -f $f && $(file -L "$f") == *ELF* ]] && echo "$f"; done; }
# The first round reads the executables where they were built (their RUNPATH finds libferry there);
# the next ones read the copies, whose own dependencies then resolve from lib/.
originals() { echo "$build/bench/ferry-perf"; echo "$build/bench/ferry-gpu-micro"; echo "$build/bench/ferry-gpu-probe"; echo "$build/tools/ferryrun"; cat "$out/tests/.originals" 2>/dev/null || true; }
for round in 1 2 3; do
  while read -r elf; do
    LD_LIBRARY_PATH="$out/lib" ldd "$elf" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
      while read -r name path; do
        is_system "$name" && continue
        [[ -e $out/lib/$name ]] || cp -L "$path" "$out/lib/$name"
      done
  done < <(if ((round == 1)); then originals; else elfs; ls "$out"/lib/*.so* 2>/dev/null || true; fi)
  missing=$(for e in $(elfs); do LD_LIBRARY_PATH="$out/lib" ldd "$e" | grep "not found" || true; done | sort -u)
  [[ $round == 3 && -n $missing ]] && { echo "gpu_bundle.sh: unresolved libraries:" >&2; echo "$missing" >&2; exit 1; }
done
rm -f "$out/tests/.originals"
# libstdc++ and libgcc_s are used only where the machine's own are too old (gpu_check.sh asks ldd):
# Debian's libstdc++ needs glibc 2.36, newer than ferry's own files need.
mkdir -p "$out/lib/fallback"
for f in "$out"/lib/libstdc++.so* "$out"/lib/libgcc_s.so*; do [[ -e $f ]] && mv "$f" "$out/lib/fallback/"; done
chmod u+w -R "$out"
find "$out/bin" "$out/tests" "$out/lib" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-unneeded {} + 2>/dev/null || true

# What the bundle needs from the GPU machine: the newest symbol versions any file references.
newest() { for e in $(elfs) "$out"/lib/*.so*; do objdump -T "$e" 2>/dev/null; done | grep -o "$1[0-9.]*" | sort -Vu | tail -n 1; }
provided() { objdump -T "$out"/lib/fallback/libstdc++.so* 2>/dev/null | grep -o "$1[0-9.]*" | sort -Vu | tail -n 1; }
{
  echo "ferry GPU bundle, built $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"))"
  echo "commit: $(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet 2>/dev/null || echo ' (modified)')"
  echo "nccl-tests: ${nccl_tests:-none (no --nccl-tests path given)}"
  echo "options: $(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print(" ".join("%s=%s" % (o["name"], o["value"]) for o in json.load(sys.stdin) if o["name"] in ("cuda","cuda-arch","buildtype")))')"
  echo "needs glibc: $(newest GLIBC_2) (not bundled), libstdc++: $(newest GLIBCXX_3) (lib/fallback has up to $(provided GLIBCXX_3), needs glibc $(objdump -T "$out"/lib/fallback/libstdc++.so* 2>/dev/null | grep -o 'GLIBC_2[0-9.]*' | sort -Vu | tail -n 1))"
  echo "files:"; (cd "$out" && find . -type f | sort | sed 's/^/  /')
} > "$out/MANIFEST"

tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
size=$(du -sm "$out" | cut -f1)
packed=$(( ($(stat -c %s "$out.tar.gz") + (1 << 20) - 1) >> 20 ))
echo "bundle: $out, ${size} MiB ($out.tar.gz: ${packed} MiB), $((SECONDS - start)) s"
grep "needs glibc" "$out/MANIFEST"
if ((packed > 60)); then echo "gpu_bundle.sh: the tarball is ${packed} MiB, over 60 MiB" >&2; exit 1; fi
