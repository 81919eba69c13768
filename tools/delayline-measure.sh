#!/usr/bin/env bash
# delayline-measure.sh - measures mln-delayline between two network namespaces (needs root,
# iperf3, ping, ethtool).  Topology:  A (10.250.0.1) --veth-- W [mln-delayline] --veth-- B (.2)
# Usage: tools/delayline-measure.sh [path/to/mln-delayline] [seconds]
# Prints one table row per run; removes exactly the namespaces and processes it created.
set -euo pipefail
BIN=${1:-build/openmpi/bin/mln-delayline}
SECS=${2:-8}
BIN=$(readlink -f "$BIN")
P="dltest-$$-"
NA=${P}a NB=${P}b NW=${P}w
TMP=$(mktemp -d /tmp/dltest-$$.XXXX)
CREATED=() PIDS=()
TCK=$(getconf CLK_TCK)

cleanup() {
    local p n
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for n in "${CREATED[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "$NA" "$NB" "$NW"; do
    ip netns add "$n"
    CREATED+=("$n")
    ip -n "$n" link set lo up
done
ip -n "$NA" link add va type veth peer name wa netns "$NW"
ip -n "$NB" link add vb type veth peer name wb netns "$NW"
veths() { printf '%s\n' "$NA va" "$NB vb" "$NW wa" "$NW wb"; }
while read -r ns ifc; do
    ip -n "$ns" link set "$ifc" mtu 9000 up
    if command -v ethtool >/dev/null; then
        ip netns exec "$ns" ethtool -K "$ifc" tx off tso off gso off gro off sg off >/dev/null 2>&1 ||
            echo "warning: ethtool -K $ifc failed" >&2
    else
        echo "warning: no ethtool: offloads left on" >&2
    fi
done < <(veths)
ip -n "$NA" addr add 10.250.0.1/24 dev va
ip -n "$NB" addr add 10.250.0.2/24 dev vb
RMEM_DEFAULT=$(ip netns exec "$NB" sysctl -n net.ipv4.tcp_rmem)

ip netns exec "$NB" iperf3 -s >"$TMP/iperf3-server.log" 2>&1 &
PIDS+=($!)

DL_PID=""
dl_start() { # args: delay-line options
    : >"$TMP/dl.out"
    ip netns exec "$NW" "$BIN" --a wa --b wb --stats "$TMP/dl.json" "$@" \
        >"$TMP/dl.out" 2>"$TMP/dl.err" &
    DL_PID=$!
    PIDS+=("$DL_PID")
    for _ in $(seq 100); do
        grep -qx ready "$TMP/dl.out" && return 0
        sleep 0.05
    done
    echo "mln-delayline did not become ready:" >&2
    cat "$TMP/dl.err" >&2
    exit 1
}
dl_stop() {
    kill -TERM "$DL_PID"
    wait "$DL_PID" || true
}
dl_drops() { # ab drops loss/queue/flow/kernel from --stats (after SIGUSR1), minus "$1" if given
    kill -USR1 "$DL_PID"
    sleep 0.2
    python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))["ab"]
v=[d["drop_loss"], d["drop_queue"], d["drop_flow"], d["drop_kernel"]]
b=[int(x) for x in sys.argv[2].split("/")] if len(sys.argv) > 2 else [0, 0, 0, 0]
print("/".join(str(x - y) for x, y in zip(v, b)))' "$TMP/dl.json" "$@"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

printf '%-28s %5s %3s %7s %7s %5s %12s %14s\n' case cc P Mbit/s retrans cpu% rtt_min/avg drops_l/q/f/k
run() { # label streams congestion-control
    local label=$1 n=$2 cc=$3 t0 t1 c0 c1 mbps retr cpu before
    sleep 0.5
    before=$(dl_drops)
    c0=$(cpu_ticks "$DL_PID")
    t0=$(date +%s.%N)
    ip netns exec "$NA" iperf3 -c 10.250.0.2 -t "$SECS" -P "$n" -C "$cc" -J >"$TMP/iperf.json"
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$DL_PID")
    read -r mbps retr < <(python3 -c 'import json,sys
e=json.load(open(sys.argv[1]))["end"]
print("%.0f %d" % (e["sum_received"]["bits_per_second"]/1e6, e["sum_sent"].get("retransmits",0)))' \
        "$TMP/iperf.json")
    cpu=$(awk -v a="$c0" -v b="$c1" -v t0="$t0" -v t1="$t1" -v h="$TCK" \
        'BEGIN{printf "%.0f", (b-a)/h/(t1-t0)*100}')
    drops=$(dl_drops "$before")
    printf '%-28s %5s %3s %7s %7s %5s %12s %14s\n' "$label" "$cc" "$n" "$mbps" "$retr" "$cpu" "$RTT" "$drops"
}
rtt() { # min/avg of 20 pings after one warm-up (ARP)
    ip netns exec "$NA" ping -q -c 1 10.250.0.2 >/dev/null
    RTT=$(ip netns exec "$NA" ping -q -c 20 -i 0.05 10.250.0.2 |
        awk -F'[/ ]' '/rtt|round-trip/ {printf "%.2f/%.2f", $7, $8}')
}

dl_start --delay 5ms --rate 1gbit
rtt
for cc in bbr cubic; do
    run "5ms 1gbit autotune" 1 $cc
    run "5ms 1gbit autotune" 8 $cc
done
ip netns exec "$NB" sysctl -qw net.ipv4.tcp_rmem="4096 131072 262144"
run "5ms 1gbit rmem 128K" 1 cubic
run "5ms 1gbit rmem 128K" 8 cubic
ip netns exec "$NB" sysctl -qw net.ipv4.tcp_rmem="$RMEM_DEFAULT"
dl_stop

dl_start --delay 5ms --rate 1gbit --flow-rate 100mbit
rtt
run "5ms 1gbit flow-rate 100mbit" 1 cubic
run "5ms 1gbit flow-rate 100mbit" 8 cubic
dl_stop

dl_start --delay 5ms --rate 1gbit --loss 0.001
rtt
for cc in cubic bbr; do
    run "5ms 1gbit loss 0.001" 1 $cc
    run "5ms 1gbit loss 0.001" 8 $cc
done
dl_stop

dl_start --delay 5ms
rtt
run "5ms unlimited rate" 8 cubic
dl_stop

while read -r ns ifc; do
    ip -n "$ns" link set "$ifc" mtu 1500
done < <(veths)
dl_start --delay 5ms --rate 1gbit
rtt
run "MTU 1500 5ms 1gbit" 1 cubic
run "MTU 1500 5ms 1gbit" 8 cubic
dl_stop
echo "last delay-line counters (stderr):"
cat "$TMP/dl.err"
