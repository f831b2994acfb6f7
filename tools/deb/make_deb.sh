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
depends=""
mkdir -p "$stage/debian"
printf 'Source: ferry\n\nPackage: ferry\nArchitecture: any\n' >"$stage/debian/control"
mapfile -t elves < <(find "$root" -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c \
  'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
if [ ${#elves[@]} -gt 0 ]; then
  depends=$(cd "$stage" && dpkg-shlibdeps -O -l"$root/usr/$libdir" -l"$root/usr/$libdir/ferry/nccl/lib" \
    "${elves[@]}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p' || true)
fi

cat >"$root/DEBIAN/control" <<CONTROL
Package: ferry
Version: $version
Architecture: $arch
Maintainer: ferry developers <ferry@localhost>
Section: libs
Priority: optional
${depends:+Depends: $depends
}Description: ferry collective communication runtime, with an NCCL-compatible libnccl.so.2
 ferry's C++ API (libferry, headers, ferry.pc), ferryrun, and libnccl.so.2 implementing NCCL
 2.28.9's host API in /usr/$libdir/ferry/nccl (nccl.pc), found by the dynamic linker through
 /etc/ld.so.conf.d/00-ferry-nccl.conf. NVIDIA's NCCL packages are left untouched.
CONTROL
echo /etc/ld.so.conf.d/00-ferry-nccl.conf >"$root/DEBIAN/conffiles"
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
deb="$out/ferry_${version}_${arch}.deb"
fakeroot dpkg-deb --build -Zxz "$root" "$deb" >/dev/null 2>&1 || dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
