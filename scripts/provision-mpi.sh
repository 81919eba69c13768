#!/usr/bin/env bash
# provision-mpi.sh NAME VERSION PREFIX
#
# Installs a pinned MPI from its Python wheel into its own prefix (a virtual environment that
# holds bin/mpicc, bin/mpirun, lib/, include/), without root.  Idempotent: when PREFIX already
# holds VERSION it returns at once.  Used by `make deps`; see docs/MPI.md.
set -euo pipefail

name=${1:?usage: provision-mpi.sh NAME VERSION PREFIX}
version=${2:?usage: provision-mpi.sh NAME VERSION PREFIX}
prefix=${3:?usage: provision-mpi.sh NAME VERSION PREFIX}
python=${PYTHON:-python3}
stamp="$prefix/.multilane-mpi"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$name $version" ] && [ -x "$prefix/bin/mpicc" ]; then
    exit 0
fi

echo "multilane: installing $name $version into $prefix (PyPI wheel, no root needed)"
rm -rf "$prefix"
"$python" -m venv "$prefix"
"$prefix/bin/python" -m pip install --quiet --disable-pip-version-check "$name==$version"
if [ ! -x "$prefix/bin/mpicc" ]; then
    echo "multilane: error: the $name $version wheel did not provide $prefix/bin/mpicc" >&2
    exit 1
fi
echo "$name $version" >"$stamp"
