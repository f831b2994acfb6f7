#!/usr/bin/env bash
# bench/gpu_check.sh without a GPU: a made-up bundle whose ferry-perf and ferry-gpu-micro print
# known numbers. Checks the summary's arithmetic (limits from B, percentages, PASS/FAIL), the
# --rank-threads retry, the bundle's test list (OK, SKIP) and the files written to --out.
# Usage: test_gpu_check.sh GPU_CHECK_SH
set -euo pipefail
check_sh=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
b="$tmp/bundle"
mkdir -p "$b/bin" "$b/lib" "$b/tests"
printf '# NAME\tTIMEOUT\tPROGRAM\tARGS\npasses\t10\t./pass.sh\t\nskips\t10\t./skip.sh\t\n' > "$b/tests/gpu_tests.tsv"
printf '#!/bin/sh\nexit 0\n' > "$b/tests/pass.sh"
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
[[ $(tail -n 1 "$tmp/stdout") =~ ^#\ [0-9]+\ of\ [0-9]+\ PASS$ ]] || fail "the table is not the last thing printed"
[[ -f $tmp/out/summary.txt && -f $tmp/out/gpu_check.log && -f $tmp/out/results.tar.gz ]] || fail "missing --out files"
(( $(find "$tmp/out" -type f | wc -l) <= 8 )) || fail "more than 8 files in --out"
grep -q '^SKIP  skips' "$tmp/out/gpu_check.log" || fail "the suite did not run the bundle's tests"
listing=$(tar -tzf "$tmp/out/results.tar.gz")  # not piped into grep -q: pipefail would see SIGPIPE
grep -q 'raw/perf-4-float32-groups.txt' <<< "$listing" || fail "the first attempt's output is not kept"
echo "gpu_check.sh summary OK"
