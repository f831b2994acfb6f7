#!/usr/bin/env bash
# Runs one libFuzzer harness for FERRY_FUZZ_SECONDS (default 20) and prints its final statistics.
#   run_fuzzer.sh FUZZER SEED_DIR WORK_DIR [libFuzzer options...]
# New inputs go to WORK_DIR (in the build directory); the checked-in seeds are only read. A crash
# leaves its input as WORK_DIR/crash-* and fails the test.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3
shift 3
seconds=${FERRY_FUZZ_SECONDS:-20}
mkdir -p "$work"
log="$work.log"
status=0
# -error_exitcode=1: libFuzzer's default, 77, is what meson reads as "skipped".
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -error_exitcode=1 \
  -artifact_prefix="$work/" "$@" "$work" "$seeds" >"$log" 2>&1 || status=$?
# "stat::number_of_executed_units: 123456" and the last "#N DONE cov: ... ft: ..." line.
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
cov=$(grep -E '^#[0-9]+' "$log" | tail -n1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
echo "$(basename "$fuzzer"): ${execs:-?} executions in ${seconds} s, ${cov:-no coverage line}, exit $status"
if [ "$status" -ne 0 ]; then
  tail -n 60 "$log"
  exit 1  # whatever the harness or a sanitizer exited with, never 77 (skipped)
fi
exit 0
