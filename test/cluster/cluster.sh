#!/usr/bin/env bash
# cluster.sh: a cluster of H hosts made of network namespaces on this machine, and a job run on it.
#
#   test/cluster/cluster.sh [--hosts H] [--ranks R | --layout R0,R1,...] [--rate RATE] [--delay DELAY]
#                           [--loss PCT] [--mtu N] [--timeout SECONDS] [--raw] [--keep-going] [--ferryrun PATH]
#                           -- PROGRAM [ARGS...]
#
# A "switch" namespace holds a Linux bridge; each host is a namespace joined to the bridge by a veth
# pair, whose host end is called eth0 and has address 10.77.0.(i+1)/24 (docs/CLUSTER.md has the
# picture). Nothing connects the switch to this machine's own network, so no packet leaves it and
# two clusters at once may both use 10.77.0.0/24. Each host also gets a host name of its own, hN, in
# a UTS namespace, so software that groups processes by host name (ferry, Open MPI, UCX) sees H hosts.
#
# The job is one ferryrun per host (--world-size, --first-rank), ranks numbered host-major, all
# sharing one rendezvous address on host 0 and one random secret; with --raw, PROGRAM runs once on
# host 0 with variables that describe the cluster (for mpirun and other launchers).
#
# Teardown runs on EXIT, INT, TERM and HUP and ignores further signals while it runs: it stops every
# process left in the namespaces (ip netns pids), deletes the namespaces (that removes the veths and
# the bridge) and the temporary files. A cluster whose script was killed with SIGKILL is removed by
# the next run (its namespaces and temporary folder carry the dead script's pid).
#
# Exit status: PROGRAM's (the first failing host's), 124 after --timeout, 128+N on signal N, 2 for
# bad usage, 77 (meson's SKIP) when namespaces or the asked-for link shaping cannot be made here.
set -euo pipefail

readonly kSubnet=10.77.0      # hosts are $kSubnet.1 .. $kSubnet.H, /24
readonly kPort=29500          # rendezvous port on host 0 (the namespace is ours: nothing else listens)
# A host failed: the others may still report their own errors (FERRY_REPORT_SECONDS, as ferryrun).
readonly kReportSeconds=${FERRY_REPORT_SECONDS:-3}
readonly kGraceSeconds=3      # SIGTERM to SIGKILL at teardown
readonly kNsPrefix=ferrycl    # namespaces are ferrycl<pid>-sw and ferrycl<pid>-h<i>

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)

usage() {
  cat <<EOF
usage: cluster.sh [--hosts H] [--ranks R | --layout R0,R1,...] [--rate RATE] [--delay DELAY]
                  [--loss PCT] [--mtu N] [--timeout SECONDS] [--raw] [--ferryrun PATH] -- PROGRAM [ARGS...]
Make H hosts out of network namespaces on this machine (root needed) and run PROGRAM on them.
Host i is namespace ${kNsPrefix}<pid>-h<i> with host name h<i> (FERRY_HOST_ID=h<i>) and one interface,
eth0, address $kSubnet.<i+1>/24, cabled to a bridge in a switch namespace of its own; nothing
reaches this machine's network, so traffic never leaves it.
  --hosts H          hosts, 1 to 254 (default 2, or the length of --layout)
  --ranks R          ranks per host (default 1)
  --layout R0,R1,..  ranks on each host instead (e.g. 2,1: h0 runs ranks 0-1, h1 rank 2)
  --rate RATE        each host's link runs at RATE in each direction (full duplex): kbit, mbit or
                     gbit, e.g. 1gbit
  --delay DELAY      one-way delay host -> switch, so DELAY from host to host and 2*DELAY round
                     trip: us, ms or s, e.g. 5ms (the kernel's netem qdisc, else ferry-link-emulator)
  --loss PCT         each packet a host sends is lost with probability PCT percent (likewise)
  --mtu N            MTU of every link (default 1500)
  --timeout SECONDS  stop everything after SECONDS and exit 124
  --raw              run PROGRAM once on host 0 (not under ferryrun) with FERRY_CLUSTER_HOSTS (the
                     addresses), FERRY_CLUSTER_HOSTFILE (an Open MPI hostfile with the rank counts),
                     FERRY_CLUSTER_RSH (an rsh agent that runs a command on a host given by address
                     or name, for mpirun's plm_rsh_agent) and FERRY_CLUSTER_IFNAME=eth0; FERRY_ADDR
                     and FERRY_SECRET are set as for ferryrun, for ferry programs mpirun starts
  --keep-going       each host's ferryrun lets its other ranks run on when one dies (elastic jobs
                     whose survivors shrink their communicator: ferryrun --keep-going)
  --ferryrun PATH    the launcher (default: \$FERRY_RUN, else \${FERRY_BUILD_DIR:-build}/tools/ferryrun
                     in the repository)
  --link-emulator PATH  the user-space link for kernels without netem (default:
                     \$FERRY_LINK_EMULATOR, else \${FERRY_BUILD_DIR:-build}/test/cluster/ferry-link-emulator)
  -h, --help         show this help
After a host fails, the others get \$FERRY_REPORT_SECONDS (default 3) to exit by themselves before
they are stopped; each host's ferryrun gives its own ranks as long after one of them fails.
Without --raw each host runs PATH -n R_i --world-size W --first-rank K -- PROGRAM ARGS: ranks are
numbered host-major, FERRY_ADDR=$kSubnet.1:$kPort and FERRY_SECRET are shared, output lines keep
ferryrun's "[rank] " prefix. A shaped link: the host's egress goes through netem (delay, loss, rate;
tbf when only --rate is given and the kernel has no netem), the switch port's egress toward the
host through tbf (rate), so each direction of each link carries at most RATE. On a kernel without
netem, --delay and --loss make each link a pair of TAP devices joined by ferry-link-emulator
(test/cluster/link_emulator.cpp), which carries the frames with the same rate, delay and loss.
Exit status: the first failing host's code (0 when all succeed), 124 on timeout, 128+N on signal
N, 2 for bad usage, 77 when namespaces or the shaping cannot be made here (not root, no ip, ...).
EOF
}

say() { echo "cluster.sh: $*" >&2; }
usage_error() {  # usage_error MESSAGE...: exit 2
  say "$*"
  say "run 'cluster.sh --help' for more"
  exit 2
}
skip() {  # The environment cannot host a cluster: meson reports SKIP.
  say "SKIP: $1"
  exit 77
}
[[ $kReportSeconds =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  usage_error "invalid value '$kReportSeconds' for FERRY_REPORT_SECONDS: expected a number of seconds >= 0"

# --- command line ---------------------------------------------------------------------------------
hosts=""
ranks=""
layout_arg=""
rate=""
delay=""
loss=""
mtu=""
timeout=""
raw=0
keep_going=()
ferryrun=${FERRY_RUN:-$repo_root/${FERRY_BUILD_DIR:-build}/tools/ferryrun}
link_emulator=${FERRY_LINK_EMULATOR:-$repo_root/${FERRY_BUILD_DIR:-build}/test/cluster/ferry-link-emulator}
while (($# > 0)); do
  arg=$1
  case $arg in
    --) shift; break ;;
    -h | --help) usage; exit 0 ;;
    --raw) raw=1; shift; continue ;;
    --keep-going) keep_going=(--keep-going); shift; continue ;;
    --*=*) flag=${arg%%=*}; value=${arg#*=}; shift ;;
    --hosts | --ranks | --layout | --rate | --delay | --loss | --mtu | --timeout | --ferryrun | --link-emulator)
      (($# >= 2)) || usage_error "$arg needs a value"
      flag=$arg; value=$2; shift 2 ;;
    -*) usage_error "unknown option '$arg'" ;;
    *) break ;;
  esac
  case $flag in
    --hosts) [[ $value =~ ^[0-9]+$ ]] && ((10#$value >= 1 && 10#$value <= 254)) ||
               usage_error "invalid value '$value' for --hosts: expected an integer from 1 to 254"
             hosts=$((10#$value)) ;;
    --ranks) [[ $value =~ ^[0-9]+$ ]] && ((10#$value >= 1 && 10#$value <= 4096)) ||
               usage_error "invalid value '$value' for --ranks: expected an integer from 1 to 4096"
             ranks=$((10#$value)) ;;
    --layout) [[ $value =~ ^[0-9]+(,[0-9]+)*$ ]] ||
                usage_error "invalid value '$value' for --layout: expected rank counts separated by commas, e.g. 2,1"
              layout_arg=$value ;;
    --rate) [[ ${value,,} =~ ^[0-9]+(\.[0-9]+)?(kbit|mbit|gbit)$ ]] ||
              usage_error "invalid value '$value' for --rate: expected a number with kbit, mbit or gbit, e.g. 1gbit"
            rate=${value,,} ;;
    --delay) [[ $value =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
               usage_error "invalid value '$value' for --delay: expected a number with us, ms or s, e.g. 5ms"
             delay=$value ;;
    --loss) value=${value%\%}
            [[ $value =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v p="$value" 'BEGIN { exit !(p <= 100) }' ||
              usage_error "invalid value '$value' for --loss: expected a percentage from 0 to 100"
            loss=$value ;;
    --mtu) [[ $value =~ ^[0-9]+$ ]] && ((10#$value >= 576 && 10#$value <= 65535)) ||
             usage_error "invalid value '$value' for --mtu: expected an integer from 576 to 65535"
           mtu=$((10#$value)) ;;
    --timeout) [[ $value =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v t="$value" 'BEGIN { exit !(t > 0) }' ||
                 usage_error "invalid value '$value' for --timeout: expected a number of seconds > 0"
               timeout=$value ;;
    --ferryrun) ferryrun=$value ;;
    --link-emulator) link_emulator=$value ;;
    *) usage_error "unknown option '$flag'" ;;
  esac
done
(($# > 0)) || usage_error "missing the program to run"

# The ranks on each host: --layout, else --ranks on each of --hosts.
if [[ -n $layout_arg ]]; then
  [[ -z $ranks ]] || usage_error "--ranks and --layout exclude each other: give one"
  IFS=, read -r -a layout <<<"$layout_arg"
  [[ -z $hosts || $hosts == "${#layout[@]}" ]] ||
    usage_error "--layout $layout_arg names ${#layout[@]} hosts but --hosts is $hosts:" \
      "expected --hosts ${#layout[@]} or none"
  ((${#layout[@]} <= 254)) || usage_error "--layout $layout_arg: expected at most 254 hosts"
  for i in "${!layout[@]}"; do
    layout[i]=$((10#${layout[i]}))
    ((layout[i] >= 1 && layout[i] <= 4096)) ||
      usage_error "--layout $layout_arg: host $i has ${layout[i]} ranks, expected 1 to 4096"
  done
else
  layout=()
  for ((i = 0; i < ${hosts:-2}; i++)); do layout+=("${ranks:-1}"); done
fi
hosts=${#layout[@]}
world=0
first=()  # the global rank of each host's first rank
for n in "${layout[@]}"; do
  first+=("$world")
  world=$((world + n))
done
if ((raw == 0)); then
  [[ -x $ferryrun ]] ||
    usage_error "no ferryrun at $ferryrun (build it: ninja -C build tools/ferryrun, or pass --ferryrun PATH)"
  ferryrun=$(cd "$(dirname "$ferryrun")" && pwd)/$(basename "$ferryrun")  # namespaces start elsewhere
fi

# --- can this machine make namespaces? ------------------------------------------------------------
command -v ip >/dev/null || skip "no 'ip' command (iproute2) to make network namespaces"
command -v unshare >/dev/null || skip "no 'unshare' command (util-linux) to give hosts their own names"
((EUID == 0)) || skip "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); running as uid $EUID"
shaping=0
if [[ -n $rate || -n $delay || -n $loss ]]; then
  shaping=1
  command -v tc >/dev/null ||
    skip "link shaping (--rate, --delay, --loss) needs 'tc' (iproute2), which is not installed"
fi

# --- teardown -------------------------------------------------------------------------------------
prefix=$kNsPrefix$$
switch_ns=$prefix-sw
host_ns=()
for ((i = 0; i < hosts; i++)); do host_ns+=("$prefix-h$i"); done
made_ns=()       # namespaces created so far, in order
launched=()      # pids of the per-host launchers (ip netns exec ... ferryrun)
emulators=()     # pids of the ferry-link-emulator processes (they run outside the namespaces)
timer_pid=""
tmp=""
torn_down=0

# Every pid in our namespaces but the link emulators' (ip netns pids lists them too: they hold the
# namespaces open), which must carry frames until the ranks are gone and are stopped after them.
ns_pids() {
  local ns pid emulator
  for ns in "${made_ns[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      for emulator in "${emulators[@]}"; do [[ $pid != "$emulator" ]] || continue 2; done
      echo "$pid"
    done
  done
}

# Removes namespace NS, first killing whatever still runs in it.
delete_ns() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  ip netns delete "$ns" 2>/dev/null || true
}

teardown() {
  # A second Ctrl-C (or TERM) must not interrupt this: ignore them from here on.
  trap '' INT TERM HUP
  ((torn_down == 0)) || return 0
  torn_down=1
  set +e
  [[ -z $timer_pid ]] || kill "$timer_pid" 2>/dev/null
  # Ask the launchers first: ferryrun forwards a SIGTERM to its ranks, and on a second one kills
  # them and exits. Then kill everything left in the namespaces, including processes a rank started
  # or that left its process group. Bash's own reports of jobs that die of a signal ("Killed") are
  # muted meanwhile: the launchers report for themselves.
  local pids t
  pids=$(ns_pids)
  if [[ -n $pids ]]; then
    exec 4>&2 2>/dev/null
    ((${#launched[@]} == 0)) || kill -TERM "${launched[@]}"
    for ((t = 0; t < kGraceSeconds * 10; t++)); do
      [[ -n $(ns_pids) ]] || break
      sleep 0.1
      ((t != 20)) || ((${#launched[@]} == 0)) || kill -TERM "${launched[@]}"  # after 2 s: again
    done
    for ((t = 0; t < 50; t++)); do  # SIGKILL until nothing is left (5 s at most)
      pids=$(ns_pids)
      [[ -n $pids ]] || break
      kill -KILL $pids
      sleep 0.1
    done
    ((${#launched[@]} == 0)) || wait "${launched[@]}"
    exec 2>&4 4>&-
  fi
  if ((${#emulators[@]} > 0)); then  # their TAP devices go with them
    kill -TERM "${emulators[@]}" 2>/dev/null
    wait "${emulators[@]}" 2>/dev/null
  fi
  local ns
  for ns in "${made_ns[@]}"; do delete_ns "$ns"; done
  [[ -z $tmp ]] || rm -rf "$tmp"
}

on_signal() {  # on_signal NAME NUMBER
  say "received SIG$1; stopping every host"
  teardown
  exit $((128 + $2))
}
trap teardown EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP

# What a cluster.sh killed outright left (SIGKILL leaves no chance to tear down) goes now: namespaces
# ferrycl<pid>-* and temporary folders /tmp/ferry-cluster.<pid>.* where no cluster.sh runs as <pid>.
running_cluster() {  # running_cluster PID: true when PID is a cluster.sh
  tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q cluster.sh
}
for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E "^${kNsPrefix}[0-9]+-" || true); do
  owner=${ns#"$kNsPrefix"}
  owner=${owner%%-*}
  if ! running_cluster "$owner"; then
    say "removing $ns, left behind by cluster.sh pid $owner"
    delete_ns "$ns"
  fi
done
for dir in /tmp/ferry-cluster.*.*; do
  owner=${dir#/tmp/ferry-cluster.}
  owner=${owner%%.*}
  [[ ! -d $dir || ! $owner =~ ^[0-9]+$ ]] || running_cluster "$owner" || rm -rf "$dir"
done

tmp=$(mktemp -d "/tmp/ferry-cluster.$$.XXXXXX")

# --- the cluster ----------------------------------------------------------------------------------
# Every step runs through setup_or_skip: a failure here means this machine cannot make the cluster
# (no CAP_NET_ADMIN, no bridge or veth support, ...), which is a SKIP (77), not a test failure.
setup_or_skip() {  # setup_or_skip WHAT COMMAND...: runs COMMAND, exit 77 naming WHAT if it fails
  local what=$1 err
  shift
  err=$("$@" 2>&1) || skip "cannot $what: ${err:-$1 failed}"
}
make_ns() {  # make_ns NAME: a namespace with lo up
  setup_or_skip "make network namespace $1" ip netns add "$1"
  made_ns+=("$1")
  setup_or_skip "bring up lo in $1" ip -n "$1" link set lo up
}

make_ns "$switch_ns"
setup_or_skip "make a bridge in $switch_ns" ip -n "$switch_ns" link add br0 type bridge
[[ -z $mtu ]] || setup_or_skip "set the bridge's MTU" ip -n "$switch_ns" link set br0 mtu "$mtu"
setup_or_skip "bring up the bridge" ip -n "$switch_ns" link set br0 up
# Delay and loss come from netem where the kernel has it; otherwise each link is a user-space
# emulator between two TAP devices (it also takes the rate, so no tc is needed then).
emulate=0
if [[ -n $delay || -n $loss ]] &&
  ! tc -n "$switch_ns" qdisc add dev lo root netem delay 1ms 2>/dev/null; then
  [[ -x $link_emulator ]] ||
    skip "--delay and --loss need the kernel's netem qdisc or ferry-link-emulator (not at $link_emulator;" \
      "build it: ninja -C build test/cluster/ferry-link-emulator)"
  [[ -c /dev/net/tun ]] || skip "--delay and --loss need netem or /dev/net/tun (for ferry-link-emulator)"
  emulate=1
else
  tc -n "$switch_ns" qdisc del dev lo root 2>/dev/null || true
fi
# RATE in bits per second (0: unlimited), DELAY in microseconds, for the emulator.
rate_bps=$(awk -v r="${rate:-0kbit}" 'BEGIN {
    m = 1; if (r ~ /kbit$/) m = 1e3; else if (r ~ /mbit$/) m = 1e6; else if (r ~ /gbit$/) m = 1e9
    sub(/[a-z]+$/, "", r); printf "%.0f", r * m }')
delay_us=$(awk -v d="${delay:-0us}" 'BEGIN {
    m = 1; if (d ~ /ms$/) m = 1e3; else if (d ~ /s$/ && d !~ /us$/) m = 1e6
    sub(/[a-z]+$/, "", d); printf "%.0f", d * m }')

# emulated_link I: host i's eth0 and the switch's p<i> as TAP devices joined by the emulator, which
# prints "ready" once both exist. Its queue holds a round trip at full rate plus 1 MiB, as a switch
# port buffers about a bandwidth-delay product: more only lengthens the round trip (bufferbloat).
emulated_link() {
  local i=$1 fifo=$tmp/emulator$1 line=""
  mkfifo "$fifo"
  "$link_emulator" --host-ns "/var/run/netns/${host_ns[i]}" --host-dev eth0 \
    --switch-ns "/var/run/netns/$switch_ns" --switch-dev "p$i" --rate-bps "$rate_bps" --delay-us "$delay_us" \
    --loss "${loss:-0}" --seed "$((i + 1))" \
    --limit "$(awk -v r="$rate_bps" -v d="$delay_us" 'BEGIN { printf "%.0f", r / 8 * 2 * d / 1e6 + 1048576 }')" \
    >"$fifo" &
  emulators+=("$!")
  read -r -t 10 line <"$fifo" || true
  [[ $line == ready ]] || skip "ferry-link-emulator could not make the TAP devices of host $i (see above)"
}

for ((i = 0; i < hosts; i++)); do
  ns=${host_ns[i]}
  make_ns "$ns"
  # Port p<i> of the switch is cabled to eth0 of host i.
  if ((emulate)); then
    emulated_link "$i"
  else
    setup_or_skip "make a veth pair to $ns" ip -n "$switch_ns" link add "p$i" type veth peer name eth0 netns "$ns"
  fi
  if [[ -n $mtu ]]; then
    setup_or_skip "set the MTU of p$i" ip -n "$switch_ns" link set "p$i" mtu "$mtu"
    setup_or_skip "set the MTU of eth0 in $ns" ip -n "$ns" link set eth0 mtu "$mtu"
  fi
  setup_or_skip "attach p$i to the bridge" ip -n "$switch_ns" link set "p$i" master br0 up
  setup_or_skip "address eth0 in $ns" ip -n "$ns" addr add "$kSubnet.$((i + 1))/24" dev eth0
  setup_or_skip "bring up eth0 in $ns" ip -n "$ns" link set eth0 up
done

# --- link shaping ---------------------------------------------------------------------------------
# Host i's link is two queues: the host's egress (eth0 in its namespace) through netem, which
# delays each packet by DELAY, drops it with probability LOSS and serializes at RATE; and the switch
# port's egress toward the host (p<i>) through tbf at RATE. So each direction of each link carries
# RATE at most, a packet from host a to host b is delayed DELAY once (at a), and a round trip takes
# 2 * DELAY plus serialization. Queues are sized for a round trip at full rate plus 10 ms so that a
# bandwidth-delay product of data in flight is queued, not dropped (netem's default limit of 1000
# packets is less than 1 Gbit/s * 5 ms at MTU-sized packets once queueing adds up).
if ((shaping && !emulate)); then
  link_mtu=${mtu:-1500}
  # RATE in bytes per second; an unshaped rate counts as 100 Gbit/s to size netem's queue.
  rate_Bps=$(awk -v r="${rate:-100gbit}" 'BEGIN {
      m = 1; if (r ~ /kbit$/) m = 1e3; else if (r ~ /mbit$/) m = 1e6; else if (r ~ /gbit$/) m = 1e9
      sub(/[a-z]+$/, "", r); printf "%.0f", r * m / 8 }')
  delay_s=$(awk -v d="${delay:-0s}" 'BEGIN {
      m = 1; if (d ~ /us$/) m = 1e-6; else if (d ~ /ms$/) m = 1e-3
      sub(/[a-z]+$/, "", d); printf "%.6f", d * m }')
  queue_bytes=$(awk -v b="$rate_Bps" -v d="$delay_s" 'BEGIN {
      q = b * (2 * d + 0.01); printf "%.0f", (q < 262144) ? 262144 : q }')
  queue_packets=$(( queue_bytes / (link_mtu + 14) + 1 ))
  ((queue_packets >= 10000)) || queue_packets=10000
  # tbf: a bucket of 1 ms at RATE, at least two full frames.
  burst=$(awk -v b="$rate_Bps" -v m="$link_mtu" 'BEGIN {
      x = b / 1000; y = 2 * (m + 14); printf "%.0f", (x > y) ? x : y }')
  tbf_limit=$((queue_bytes + burst))
  if [[ -n $delay || -n $loss ]]; then
    host_qdisc=(netem limit "$queue_packets")
    [[ -z $delay ]] || host_qdisc+=(delay "$delay")
    [[ -z $loss ]] || host_qdisc+=(loss "$loss%")
    [[ -z $rate ]] || host_qdisc+=(rate "$rate")
  elif tc -n "${host_ns[0]}" qdisc add dev eth0 root netem limit 1000 2>/dev/null; then
    tc -n "${host_ns[0]}" qdisc del dev eth0 root
    host_qdisc=(netem limit "$queue_packets" rate "$rate")
  else  # this kernel has no netem (CONFIG_NET_SCH_NETEM): tbf shapes the rate as well
    host_qdisc=(tbf rate "$rate" burst "$burst" limit "$tbf_limit")
  fi
  for ((i = 0; i < hosts; i++)); do
    if ! err=$(tc -n "${host_ns[i]}" qdisc add dev eth0 root "${host_qdisc[@]}" 2>&1); then
      if [[ ${host_qdisc[0]} == netem ]]; then
        skip "--delay and --loss need the kernel's netem qdisc (CONFIG_NET_SCH_NETEM, module sch_netem): $err"
      fi
      skip "cannot shape links with tc: $err"
    fi
    if [[ -n $rate ]]; then
      setup_or_skip "shape the switch port to host $i with tc" \
        tc -n "$switch_ns" qdisc add dev "p$i" root tbf rate "$rate" burst "$burst" limit "$tbf_limit"
    fi
  done
fi

# --- the job --------------------------------------------------------------------------------------
addresses=()
names=()
for ((i = 0; i < hosts; i++)); do
  addresses+=("$kSubnet.$((i + 1))")
  names+=("h$i")
done
describe=""
for ((i = 0; i < hosts; i++)); do
  if ((layout[i] == 1)); then
    r="rank ${first[i]}"
  else
    r="ranks ${first[i]}-$((first[i] + layout[i] - 1))"
  fi
  describe+="${describe:+, }h$i ${addresses[i]} $r"
done
((raw == 0)) || describe+=" (--raw: the program runs on h0)"
((shaping == 0)) || describe+="; links: ${rate:-unlimited rate}, delay ${delay:-0}, loss ${loss:-0}%"
((emulate == 0)) || describe+=" (ferry-link-emulator: this kernel has no netem)"
say "$hosts host(s): $describe"

# Variables every process on the cluster sees. Nothing tells ferry which devices to use: each
# namespace has lo and eth0, and the runtime must pick eth0 by itself (runtime/net_devices.hpp).
# Device choices made for this machine's own loopback (./run test exports UCX_NET_DEVICES=lo for
# its single-host tests) mean nothing on the cluster's hosts: they are dropped.
unset UCX_NET_DEVICES FERRY_UCX_NET_DEVICES
export FERRY_CLUSTER_HOSTS="${addresses[*]}"
export FERRY_CLUSTER_NAMES="${names[*]}"
export FERRY_CLUSTER_NETNS="${host_ns[*]}"
export FERRY_CLUSTER_IFNAME=eth0
export FERRY_CLUSTER_RSH=$script_dir/ns_rsh
export FERRY_CLUSTER_HOSTFILE=$tmp/hostfile
for ((i = 0; i < hosts; i++)); do echo "${addresses[i]} slots=${layout[i]}"; done >"$FERRY_CLUSTER_HOSTFILE"

# on_host I COMMAND...: COMMAND in host I's namespace, under its own host name, as that host.
# Called as a background job (on_host ... &), whose subshell it replaces: the job's pid is then
# COMMAND's own (every step execs the next), so teardown's SIGTERM reaches ferryrun itself.
on_host() {
  local i=$1
  shift
  exec ip netns exec "${host_ns[i]}" unshare --uts -- \
    env FERRY_HOST_ID="h$i" sh -c 'hostname "$0" && exec "$@"' "h$i" "$@"
}

# A background command's stdin would be /dev/null (no job control here): host 0 gets ours through
# fd 3 explicitly, the way a launcher hands stdin to rank 0 only.
# The job's rendezvous, also with --raw: ferry programs that mpirun starts find it there.
export FERRY_ADDR=$kSubnet.1:$kPort
FERRY_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export FERRY_SECRET
exec 3<&0
if ((raw)); then
  on_host 0 "$@" <&3 3<&- &
  launched+=("$!")
else
  for ((i = 0; i < hosts; i++)); do
    # --bind-to none: the hosts share this machine's CPUs, and each host's ferryrun would bind its
    # first rank to the first CPU, so every host's rank 0 would share one core (4x1: four ranks on
    # CPU 0, the other idle). mpirun runs with --bind-to none on the cluster likewise.
    launch=("$ferryrun" "${keep_going[@]}" --bind-to none -n "${layout[i]}" --world-size "$world" \
      --first-rank "${first[i]}" -- "$@")
    # Host 0's ferryrun reads our stdin (it gives it to rank 0), the others read nothing.
    if ((i == 0)); then
      on_host "$i" "${launch[@]}" <&3 3<&- &
    else
      on_host "$i" "${launch[@]}" </dev/null 3<&- &
    fi
    launched+=("$!")
  done
fi
exec 3<&-
if [[ -n $timeout ]]; then
  sleep "$timeout" &
  timer_pid=$!
fi

# Wait for every host. The first host to fail sets the exit status; the others get kReportSeconds
# to finish on their own (ferry ranks notice a dead peer and say so) before teardown stops them.
status=0
running=("${launched[@]}")
stop_at=""
while ((${#running[@]} > 0)); do
  waiting=("${running[@]}")
  [[ -z $timer_pid ]] || waiting+=("$timer_pid")
  done_pid=""
  rc=0
  wait -n -p done_pid "${waiting[@]}" || rc=$?
  if [[ -z $done_pid ]]; then  # nothing left to wait for (should not happen)
    break
  fi
  if [[ $done_pid == "$timer_pid" ]]; then
    timer_pid=""
    if [[ -n $stop_at ]]; then break; fi  # the report time after a failure is over
    say "timed out after $timeout s; stopping every host"
    status=124
    break
  fi
  for j in "${!launched[@]}"; do
    [[ ${launched[j]} == "$done_pid" ]] && host=$j
  done
  still=()
  for pid in "${running[@]}"; do [[ $pid == "$done_pid" ]] || still+=("$pid"); done
  running=("${still[@]}")
  if ((rc != 0 && status == 0)); then
    status=$rc
    if ((${#running[@]} > 0)); then
      say "host h$host exited with code $rc; stopping the other hosts in $kReportSeconds s"
      [[ -z $timer_pid ]] || kill "$timer_pid" 2>/dev/null || true
      sleep "$kReportSeconds" &
      timer_pid=$!
      stop_at=1
    fi
  fi
done
teardown
exit "$status"
