#!/usr/bin/env bash
# Tests of cluster.sh itself: test_cluster.sh PATH/TO/cluster.sh PATH/TO/ferryrun
#
# What cluster.sh promises is checked from outside: the layout each rank sees (host name, ranks,
# address), the exit status, and above all that no namespace and no process outlives it, whether
# the job succeeds, fails, times out, or cluster.sh is interrupted once, twice or killed outright.
# Exits 77 (SKIP) where cluster.sh cannot make namespaces.
set -u

CLUSTER=${1:?usage: test_cluster.sh PATH/TO/cluster.sh PATH/TO/ferryrun}
FERRYRUN=${2:?usage: test_cluster.sh PATH/TO/cluster.sh PATH/TO/ferryrun}
# shellcheck source=test/common/shell_checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/shell_checks.sh"

# run ARGS...: cluster.sh ARGS in the foreground; stdout in $TMP/out, stderr in $TMP/err, status in
# $rc, wall time in $ms, its pid in $pid (for the namespace names).
run() {
  local start=${EPOCHREALTIME/./}
  bash "$CLUSTER" --ferryrun "$FERRYRUN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null &
  pid=$!
  wait "$pid"
  rc=$?
  ms=$(((${EPOCHREALTIME/./} - start) / 1000))
}

expect_rc() {  # expect_rc WANT WHAT
  [[ $rc == "$1" ]] || fail "$2: exit status $rc, expected $1; stderr: $(head -c 2000 "$TMP/err")"
}

expect_line() {  # expect_line FILE REGEX WHAT
  grep -Eq -- "$2" "$TMP/$1" || fail "$3: no line matching '$2' in $1: $(head -c 2000 "$TMP/$1")"
}

# The jobs that must be stopped run `sleep $marker`: 60 s and a fraction that names this test.
marker=60.$$

# No namespace of cluster.sh pid $pid is left, and none of the test's sleeps runs.
expect_clean() {  # expect_clean WHAT
  local left
  left=$(ip netns list | awk '{ print $1 }' | grep -E "^ferrycl$pid-")
  [[ -z $left ]] || fail "$1: namespaces left behind: $left"
  if pgrep -f "sleep $marker" >/dev/null; then
    fail "$1: processes left behind: $(pgrep -af "sleep $marker")"
    pkill -KILL -f "sleep $marker"
  fi
}

wait_for_lines() {  # wait_for_lines FILE TEXT COUNT: until FILE has COUNT lines with TEXT (10 s at most)
  for _ in $(seq 200); do
    (($(grep -c -- "$2" "$TMP/$1") >= $3)) && return
    sleep 0.05
  done
}

run --hosts 1 --raw -- true
if ((rc == 77)); then
  cat "$TMP/err"
  exit 77
fi
expect_rc 0 "a one-host cluster"
expect_clean "a one-host cluster"

# --- the layout every rank sees -------------------------------------------------------------------
run --layout 2,1 -- sh -c 'echo $(hostname) $FERRY_HOST_ID $FERRY_RANK/$FERRY_WORLD_SIZE $FERRY_LOCAL_RANK/$FERRY_LOCAL_SIZE $FERRY_ADDR $(ip -4 -o addr show eth0 | awk "{ print \$4 }")'
expect_rc 0 "layout 2,1"
[[ $(sort "$TMP/out") == $'[0] h0 h0 0/3 0/2 10.77.0.1:29500 10.77.0.1/24\n[1] h0 h0 1/3 1/2 10.77.0.1:29500 10.77.0.1/24\n[2] h1 h1 2/3 0/1 10.77.0.1:29500 10.77.0.2/24' ]] ||
  fail "layout 2,1: $(cat "$TMP/out")"
expect_line err '^cluster.sh: 2 host\(s\): h0 10.77.0.1 ranks 0-1, h1 10.77.0.2 rank 2$' "layout 2,1"
expect_clean "layout 2,1"

run --hosts 3 --ranks 2 -- sh -c 'echo $FERRY_SECRET'
expect_rc 0 "shared secret"
[[ $(sed 's/^\[[0-9]\] //' "$TMP/out" | sort -u | grep -Ec '^[0-9a-f]{32}$') == 1 && $(wc -l <"$TMP/out") == 6 ]] ||
  fail "every rank gets one secret: $(cat "$TMP/out")"

# Our stdin goes to rank 0 only, as ferryrun hands it.
bash "$CLUSTER" --ferryrun "$FERRYRUN" --hosts 2 -- sh -c 'read -r x; echo "got:$x"' <<<"piped" >"$TMP/out" 2>/dev/null
[[ $(sort "$TMP/out") == $'[0] got:piped\n[1] got:' ]] || fail "stdin goes to rank 0 only: $(cat "$TMP/out")"

# Two clusters at once, both on 10.77.0.0/24: each in namespaces of its own.
bash "$CLUSTER" --ferryrun "$FERRYRUN" --hosts 2 -- sh -c 'sleep 1; hostname' >"$TMP/out2" 2>&1 &
other=$!
run --hosts 2 -- sh -c 'sleep 1; hostname'
wait "$other"
rc2=$?
expect_rc 0 "two clusters at once"
[[ $rc2 == 0 && $(grep -c '^\[.\] h[01]$' "$TMP/out2") == 2 ]] || fail "two clusters at once: $rc2 $(cat "$TMP/out2")"

# Hosts reach each other through the switch, and only each other: no route leaves the cluster.
run --hosts 3 --raw -- sh -c '$FERRY_CLUSTER_RSH -x -o BatchMode=yes h2 hostname
                              ip route get 192.0.2.1 2>&1 || echo unreachable; echo $FERRY_CLUSTER_HOSTS; cat $FERRY_CLUSTER_HOSTFILE'
expect_rc 0 "--raw"
expect_line out '^h2$' "ns_rsh runs on the named host under its name"
expect_line out '^unreachable$' "no route out of the cluster"
expect_line out '^10.77.0.1 10.77.0.2 10.77.0.3$' "FERRY_CLUSTER_HOSTS"
expect_line out '^10.77.0.3 slots=1$' "FERRY_CLUSTER_HOSTFILE"

# --- exit status and teardown ---------------------------------------------------------------------
# The report time (3 s by default; ferryrun's test checks that) shortened for both launchers.
FERRY_REPORT_SECONDS=0.5 run --hosts 2 --ranks 2 -- \
  sh -c 'if [ $FERRY_RANK = 2 ]; then exit 3; fi; exec sleep '"$marker"
expect_rc 3 "a failing host"
((ms < 15000)) || fail "a failing host: the others are stopped (took $ms ms)"
expect_line err '^cluster.sh: host h1 exited with code 3; stopping the other hosts in 0.5 s$' "a failing host"
expect_clean "a failing host"

run --hosts 2 --timeout 1 -- sleep "$marker"
expect_rc 124 "--timeout"
((ms < 10000)) || fail "--timeout 1 took $ms ms"
expect_line err '^cluster.sh: timed out after 1 s; stopping every host$' "--timeout"
expect_clean "--timeout"

# Interrupted once, twice in a row, and terminated. Job control gives the background job its own
# process group with SIGINT not ignored, as a terminal's foreground job has.
for signals in "INT" "INT INT" "TERM"; do
  : >"$TMP/out"  # no "ready" of the previous round
  (
    set -m
    bash "$CLUSTER" --ferryrun "$FERRYRUN" --hosts 2 --ranks 2 -- \
      sh -c 'echo ready; exec sleep $0' "$marker" >"$TMP/out" 2>"$TMP/err" </dev/null &
    echo $! >"$TMP/pid"
    wait_for_lines out ready 4
    for sig in $signals; do kill -"$sig" -- -"$!"; done
    wait $!
    echo $? >"$TMP/rc"
  )
  pid=$(cat "$TMP/pid")
  rc=$(cat "$TMP/rc")
  want=130
  [[ $signals == TERM ]] && want=143
  expect_rc "$want" "SIG$signals"
  expect_line err "^cluster.sh: received SIG${signals%% *}; stopping every host$" "SIG$signals"
  expect_clean "SIG$signals"
done

# Killed outright: nothing can clean up then, so the next run removes what the dead one left.
: >"$TMP/out"
bash "$CLUSTER" --ferryrun "$FERRYRUN" --hosts 2 -- sh -c 'echo ready; exec sleep $0' "$marker" \
  >"$TMP/out" 2>/dev/null </dev/null &
killed=$!
wait_for_lines out ready 2
{
  kill -KILL "$killed"
  wait "$killed"
} 2>/dev/null  # no "Killed" job report
run --hosts 1 -- true
expect_rc 0 "after SIGKILL"
expect_line err "^cluster.sh: removing ferrycl$killed-h0, left behind by cluster.sh pid $killed$" "after SIGKILL"
pid=$killed expect_clean "after SIGKILL"
left=$(ls -d /tmp/ferry-cluster."$killed".* 2>/dev/null)
[[ -z $left ]] || fail "after SIGKILL: temporary files left behind: $left"

# --- usage errors name what was wrong (exit 2) ----------------------------------------------------
usage_error() {  # usage_error EXPECTED_TEXT ARGS...
  local want=$1
  shift
  run "$@"
  expect_rc 2 "usage: cluster.sh $*"
  grep -qF -- "$want" "$TMP/err" || fail "usage: cluster.sh $*: stderr does not name '$want': $(cat "$TMP/err")"
}
usage_error "invalid value '0' for --hosts" --hosts 0 -- true
FERRY_REPORT_SECONDS=soon usage_error "invalid value 'soon' for FERRY_REPORT_SECONDS" -- true
usage_error "invalid value '2,x' for --layout" --layout 2,x -- true
usage_error "--ranks and --layout exclude each other" --ranks 2 --layout 2,1 -- true
usage_error "--layout 2,1 names 2 hosts but --hosts is 3" --hosts 3 --layout 2,1 -- true
usage_error "invalid value '1gb' for --rate" --rate 1gb -- true
usage_error "invalid value '5' for --delay" --delay 5 -- true
usage_error "invalid value '101' for --loss" --loss 101 -- true
usage_error "unknown option '--bogus'" --bogus -- true
usage_error "missing the program to run" --hosts 2
usage_error "no ferryrun at /nonexistent" --ferryrun /nonexistent -- true

# --- Open MPI across the namespaces (docs/CLUSTER.md's line), where it is installed ----------------
if command -v mpirun.openmpi >/dev/null; then
  run --hosts 2 --ranks 2 --raw --timeout 60 -- sh -c 'mpirun.openmpi --allow-run-as-root \
      --hostfile "$FERRY_CLUSTER_HOSTFILE" --mca plm_rsh_agent "$FERRY_CLUSTER_RSH" \
      --mca oob_tcp_if_include eth0 --mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 \
      -n 4 hostname'
  expect_rc 0 "mpirun"
  [[ $(sort "$TMP/out" | tr '\n' ' ') == "h0 h0 h1 h1 " ]] || fail "mpirun: $(cat "$TMP/out" "$TMP/err")"
  expect_clean "mpirun"
fi

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all cluster.sh checks passed"
