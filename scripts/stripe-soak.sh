#!/usr/bin/env bash
# stripe-soak.sh SECONDS [MPI...]
#
# The soak of the differential test (docs/STRIPE.md "Soak record"): mpi_stripe_diff for SECONDS
# per lane backend (tcp and mpi on 3 ranks, helper on 4: 3 application ranks) and per MPI
# (default: openmpi mpich), one after the other, on this host, with bursts of 64-byte messages
# (--burst-prob 0.01) and compute gaps longer than MLN_STRIPE_TIMEOUT (the test's default).
# Each run prints its seed and a progress line every 30 s; the last line of each is its
# summary.  Logs go to build/soak/<mpi>-<backend>.log; the script ends with one line per run
# and exits non-zero when any run failed.  Needs `make build`.
set -uo pipefail

seconds=${1:?usage: stripe-soak.sh SECONDS [MPI...]}
shift
mpis=("$@")
[ ${#mpis[@]} -gt 0 ] || mpis=(openmpi mpich)
root=$(cd "$(dirname "$0")/.." && pwd)
logs="$root/build/soak"
mkdir -p "$logs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
status=0
summary=()

for mpi in "${mpis[@]}"; do
    exe="$root/build/$mpi/bin/mpi_stripe_diff"
    launcher="$root/.deps/$mpi/bin/mpiexec"
    if [ ! -x "$exe" ] || [ ! -x "$launcher" ]; then
        echo "stripe-soak: $exe or $launcher missing: run make build" >&2
        exit 2
    fi
    extra=()
    [ "$mpi" != openmpi ] || extra=(--oversubscribe)
    for backend in tcp mpi helper; do
        np=3
        [ "$backend" != helper ] || np=4
        log="$logs/$mpi-$backend.log"
        echo "== stripe-soak: $mpi, backend $backend, $np ranks, $seconds s (log $log)"
        # the watchdog of a round stays the test's own; the launcher gets the whole run + 5 min
        timeout $((seconds + 300)) "$launcher" -n "$np" "${extra[@]}" "$exe" --backend "$backend" \
            --duration "$seconds" --burst-prob 0.01 2>&1 | tee "$log"
        rc=${PIPESTATUS[0]}
        line=$(grep "^mpi_stripe_diff: seed=" "$log" | tail -1)
        [ -n "$line" ] || line="no summary line (exit $rc)"
        [ "$rc" -eq 0 ] || status=1
        summary+=("$mpi $backend (exit $rc): $line")
    done
done
echo "== stripe-soak: summary"
printf '%s\n' "${summary[@]}"
exit $status
