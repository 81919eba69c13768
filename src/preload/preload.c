/*
 * preload.c - the interposition layer's life cycle: the real entry points, MPI_Init and
 * MPI_Finalize, what it knows about communicators, and its counters (docs/PRELOAD.md).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "preload_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <stdint.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

mln_pl_t mln_pl = {.keyval = MPI_KEYVAL_INVALID};

/* ---- the real MPI -------------------------------------------------------------------------- */

/* The MPI library this layer was built for (CMake: the soname of its libmpi), opened again
 * when RTLD_NEXT cannot see it: a program that loaded it with RTLD_LOCAL (mpi4py does, through
 * its extension module) keeps it out of the global scope. */
#ifndef MLN_PL_LIBMPI
#define MLN_PL_LIBMPI ""
#endif

static void *libmpi_handle;

static void *lookup(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);

    if (fn == NULL && libmpi_handle == NULL && MLN_PL_LIBMPI[0] != '\0')
        libmpi_handle = dlopen(MLN_PL_LIBMPI, RTLD_NOLOAD | RTLD_LAZY);
    if (fn == NULL && libmpi_handle != NULL)
        fn = dlsym(libmpi_handle, name);
    return fn;
}

/* The executable code of the MPI library: calls from there (MPICH's ROMIO calls MPI_X by
 * name) are MPI's own, and go straight back to it. */
uintptr_t mln_pl_mpi_text_lo, mln_pl_mpi_text_hi; /* wrappers_gen.h: mln_pl_from_mpi */
int mln_pl_p2p;

static int find_text(struct dl_phdr_info *info, size_t size, void *base)
{
    (void)size;
    if ((void *)info->dlpi_addr != base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
            if (mln_pl_mpi_text_lo == 0 || lo < mln_pl_mpi_text_lo)
                mln_pl_mpi_text_lo = lo;
            if (hi > mln_pl_mpi_text_hi)
                mln_pl_mpi_text_hi = hi;
        }
    }
    return 1;
}

static void find_mpi_text(void)
{
    Dl_info where;
    void *fn;

    memcpy(&fn, &mln_pmpi.Send, sizeof(fn));
    if (fn != NULL && dladdr(fn, &where) != 0 && where.dli_fbase != NULL)
        dl_iterate_phdr(find_text, where.dli_fbase);
}

/* ULFM (MPI's fault-tolerance extension, in Open MPI 5 and MPICH) where the library has it:
 * a blocking collective on a revoked communicator must fail at once with MPI_ERR_REVOKED, so
 * it goes to MPI as it is. */
static int (*comm_is_revoked)(MPI_Comm comm, int *flag);

int mln_pl_revoked(MPI_Comm comm)
{
    int flag = 0;

    return comm_is_revoked != NULL && comm_is_revoked(comm, &flag) == MPI_SUCCESS && flag;
}

/* Resolves the table once; on failure says which entries are missing and returns -1. */
static int resolve(void)
{
    static int state; /* 0: not yet, 1: done, -1: failed */
    char missing[512];

    if (state != 0)
        return state > 0 ? 0 : -1;
    if (mln_pmpi_resolve(lookup, missing, sizeof(missing)) != 0) {
        fprintf(stderr,
                "multilane-preload: the MPI library (%s) lacks %s: this layer was built for "
                "another MPI\n",
                MLN_PL_LIBMPI[0] ? MLN_PL_LIBMPI : "libmpi", missing);
        state = -1;
        return -1;
    }
    find_mpi_text();
    *(void **)&comm_is_revoked = lookup("PMPIX_Comm_is_revoked");
    if (comm_is_revoked == NULL)
        *(void **)&comm_is_revoked = lookup("MPIX_Comm_is_revoked");
    state = 1;
    return 0;
}

__attribute__((constructor)) static void preload_load(void)
{
    resolve(); /* libmpi is a dependency of this library: found now in all usual cases */
}

/* ---- communicators -------------------------------------------------------------------------- */

static void stash_clear(mln_pl_comm_t *info)
{
    while (info->stash) {
        mln_pl_stash_t *e = info->stash;
        info->stash = e->next;
        mln_pl_stash_free(e);
    }
}

static int comm_info_delete(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    mln_pl_comm_t *info = attr;

    (void)comm;
    (void)keyval;
    (void)extra;
    if (mln_pl.last_info == info) {
        mln_pl.last_info = NULL;
        mln_pl.last_comm = MPI_COMM_NULL;
    }
    if (info->stash)
        fprintf(stderr, "multilane-preload: a communicator freed with messages a probe found "
                        "and nobody received\n");
    stash_clear(info);
    /* after the layer's MPI_Finalize began, MPI frees what is left itself */
    if (info->coll != MPI_COMM_NULL && info->coll != comm && mln_pl.on)
        MPI_Comm_free(&info->coll);
    free(info->remote);
    free(info);
    return MPI_SUCCESS;
}

/* Who is remote in comm, from each rank's world rank and the engine's site map. */
static mln_pl_comm_t *comm_info_make(MPI_Comm comm)
{
    mln_pl_comm_t *info = calloc(1, sizeof(*info));
    MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
    int inter = 0, *ranks = NULL, *world = NULL;

    if (info == NULL)
        return NULL;
    info->plain = 1;
    info->coll = MPI_COMM_NULL;
    if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
        MPI_Comm_size(comm, &info->size) != MPI_SUCCESS)
        return info;
    info->remote = calloc((size_t)info->size, 1);
    ranks = malloc(sizeof(int) * (size_t)info->size);
    world = malloc(sizeof(int) * (size_t)info->size);
    if (info->remote == NULL || ranks == NULL || world == NULL ||
        MPI_Comm_group(comm, &g) != MPI_SUCCESS ||
        MPI_Comm_group(MPI_COMM_WORLD, &wg) != MPI_SUCCESS)
        goto out;
    for (int i = 0; i < info->size; i++)
        ranks[i] = i;
    if (MPI_Group_translate_ranks(g, info->size, ranks, wg, world) != MPI_SUCCESS)
        goto out;
    for (int i = 0; i < info->size; i++) {
        /* a process outside MPI_COMM_WORLD (spawned, connected): no lanes, plain MPI */
        info->remote[i] = world[i] != MPI_UNDEFINED && world[i] >= 0 && mln_stripe_remote(world[i]);
        info->spans |= info->remote[i];
    }
    info->plain = !info->spans;
out:
    if (g != MPI_GROUP_NULL)
        MPI_Group_free(&g);
    if (wg != MPI_GROUP_NULL)
        MPI_Group_free(&wg);
    free(ranks);
    free(world);
    return info;
}

mln_pl_comm_t *mln_pl_comm(MPI_Comm comm)
{
    mln_pl_comm_t *info = NULL;
    int flag = 0;

    if (comm == mln_pl.last_comm && mln_pl.last_info != NULL)
        return mln_pl.last_info;
    if (comm == MPI_COMM_NULL ||
        MPI_Comm_get_attr(comm, mln_pl.keyval, &info, &flag) != MPI_SUCCESS)
        return NULL;
    if (!flag) {
        info = comm_info_make(comm);
        if (info == NULL)
            return NULL;
        if (MPI_Comm_set_attr(comm, mln_pl.keyval, info) != MPI_SUCCESS) {
            free(info->remote);
            free(info);
            return NULL;
        }
    }
    mln_pl.last_comm = comm;
    mln_pl.last_info = info;
    return info;
}

MPI_Count mln_pl_bytes(MPI_Count count, MPI_Datatype dtype)
{
    MPI_Count size = 0;

    if (count <= 0 || dtype == MPI_DATATYPE_NULL || MPI_Type_size_x(dtype, &size) != MPI_SUCCESS)
        return 0;
    return size > 0 && count > LLONG_MAX / size ? LLONG_MAX : count * size;
}

int mln_pl_send_engine(MPI_Comm comm, int dest, MPI_Count count, MPI_Datatype dtype)
{
    mln_pl_comm_t *info;
    MPI_Count bytes;

    /* the peer first: a local or plain peer (every call of a job on one host) costs no
     * MPI_Type_size */
    if (!mln_pl_p2p || dest < 0 || (info = mln_pl_comm(comm)) == NULL || info->plain ||
        dest >= info->size || !info->remote[dest])
        return 0;
    bytes = mln_pl_bytes(count, dtype);
    return (uint64_t)bytes > mln_stripe_threshold() || bytes == 64;
}

int mln_pl_recv_engine(MPI_Comm comm, int source)
{
    mln_pl_comm_t *info;

    if (!mln_pl_p2p || source == MPI_PROC_NULL || (info = mln_pl_comm(comm)) == NULL || info->plain)
        return 0;
    if (source == MPI_ANY_SOURCE)
        return 1;
    return source >= 0 && source < info->size && info->remote[source];
}

int mln_pl_error(MPI_Comm comm, mln_status_t st)
{
    int code;

    switch (st) {
    case MLN_OK:
        return MPI_SUCCESS;
    case MLN_ERR_TRUNCATE:
        code = MPI_ERR_TRUNCATE;
        break;
    case MLN_ERR_ARG:
        code = MPI_ERR_ARG;
        break;
    case MLN_ERR_NOMEM:
        code = MPI_ERR_NO_MEM;
        break;
    default:
        code = MPI_ERR_OTHER;
        break;
    }
    if (MLN_PL_GRID(comm)) /* fatal: every site ends */
        mln_pl_grid_error(comm, code);
    else if (comm != MPI_COMM_NULL)
        MPI_Comm_call_errhandler(comm, code); /* aborts under MPI_ERRORS_ARE_FATAL, as MPI */
    return code;
}

/* Levels of the layer's lock this thread holds. */
static __thread int lock_depth;

void mln_pl_lock(void)
{
    pthread_mutex_lock(&mln_pl.lock);
    lock_depth++;
}

void mln_pl_unlock(void)
{
    lock_depth--;
    pthread_mutex_unlock(&mln_pl.lock);
}

void mln_pl_idle(int *spins)
{
    const int depth = mln_pl.threaded ? lock_depth : 0;

    if (mln_pl.grid != NULL && depth == 0) { /* grid mode: gateways share the host's cores */
        mln_pl_grid_idle(spins);
        return;
    }
    if (depth == 0 && ++*spins < 64)
        return;
    *spins = 0;
    for (int i = 0; i < depth; i++) /* other threads of the program get their turn */
        mln_pl_unlock();
    sched_yield(); /* and so do other ranks of an oversubscribed host */
    for (int i = 0; i < depth; i++)
        mln_pl_lock();
}

void mln_pl_linger(double seconds)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(seconds * 1e9)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- MPI_Init, MPI_Finalize --------------------------------------------------------------- */

static void start_failed(const char *why)
{
    fprintf(stderr, "multilane-preload: %s\n", why);
    fflush(stderr);
    mln_pl_linger(MLN_PL_LINGER_START_S);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Multilane on top of the MPI that was just initialised. */
static void start(void)
{
    mln_config_t cfg;
    char err[512] = "";
    pthread_mutexattr_t attr;
    int provided = MPI_THREAD_SINGLE, rank = 0;
    mln_pl_comm_t *world;
    const char *env;

    if (mln_config_load(NULL, NULL, &cfg, err, sizeof(err)) != MLN_OK)
        start_failed(err); /* a bad MLN_* value: said once, clearly, before anything runs */
    if (cfg.stripe_backend == MLN_STRIPE_HELPER)
        start_failed("MLN_STRIPE_BACKEND=helper cannot be used under the interposition layer "
                     "(its helper ranks would be taken from the program's MPI_COMM_WORLD): "
                     "use tcp or mpi");
    MPI_Query_thread(&provided);
    mln_pl.threaded = provided == MPI_THREAD_MULTIPLE;
    env = getenv("MLN_PRELOAD_THREADS");
    if (mln_pl.threaded && env != NULL && strcmp(env, "0") == 0 && mln_relay_wanted()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            fprintf(stderr, "multilane-preload: MLN_PRELOAD_THREADS=0 is ignored under "
                            "`multilane grid run` (MPI_COMM_WORLD spans the sites only through "
                            "the layer)\n");
    } else if (mln_pl.threaded && env != NULL && strcmp(env, "0") == 0) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            fprintf(stderr, "multilane-preload: MPI_THREAD_MULTIPLE with MLN_PRELOAD_THREADS=0: "
                            "the layer passes every call to MPI unchanged (no striping)\n");
        return;
    }
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&mln_pl.lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (mln_init() != MLN_OK)
        start_failed("Multilane could not start (the line above says why)");
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_info_delete, &mln_pl.keyval, NULL) !=
            MPI_SUCCESS ||
        mln_pmpi.Comm_dup(MPI_COMM_SELF, &mln_pl.self) != MPI_SUCCESS)
        start_failed("MPI refused the layer's set-up (a keyval, a duplicate of MPI_COMM_SELF)");
    env = getenv("MLN_PRELOAD_STATS");
    mln_pl.stats = env != NULL && env[0] != '\0' && strcmp(env, "0") != 0;
    env = getenv("MLN_PRELOAD_COLL_PROGRESS");
    mln_pl.coll_progress = env == NULL || strcmp(env, "0") != 0;
    mln_pl.on = 1;
    mln_pl_comm_born(MPI_COMM_WORLD);
    world = mln_pl_comm(MPI_COMM_WORLD); /* its entry says whether any rank is remote */
    mln_pl_p2p = world != NULL && world->spans;
    if (mln_relay_wanted()) /* the grid's world (preload_grid.c): every site is up after it */
        mln_pl_grid_start();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 && cfg.log_level >= MLN_LOG_INFO)
        fprintf(stderr,
                "multilane-preload: active: %s lanes x %d above %llu bytes to remote peers, "
                "thread level %d%s\n",
                mln_stripe_backend_name(), mln_stripe_lanes(),
                (unsigned long long)mln_stripe_threshold(), provided,
                mln_pl.threaded ? " (calls into the layer are serialised by one lock)" : "");
}

int mln_pl_Init(int *argc, char ***argv)
{
    int rc;

    if (resolve() != 0)
        return MPI_ERR_OTHER;
    rc = mln_pmpi.Init(argc, argv);
    if (rc == MPI_SUCCESS)
        start();
    return rc;
}

int mln_pl_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc;

    if (resolve() != 0)
        return MPI_ERR_OTHER;
    rc = mln_pmpi.Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        start(); /* `provided` is MPI's own answer, passed on untouched */
    return rc;
}

static void print_stats(void)
{
    mln_stripe_counters_t c;
    int rank = 0, size = 0;
    char grid[256] = "";

    mln_stripe_counters(&c);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (mln_pl.grid != NULL) /* global rank and size, and what went through the relay */
        mln_pl_grid_stats(grid, sizeof(grid), &rank, &size);
    fprintf(stderr,
            "multilane-preload: rank=%d size=%d striped_send_msgs=%llu striped_send_bytes=%llu "
            "striped_recv_msgs=%llu striped_recv_bytes=%llu bcast_calls=%llu bcast_bytes=%llu%s\n",
            rank, size, (unsigned long long)c.send_msgs, (unsigned long long)c.send_bytes,
            (unsigned long long)c.recv_msgs, (unsigned long long)c.recv_bytes,
            (unsigned long long)mln_pl.bcast_calls, (unsigned long long)mln_pl.bcast_bytes, grid);
}

int mln_pl_Finalize(void)
{
    if (mln_pl.on) {
        MLN_PL_LOCK();
        if (mln_pl.grid != NULL) /* every site's ranks reach MPI_Finalize before any leaves */
            mln_pl_grid_finish();
        mln_pl_drain(1); /* buffered sends: MPI_Finalize completes them */
        /* MPI_Finalize is collective: no rank closes its lanes (mln_finalize) while a peer may
         * still read the end of a message from them (a socket closed with data unread on it
         * is reset, and what it still had to send is lost). */
        MPI_Request all;
        if (mln_pmpi.Ibarrier(MPI_COMM_WORLD, &all) == MPI_SUCCESS)
            mln_pl_poll(&all);
        if (mln_pl.stats)
            print_stats();
        mln_pl_grid_stop();
        mln_pl_msgs_fini();
        mln_pl.last_comm = MPI_COMM_NULL;
        mln_pl.last_info = NULL;
        /* MPI deletes MPI_COMM_SELF's attributes at MPI_Finalize, not MPI_COMM_WORLD's: the
         * layer's entry on it (and its communicator for collectives) goes now */
        MPI_Comm_delete_attr(MPI_COMM_WORLD, mln_pl.keyval);
        mln_pl.on = 0;
        mln_pl_p2p = 0;
        MPI_Comm_free(&mln_pl.self);
        mln_finalize();
        MLN_PL_UNLOCK();
    }
    return mln_pmpi.Finalize();
}
