#!/usr/bin/env bash
# Fault injection: test_faults.sh FERRYRUN CLUSTER_SH LINK_EMULATOR FAULT_RANK FAULT PLACE
#
# One job of four ranks of fault-rank (test/faults/fault_rank.cpp: a loop of verified 16 MiB
# all-reduces) meets one fault, and every rank must end in the right outcome: a correct result, or
# a clear error within the deadline (FERRY_TIMEOUT) naming the rank at fault. Never a hang (an
# outer `timeout` ends the job and fails the test), and nothing left behind: no process of the
# job, no shared-memory segment of its ranks, no namespace of its cluster.
#
# FAULT:
#   kill               one rank SIGKILLs itself mid-collective: the others name it, long before
#                      the deadline (the runtime sees the death itself);
#   link-down          host h1's eth0 goes down mid-run: every rank times out, naming the rank
#                      it waited for;
#   loss               5% of the packets each host sends are lost: the results are still right;
#                      prints the time against the same links without loss;
#   straggler          one rank 10x slower than the others, the deadline longer than its delay:
#                      correct results, no false timeout;
#   straggler-timeout  one rank sleeps 4 s before its calls, the deadline 2 s: the others time
#                      out naming it among the ranks that have not reached the call;
#   absent             one rank never arrives at init (the last; on one host also rank 0, where the
#                      rendezvous root listens): the others fail within the init deadline.
# PLACE: host (ferryrun -n 4 on this machine, UCX over lo) or cluster (cluster.sh, 2 hosts x 2
# ranks; exits 77 where namespaces cannot be made). link-down and loss exist on the cluster only.
#
# Each detected fault prints "detection FAULT PLACE rank R: X.XXX s", the time from the injection
# (the killed rank's last line, the `ip link` command, the straggler's first sleep, the start of
# init) to that rank's error; docs/RELIABILITY.md's table is made of these.
set -u

FERRYRUN=${1:?usage: test_faults.sh FERRYRUN CLUSTER_SH LINK_EMULATOR FAULT_RANK FAULT PLACE}
CLUSTER=${2:?}
EMULATOR=${3:?}
DRIVER=${4:?}
FAULT=${5:?}
PLACE=${6:?}
# shellcheck source=test/common/shell_checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/shell_checks.sh"

tag=faults.$$  # on every rank's command line: pgrep finds this test's processes, no one else's
cluster_pid=""

# start_job LIMIT [--shape SHAPE_ARGS... --] DRIVER_ARGS...: the job in the background under
# `timeout LIMIT`; output in $TMP/out and $TMP/err. On the cluster, $cluster_pid is cluster.sh's pid
# (it names the namespaces ferrycl<pid>-*).
start_job() {
  local limit=$1 shape=()
  shift
  if [[ ${1:-} == --shape ]]; then
    shift
    while [[ $1 != -- ]]; do shape+=("$1") && shift; done
    shift
  fi
  : >"$TMP/out"
  if [[ $PLACE == host ]]; then
    timeout -k 5 "$limit" "$FERRYRUN" -n 4 -- "$DRIVER" --tag "$tag" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null &
    job=$!
  else
    # cluster.sh's own --timeout stops the job and tears the cluster down first; `timeout` (later)
    # is the last resort, for a cluster.sh that hangs itself.
    timeout -k 5 $((limit + 15)) bash "$CLUSTER" --hosts 2 --ranks 2 --timeout "$limit" --ferryrun "$FERRYRUN" \
      --link-emulator "$EMULATOR" "${shape[@]}" -- "$DRIVER" --tag "$tag" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null &
    job=$!
    for _ in $(seq 100); do
      cluster_pid=$(pgrep -P "$job" -f cluster.sh)
      [[ -n $cluster_pid ]] && break
      sleep 0.02
    done
  fi
}

# finish_job: waits for the job; $rc is its status. 124 or 137 from `timeout` is a hang.
finish_job() {
  wait "$job"
  rc=$?
  if ((rc == 77)) && [[ $PLACE == cluster ]] && ! grep -q 'starts at' "$TMP/out"; then
    cat "$TMP/err"
    exit 77
  fi
  if ! grep -q 'starts at' "$TMP/out"; then
    fail "$FAULT on $PLACE: no rank started (exit status $rc); stderr: $(tail -n 20 "$TMP/err")"
  elif ((rc == 124)) || { ((rc == 137)) && ! grep -q 'killing itself' "$TMP/out"; }; then
    fail "$FAULT on $PLACE: the job hung and was stopped by its timeout; output: $(tail -c 3000 "$TMP/out")"
  fi
}

wait_for_lines() {  # wait_for_lines TEXT COUNT: until the output has COUNT lines with TEXT (20 s at most)
  for _ in $(seq 400); do
    (($(grep -c -- "$1" "$TMP/out") >= $2)) && return 0
    kill -0 "$job" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# outcome R: "ok T" or "error T MESSAGE" from rank R's last line, or nothing.
outcome() {
  sed -nE "s/^\[$1\] rank $1: ok [0-9]+ calls in [0-9.]+ s at ([0-9.]+)$/ok \1/p
           s/^\[$1\] rank $1: error after [0-9.]+ s at ([0-9.]+) in call [0-9]+: (.*)$/error \1 \2/p" "$TMP/out" | tail -1
}

# event R TEXT: the time on rank R's line "rank R: TEXT at T...".
event() {
  sed -nE "s/^\[$1\] rank $1: $2 at ([0-9.]+).*$/\1/p" "$TMP/out" | head -1
}

# expect_ok RANKS...: every rank's calls succeeded (results verified by the driver).
expect_ok() {
  local r o
  for r in "$@"; do
    o=$(outcome "$r")
    [[ $o == ok* ]] || fail "$FAULT on $PLACE: rank $r should have succeeded: ${o:-no outcome line}; $(grep "^\[$r\]" "$TMP/out" | tail -3)"
  done
}

# expect_error SINCE MAX_S NEEDLE_REGEX RANKS...: each rank ended in an error matching NEEDLE_REGEX
# at most MAX_S seconds after SINCE (seconds since the epoch); prints its detection time.
expect_error() {
  local since=$1 max=$2 needle=$3 r o t msg took
  shift 3
  for r in "$@"; do
    o=$(outcome "$r")
    if [[ $o != error* ]]; then
      fail "$FAULT on $PLACE: rank $r should have ended in an error: ${o:-no outcome line}; $(grep "^\[$r\]" "$TMP/out" | tail -3)"
      continue
    fi
    read -r _ t msg <<<"$o"
    took=$(awk -v a="$t" -v b="$since" 'BEGIN { printf "%.3f", a - b }')
    echo "detection $FAULT $PLACE rank $r: $took s"
    awk -v x="$took" -v m="$max" 'BEGIN { exit !(x <= m) }' ||
      fail "$FAULT on $PLACE: rank $r's error came $took s after the fault, more than $max s: $msg"
    [[ $msg =~ $needle ]] || fail "$FAULT on $PLACE: rank $r's error does not match '$needle': $msg"
  done
}

# expect_clean: no process of the job, no shared-memory segment of its ranks, no namespace left.
expect_clean() {
  local left pid
  sleep 0.2
  if left=$(pgrep -af -- "--tag $tag"); then
    fail "$FAULT on $PLACE: processes left behind: $left"
    pkill -KILL -f -- "--tag $tag"
  fi
  # transports/shm's segments are memfds (never in /dev/shm); before, they were named
  # /ferry-<comm>-<rank>-<pid> and /ferry-arena-<comm>-<rank>-<pid> until the init barrier.
  for pid in $(sed -nE 's/^\[[0-9]+\] rank [0-9]+: pid ([0-9]+) starts at .*/\1/p' "$TMP/out"); do
    left=$(find /dev/shm -maxdepth 1 -name "ferry-*-$pid" -printf '%f ')
    if [[ -n $left ]]; then
      fail "$FAULT on $PLACE: shared-memory segments left behind: $left"
      find /dev/shm -maxdepth 1 -name "ferry-*-$pid" -delete
    fi
  done
  if [[ -n $cluster_pid ]]; then
    left=$(ip netns list | awk '{ print $1 }' | grep -E "^ferrycl$cluster_pid-")
    [[ -z $left ]] || fail "$FAULT on $PLACE: namespaces left behind: $left"
  fi
}

# The ranks: 0-3; on the cluster h0 holds 0-1 and h1 2-3.
case "$FAULT $PLACE" in
"kill host" | "kill cluster")
  # Rank 2 (on h1 on the cluster) dies a second into the loop. The runtime sees a dead process on
  # its host, or a closed connection from another host, at once: 3 s of the 10 s deadline at most.
  export FERRY_TIMEOUT=10
  victim=2
  start_job 60 --calls 300 --kill-rank "$victim" --kill-after 1
  finish_job
  t=$(event "$victim" "killing itself")
  if [[ -z $t ]]; then
    fail "kill on $PLACE: rank $victim did not get to kill itself: $(tail -c 2000 "$TMP/out")"
  else
    expect_error "$t" 3 "rank $victim" 0 1 3
    for r in 0 1 3; do
      [[ $(outcome "$r") == *"error "*" timeout: "* ]] && fail "kill on $PLACE: rank $r only noticed at the deadline"
    done
  fi
  [[ $(outcome "$victim") == "" ]] || fail "kill on $PLACE: rank $victim reported an outcome: $(outcome "$victim")"
  ;;
"link-down cluster")
  # h1's only link goes down in the middle of a call: nothing tells either side, so every rank
  # must give up at the deadline (5 s), naming the rank it waited for (in a ring that may be a rank
# of its own host, itself waiting for the other host). A timeout over the network then asks the
# other ranks for up to 1 s where they stand: the deadline + 4 s at most.
  export FERRY_TIMEOUT=5
  start_job 40 --calls 1000
  if wait_for_lines "running at" 4; then
    sleep 0.5
    t=${EPOCHREALTIME}
    ip -n "ferrycl$cluster_pid-h1" link set eth0 down || fail "link-down: cannot set h1's eth0 down"
    echo "h1's eth0 down at $t"
  else
    fail "link-down: the ranks did not start: $(tail -c 2000 "$TMP/out")"
    t=0
  fi
  finish_job
  # A rank blocks on a receive across the dead link, or (over TCP, whose sends wait for room in
  # the socket) on a send: either way the error names the peer and the deadline.
  expect_error "$t" $((FERRY_TIMEOUT + 4)) "(waiting for|sending to) rank [0-9]+: timed out" 0 1 2 3
  ;;
"loss cluster")
  # TCP retransmits what the links drop; UCX and ferry see nothing but a slower network.
  export FERRY_TIMEOUT=60
  # Three calls: each already loses hundreds of packets (16 MiB per call is ~11,000 segments a way).
  start_job 60 --shape --loss 0 -- --calls 3
  finish_job
  expect_ok 0 1 2 3
  base=$(sed -nE 's/^\[0\] rank 0: ok [0-9]+ calls in ([0-9.]+) s.*/\1/p' "$TMP/out")
  expect_clean
  start_job 90 --shape --loss 5 -- --calls 3
  finish_job
  expect_ok 0 1 2 3
  lossy=$(sed -nE 's/^\[0\] rank 0: ok [0-9]+ calls in ([0-9.]+) s.*/\1/p' "$TMP/out")
  [[ -n $base && -n $lossy ]] &&
    echo "loss cluster: 3 calls of 16 MiB in $base s without loss, $lossy s with 5% loss:" \
      "$(awk -v a="$lossy" -v b="$base" 'BEGIN { printf "%.2f", a / b }')x slower"
  ;;
"straggler host" | "straggler cluster")
  # Rank 1 runs 10x slower; each wait is far shorter than the 10 s deadline: no false timeout.
  export FERRY_TIMEOUT=10
  start_job 60 --count 1048576 --calls 8 --straggler 1 --slowdown 10
  finish_job
  expect_ok 0 1 2 3
  grep -q 'rank 1: straggling' "$TMP/out" || fail "straggler on $PLACE: rank 1 did not straggle"
  ;;
"straggler-timeout host" | "straggler-timeout cluster")
  # Rank 3 sleeps 4 s before its fourth call; the others wait for it 2 s, then fail naming it.
  # It fails too once it arrives (the others are gone or reported their timeout).
  export FERRY_TIMEOUT=2
  straggler=3
  start_job 40 --calls 6 --straggler "$straggler" --delay 4
  finish_job
  t=$(event "$straggler" straggling)
  if [[ -z $t ]]; then
    fail "straggler-timeout on $PLACE: rank $straggler did not straggle: $(tail -c 2000 "$TMP/out")"
  else
    # Every error lists the ranks that have not reached the call: on one host from the counters
    # in shared memory, across hosts from the status queries of the rank that timed out (the
    # straggler, asleep outside ferry, does not answer); the others carry that rank's report.
    # The queries wait up to 1 s for answers: hence the deadline + 3 s.
    expect_error "$t" $((FERRY_TIMEOUT + 3)) "timed out.*not reached call #[0-9]+:.*rank ${straggler}([ :(;]|$)" 0 1 2
    for r in 0 1 2; do
      took=$(outcome "$r" | awk -v s="$t" '{ printf "%.3f", $2 - s }')
      awk -v x="${took:-0}" -v d="$FERRY_TIMEOUT" 'BEGIN { exit !(x >= 0.9 * d) }' ||
        fail "straggler-timeout on $PLACE: rank $r gave up after $took s, before the deadline"
    done
    [[ $(outcome "$straggler") == error* ]] ||
      fail "straggler-timeout on $PLACE: rank $straggler should have ended in an error: $(outcome "$straggler")"
  fi
  ;;
"absent host" | "absent cluster")
  # The last rank never starts its init: the others wait for it until the init deadline (3 s).
  export FERRY_TIMEOUT=3
  start_job 30 --absent 3
  finish_job
  for r in 0 1 2; do
    expect_error "$(event "$r" "pid [0-9]+ starts")" $((FERRY_TIMEOUT + 2)) "rank 3 .*never arrived" "$r"
  done
  if [[ $PLACE == host ]]; then
    # Rank 0 absent: nobody listens at FERRY_ADDR, and the others say so within the deadline.
    expect_clean
    start_job 30 --absent 0
    finish_job
    for r in 1 2 3; do
      expect_error "$(event "$r" "pid [0-9]+ starts")" $((FERRY_TIMEOUT + 2)) "rank 0, which listens for the rendezvous at .* never arrived" "$r"
    done
  fi
  ;;
*)
  echo "test_faults.sh: no case '$FAULT' on '$PLACE'" >&2
  exit 2
  ;;
esac
expect_clean

grep -E '^\[[0-9]+\] rank [0-9]+: (ok|error|killing|straggling|stays)' "$TMP/out" | cut -c1-400
if ((failures > 0)); then
  echo "--- the job's stderr (last 40 lines):"
  tail -n 40 "$TMP/err"
  exit 1
fi
echo "$FAULT on $PLACE: ok"
