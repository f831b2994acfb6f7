#!/usr/bin/env bash
# bench/gpu_check.sh without a GPU, twice.
# 1. A made-up bundle whose probe passes and whose ferry-perf and ferry-gpu-micro print known
#    numbers: the summary's arithmetic (limits from B, percentages, PASS/FAIL), the --rank-threads
#    retry, the bundle's test list with each test's environment (OK, SKIP), the files in --out.
# 2. The same bundle with the real preflight (ferry-gpu-probe of this build, or a stand-in that says
#    what a build without CUDA says): this machine has no GPU, so the script must run to its end,
#    every GPU step and target reported SKIP with the probe's reason, and exit 0.
# Usage: test_gpu_check.sh GPU_CHECK_SH [FERRY_GPU_PROBE]
set -euo pipefail
check_sh=$1
real_probe=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
b="$tmp/bundle"
mkdir -p "$b/bin" "$b/lib" "$b/tests"
printf '# NAME\tTIMEOUT\tENV\tPROGRAM\tARGS\npasses with env\t10\tA=1;B=two\t./pass.sh\tx\nskips\t10\t-\t./skip.sh\t\n' \
  > "$b/tests/gpu_tests.tsv"
printf '#!/bin/sh\n[ "$A" = 1 ] && [ "$B" = two ] && [ "$1" = x ] || { echo "env or args lost: A=$A B=$B 1=$1"; exit 1; }\n' \
  > "$b/tests/pass.sh"
printf '#!/bin/sh\necho "probe kernel=collectiveKernel registers=128"\necho "ok collectiveKernel launches"\n' > "$b/bin/ferry-gpu-probe"
printf '#!/bin/sh\nexit 77\n' > "$b/tests/skip.sh"
cat > "$b/bin/ferry-gpu-micro" <<'EOF'
#!/bin/sh
case "$1" in
  copy) echo "result copy bytes=1073741824 best_gbps=4000.0 median_gbps=3900.0" ;;
  reduce_copy) echo "result reduce_copy type=$3 bytes=1073741824 best_gbps=3500.0 blocks=528 threads=512 copy_gbps=4000.0 fraction=0.875 wrong=0" ;;
esac
EOF
# all_reduce at 60% of its limit, alltoall at 40%; 4 ranks with groups fail, --rank-threads works.
cat > "$b/bin/ferry-perf" <<'EOF'
#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
p = int(a[a.index("--gpu-ranks") + 1])
if p == 4 and "--rank-threads" not in a:
    sys.exit("ferry-perf: groupEnd: made-up failure")
limit = {"all_reduce": (p - 1) / p**2, "reduce_scatter": (p - 1) / (p * (p + 1)),
         "all_gather": (p - 1) / (p * (p + 1)), "alltoall": (p - 1) / (2 * p * p)}
res = []
for c in [x for x in a if x in limit]:
    for size in (8, 256 << 20):
        bw = 4000 * limit[c] * (0.4 if c == "alltoall" else 0.6)
        t = 3.0 if "--graph" in a else 12.0
        res.append({"collective": c, "size": size, "out_of_place": {"time": t, "bus_bw": bw},
                    "in_place": {"time": t, "bus_bw": bw}})
json.dump({"results": res}, open(a[a.index("-J") + 1], "w"))
EOF
chmod +x "$b"/bin/* "$b"/tests/*.sh
rc=0
bash "$check_sh" --prebuilt "$b" --out "$tmp/out" > "$tmp/stdout" 2>&1 || rc=$?
fail() { echo "FAIL: $*"; cat "$tmp/stdout"; exit 1; }
[[ $rc == 1 ]] || fail "exit status $rc, expected 1"
summary=$(sed -n '/# ferry GPU check/,$p' "$tmp/stdout")
expect() { grep -E -q "$1" <<< "$summary" || fail "no line matching: $1"; }
expect '^D2D copy bandwidth .* 4000 GB/s .* PASS'
expect '^reduce_copy float32 .* 3500 GB/s = 87\.5% .* FAIL'
expect '^all_reduce 4 ranks bfloat16 .* 450 GB/s = 60\.0% +>= 50% of 750 +PASS +only with --rank-threads'
expect '^reduce_scatter 4 ranks float32 .* 360 GB/s = 60\.0% +>= 50% of 600 +PASS'
expect '^alltoall 4 ranks float32 .* 150 GB/s = 40\.0% +>= 50% of 375 +FAIL'
expect '^all_reduce 8 B 2 ranks +12\.00 us .* FAIL'
expect '^all_reduce 8 B 2 ranks graph replay +3\.00 us .* PASS'
expect '^step suite +ok'
expect '^step preflight +ok'
expect '^step nccl +- +runs +SKIP +no nccl-tests in the bundle'
[[ $(tail -n 1 "$tmp/stdout") =~ ^#\ [0-9]+\ of\ [0-9]+\ PASS,\ [0-9]+\ SKIP$ ]] || fail "the table is not the last thing printed"
[[ -f $tmp/out/summary.txt && -f $tmp/out/gpu_check.log && -f $tmp/out/results.tar.gz ]] || fail "missing --out files"
(( $(find "$tmp/out" -type f | wc -l) <= 8 )) || fail "more than 8 files in --out"
grep -q '^SKIP  skips' "$tmp/out/gpu_check.log" || fail "the suite did not run the bundle's tests"
listing=$(tar -tzf "$tmp/out/results.tar.gz")  # not piped into grep -q: pipefail would see SIGPIPE
grep -q 'raw/perf-4-float32-groups.txt' <<< "$listing" || fail "the first attempt's output is not kept"
grep -q '^OK    passes with env' "$tmp/out/gpu_check.log" || fail "a bundle test did not get its environment"

# 2. No GPU: the real preflight says so; everything after it is SKIP with that reason.
if [[ -n $real_probe && -x $real_probe ]]; then
  cp "$real_probe" "$b/bin/ferry-gpu-probe"
else
  printf '#!/bin/sh\necho "no CUDA device: ferry was built without CUDA"\nexit 3\n' > "$b/bin/ferry-gpu-probe"
fi
rm -rf "$tmp/out"
rc=0
bash "$check_sh" --bundle "$b" --out "$tmp/out" > "$tmp/stdout" 2>&1 || rc=$?
[[ $rc == 0 ]] || fail "no GPU: exit status $rc, expected 0 (every GPU step skipped)"
summary=$(sed -n '/# ferry GPU check/,$p' "$tmp/stdout")
expect '^step preflight +- +runs +SKIP +no CUDA device'
expect '^reduce_copy float32 .* SKIP +no CUDA device'
expect '^all_reduce 4 ranks bfloat16 .* SKIP +no CUDA device'
expect '^all_reduce 8 B 2 ranks graph replay .* SKIP +no CUDA device'
expect '^step suite +- +runs +SKIP +no CUDA device'
expect '^step smoke +- +runs +SKIP'
if grep -E '  (PASS|FAIL)( |$)' <<< "$summary"; then fail "no GPU, yet a target passed or failed"; fi
[[ $(tail -n 1 "$tmp/stdout") =~ ^#\ 0\ of\ [0-9]+\ PASS,\ [0-9]+\ SKIP$ ]] || fail "no GPU: the last line is not '# 0 of N PASS, N SKIP'"
[[ -f $tmp/out/results.tar.gz ]] || fail "no GPU: no results.tar.gz"
echo "gpu_check.sh summary OK"
