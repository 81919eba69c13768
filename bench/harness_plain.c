/*
 * harness_plain.c - the harness's runtime for a plain MPI program (mln_bench_plain;
 * harness_int.h): no Multilane library, and no MPI call on MPI_COMM_WORLD but those that
 * `multilane grid run`'s interposition layer carries across sites (point-to-point, Barrier,
 * Abort, Comm_rank/size, Wtime, Get_processor_name, Get_library_version) plus the calls that
 * take no communicator (Init, Finalize, Initialized, Get_version, Error_string).  The
 * benchmark communicator is MPI_COMM_WORLD itself (no MPI_Comm_dup, no error handler: an MPI
 * error ends the job, MPI's default), and the harness's collectives are point-to-point
 * (coll_p2p.c).  mln-relay runs on it, so that the same binary runs as one stock MPI job and
 * under the grid.
 *
 * The MPI-free core sources the harness uses (parse.c, json.c, status.c, version.c) are
 * compiled into mln_bench_plain; the check macro's log line (mln_core.h: mln_log_write, whose
 * library version needs the library's context) is written here.
 */
#include "harness_int.h"
#include "mln_core.h"

#include <stdarg.h>
#include <string.h>

static int rt_plain_mpi_init(int *argc, char ***argv)
{
    return MPI_Init(argc, argv);
}

static mln_status_t rt_plain_init(mln_bench_t *b, int *inited)
{
    *inited = 0;
    b->comm = MPI_COMM_WORLD; /* rank and size: bench_start */
    return MLN_OK;
}

static void rt_plain_fini(mln_bench_t *b, int inited)
{
    (void)b;
    (void)inited;
}

const mln_bench_rt_t mln_bench_rt = {
    .name = "plain",
    .coll = &mln_bench_coll_p2p,
    .mpi_init = rt_plain_mpi_init,
    .init = rt_plain_init,
    .fini = rt_plain_fini,
};

/* The library's line format ("multilane LEVEL file:line: message", log.c) on stderr. */
void mln_log_write(mln_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    static const char *const names[] = {"none", "error", "warn", "info", "debug", "trace"};
    const char *base = strrchr(file, '/');
    const char *name =
        (int)level >= 0 && (size_t)level < sizeof(names) / sizeof(names[0]) ? names[level] : "?";
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "multilane %s %s:%d: %s\n", name, base ? base + 1 : file, line, msg);
    fflush(stderr);
}
