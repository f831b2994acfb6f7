#!/usr/bin/env bash
# tools/relayout.sh: the folder moves and renames of issue 35 (folders that show the layers), as one
# script that can be run again on any tree: a tree where some files still use the old paths or names
# (a branch merged after the moves) gets only those fixed, a tree already moved is left as it is.
#
#   tools/relayout.sh            every step, in order
#   tools/relayout.sh base nic   only the steps named (base, nccl, nic, gpu)
#
# It edits tracked files only (git ls-files), never docs/RELIABILITY.md (kept as written) nor
# collectives/cuda/kernel_figures.json (launch_fit.py update rewrites it: run that after the gpu step
# when kernels changed). Meson files are edited by hand in the commits that made each move; this script
# repeats only their path text. Run from anywhere inside the checkout; it prints each file it moves.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

# The tracked files the rewrites may touch (the pathspecs narrow them further; grep -I skips binary ones).
tracked() {
  git ls-files -z -- "$@" ':!tools/relayout.sh' ':!docs/RELIABILITY.md' ':!collectives/cuda/kernel_figures.json'
}

# subst ERE REPLACEMENT [PATHSPEC...]: sed -E 's/ERE/REPLACEMENT/g' on every tracked file that holds a match
# (files without one are not rewritten, so their timestamps stay).
subst() {
  local from=$1 to=$2 d=$'\001'  # a delimiter no pattern holds
  shift 2
  (( $# > 0 )) || set -- .
  { tracked "$@" | xargs -0 -r grep -lIZE -- "$from" || true; } | xargs -0 -r sed -i -E "s${d}${from}${d}${to}${d}g"
}

# drop ERE [PATHSPEC...]: delete the lines that match, in every tracked file that holds one.
drop() {
  local re=$1
  shift
  (( $# > 0 )) || set -- .
  { tracked "$@" | xargs -0 -r grep -lIZE -- "$re" || true; } | xargs -0 -r sed -i -E "/${re}/d"
}

# move OLD NEW: git mv every tracked file under OLD (a file or a folder) to the same place under NEW.
# Nothing to do when OLD is gone; a file present on both sides stops the script (a person decides).
move() {
  local old=$1 new=$2 f dest
  while IFS= read -r -d '' f; do
    dest=$new${f#"$old"}
    if [[ -e $dest ]]; then
      echo "relayout: both $f and $dest exist; merge them by hand" >&2
      exit 1
    fi
    mkdir -p "$(dirname "$dest")"
    git mv -- "$f" "$dest"
    echo "moved $f -> $dest"
  done < <(git ls-files -z -- "$old")
  [[ -d $old ]] && find "$old" -depth -type d -empty -delete
  return 0
}

# 1. runtime/base is the ground layer: base/ at the top level.
step_base() {
  move runtime/base base
  subst 'runtime/base/' 'base/'
  subst '\bruntime/base\b' 'base'
}

# 2. The NCCL C API is a client of the public API: nccl/ at the top level. What it needs from the
# runtime comes through one header, runtime/nccl_support.hpp (the only non-public header nccl/ includes).
step_nccl() {
  move runtime/nccl nccl
  subst 'runtime\\/nccl\\/' 'nccl\\/' 'bench/gpu_bundle.sh'  # an awk pattern's escaped slashes
  subst 'runtime/nccl/' 'nccl/'
  subst '\bruntime/nccl\b' 'nccl'
  # Runtime and base headers in nccl/ sources: one include of the support header instead. A header
  # that the support header does not hold yet is named here: add it there (or make it public).
  local inc
  while IFS= read -r inc; do
    grep -qsF "#include \"${inc#*:}\"" runtime/nccl_support.hpp ||
      echo "relayout: ${inc%%:*} includes ${inc#*:}: add it to runtime/nccl_support.hpp" >&2
  done < <({ tracked 'nccl/*.cpp' 'nccl/*.hpp' | xargs -0 -r grep -HoE \
    '^#include "(base|kernels|runtime|transports|collectives)/[a-z0-9_/]+\.hpp"' || true; } |
    sed -E 's/#include "(.*)"$/\1/' | grep -v ':runtime/nccl_support.hpp$' || true)
  subst '^#include "(base|kernels|runtime|transports|collectives)/[a-z0-9_/]+\.hpp"$' \
        '#include "runtime/nccl_support.hpp"' 'nccl/*.cpp' 'nccl/*.hpp'
  local f
  while IFS= read -r -d '' f; do
    awk '!($0 == "#include \"runtime/nccl_support.hpp\"" && seen++)' "$f" > "$f.relayout" && mv "$f.relayout" "$f"
  done < <({ tracked 'nccl/*.cpp' 'nccl/*.hpp' | xargs -0 -r grep -lZ 'runtime/nccl_support.hpp' || true; })
}

# 3. transports/ib holds no transport, only RDMA NIC discovery: transports/nic, namespace transport::nic.
step_nic() {
  move transports/ib transports/nic
  subst 'transports/ib/' 'transports/nic/'
  subst '\btransports/ib\b' 'transports/nic'
  subst '\btransport::ib\b' 'transport::nic'
  subst "'ib/([a-z_]+\\.cpp)'" "'nic/\\1'" 'transports/meson.build'
}

# 4. One GPU namespace, ferry::gpu, for what were ferry::cuda (runtime/cuda), ferry::kernels::cuda
# (kernels/cuda) and ferry::coll::gpu (collectives/cuda). Not python/c10d (c10::cuda is PyTorch's).
# By hand in the same commit: ring_kernels.cuh names ring_math.hpp's functions (ferry::coll), which
# device code found through the enclosing namespace before; collectives/cuda/kernel_figures.json is
# rewritten by `python3 collectives/cuda/launch_fit.py update` (the kernels' names changed).
step_gpu() {
  local src=('*.hpp' '*.cpp' '*.cu' '*.cuh' '*.py' '*.md' ':!python/c10d')
  # Aliases and using-declarations that only bridged the old namespaces.
  drop '^namespace gpu = coll::gpu;$' "${src[@]}"
  drop '^using coll::gpu::(DevWork|WorkKind);$' "${src[@]}"
  subst '\bferry::(kernels::cuda|coll::gpu|cuda)\b' 'ferry::gpu' "${src[@]}"
  subst '(^|[^:[:alnum:]_])(kernels::cuda|coll::gpu)\b' '\1gpu' "${src[@]}"
  subst '(^|[^:[:alnum:]_])cuda::' '\1gpu::' "${src[@]}"
  subst '^namespace cuda \{$' 'namespace gpu {' "${src[@]}"
  subst '^\}  // namespace cuda$' '}  // namespace gpu' "${src[@]}"
}

steps=("$@")
(( ${#steps[@]} > 0 )) || steps=(base nccl nic gpu)
for s in "${steps[@]}"; do
  case $s in
    base | nccl | nic | gpu) "step_$s" ;;
    *) echo "relayout: unknown step '$s' (base, nccl, nic, gpu)" >&2; exit 2 ;;
  esac
done
