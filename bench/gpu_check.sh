#!/usr/bin/env bash
# bench/gpu_check.sh: everything the GPU issues measure, on a GPU machine, in one run of at most 8
# minutes, ending with one summary table (PASS/FAIL/SKIP per target) and every log in one tarball.
#
#   bash bench/gpu_check.sh [--bundle DIR] [--out DIR] [--build-dir DIR] [--device N] [--budget SECONDS]
#                           [--max-bytes SIZE]   (default 1G; smaller only for a smoke test)
#
# Steps, in this order, each under `timeout` and within one overall deadline (--budget, default
# 450 s), each reported as ok, FAIL or SKIP with its reason; only a failed preflight stops the run:
#   build      meson setup -Dcuda=enabled -Dcuda-arch=sm_90 and ninja (skipped with --bundle DIR,
#              a bundle from bench/gpu_bundle.sh, whose layout that script describes)
#   preflight  nvidia-smi and ferry-gpu-probe: the driver, the GPU, the collective kernel's
#              registers, stack and resident blocks as the device reports them. No device: every
#              later GPU step is reported SKIP with the probe's reason and the run goes on to the
#              summary. A kernel that cannot launch: the run stops here, with the figures.
#   smoke      ferry-perf all_reduce all_gather, 2 ranks, 8 B to 1 MiB, -c 1, for ring LL, ring
#              simple and direct (60 s in all)
#   suite      the gpu test suite: `meson test --suite gpu`, or each bundle test with its own
#              environment and time limit (at most 60 s each, 200 s in all)
#   nccl       nccl-tests (bundle's nccl-tests/) all_reduce all_gather reduce_scatter alltoall
#              sendrecv -g 1 -c 1, on ferry's libnccl.so.2 and on NVIDIA's (/usr/local/cuda/lib64,
#              LD_LIBRARY_PATH swapped), then all_reduce under ferryrun -n 2 and -n 4 on one GPU
#   copy       ferry-gpu-micro copy: cudaMemcpyAsync D2D bandwidth at 1 GiB (read + write bytes) = B
#   rcopy      ferry-gpu-micro reduce_copy, float32 and bfloat16: 2 inputs -> 1 output, 1 GiB
#   perf       ferry-perf all_reduce reduce_scatter all_gather alltoall, --gpu-ranks 1, 2, 4 on one
#              GPU, bfloat16 and float32, 8 B to 1 GiB (-f 2, --iter_budget 4G, no check), then the
#              same at 2 and 4 ranks up to 32 MiB with the exact check (-c 1)
#   lat        ferry-perf all_reduce 8 B, 2 ranks, plain and --graph (run right after the 4-rank sweeps)
# A ferry-perf step that fails fast (an error, not a timeout) runs once more with --rank-threads.
#
# Memory limits (p ranks on one GPU share its memory; B = the copy bandwidth, read + write, so a
# collective's time is at least the bytes it must read plus write over B; S = nccl-tests' algbw bytes):
#   all_reduce      read p x S, write p x S            busbw <= B (p-1) / p^2
#   reduce_scatter  read p x S, write S                busbw <= B (p-1) / (p (p+1))
#   all_gather      read S, write p x S                busbw <= B (p-1) / (p (p+1))
#   alltoall        read p x S, write p x S            busbw <= B (p-1) / (2 p^2)
#
# Files written to --out DIR (at most 8): gpu_check.log (everything, step by step), summary.txt
# (the table), results.tar.gz (every raw output: JSON, tables, micro results, suite logs).
# Exit status: 0 when no step and no target failed (SKIPs included), 1 otherwise.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
prebuilt=""
out=""
build_dir="$src/build-gpu"
device=0
budget=450
max_bytes=1G

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle|--prebuilt) [[ $# -ge 2 ]] || { echo "gpu_check.sh: $1 needs a directory" >&2; exit 2; }; prebuilt=$2; shift 2 ;;
    --out) [[ $# -ge 2 ]] || { echo "gpu_check.sh: --out needs a directory" >&2; exit 2; }; out=$2; shift 2 ;;
    --build-dir) [[ $# -ge 2 ]] || { echo "gpu_check.sh: --build-dir needs a directory" >&2; exit 2; }; build_dir=$2; shift 2 ;;
    --device) [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: --device needs a number" >&2; exit 2; }; device=$2; shift 2 ;;
    --budget) [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: --budget needs seconds" >&2; exit 2; }; budget=$2; shift 2 ;;
    --max-bytes) [[ $# -ge 2 && $2 =~ ^[0-9]+[KMG]?$ ]] || { echo "gpu_check.sh: --max-bytes needs a size (8, 64K, 1G)" >&2; exit 2; }; max_bytes=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ -n $prebuilt ]]; then
  [[ -d $prebuilt ]] || { echo "gpu_check.sh: --bundle $prebuilt is not a directory" >&2; exit 2; }
  prebuilt=$(cd "$prebuilt" && pwd)
fi

# Raw outputs go to a work directory; --out receives the log, the summary and one tarball.
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-gpu-check.XXXXXX")
raw="$work/raw"
mkdir -p "$raw"
log="$work/gpu_check.log"
status_file="$raw/steps.tsv"  # step <TAB> ok|FAIL <TAB> reason
: > "$status_file"
start=$(date +%s)
deadline=$((start + budget))

say() { echo "[gpu_check $(($(date +%s) - start))s] $*" | tee -a "$log"; }

# Set by the preflight when there is no GPU: why every GPU step is skipped.
nogpu=""

# run_step NAME LIMIT OUTFILE CMD...: runs CMD under timeout (the smaller of LIMIT and the time left),
# output to OUTFILE and the log; records ok or FAIL with a reason (SKIP with $nogpu's reason, not
# running CMD, when there is no GPU). Never fails itself.
run_step() {
  local name=$1 limit=$2 outfile=$3
  shift 3
  if [[ -n $nogpu ]]; then
    printf '%s\tSKIP\t%s\n' "$name" "$nogpu" >> "$status_file"
    say "$name: SKIP ($nogpu)"
    return 0
  fi
  local left=$((deadline - $(date +%s) - 15))
  if ((left < 5)); then
    printf '%s\tFAIL\tno time left in the %ss budget\n' "$name" "$budget" >> "$status_file"
    say "$name: skipped, no time left"
    return 0
  fi
  ((limit > left)) && limit=$left
  say "$name: $* (limit ${limit}s)"
  local rc=0
  timeout --kill-after=10 "$limit" "$@" > "$outfile" 2>&1 || rc=$?
  cat "$outfile" >> "$log"
  if ((rc == 0)); then
    printf '%s\tok\t\n' "$name" >> "$status_file"
  else
    local reason
    if ((rc == 124 || rc == 137)); then reason="timed out after ${limit}s"
    elif grep -q "no CUDA device" "$outfile"; then reason="no CUDA device"
    else  # the tools' own error line, or a failed check's, else the last line of output
      reason=$({ grep -E -e '^(ferry-perf|ferry-gpu-micro): ' -e 'FAILED' -e '^# error' "$outfile" | grep -v 'no version information' ||
                 grep -v -e '^#' -e '^ *$' "$outfile" || true; } | tail -n 1 | cut -c1-120)
      reason="exit $rc: $reason"
    fi
    printf '%s\tFAIL\t%s\n' "$name" "$reason" >> "$status_file"
    say "$name: FAIL ($reason)"
  fi
  return 0
}

# run_perf NAME LIMIT OUTFILE ARGS...: ferry-perf ARGS as a step; when it fails fast (not a timeout,
# not a missing device), once more with --rank-threads (one host thread per rank, no groups), so that
# a problem with groups alone does not hide every number. The summary notes the retry.
run_perf() {
  local name=$1 limit=$2 outfile=$3
  shift 3
  run_step "$name" "$limit" "$outfile" "$perf" "$@"
  local last
  last=$(tail -n 1 "$status_file")
  case "$last" in
    "$name	FAIL	exit "*)
      sed -i '$d' "$status_file"
      mv "$outfile" "${outfile%.txt}-groups.txt"
      run_step "$name" "$limit" "$outfile" "$perf" "$@" --rank-threads
      last=$(tail -n 1 "$status_file")
      sed -i '$d' "$status_file"
      if [[ $last == "$name	ok	"* ]]; then
        printf '%s\tok\tonly with --rank-threads\n' "$name" >> "$status_file"
      else
        printf '%s\tFAIL\t%s (also with --rank-threads)\n' "$name" "${last#"$name	FAIL	"}" >> "$status_file"
      fi
      ;;
  esac
  return 0
}

# --- build --------------------------------------------------------------------------------------
if [[ -n $prebuilt ]]; then
  bin="$prebuilt/bin"
  chmod -f u+x "$prebuilt"/bin/* "$prebuilt"/tests/* 2> /dev/null || true  # in case a copy lost the bits
  export LD_LIBRARY_PATH="$prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [[ -d $prebuilt/lib/ucx ]] && export UCX_MODULE_DIR="$prebuilt/lib/ucx"
  # The bundle's libstdc++ only where the machine's lacks a symbol version the binaries need.
  if [[ $(ldd "$prebuilt/bin/ferry-perf" 2>&1 || true) == *"version "*" not found"* ]]; then
    export LD_LIBRARY_PATH="$prebuilt/lib/fallback:$LD_LIBRARY_PATH"
  fi
  say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  say "ldd ferry-perf: $(ldd "$prebuilt/bin/ferry-perf" 2>&1 | tr -s ' \t\n' ' ')"
  say "prebuilt bundle $prebuilt"
  [[ -f $prebuilt/MANIFEST ]] && cat "$prebuilt/MANIFEST" >> "$log"
else
  bin="$build_dir/bench"
  export PATH="/usr/local/cuda/bin:$PATH"
  if [[ -f $build_dir/build.ninja ]]; then
    setup=(meson configure "$build_dir" -Dcuda=enabled -Dcuda-arch=sm_90)
  else
    setup=(meson setup "$build_dir" "$src" -Dcuda=enabled -Dcuda-arch=sm_90 -Dbuildtype=release)
  fi
  run_step setup 120 "$raw/setup.txt" "${setup[@]}"
  run_step build 300 "$raw/build.txt" ninja -C "$build_dir"
fi
perf="$bin/ferry-perf"
micro="$bin/ferry-gpu-micro"
probe="$bin/ferry-gpu-probe"

# --- preflight ----------------------------------------------------------------------------------
if command -v nvidia-smi > /dev/null; then
  say "nvidia-smi: $(nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,driver_version --format=csv,noheader 2>&1 | head -n 1 || true)"
else
  say "nvidia-smi: not installed"
fi
preflight_rc=0
if [[ -x $probe ]]; then
  timeout 60 "$probe" > "$raw/preflight.txt" 2>&1 || preflight_rc=$?
else
  echo "no CUDA device: $probe is missing (a build without CUDA?)" > "$raw/preflight.txt"
  preflight_rc=3
fi
cat "$raw/preflight.txt" >> "$log"
stop_early=0
case $preflight_rc in
  0) printf 'preflight\tok\t%s\n' "$(grep '^ok ' "$raw/preflight.txt" | cut -c4-120)" >> "$status_file"
     say "preflight: $(grep -E '^probe (device|kernel)' "$raw/preflight.txt" | tr '\n' ' ')" ;;
  3) nogpu=$(grep -m1 '^no CUDA device' "$raw/preflight.txt" | cut -c1-120)
     nogpu=${nogpu:-no CUDA device}
     printf 'preflight\tSKIP\t%s\n' "$nogpu" >> "$status_file"
     say "preflight: $nogpu; every GPU step is skipped" ;;
  *) reason=$(grep -m1 '^FAIL' "$raw/preflight.txt" | cut -c1-160)
     printf 'preflight\tFAIL\t%s\n' "${reason:-exit $preflight_rc: $(tail -n 1 "$raw/preflight.txt" | cut -c1-120)}" >> "$status_file"
     say "preflight: FAIL, stopping: $(cat "$raw/preflight.txt")"
     stop_early=1 ;;
esac

if ((stop_early == 0)); then
# --- smoke: every algorithm and protocol, small sizes, checked -----------------------------------
smoke() {
  local cfg
  for cfg in "ring LL" "ring simple" "direct simple"; do
    set -- $cfg
    echo "== FERRY_GPU_ALGO=$1 FERRY_GPU_PROTO=$2"
    FERRY_GPU_ALGO=$1 FERRY_GPU_PROTO=$2 timeout 20 "$perf" all_reduce all_gather --gpu-ranks 2 --device "$device" \
      -b 8 -e 1M -f 8 -n 2 -w 1 -c 1 || return 1
  done
}
export perf device
export -f smoke
run_step smoke 60 "$raw/smoke.txt" bash -c smoke

# --- gpu suite ----------------------------------------------------------------------------------
suite_gpu() {
  # Bundle: tests/gpu_tests.tsv lists NAME <TAB> TIMEOUT <TAB> PROGRAM <TAB> ARGS; exit 77 is a skip.
  local list="$prebuilt/tests/gpu_tests.tsv" failed=0 ran=0 name limit file args rc
  local PATH="$prebuilt/bin:$PATH"
  if [[ -z $prebuilt ]]; then
    local text
    text=$(meson test -C "$build_dir" --suite gpu --print-errorlogs --num-processes 4 2>&1) || rc=$?
    echo "$text"
    if grep -q "No suitable tests" <<< "$text"; then echo "no tests in the gpu suite"; return 1; fi
    return "${rc:-0}"
  fi
  [[ -f $list ]] || { echo "no tests/gpu_tests.tsv in the bundle"; return 1; }
  grep -qv '^#' "$list" || { echo "no tests in the gpu suite"; return 1; }
  local envs
  while IFS=$'\t' read -r name limit envs file args; do
    [[ -z $name || $name == \#* ]] && continue
    rc=0
    [[ $envs == - ]] && envs=""
    ((limit > 60)) && limit=60  # the whole run has 8 minutes
    # shellcheck disable=SC2086
    (cd "$prebuilt/tests" && env ${envs//;/ } timeout "$limit" "$file" $args) > "$raw/suite-${name// /_}.txt" 2>&1 || rc=$?
    ran=$((ran + 1))
    case $rc in
      0) echo "OK    $name" ;;
      77) echo "SKIP  $name" ;;
      *) echo "FAIL  $name (exit $rc)"; tail -n 20 "$raw/suite-${name// /_}.txt"; failed=$((failed + 1)) ;;
    esac
  done < "$list"
  echo "$ran tests, $failed failed"
  ((ran > 0 && failed == 0))
}
export prebuilt raw build_dir
export -f suite_gpu
run_step suite 200 "$raw/suite.txt" bash -c suite_gpu

# --- nccl-tests: ferry's libnccl.so.2 beside NVIDIA's, same binaries ------------------------------
if [[ -n $prebuilt && -d $prebuilt/nccl-tests ]]; then
  for t in all_reduce all_gather reduce_scatter alltoall sendrecv; do
    run_step "nccl-ferry-$t" 40 "$raw/nccl-ferry-$t.txt" "$prebuilt/nccl-tests/${t}_perf" -b 8 -e 256M -f 4 -g 1 -c 1
    run_step "nccl-nvidia-$t" 40 "$raw/nccl-nvidia-$t.txt" env LD_LIBRARY_PATH=/usr/local/cuda/lib64 \
      "$prebuilt/nccl-tests/${t}_perf" -b 8 -e 256M -f 4 -g 1 -c 1
  done
  for n in 2 4; do
    run_step "nccl-ferryrun-$n" 60 "$raw/nccl-ferryrun-$n.txt" "$bin/ferryrun" -n "$n" \
      env FERRY_GPU_CORESIDENT=1 "$prebuilt/nccl-tests/all_reduce_perf" -b 8 -e 32M -f 4 -g 1 -c 1
  done
else
  printf 'nccl\tSKIP\t%s\n' "no nccl-tests in the bundle (gpu_bundle.sh --nccl-tests SRC builds them)" >> "$status_file"
  say "nccl: SKIP (no nccl-tests in the bundle)"
fi

# --- micro-benchmarks ---------------------------------------------------------------------------
run_step copy 60 "$raw/micro-copy.txt" "$micro" copy -s "$max_bytes" -n 20
for t in float32 bfloat16; do
  run_step "rcopy-$t" 60 "$raw/micro-rcopy-$t.txt" "$micro" reduce_copy -d "$t" -s "$max_bytes" -n 5
done

# --- ferry-perf ---------------------------------------------------------------------------------
# Targets first (4 ranks, the 8 B latencies), so that a hang late in the run costs the least.
colls="all_reduce reduce_scatter all_gather alltoall"
sweep() {  # sweep P TYPE: the unchecked 8 B .. max sweep of the four collectives at P ranks
  # shellcheck disable=SC2086
  run_perf "perf-$1-$2" 90 "$raw/perf-$1-$2.txt" $colls --gpu-ranks "$1" --device "$device" \
    -d "$2" -b 8 -e "$max_bytes" -f 2 -n 20 -w 5 --iter_budget 4G -c 0 -J "$raw/perf-$1-$2.json"
}
sweep 4 bfloat16
sweep 4 float32
run_perf lat-plain 60 "$raw/lat-plain.txt" all_reduce --gpu-ranks 2 --device "$device" \
  -b 8 -e 8 -n 1000 -w 100 -c 1 -J "$raw/lat-plain.json"
run_step lat-graph 60 "$raw/lat-graph.txt" "$perf" all_reduce --gpu-ranks 2 --device "$device" \
  -b 8 -e 8 -n 1000 -w 1 -c 1 --graph -J "$raw/lat-graph.json"
for p in 4 2; do
  for t in bfloat16 float32; do
    # shellcheck disable=SC2086
    run_perf "check-$p-$t" 60 "$raw/check-$p-$t.txt" $colls --gpu-ranks "$p" --device "$device" \
      -d "$t" -b 8 -e 32M -f 8 -n 2 -w 1 -c 1 -J "$raw/check-$p-$t.json"
  done
done
for p in 2 1; do
  sweep "$p" bfloat16
  sweep "$p" float32
done

fi  # stop_early

# --- summary ------------------------------------------------------------------------------------
summary="$work/summary.txt"
verdict=0
python3 - "$raw" > "$summary" <<'PY' || verdict=$?
import json, os, re, sys
raw = sys.argv[1]
steps = {}
for line in open(os.path.join(raw, "steps.tsv")):
    name, state, reason = (line.rstrip("\n").split("\t") + ["", ""])[:3]
    steps[name] = (state, reason)

def why(*names):
    for n in names:
        state, reason = steps.get(n, ("FAIL", "did not run"))
        if state != "ok":
            return f"{n}: {reason}"
    return ""

def micro(name):
    try:
        for line in open(os.path.join(raw, name)):
            if line.startswith("result "):
                return dict(kv.split("=", 1) for kv in line.split()[2:])
    except OSError:
        pass
    return None

def results(name):
    try:
        return json.load(open(os.path.join(raw, name))).get("results", [])
    except (OSError, ValueError):
        return []

rows, failures, skips = [], 0, 0
def skipped(*names):
    """The reason the first of these steps was skipped, or ''."""
    for n in names:
        state, reason = steps.get(n, ("", ""))
        if state == "SKIP":
            return reason
    return ""

def row(what, value, target, ok, note="", needs=()):
    global failures, skips
    reason = skipped(*needs) if not ok else ""
    if reason:
        skips += 1
        rows.append((what, "-", target, "SKIP", reason))
        return
    verdict = "PASS" if ok else "FAIL"
    failures += 0 if ok else 1
    rows.append((what, value, target, verdict, note))

copy = micro("micro-copy.txt")
B = float(copy["best_gbps"]) if copy else 0.0
row("D2D copy bandwidth (read+write), 1 GiB", f"{B:.0f} GB/s" if copy else "-", "measured", bool(copy),
    "" if copy else why("copy") or "no result line", ("copy",))
for t in ("float32", "bfloat16"):
    r = micro(f"micro-rcopy-{t}.txt")
    base = B or (float(r["copy_gbps"]) if r else 0.0)
    if r and base > 0:
        frac = float(r["best_gbps"]) / base
        row(f"reduce_copy {t} 2->1, 1 GiB", f"{float(r['best_gbps']):.0f} GB/s = {100*frac:.1f}%",
            ">= 90% of copy", frac >= 0.90 and r.get("wrong") == "0",
            f"{r['blocks']}x{r['threads']}" + ("" if r.get("wrong") == "0" else f", {r.get('wrong')} wrong"))
    else:
        row(f"reduce_copy {t} 2->1, 1 GiB", "-", ">= 90% of copy", False, why(f"rcopy-{t}", "copy") or "no result line",
            (f"rcopy-{t}", "copy"))

p = 4
limits = {"all_reduce": (p - 1) / p**2, "reduce_scatter": (p - 1) / (p * (p + 1)),
          "all_gather": (p - 1) / (p * (p + 1)), "alltoall": (p - 1) / (2 * p**2)}
for coll, factor in limits.items():
    for t, tname in (("bfloat16", "bfloat16"), ("float32", "float")):
        limit = factor * B
        best = 0.0
        for res in results(f"perf-{p}-{t}.json"):
            if res["collective"] == coll and res["size"] >= 256 << 20:
                for place in ("out_of_place", "in_place"):
                    best = max(best, res.get(place, {}).get("bus_bw", 0.0) or 0.0)
        label = f"{coll} {p} ranks {t} >=256 MiB busbw"
        if best > 0 and limit > 0:
            row(label, f"{best:.0f} GB/s = {100*best/limit:.1f}%", f">= 50% of {limit:.0f}", best >= 0.5 * limit,
                steps.get(f"perf-{p}-{t}", ("", ""))[1])
        else:
            row(label, "-", f">= 50% of {limit:.0f}" if limit else ">= 50% of limit", False,
                why(f"perf-{p}-{t}", "copy") or "no rows >= 256 MiB", (f"perf-{p}-{t}", "copy"))

for mode, target in (("plain", 10.0), ("graph", 5.0)):
    res = [x for x in results(f"lat-{mode}.json") if x["collective"] == "all_reduce"]
    label = f"all_reduce 8 B 2 ranks{' graph replay' if mode == 'graph' else ''}"
    if res:
        t = res[0]["out_of_place"]["time"]
        tin = res[0]["in_place"]["time"]
        note = steps.get(f"lat-{mode}", ("", ""))[1]
        row(label, f"{t:.2f} us", f"< {target:.0f} us", t < target, f"in-place {tin:.2f} us" + (f"; {note}" if note else ""))
    else:
        row(label, "-", f"< {target:.0f} us", False, why(f"lat-{mode}") or "no result", (f"lat-{mode}",))

# Steps without a target row of their own: preflight, smoke, the suite, nccl-tests, the checked
# sweeps, the 1- and 2-rank sweeps.
for name, (state, reason) in steps.items():
    if name.startswith(("copy", "rcopy", "lat", "perf-4-")):
        continue
    if state == "SKIP":
        row(f"step {name}", "-", "runs", False, reason, (name,))
    elif state != "ok":
        row(f"step {name}", "-", "runs", False, reason)
    elif name in ("preflight", "smoke", "suite") or name.startswith(("check-", "nccl")):
        row(f"step {name}", "ok", "runs", True, reason)

# nccl-tests at one rank: ferry's algbw within 10% of NVIDIA's at >= 64 MiB (busbw is 0 there).
def nccl_algbw(name):
    best = 0.0
    try:
        for line in open(os.path.join(raw, name)):
            f = line.split()
            if len(f) >= 8 and f[0].isdigit() and int(f[0]) >= 64 << 20:
                try:
                    best = max(best, float(f[6]))  # out-of-place algbw (GB/s)
                except ValueError:
                    pass
    except OSError:
        pass
    return best
for t in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"):
    if f"nccl-ferry-{t}" not in steps:
        continue
    mine, theirs = nccl_algbw(f"nccl-ferry-{t}.txt"), nccl_algbw(f"nccl-nvidia-{t}.txt")
    label = f"nccl-tests {t} 1 rank >= 64 MiB algbw"
    if mine > 0 and theirs > 0:
        row(label, f"{mine:.0f} vs NVIDIA {theirs:.0f} GB/s = {100*mine/theirs:.0f}%", ">= 90% of NCCL", mine >= 0.9 * theirs)
    else:
        row(label, "-", ">= 90% of NCCL", False, why(f"nccl-ferry-{t}", f"nccl-nvidia-{t}") or "no rows >= 64 MiB",
            (f"nccl-ferry-{t}", f"nccl-nvidia-{t}"))

w = [max(len(str(r[i])) for r in rows + [("target", "value", "goal", "verdict", "note")]) for i in range(5)]
head = ("target", "value", "goal", "verdict", "note")
print("# ferry GPU check. B = D2D copy bandwidth (read + write); busbw memory limits at p ranks on one GPU:")
print("#   all_reduce B(p-1)/p^2, reduce_scatter and all_gather B(p-1)/(p(p+1)), alltoall B(p-1)/(2p^2)")
print(f"#   at p = 4 with B = {B:.0f} GB/s: " + ", ".join(f"{c} {f * B:.0f}" for c, f in limits.items()) + " GB/s")
print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
print("  ".join("-" * w[i] for i in range(5)))
for r in rows:
    print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip())
print(f"# {len(rows) - failures - skips} of {len(rows)} PASS, {skips} SKIP")
sys.exit(1 if failures else 0)
PY
if [[ ! -s $summary ]]; then
  echo "summary: python3 failed (exit $verdict); step states:" > "$summary"
  cat "$status_file" >> "$summary"
  verdict=1
fi
cat "$summary" >> "$log"

if [[ -n $out ]]; then
  mkdir -p "$out"
  cp "$log" "$summary" "$out/"
  tar -czf "$out/results.tar.gz" -C "$work" raw
fi
echo
cat "$summary"
if [[ -n $out ]]; then rm -rf "$work"; else echo "raw outputs: $work"; fi
exit $((verdict == 0 ? 0 : 1))
