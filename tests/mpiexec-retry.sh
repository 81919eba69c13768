#!/usr/bin/env bash
# mpiexec-retry.sh MPIEXEC ARG...: how ctest starts the MPI test programs (tests/c, tests/fortran;
# cmake/MultilaneTestLaunch.cmake). It runs the command as given, passing on its output and its
# exit status, with one exception: where the launcher itself failed to start, before any rank ran,
# it says so and runs the command once more. The one such failure known: Open MPI 5's PMIx server
# printing "The PMIx server's listener thread failed to start" (2 fresh-clone runs of `make test`
# in a row; the same command passed when run again). A rank's own failure, or a launcher that
# started, is never retried. The command's stderr comes out on stdout (ctest merges them anyway).
set -u
log=$(mktemp "${TMPDIR:-/tmp}/mln-mpiexec.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
for try in 1 2; do
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ] || [ "$try" -eq 2 ] ||
        ! grep -q "PMIx server's listener thread failed to start" "$log"; then
        exit "$rc"
    fi
    echo "mpiexec-retry.sh: the launcher failed to start (exit $rc, no rank ran): once more"
done
