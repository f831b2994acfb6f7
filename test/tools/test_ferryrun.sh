#!/usr/bin/env bash
# Tests of the ferryrun launcher, run against the built binary:
#   test_ferryrun.sh PATH/TO/ferryrun [PATH/TO/ferry-perf]
# With ferry-perf, two ferryruns also join one real job (--world-size, --first-rank).
#
# ferryrun's contract is what a user sees: the variables each rank gets, the prefixed lines on stdout
# and stderr, the exit status and the one-line reports. So the tests run real jobs of small shell
# ranks and compare exactly that. Time limits in the checks are generous multiples of what the
# launcher needs (the SIGTERM grace period is 2 s) so that a loaded machine does not fail them, yet
# tight enough to catch a launcher that waits for a rank's `sleep 60`.
set -u

FERRYRUN=${1:?usage: test_ferryrun.sh PATH/TO/ferryrun [PATH/TO/ferry-perf]}
FERRY_PERF=${2:-}
# shellcheck source=test/common/shell_checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/shell_checks.sh"

# run ARGS...: runs ferryrun, leaving stdout in $TMP/out, stderr in $TMP/err, the status in $rc and
# the wall time in milliseconds in $ms.
run() {
  local start=${EPOCHREALTIME/./}
  "$FERRYRUN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  rc=$?
  ms=$(((${EPOCHREALTIME/./} - start) / 1000))
}

expect_rc() {  # expect_rc WANT WHAT
  [[ $rc == "$1" ]] || fail "$2: exit status $rc, expected $1; stderr: $(head -c 2000 "$TMP/err")"
}

expect_fast() {  # expect_fast MAX_MS WHAT
  ((ms <= $1)) || fail "$2: took $ms ms, expected at most $1 ms"
}

expect_line() {  # expect_line FILE REGEX WHAT
  grep -Eq -- "$2" "$TMP/$1" || fail "$3: no line matching '$2' in $1: $(head -c 2000 "$TMP/$1")"
}

wait_for_lines() {  # wait_for_lines FILE TEXT COUNT: until FILE has COUNT lines with TEXT (5 s at most)
  for _ in $(seq 100); do
    (($(grep -c -- "$2" "$TMP/$1") >= $3)) && return
    sleep 0.05
  done
}

# --- every rank sees its place in the job -------------------------------------------------------
run -n 3 sh -c 'echo $FERRY_RANK $FERRY_WORLD_SIZE $FERRY_LOCAL_RANK $FERRY_LOCAL_SIZE'
expect_rc 0 "env"
[[ $(sort "$TMP/out") == $'[0] 0 3 0 3\n[1] 1 3 1 3\n[2] 2 3 2 3' ]] ||
  fail "env: unexpected output: $(cat "$TMP/out")"

run -n 4 sh -c 'echo "$FERRY_ADDR $FERRY_SECRET"'
expect_rc 0 "addr and secret"
[[ $(sed 's/^\[[0-9]\] //' "$TMP/out" | sort -u | wc -l) == 1 ]] ||
  fail "addr and secret: ranks disagree: $(cat "$TMP/out")"
expect_line out '^\[0\] 127\.0\.0\.1:[1-9][0-9]* [0-9a-f]{32}$' "addr and secret"

FERRY_ADDR=10.1.2.3:4567 FERRY_SECRET=s3cret run -n 2 sh -c 'echo "$FERRY_ADDR $FERRY_SECRET"'
[[ $(sort "$TMP/out") == $'[0] 10.1.2.3:4567 s3cret\n[1] 10.1.2.3:4567 s3cret' ]] ||
  fail "a caller's FERRY_ADDR and FERRY_SECRET are kept: $(cat "$TMP/out")"

FERRY_RANK=7 FERRY_WORLD_SIZE=9 run -n 2 sh -c 'echo $FERRY_RANK/$FERRY_WORLD_SIZE'
[[ $(sort "$TMP/out") == $'[0] 0/2\n[1] 1/2' ]] || fail "inherited FERRY_RANK is replaced: $(cat "$TMP/out")"

# --- several hosts: this ferryrun starts ranks K..K+N-1 of a W-rank job ----------------------------
FERRY_ADDR=127.0.0.1:1 FERRY_SECRET=s3cret run --world-size 5 --first-rank 2 -n 2 \
  sh -c 'echo $FERRY_RANK $FERRY_WORLD_SIZE $FERRY_LOCAL_RANK $FERRY_LOCAL_SIZE $FERRY_ADDR $FERRY_SECRET'
expect_rc 0 "--world-size"
[[ $(sort "$TMP/out") == $'[2] 2 5 0 2 127.0.0.1:1 s3cret\n[3] 3 5 1 2 127.0.0.1:1 s3cret' ]] ||
  fail "--world-size 5 --first-rank 2 -n 2: $(cat "$TMP/out")"

FERRY_ADDR=127.0.0.1:1 FERRY_SECRET=s3cret run --world-size 3 -n 1 sh -c 'echo $FERRY_RANK/$FERRY_WORLD_SIZE'
[[ $(cat "$TMP/out") == "[0] 0/3" ]] || fail "--first-rank defaults to 0: $(cat "$TMP/out")"

# Reports name global ranks.
FERRY_ADDR=127.0.0.1:1 FERRY_SECRET=s3cret run --world-size 4 --first-rank 2 -n 2 --report-seconds 0.2 \
  sh -c 'if [ "$FERRY_RANK" = 3 ]; then exit 3; fi; sleep 60'
expect_rc 3 "--first-rank: exit code"
expect_line err '^ferryrun: rank 3 \(pid [0-9]+\) exited with code 3; stopping the other rank$' "--first-rank: report"

# Two ferryruns on loopback, as two hosts would run them, form one 3-rank job.
if [[ -n $FERRY_PERF ]]; then
  "$FERRYRUN" -n 1 sh -c 'echo $FERRY_ADDR' >"$TMP/addr"  # a free loopback port
  FERRY_ADDR=$(sed 's/^\[0\] //' "$TMP/addr")
  export FERRY_ADDR FERRY_SECRET=two-launchers
  "$FERRYRUN" --world-size 3 --first-rank 2 -n 1 --timeout 60 "$FERRY_PERF" all_reduce -b 4K -e 4K -n 2 -w 1 \
    >"$TMP/out2" 2>&1 </dev/null &
  run --world-size 3 -n 2 --timeout 60 "$FERRY_PERF" all_reduce -b 4K -e 4K -n 2 -w 1
  wait $!
  rc2=$?
  unset FERRY_ADDR FERRY_SECRET
  expect_rc 0 "two launchers, one job: ranks 0-1"
  [[ $rc2 == 0 ]] || fail "two launchers, one job: rank 2 exited $rc2: $(head -c 2000 "$TMP/out2")"
  expect_line out '^\[0\] +4096 +1024 +float +sum ' "two launchers, one job: rank 0 reports the size"
  expect_line out '^\[0\] # Out of bounds values : 0 OK' "two launchers, one job: results checked"
  expect_line out '^\[0\] #  Rank  2 .*' "two launchers, one job: rank 2 joined"

  # FERRY_TIMEOUT: a value that is no deadline fails every rank's init with the value named (these
  # were once taken as "wait forever"); none is the one way to ask for that, and init says so.
  for bad in 0 nan inf 1e300; do
    FERRY_TIMEOUT=$bad run -n 2 --timeout 60 "$FERRY_PERF" all_reduce -b 4K -e 4K -n 1 -w 0
    expect_rc 1 "FERRY_TIMEOUT=$bad"
    for r in 0 1; do
      expect_line err \
        "^\[$r\] .*FERRY_TIMEOUT='$bad' is not valid: expected a number of seconds from 0.001 to 1e\+06, or 'none'" \
        "FERRY_TIMEOUT=$bad, rank $r"
    done
  done
  FERRY_TIMEOUT=none run -n 2 --timeout 60 "$FERRY_PERF" all_reduce -b 4K -e 4K -n 1 -w 0
  expect_rc 0 "FERRY_TIMEOUT=none"
  expect_line err '^\[1\] .*WARN INIT: rank 1: FERRY_TIMEOUT=none: waits have no deadline' \
    "FERRY_TIMEOUT=none: said at init"
fi

# --- output: stdout and stderr apart, prefixed, whole lines -------------------------------------
run -n 2 sh -c 'echo out $FERRY_RANK; echo err $FERRY_RANK >&2'
[[ $(sort "$TMP/out") == $'[0] out 0\n[1] out 1' ]] || fail "stdout: $(cat "$TMP/out")"
[[ $(sort "$TMP/err") == $'[0] err 0\n[1] err 1' ]] || fail "stderr: $(cat "$TMP/err")"

run -n 1 sh -c 'printf part; sleep 0.2; printf "ial\n"; printf "no newline at the end"'
expect_rc 0 "partial lines"
[[ $(cat "$TMP/out") == $'[0] partial\n[0] no newline at the end' ]] ||
  fail "partial lines: $(cat "$TMP/out")"

# A 300000-byte line is longer than a pipe and than one read: it must arrive in one piece.
run -n 2 sh -c 'head -c 300000 /dev/zero | tr "\0" x; echo; echo after'
[[ $(awk '{ print substr($0, 1, 5), length($0) }' "$TMP/out" | sort) == \
   $'[0] a 9\n[0] x 300004\n[1] a 9\n[1] x 300004' ]] ||
  fail "long lines: $(awk '{ print substr($0, 1, 10), length($0) }' "$TMP/out")"

# Four ranks write 2000 lines each, every line in two write()s; no line may mix two ranks.
run -n 4 awk 'BEGIN { r = ENVIRON["FERRY_RANK"]; h = sprintf("%025d", 0); gsub(/0/, r, h)
                      for (i = 0; i < 2000; i++) { printf "%s", h; fflush(); print h; fflush() } }'
expect_rc 0 "interleaving"
[[ $(wc -l <"$TMP/out") == 8000 ]] || fail "interleaving: $(wc -l <"$TMP/out") lines, expected 8000"
bad=$(grep -Evc '^\[([0-3])\] \1{50}$' "$TMP/out")
[[ $bad == 0 ]] || fail "interleaving: $bad mixed lines, e.g. $(grep -Ev '^\[([0-3])\] \1{50}$' "$TMP/out" | head -3)"

echo piped | "$FERRYRUN" -n 2 sh -c 'read -r x; echo "got:$x"' >"$TMP/out" 2>&1
[[ $(sort "$TMP/out") == $'[0] got:piped\n[1] got:' ]] || fail "stdin goes to rank 0 only: $(cat "$TMP/out")"

run -n 2 --no-prefix sh -c 'echo plain $FERRY_RANK'
[[ $(sort "$TMP/out") == $'plain 0\nplain 1' ]] || fail "--no-prefix: $(cat "$TMP/out")"

# --- failures stop the job ----------------------------------------------------------------------
# The others get the report time (3 s by default) to exit by themselves, then SIGTERM. The cases
# whose subject is not that time shorten it with --report-seconds or FERRY_REPORT_SECONDS.
run -n 4 sh -c 'if [ "$FERRY_RANK" = 2 ]; then echo dying >&2; exit 3; fi; sleep 60'
expect_rc 3 "exit code"
((ms >= 2900)) || fail "exit code: the others get 3 s to report, took only $ms ms"
expect_fast 5000 "exit code: the other ranks are stopped"
expect_line err '^ferryrun: rank 2 \(pid [0-9]+\) exited with code 3; stopping the other 3 ranks$' "exit code"
[[ $(head -1 "$TMP/err") == "[2] dying" ]] || fail "a rank's last words come before the report: $(cat "$TMP/err")"

run -n 3 --report-seconds 0.2 sh -c 'if [ "$FERRY_RANK" = 1 ]; then kill -9 $$; fi; sleep 60'
expect_rc 137 "signal"
expect_fast 2000 "signal, --report-seconds 0.2"
expect_line err '^ferryrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\); stopping the other 2 ranks$' "signal"

# 0 stops the others at once (it once meant "never": the job waited for their sleep).
run -n 3 --report-seconds 0 sh -c 'if [ "$FERRY_RANK" = 1 ]; then exit 6; fi; sleep 60'
expect_rc 6 "--report-seconds 0"
expect_fast 4000 "--report-seconds 0: the others are stopped at once"

# Limits too large for a deadline are refused, not taken as no limit.
for bad in 1e300 inf nan -1 0; do
  run -n 1 --timeout "$bad" true
  expect_rc 2 "--timeout $bad"
  expect_line err "invalid value '$bad' for --timeout: expected a number of seconds" "--timeout $bad"
done
run -n 1 --report-seconds 1e300 true
expect_rc 2 "--report-seconds 1e300"

# --keep-going: a death is reported and the others run to their end.
run --keep-going -n 3 sh -c 'if [ "$FERRY_RANK" = 1 ]; then kill -9 $$; fi; sleep 0.5; echo done $FERRY_RANK'
expect_rc 0 "--keep-going: the survivors exited 0"
expect_line err '^ferryrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\); 2 other ranks keep running \(--keep-going\)$' "--keep-going"
[[ $(sort "$TMP/out") == $'[0] done 0\n[2] done 2' ]] || fail "--keep-going: the survivors ran on: $(cat "$TMP/out")"
run --keep-going -n 3 sh -c 'if [ "$FERRY_RANK" = 1 ]; then kill -9 $$; fi; sleep 0.3; exit 4'
expect_rc 4 "--keep-going: a survivor's failure is the job's"
run --keep-going -n 2 sh -c 'kill -9 $$'
expect_rc 137 "--keep-going: nobody survived"

FERRY_REPORT_SECONDS=0.2 run -n 2 sh -c 'trap "" TERM; if [ "$FERRY_RANK" = 1 ]; then sleep 0.5; exit 5; fi; sleep 60'
expect_rc 5 "SIGKILL after the grace period"
((ms >= 2600)) || fail "SIGKILL after the grace period: took only $ms ms, expected 0.5 + 0.2 + 2 s"
expect_fast 8000 "SIGKILL after the grace period"
expect_line err '^ferryrun: rank 0 did not stop within 2 s of SIGTERM; sending SIGKILL$' "grace period"

run -n 2 --timeout 0.5 sh -c 'sleep 60'
expect_rc 124 "timeout"
expect_fast 5000 "timeout"
expect_line err '^ferryrun: timed out after 0.5 s; stopping 2 running ranks$' "timeout"

run -n 3 sh -c 'exit 0'
expect_rc 0 "all ranks succeed"
[[ ! -s $TMP/err ]] || fail "all ranks succeed: unexpected stderr: $(cat "$TMP/err")"

run -n 2 /nonexistent/program
expect_rc 127 "missing program"
expect_line err "^ferryrun: cannot run '/nonexistent/program': No such file or directory$" "missing program"

# --- signals reach every rank once --------------------------------------------------------------
# Each rank leads its own process group (field 5 of /proc/PID/stat), apart from ferryrun's, so a
# terminal's Ctrl-C reaches ferryrun alone and the ranks get it once, from ferryrun.
run -n 2 sh -c 'echo $$ $(cut -d" " -f5 /proc/$$/stat) $(cut -d" " -f5 /proc/$PPID/stat)'
[[ $(wc -l <"$TMP/out") == 2 ]] || fail "process groups: $(cat "$TMP/out")"
while read -r prefix pid pgid parent_pgid; do
  [[ $pgid == "$pid" && $pgid != "$parent_pgid" ]] ||
    fail "process groups: $prefix pid $pid is in group $pgid, ferryrun in $parent_pgid"
done <"$TMP/out"

# With job control the background job gets its own process group, and `kill -INT -PGID` signals it
# the way a terminal's Ctrl-C does.
(
  set -m
  "$FERRYRUN" -n 3 sh -c 'trap "echo got INT" INT; echo ready; sleep 2 & wait; wait; echo done' \
    >"$TMP/out" 2>"$TMP/err" </dev/null &
  pid=$!
  wait_for_lines out ready 3
  kill -INT -- -"$pid"
  wait "$pid"
  echo $? >"$TMP/rc"
)
[[ $(cat "$TMP/rc") == 0 ]] || fail "Ctrl-C: exit status $(cat "$TMP/rc"), expected 0: $(cat "$TMP/err")"
[[ $(grep -c 'got INT' "$TMP/out") == 3 ]] || fail "Ctrl-C: each rank must see SIGINT once: $(cat "$TMP/out")"
[[ $(grep -c 'done' "$TMP/out") == 3 ]] || fail "Ctrl-C: $(cat "$TMP/out")"
expect_line err '^ferryrun: forwarding SIGINT to 3 ranks' "Ctrl-C"

(
  set -m
  "$FERRYRUN" -n 2 sh -c 'sleep 60' >"$TMP/out" 2>"$TMP/err" </dev/null &
  pid=$!
  sleep 0.5
  kill -TERM "$pid"
  wait "$pid"
  echo $? >"$TMP/rc"
)
[[ $(cat "$TMP/rc") == 143 ]] || fail "SIGTERM: exit status $(cat "$TMP/rc"), expected 143: $(cat "$TMP/err")"

# If ferryrun dies, its ranks get SIGTERM (PR_SET_PDEATHSIG).
(
  "$FERRYRUN" -n 2 sh -c 'trap "touch $0.\$FERRY_RANK; kill \$!; wait; exit 0" TERM; echo ready
                          sleep 60 & wait' "$TMP/orphan" >"$TMP/out" 2>/dev/null </dev/null &
  wait_for_lines out ready 2
  kill -KILL $!
  wait $!
) 2>/dev/null  # no "Killed" job report
for _ in $(seq 50); do
  [[ -e $TMP/orphan.0 && -e $TMP/orphan.1 ]] && break
  sleep 0.1
done
[[ -e $TMP/orphan.0 && -e $TMP/orphan.1 ]] || fail "the ranks of a killed ferryrun get SIGTERM"

# --- --bind-to: a CPU of its own per rank where there are enough ----------------------------------
# Ranks report their CPU list with taskset -cp.
cpus=$(nproc)
affinity() {  # the CPU list of each rank, "[r] list", sorted by rank
  sort "$TMP/out" | sed 's/pid [0-9]*.s current affinity list: //'
}
run -n 1 --bind-to none sh -c 'taskset -cp $$'
unbound=$(sed 's/.*: //' "$TMP/out")
run -n "$cpus" --bind-to core sh -c 'taskset -cp $$'
expect_rc 0 "--bind-to core"
bound=$(affinity)
lines=$(sed 's/^\[[0-9]*\] //' <<<"$bound" | sort -u | wc -l)
[[ $lines == "$cpus" ]] || fail "--bind-to core: $cpus ranks should get $cpus different CPUs: $bound"
if grep -qv '^\[[0-9]*\] [0-9]*$' <<<"$bound"; then fail "--bind-to core: a rank has more than one CPU: $bound"; fi
run -n "$cpus" sh -c 'taskset -cp $$'
[[ $(affinity) == "$bound" ]] || fail "auto with $cpus ranks on $cpus CPUs should bind as core: $(affinity)"
run -n $((cpus + 1)) sh -c 'taskset -cp $$'
grep -q "list: $unbound\$" "$TMP/out" || fail "auto with more ranks than CPUs should not bind: $(cat "$TMP/out")"
run -n 2 --bind-to none sh -c 'taskset -cp $$'
grep -q "list: $unbound\$" "$TMP/out" || fail "--bind-to none should not bind: $(cat "$TMP/out")"

# --- usage errors name what was wrong -----------------------------------------------------------
usage_error() {  # usage_error EXPECTED_TEXT ARGS...
  local want=$1
  shift
  run "$@"
  expect_rc 2 "usage: ferryrun $*"
  grep -qF -- "$want" "$TMP/err" || fail "usage: ferryrun $*: stderr does not name '$want': $(cat "$TMP/err")"
}
usage_error "unknown option '--bogus'" --bogus true
usage_error "invalid value '0' for -n" -n 0 true
usage_error "invalid value 'abc' for --np" --np abc true
usage_error "invalid value '5000' for -n" -n5000 true
usage_error "invalid value 'soon' for --timeout" --timeout=soon true
usage_error "invalid value '-1' for --timeout" --timeout -1 true
usage_error "invalid value 'socket' for --bind-to" --bind-to socket true
usage_error "invalid value '-1' for --report-seconds: expected a number of seconds >= 0" --report-seconds -1 true
FERRY_REPORT_SECONDS=later usage_error \
  "invalid value 'later' for FERRY_REPORT_SECONDS: expected a number of seconds >= 0" true
usage_error "-n needs a value" -n
usage_error "invalid value '0' for --world-size" --world-size 0 true
usage_error "invalid value '-1' for --first-rank" --world-size 2 --first-rank -1 true
usage_error "--first-rank needs --world-size" --first-rank 1 true
FERRY_ADDR='' FERRY_SECRET=s usage_error "--world-size needs FERRY_ADDR=host:port" --world-size 2 true
FERRY_ADDR=127.0.0.1:1 FERRY_SECRET='' usage_error "--world-size needs FERRY_SECRET" --world-size 2 true
export FERRY_ADDR=127.0.0.1:1 FERRY_SECRET=s
usage_error "-n 3 starts more ranks than --world-size 2: expected -n at most 2" -n 3 --world-size 2 true
usage_error "--first-rank 2 with -n 2 would start ranks up to 3, beyond --world-size 3: expected --first-rank at most 1" \
  -n 2 --world-size 3 --first-rank 2 true
unset FERRY_ADDR FERRY_SECRET
usage_error "missing the program to run" -n 2
usage_error "missing the program to run"

run --help
expect_rc 0 "--help"
expect_line out '^usage: ferryrun' "--help"

run -n2 -- sh -c 'echo $FERRY_WORLD_SIZE'
[[ $(sort "$TMP/out") == $'[0] 2\n[1] 2' ]] || fail "-n2 and --: $(cat "$TMP/out")"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all ferryrun checks passed"
