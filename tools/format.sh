#!/bin/bash
# tools/format.sh: clang-format the tree's C, C++ and CUDA sources with the repository's
# .clang-format.
#
#   tools/format.sh              format every source in place
#   tools/format.sh --check      list the sources that would change; exit 1 if any would, else 0
#   tools/format.sh [--check] FILE...   only these files
#
# The sources: the files git tracks with a C/C++/CUDA extension (.c .cc .cpp .h .hpp .cu .cuh), so
# build directories, fetched code (subprojects/) and anything untracked are never touched.
# Outside a git checkout (a release tarball), the same extensions under the top-level folders,
# build* and subprojects excluded.
#
# Formatting differs between clang-format releases; the tree is formatted with release 14
# (Debian 12's). CLANG_FORMAT names the binary; by default clang-format-14, else clang-format,
# with a warning when its major release is not 14.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

cf=${CLANG_FORMAT:-}
if [[ -z $cf ]]; then
  if command -v clang-format-14 >/dev/null; then cf=clang-format-14; else cf=clang-format; fi
fi
if ! command -v "$cf" >/dev/null; then
  echo "format.sh: $cf not found (install clang-format 14, or set CLANG_FORMAT)" >&2
  exit 2
fi
major=$("$cf" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [[ $major != 14 ]]; then
  echo "format.sh: warning: $cf is release ${major:-?}; the tree is formatted with release 14" >&2
fi

files=()
if (($# > 0)); then
  files=("$@")
elif git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do
    [[ -f $f ]] && files+=("$f")
  done < <(git ls-files -z -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' ':!:subprojects/**')
else
  while IFS= read -r -d '' f; do
    files+=("${f#./}")
  done < <(find . -mindepth 2 \( -path './build*' -o -path './subprojects' -o -path './.git' \) -prune -o \
    -type f \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.cu' \
    -o -name '*.cuh' \) -print0)
fi
((${#files[@]} > 0)) || exit 0
jobs=$(nproc 2>/dev/null || echo 2)

if ((check == 0)); then
  printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$jobs" "$cf" -i --style=file
  exit 0
fi

# --check: a file differs when clang-format's output is not the file.
changed=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$jobs" sh -c '"$0" --style=file "$1" | cmp -s - "$1" || printf "%s\n" "$1"' "$cf" | sort)
if [[ -n $changed ]]; then
  printf '%s\n' "$changed"
  echo "format.sh: $(printf '%s\n' "$changed" | wc -l) file(s) would change; run tools/format.sh" >&2
  exit 1
fi
