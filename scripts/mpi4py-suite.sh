#!/usr/bin/env bash
# mpi4py's own test suite without and with libmultilane-preload.so, compared test by test
# (docs/PRELOAD-MPI4PY.md).  Set-up, each step skipped when done: the pinned mpi4py sdist
# fetched once with pip into .deps/mpi4py/, built per MPI into .deps/mpi4py-<mpi>/.
#
#   scripts/mpi4py-suite.sh --setup-only                 # fetch and build only (make setup)
#   scripts/mpi4py-suite.sh                              # full suite, both MPIs, np 2, local
#   scripts/mpi4py-suite.sh --mpi mpich --np 2,4 --subset ci
#   scripts/mpi4py-suite.sh --scenario scenarios/wan-2site.toml --np 2,4   # on the test bed
#   scripts/mpi4py-suite.sh --grid --mpi openmpi,mpich,a=openmpi,b=mpich --np 2,4
#                            # across two sites under `multilane grid run --local`, beside one
#                            # plain job (python/multilane/mpi4py_grid.py)
#
# Exit 0: every comparison the same and the layer did something; 1: a test differs, a run
# did not finish, or the layer neither striped nor broadcast; 2: set-up failed.  With --grid:
# 0 when every grid run has the plain run's outcomes, 1 when a test differs or a run did not
# finish.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$root/.venv/bin/python
if [[ ! -x $python ]]; then
    echo "mpi4py-suite: $python is missing: run make venv" >&2
    exit 2
fi
export MULTILANE_ROOT=$root
exec "$python" -m multilane.mpi4py_suite "$@"
