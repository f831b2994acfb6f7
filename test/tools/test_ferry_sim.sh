#!/bin/bash
# ferry-sim smoke test: a small sweep on the uniform topology prints a table per algorithm and for
# the tuner's choice (each block its own sizes in order), the ring's 1 MiB row matches
# 2(p-1)(alpha + n/(p beta)), and -J writes ferry-perf JSON files. Usage: test_ferry_sim.sh FERRY_SIM UNIFORM.ini
set -euo pipefail
sim=$1
topo=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$sim" --topology "$topo" --ranks 8 all_reduce -b 16 -e 1M -f 4 -J "$dir/out.json" >"$dir/table.txt"
cat "$dir/table.txt"
grep -q "^# algorithm: ring" "$dir/table.txt"
grep -q "^# algorithm: doubling" "$dir/table.txt"
grep -q "^# algorithm: choice" "$dir/table.txt"
# 1 MiB on 8 ranks, alpha 10 us, 10 GB/s: 14 x (10 us + 131072 B / 10 GB/s) = 323.50 us.
awk '$1 == 1048576 && $5 == "ring" { found = 1; if ($6 < 323.4 || $6 > 323.6) { print "ring 1 MiB: " $6 " us, expected 323.50"; exit 1 } }
     END { if (!found) { print "no ring row of 1 MiB"; exit 1 } }' "$dir/table.txt"
python3 -c "
import json, sys
for p in sys.argv[1:]:
    d = json.load(open(p))
    assert d['schema'].startswith('ferry-perf/') and d['results'], p
" "$dir/out-ring.json" "$dir/out-doubling.json" "$dir/out-choice.json"
# Each block lists its sizes in order, under its own algorithm (but the choice's).
awk '/^# algorithm:/ { algo = $3; last = 0; next }
     /^ / { if ($1 <= last || (algo != "choice" && $5 != algo)) { print "out of place: " $0; exit 1 }
            last = $1 }' \
  "$dir/table.txt"
# Sizes simulated at once print what one at a time prints.
"$sim" --topology "$topo" --ranks 8 all_reduce -b 16 -e 1M -f 4 -j 1 >"$dir/one.txt"
"$sim" --topology "$topo" --ranks 8 all_reduce -b 16 -e 1M -f 4 -j 3 >"$dir/three.txt"
diff <(grep -v "wall time" "$dir/one.txt") <(grep -v "wall time" "$dir/three.txt")
# Bad input names the argument.
if "$sim" --topology "$topo" --ranks 0 all_reduce 2>"$dir/err.txt"; then echo "--ranks 0 accepted"; exit 1; fi
grep -q -- "--ranks 0" "$dir/err.txt"
if "$sim" --topology "$topo" --ranks 8 -j 0 all_reduce 2>"$dir/err.txt"; then echo "-j 0 accepted"; exit 1; fi
grep -q -- "-j 0" "$dir/err.txt"
echo "ferry-sim smoke: ok"
