# How ctest launches the MPI test programs (tests/c, tests/fortran): include() it in a test
# folder after find_package(MPI).  Sets, in the including scope:
#   mln_ompi              TRUE for Open MPI
#   MLN_MPIEXEC           the launcher command: MPIEXEC_EXECUTABLE under tests/mpiexec-retry.sh,
#                         which reruns it once where the launcher itself failed to start
#   MLN_MPIEXEC_PREFLAGS  mpiexec flags before the program (MPIEXEC_PREFLAGS, plus ours)
#   MLN_TEST_ENV          the tests' ENVIRONMENT list
# Launcher flags: Open MPI refuses root without these and needs --oversubscribe above the core
# count; both are harmless otherwise.  osc/ucx needs pml/ucx: without it, it prints an error at
# each window creation (python/multilane/launchers.py leaves it out the same way).
# Open MPI is told by what its launcher says it is (`mpiexec --version`: "(Open MPI) 5.0.11",
# "(OpenRTE) 4.1.4"; MPICH's: "HYDRA build details"); only a launcher that says neither is
# taken for Open MPI by ompi_info beside it.  Not by ompi_info alone: Debian puts both MPIs'
# tools in /usr/bin, so MPICH's mpiexec.mpich has an ompi_info beside it when Open MPI is
# installed too (and FindMPI reads no library version string unless asked to).
set(MLN_TEST_ENV "")
set(MLN_MPIEXEC "${PROJECT_SOURCE_DIR}/tests/mpiexec-retry.sh" "${MPIEXEC_EXECUTABLE}")
set(MLN_MPIEXEC_PREFLAGS ${MPIEXEC_PREFLAGS})
set(mln_ompi FALSE)
execute_process(COMMAND "${MPIEXEC_EXECUTABLE}" --version OUTPUT_VARIABLE mln_mpiexec_says
                ERROR_VARIABLE mln_mpiexec_says TIMEOUT 20 RESULT_VARIABLE mln_mpiexec_rc)
get_filename_component(mln_mpiexec_dir "${MPIEXEC_EXECUTABLE}" DIRECTORY)
if(mln_mpiexec_says MATCHES "Open MPI|OpenRTE|Open RTE|PRRTE")
    set(mln_ompi TRUE)
elseif(NOT mln_mpiexec_says MATCHES "HYDRA|MPICH" AND EXISTS "${mln_mpiexec_dir}/ompi_info")
    set(mln_ompi TRUE)
endif()
if(mln_ompi)
    list(APPEND MLN_MPIEXEC_PREFLAGS --oversubscribe)
    set(MLN_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1;OMPI_MCA_osc=^ucx")
else()
    # MPICH's idle ranks poll without yielding; its progress throttle (ch4, MPICH 4.3 on; older
    # ones ignore it) sleeps after 1000 empty polls in a row, as Open MPI's yield when idle:
    # the tests of 3 ranks or more on 2 cores took 206 s without, 96 s with
    # (python/multilane/launchers.py MPICH_IDLE_ENV, the same for oversubscribed runs)
    set(MLN_TEST_ENV "MPIR_CVAR_CH4_PROGRESS_THROTTLE=1;MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT=1000")
endif()
