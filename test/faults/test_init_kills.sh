#!/usr/bin/env bash
# Nothing left behind when a job dies during init: test_init_kills.sh FERRYRUN FAULT_RANK [JOBS]
#
# Jobs of 8 ranks of fault-rank (one all-reduce) under ferryrun, each SIGKILLed at some instant of
# its init: one rank, all ranks, or ferryrun itself (its ranks then get SIGTERM: PR_SET_PDEATHSIG).
# The instants are spread over the length of an undisturbed job (measured first), each at a random
# point of its own stretch, JOBS per kind (default 5). Then one job of each kind is killed after
# init, and one is left to finish. After every job: no process of it is left, and /dev/shm holds no
# new ferry entry naming one of its ranks' pids (transports/shm must leave no name behind, whatever
# instant a process dies at). Prints how many jobs left something, and the seed of the instants
# (FERRY_TEST_SEED=N repeats them).
set -u

FERRYRUN=${1:?usage: test_init_kills.sh FERRYRUN FAULT_RANK [JOBS]}
DRIVER=${2:?}
JOBS=${3:-5}
# shellcheck source=test/common/shell_checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/shell_checks.sh"

seed=${FERRY_TEST_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$seed
tag=initkills.$$  # on every rank's command line: pgrep finds this test's processes, no one else's
ranks=8
leaks=0
jobs_run=0
declare -A leaked_by_kind=()

ms_now() { echo $((${EPOCHREALTIME/./} / 1000)); }
shm_entries() { find /dev/shm -maxdepth 1 -mindepth 1 -printf '%f\n' 2>/dev/null; }

# job_command CALLS: execs the job (run it in a subshell). Each rank appends "RANK PID" to
# $TMP/pids before it execs fault-rank (same pid), so its pid is known even when ferryrun dies
# first. A short FERRY_TIMEOUT: ranks left waiting for a dead peer give up by themselves too.
job_command() {
  # shellcheck disable=SC2016 # the rank's shell expands them
  FERRY_TIMEOUT=5 exec "$FERRYRUN" -n "$ranks" --report-seconds 0.3 -- \
    sh -c 'echo "$FERRY_RANK $$" >>"$0"; exec "$@"' "$TMP/pids" \
    "$DRIVER" --tag "$tag" --calls "$1" --count 1024 >"$TMP/out" 2>&1 </dev/null
}

# start_job CALLS: the job in the background, ferryrun's pid in $job. Started from a subshell, so
# it is not a job of this shell (which would note every SIGKILL on stderr).
start_job() {
  : >"$TMP/pids"
  : >"$TMP/out"
  shm_entries >"$TMP/shm.before"
  job=$(
    job_command "$1" >/dev/null 2>&1 &
    echo $!
  )
}

rank_pids() { awk '{ print $2 }' "$TMP/pids"; }

# alive PID: the process exists and is not a zombie (an exited rank whose parent died may wait
# for a reaper, but holds nothing any more).
alive() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

# finish_job WHAT KIND: waits (5 s at most) for ferryrun and every rank to be gone, then checks
# that nothing of the job is left (a job that left something counts for KIND).
finish_job() {
  local what=$1 kind=$2 pid left pattern deadline=$(($(ms_now) + 5000)) any
  while :; do
    any=0
    [[ -n $job ]] && alive "$job" && any=1
    while read -r _ pid; do alive "$pid" && any=1; done <"$TMP/pids"
    ((any == 0)) && break
    if (($(ms_now) > deadline)); then
      fail "$what: the job's processes outlived it by 5 s: $(pgrep -af -- "--tag $tag")"
      pkill -KILL -f -- "--tag $tag"
      kill -KILL "$job" 2>/dev/null
      break
    fi
    sleep 0.02
  done
  jobs_run=$((jobs_run + 1))
  # New entries of /dev/shm that name a pid of this job's ranks.
  [[ -s $TMP/pids ]] || return 0
  pattern="ferry.*-($(rank_pids | paste -sd '|'))(\$|[^0-9])"
  left=$(shm_entries | grep -vxF -f "$TMP/shm.before" | grep -E "$pattern" | tr '\n' ' ')
  if [[ -n $left ]]; then
    leaks=$((leaks + 1))
    leaked_by_kind[$kind]=$((${leaked_by_kind[$kind]:-0} + 1))
    echo "$what: left in /dev/shm: $left"
    for n in $left; do rm -f "/dev/shm/$n"; done
  fi
}

# kill_job KIND: SIGKILL one rank (a random one of those started), all started ranks, or ferryrun.
kill_job() {
  local pids
  case $1 in
  launcher) kill -KILL "$job" 2>/dev/null ;;
  all) mapfile -t pids < <(rank_pids) && ((${#pids[@]} > 0)) && kill -KILL "${pids[@]}" 2>/dev/null ;;
  one)
    mapfile -t pids < <(rank_pids)
    ((${#pids[@]} > 0)) && kill -KILL "${pids[RANDOM % ${#pids[@]}]}" 2>/dev/null
    ;;
  esac
}

# --- an undisturbed job: leaves nothing, and its length sets the instants of the kills -----------
start=$(ms_now)
: >"$TMP/pids"
shm_entries >"$TMP/shm.before"
(job_command 1)
rc=$?
job=""  # ended
span=$(($(ms_now) - start))
((rc == 0)) || fail "undisturbed job: exit status $rc: $(tail -c 2000 "$TMP/out")"
finish_job "undisturbed job" none
echo "undisturbed job: $span ms; seed $seed"

# --- killed during init -----------------------------------------------------------------------
for kind in one all launcher; do
  for ((k = 0; k < JOBS; k++)); do
    # Stretch k of JOBS of the undisturbed job's length, a random instant within it.
    at=$((span * k / JOBS + RANDOM % (span / JOBS + 1)))
    start_job 1
    sleep "$((at / 1000)).$(printf '%03d' $((at % 1000)))"
    kill_job "$kind"
    finish_job "kill $kind at $at ms" "$kind"
  done
done

# --- killed after init: every rank has joined and runs calls --------------------------------------
for kind in one all launcher; do
  start_job 1000000
  for _ in $(seq 250); do
    (($(grep -c 'running at' "$TMP/out") >= ranks)) && break
    sleep 0.02
  done
  (($(grep -c 'running at' "$TMP/out") >= ranks)) ||
    fail "kill $kind after init: the ranks never ran: $(tail -c 2000 "$TMP/out")"
  kill_job "$kind"
  finish_job "kill $kind after init" "after-$kind"
done

summary=""
for k in "${!leaked_by_kind[@]}"; do summary+=" $k:${leaked_by_kind[$k]}"; done
echo "jobs that left segments behind: $leaks of $jobs_run (by kind:${summary:- none}; $JOBS per kind during init)"
((leaks == 0)) || fail "$leaks of $jobs_run jobs left shared-memory segments behind"
((failures == 0))
