#!/usr/bin/env bash
# run.sh - runs fuzz targets for a bounded time each (make fuzz; docs/FUZZING.md).
#   fuzz/run.sh BUILD_DIR SECONDS TARGET...
# Each target runs on a fresh copy of its seed corpus (BUILD_DIR/run/TARGET; the committed
# fuzz/corpus/TARGET is only read), writes what it finds to BUILD_DIR/artifacts/TARGET/ and
# its output to BUILD_DIR/TARGET.log, and gets one line: time, executions, crashes, corpus
# size (files in the folder, and the inputs libFuzzer kept in memory: "corp"), coverage ("cov":
# edges, "ft": features).  FUZZ_MERGE=1 merges the new inputs that add coverage into fuzz/corpus/TARGET
# (libFuzzer -merge=1).  Exit status 1 when any target crashed (its input and the end of its
# log are printed), 2 on a usage error.
set -uo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 BUILD_DIR SECONDS TARGET..." >&2
    exit 2
fi
bin=$1
secs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
status=0

for t in "$@"; do
    work=$bin/run/$t
    art=$bin/artifacts/$t
    log=$bin/$t.log
    if [ ! -x "$bin/$t" ] || [ ! -d "$here/corpus/$t" ]; then
        echo "fuzz: $t: no program $bin/$t or no corpus $here/corpus/$t" >&2
        exit 2
    fi
    rm -rf "$work" "$art"
    mkdir -p "$work" "$art"
    cp "$here/corpus/$t"/* "$work"/
    start=$(date +%s)
    "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art/" "$work" >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    # the last status line: "#N DONE cov: C ft: F corp: ..." (or the last before a crash)
    last=$(grep -E '^#[0-9]+[[:space:]]+[A-Z]+[[:space:]]+cov:' "$log" | tail -n 1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
    if [ -z "$execs" ]; then # a crash ends the run before the final stats
        execs=$(sed -n 's/^#\([0-9]*\)[[:space:]].*/\1/p' <<<"$last")
    fi
    crashes=$(find "$art" -type f | wc -l)
    corpus=$(find "$work" -type f | wc -l)
    echo "fuzz: $t: ${took} s, ${execs:-?} executions, $crashes crashes, corpus $corpus files" \
        "(${corp:-?} in use), cov ${cov:-?}, ft ${ft:-?} (log: $log)"
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        status=1
        echo "fuzz: $t: FAILED (exit $rc); inputs kept: $(find "$art" -type f -printf '%p ')" >&2
        tail -n 40 "$log" >&2
        continue
    fi
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        before=$(find "$here/corpus/$t" -type f | wc -l)
        "$bin/$t" -merge=1 "$here/corpus/$t" "$work" >>"$log" 2>&1 || status=1
        echo "fuzz: $t: merged into fuzz/corpus/$t: $before -> $(find "$here/corpus/$t" -type f | wc -l) files"
    fi
done
exit $status
