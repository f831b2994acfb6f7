#!/usr/bin/env bash
# bench/plot.py turns results files into PNG charts: test_perf_plot.sh PLOT_PY PERF_JSON_SAMPLE
# Skipped (exit 77) where Debian's python3-matplotlib is not installed: `./run bench` installs it.
set -u
PLOT=${1:?usage: test_perf_plot.sh PLOT_PY PERF_JSON_SAMPLE}
SAMPLE=${2:?}
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { echo "python3-matplotlib is not installed: skipped"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$SAMPLE" "$TMP/a.json" || fail "sample writer"
sed 's/"ferry 0.0.0"/"Open MPI 4.1.4"/' "$TMP/a.json" >"$TMP/b.json"
# One run: one line per collective. Two runs: one panel per collective, one line per run.
/usr/bin/python3 "$PLOT" -o "$TMP/one" "$TMP/a.json" >"$TMP/out" 2>&1 || fail "plot one run: $(cat "$TMP/out")"
/usr/bin/python3 "$PLOT" -o "$TMP/two" "$TMP/a.json" "$TMP/b.json" >"$TMP/out" 2>&1 || fail "plot two runs: $(cat "$TMP/out")"
/usr/bin/python3 "$PLOT" -o "$TMP/ceil" --ceiling "9.5:memcpy, one core" "$TMP/a.json" "$TMP/b.json" >"$TMP/out" 2>&1 ||
  fail "plot with --ceiling: $(cat "$TMP/out")"
/usr/bin/python3 "$PLOT" -o "$TMP/bad" --ceiling fast "$TMP/a.json" >"$TMP/out" 2>&1 && fail "--ceiling fast must fail"
for f in one-busbw.png one-time.png two-busbw.png two-time.png ceil-busbw.png; do
  [[ $(head -c 8 "$TMP/$f" 2>/dev/null | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "$f is not a PNG"
done
/usr/bin/python3 "$PLOT" -o "$TMP/bad" /nonexistent.json >"$TMP/out" 2>&1 && fail "a missing file must fail"
grep -q "nonexistent.json" "$TMP/out" || fail "the error must name the file: $(cat "$TMP/out")"

[[ $failures == 0 ]] && echo "plot.py: all checks passed"
exit $((failures > 0))
