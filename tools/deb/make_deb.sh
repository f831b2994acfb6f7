#!/usr/bin/env bash
# tools/deb/make_deb.sh BUILDDIR OUTDIR: a Debian package of ferry from BUILDDIR's install tree
# (meson install --destdir; BUILDDIR must be configured with --prefix=/usr and fully built).
#
# Package "ferry": libferry and the C++ headers, ferryrun and the tools, ferry.pc and nccl.pc, and
# ferry's libnccl.so.2 in its own NCCL home, /usr/lib/<triplet>/ferry/nccl/lib. NVIDIA's files are
# never touched: the dynamic linker finds ferry's libnccl.so.2 through
# /etc/ld.so.conf.d/00-ferry-nccl.conf, read before the multiarch directories where NVIDIA's
# libnccl2 package puts its own (removing ferry's package restores NVIDIA's). ldconfig runs through
# dpkg's ldconfig trigger.
set -euo pipefail
build=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
prefix=$(meson introspect "$build" --buildoptions | /usr/bin/python3 -c \
  'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')
if [ "$prefix" != /usr ]; then
  echo "make_deb: $build has prefix $prefix; configure it with --prefix=/usr" >&2
  exit 1
fi
libdir=$(meson introspect "$build" --buildoptions | /usr/bin/python3 -c \
  'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["libdir"])')
version=$(meson introspect "$build" --projectinfo | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

meson install -C "$build" --destdir "$stage/root" --no-rebuild --quiet
root=$stage/root
mkdir -p "$root/etc/ld.so.conf.d" "$root/DEBIAN"
echo "/usr/$libdir/ferry/nccl/lib" >"$root/etc/ld.so.conf.d/00-ferry-nccl.conf"

# Dependencies from the ELF files' NEEDED entries (dpkg-shlibdeps wants a debian/control beside it).
# libferry comes with this package: debian/shlibs.local says so, and the self-dependency is dropped.
# A failure stops the build: a package without its Depends line installs where it cannot run.
mkdir -p "$stage/debian"
printf 'Source: ferry\n\nPackage: ferry\nArchitecture: any\n' >"$stage/debian/control"
soversion=$(find "$root/usr/$libdir" -maxdepth 1 -name 'libferry.so.*' -printf '%f\n' | sed -n 's/^libferry\.so\.\([0-9]*\)$/\1/p')
echo "libferry ${soversion:-0} ferry (= $version)" >"$stage/debian/shlibs.local"
echo "libferry ${soversion:-0} ferry (>= $version)" >"$root/DEBIAN/shlibs"
mapfile -t elves < <(find "$root" -path "$root/DEBIAN" -prune -o -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c \
  'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \; | sort)
# The torch.distributed backend's module needs libtorch, which the rest does not: its libraries are
# Recommends, so that the library and the NCCL drop-in install without PyTorch.
mapfile -t core < <(printf '%s\n' "${elves[@]}" | grep -v '/_c10d[^/]*\.so$')
mapfile -t torch < <(printf '%s\n' "${elves[@]}" | grep '/_c10d[^/]*\.so$')
depends="" recommends="" outside=""
if [ ${#elves[@]} -gt 0 ]; then
  # Libraries no Debian package provides (CUDA's runtime under /usr/local/cuda, which ferry-perf links
  # for device buffers) cannot be Depends: the description names them instead.
  outside=$(for e in "${elves[@]}"; do LD_LIBRARY_PATH="$root/usr/$libdir" ldd "$e" 2>/dev/null; done |
    sed -n 's|.* => \(/usr/local/[^ ]*\) .*|\1|p' | sort -u | paste -sd' ')
  if ! shlibs=$(cd "$stage" && dpkg-shlibdeps -O ${outside:+--ignore-missing-info} -l"$root/usr/$libdir" -l"$root/usr/$libdir/ferry/nccl/lib" \
    "${core[@]}" ${torch[0]:+-dRecommends "${torch[@]}"} 2>"$stage/shlibdeps.err"); then
    echo "make_deb: dpkg-shlibdeps failed:" >&2
    grep -v 'warning: \$ORIGIN' "$stage/shlibdeps.err" >&2
    exit 1
  fi
  depends=$(sed -n 's/^shlibs:Depends=//p' <<<"$shlibs" | tr ',' '\n' | sed 's/^ *//' | grep -v '^ferry\b' | paste -sd, |
    sed 's/,/, /g')
  recommends=$(sed -n 's/^shlibs:Recommends=//p' <<<"$shlibs")
  if [ -z "$depends" ]; then
    echo "make_deb: dpkg-shlibdeps found no dependencies (expected libc6 at least)" >&2
    exit 1
  fi
fi

outside_note=""
[ -n "${outside:-}" ] && outside_note=$'\n'" Needs from outside Debian's packages (NVIDIA's CUDA toolkit): $outside."
cat >"$root/DEBIAN/control" <<CONTROL
Package: ferry
Version: $version
Architecture: $arch
Maintainer: ferry developers <ferry@localhost>
Section: libs
Priority: optional
${depends:+Depends: $depends
}${recommends:+Recommends: $recommends
}Description: ferry collective communication runtime, with an NCCL-compatible libnccl.so.2
 ferry's C++ API (libferry, headers, ferry.pc), ferryrun, and libnccl.so.2 implementing NCCL
 2.28.9's host API in /usr/$libdir/ferry/nccl (nccl.pc), found by the dynamic linker through
 /etc/ld.so.conf.d/00-ferry-nccl.conf. NVIDIA's NCCL packages are left untouched.$outside_note
CONTROL
echo /etc/ld.so.conf.d/00-ferry-nccl.conf >"$root/DEBIAN/conffiles"
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
deb="$out/ferry_${version}_${arch}.deb"
fakeroot dpkg-deb --build -Zxz "$root" "$deb" >/dev/null 2>&1 || dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
