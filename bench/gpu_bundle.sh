#!/usr/bin/env bash
# bench/gpu_bundle.sh: pack a CUDA build into a directory that runs on a GPU machine which cannot
# build ferry (no UCX, hwloc, ibverbs or Catch2 packages there). Run it here, after
#   PATH=/usr/local/cuda/bin:$PATH meson setup build -Dcuda=enabled -Dcuda-arch=sm_90 && ninja -C build
# then, there:  bash bench/gpu_check.sh --prebuilt BUNDLE --out DIR
#
#   bash bench/gpu_bundle.sh [--build DIR] [--out BUNDLE]     (defaults: build, build-gpu-bundle,
#                                                              which git ignores like every build*)
#
# Bundle layout:
#   bin/ferry-perf, bin/ferry-gpu-micro, bin/ferryrun    stripped executables
#   lib/                 libferry and every shared library they load that is not part of glibc or
#                        the CUDA driver (ldd): UCX, hwloc, ibverbs, numa, libstdc++, libgcc_s ...
#   lib/ucx/             UCX's transport modules (gpu_check.sh points UCX_MODULE_DIR here)
#   lib/fallback/        libstdc++ and libgcc_s, used only where the machine's are older than needed
#   tests/gpu_tests.tsv  the build's `gpu` suite: NAME <TAB> TIMEOUT <TAB> PROGRAM <TAB> ARGS, run in
#                        tests/; PROGRAM is ./FILE for ferry's executables, else an interpreter name
#   tests/FILE           each listed test executable, and the build or source files its arguments name
#   gpu_check.sh         a copy of bench/gpu_check.sh
#   MANIFEST             commit, build options, the newest glibc / libstdc++ symbol versions needed
# gpu_check.sh --prebuilt sets LD_LIBRARY_PATH=BUNDLE/lib. The binaries link the CUDA runtime
# statically; the driver (libcuda.so.1) must come from the GPU machine.
# Fails when the bundle exceeds 60 MiB.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$src/build"
out="$src/build-gpu-bundle"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
for f in bench/ferry-perf bench/ferry-gpu-micro tools/ferryrun; do
  [[ -x $build/$f ]] || { echo "gpu_bundle.sh: $build/$f is missing: build with -Dcuda=enabled first" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/ucx" "$out/tests"
cp "$build/bench/ferry-perf" "$build/bench/ferry-gpu-micro" "$build/tools/ferryrun" "$out/bin/"
cp "$src/bench/gpu_check.sh" "$out/"

# The gpu suite, from Meson's introspection: one line per test, its executable copied.
meson introspect "$build" --tests | python3 -c '
import json, os, shutil, sys
out, build, src = sys.argv[1:4]
lines = ["# NAME\tTIMEOUT\tFILE\tARGS (written by bench/gpu_bundle.sh)"]
originals = []
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
    lines.append("\t".join([t["name"].replace("\t", " "), str(t.get("timeout") or 60), exe, " ".join(args)]))
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
elfs() { for f in "$out"/bin/* "$out"/tests/* "$out"/lib/ucx/*.so.0; do [[ -f $f && $(file -L "$f") == *ELF* ]] && echo "$f"; done; }
# The first round reads the executables where they were built (their RUNPATH finds libferry there);
# the next ones read the copies, whose own dependencies then resolve from lib/.
originals() { echo "$build/bench/ferry-perf"; echo "$build/bench/ferry-gpu-micro"; echo "$build/tools/ferryrun"; cat "$out/tests/.originals" 2>/dev/null || true; }
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
  echo "options: $(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print(" ".join("%s=%s" % (o["name"], o["value"]) for o in json.load(sys.stdin) if o["name"] in ("cuda","cuda-arch","buildtype")))')"
  echo "needs glibc: $(newest GLIBC_2) (not bundled), libstdc++: $(newest GLIBCXX_3) (lib/fallback has up to $(provided GLIBCXX_3), needs glibc $(objdump -T "$out"/lib/fallback/libstdc++.so* 2>/dev/null | grep -o 'GLIBC_2[0-9.]*' | sort -Vu | tail -n 1))"
  echo "files:"; (cd "$out" && find . -type f | sort | sed 's/^/  /')
} > "$out/MANIFEST"

size=$(du -sm "$out" | cut -f1)
echo "bundle: $out, ${size} MiB"
grep "needs glibc" "$out/MANIFEST"
if ((size > 60)); then echo "gpu_bundle.sh: the bundle is ${size} MiB, over 60 MiB" >&2; exit 1; fi
