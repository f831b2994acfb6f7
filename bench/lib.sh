# bench/lib.sh: shell helpers bench/compare and bench/compare-cluster share. Sourced from the
# repository root, after the caller set BENCH_NAME (its name in messages) and BUILD (the build
# directory).

# install_missing PACKAGE...: apt-get install those not installed yet.
install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "$BENCH_NAME: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# stale OUTPUT SOURCE...: true when OUTPUT is missing or older than a source.
stale() {
  local out=$1 src
  shift
  [ -e "$out" ] || return 0
  for src in "$@"; do [ "$src" -nt "$out" ] && return 0; done
  return 1
}

# build_mpi_perf WRAPPER OUTPUT: mpi-perf compiled with that MPI's compiler wrapper.
build_mpi_perf() {
  local version sources=(bench/mpi_perf.cpp bench/perf/*.cpp bench/perf/*.hpp)
  version=$(sed -n "s/^  version : '\(.*\)',$/\1/p" meson.build)
  if stale "$2" "${sources[@]}"; then
    echo "$BENCH_NAME: building $2 with $1" >&2
    "$1" -std=c++20 -O2 -pthread -DFERRY_PERF_VERSION="\"${version:-0.0.0}\"" -I. -Iinclude \
      bench/mpi_perf.cpp bench/perf/*.cpp -o "$2" || { echo "$BENCH_NAME: building $2 with $1 failed" >&2; exit 1; }
  fi
}

# openmpi_perf: sets OMPI_PERF to an mpi-perf built against Open MPI: meson's bench/mpi-perf when
# it found Open MPI at configure time (it may have found MPICH: both are installed here), else one
# built with Open MPI's compiler wrapper.
openmpi_perf() {
  OMPI_PERF=$BUILD/bench/mpi-perf
  # (grep reads all its input: with -q it could stop early and fail the pipeline through SIGPIPE)
  if ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^bench/mpi-perf:' >/dev/null &&
    ninja -C "$BUILD" bench/mpi-perf >/dev/null && ldd "$OMPI_PERF" | grep 'libmpi\.so\.40' >/dev/null; then
    return 0
  fi
  OMPI_PERF=$BUILD/bench/mpi-perf-openmpi
  build_mpi_perf mpicxx.openmpi "$OMPI_PERF"
}

# best_of OUT REP...: merge repetitions (bench/best_of.py); sets status=1 when that fails.
best_of() {
  local out=$1
  shift
  [ $# -gt 0 ] || return 0
  /usr/bin/python3 bench/best_of.py "$out" "$@" || { echo "$BENCH_NAME: merging into $out failed" >&2; status=1; }
}
