#!/usr/bin/env bash
# setup-system.sh: makes sure the system tools and libraries the build and tests need are
# present.  Fast when they are (only `command -v` and one `dpkg-query`); otherwise installs
# Debian packages with one `apt-get update` first (needs root; without it, says what is missing
# and stops).
set -euo pipefail

declare -A pkg_of=(
    [cmake]=cmake [cc]=gcc [make]=make [clang-format]=clang-format [clang]=clang
    [python3]=python3 [pkg-config]=pkg-config
)
# The test bed (`multilane testbed`, root only): namespaces, qdiscs, offloads, measurements.
if [ "$(id -u)" -eq 0 ]; then
    pkg_of+=([ip]=iproute2 [tc]=iproute2 [ethtool]=ethtool [iperf3]=iperf3
             [ping]=iputils-ping [unshare]=util-linux)
fi
PATH="$PATH:/usr/sbin:/sbin"
missing=()
for cmd in "${!pkg_of[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkg_of[$cmd]}")
done
# The venv module is a separate package on Debian's own python3.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    missing+=(python3-venv)
fi
# Libraries, not commands: ask dpkg (one call for all, no network).  OpenBLAS for the local
# DGEMM of mln-matmul (bench/matmul.c) and libsodium for the lanes' link layer (src/link);
# CMake refuses to configure without them.  Clang's runtime libraries (libFuzzer, its
# sanitizers) for the fuzz targets (make fuzz, tests/python/test_fuzz.py).  And the
# distribution's MPIs, the user MPIs of the deb-openmpi and deb-mpich builds (docs/MPI.md):
# Open MPI 4.1 and MPICH 4.0 with their Fortran bindings (gfortran), on which the Fortran
# tests run (tests/fortran/; the pinned wheels carry no Fortran bindings), and NetPIPE for
# each.  They are optional: without root the deb builds are left out, nothing fails.
deb_required=(libopenblas-dev libsodium-dev libclang-rt-14-dev)
deb_optional=(openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran netpipe-openmpi
              netpipe-mpich2)
if command -v dpkg-query >/dev/null 2>&1; then
    declare -A status_of=()
    while IFS=' ' read -r name state; do
        status_of[$name]=$state
    done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' \
                 "${deb_required[@]}" "${deb_optional[@]}" 2>/dev/null || true)
    for pkg in "${deb_required[@]}"; do
        [ "${status_of[$pkg]:-}" = ii ] || missing+=("$pkg")
    done
    if [ "$(id -u)" -eq 0 ]; then
        for pkg in "${deb_optional[@]}"; do
            [ "${status_of[$pkg]:-}" = ii ] || missing+=("$pkg")
        done
    fi
fi
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ "$(id -u)" -ne 0 ]; then
    echo "multilane: error: missing system packages: ${missing[*]}; install them (as root:" \
         "apt-get update && apt-get install -y ${missing[*]}) and run make again" >&2
    exit 1
fi
echo "multilane: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
