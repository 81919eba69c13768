/*
 * mpi_bcast.c - the broadcast (mln_bcast) against MPI_Bcast's semantics, every byte checked on
 * every rank.  One program, sub-tests chosen with --test; it sets the MLN_BCAST_* tunables and
 * MLN_NODE_SIZE from its options before mln_init, so the same test runs each algorithm:
 *
 *   mpi_bcast [--algo auto|sme|hier|mpi] [--leaders L] [--threshold SIZE] [--node-size N]
 *             [--watchdog S] [--test all|NAME[,NAME...]]
 *
 * --node-size N > 0 makes blocks of N consecutive ranks of the broadcast's communicator one
 * node (several nodes on one host; the last block may be smaller); 0 takes MPI's shared-memory
 * groups.  After every broadcast of at least one byte the test asks mln_bcast_last_algo what
 * ran and compares it with what the options and the communicator's nodes call for: below the
 * threshold or on one node MPI_Bcast; else hier for --algo hier, and for sme (auto) sme with
 * L = min(--leaders, fewest ranks on a node) leaders, or hier where that L is 1.
 *
 * Byte `off` of message `msg` broadcast from `root` is pat(root, msg, off) (stripe_check.h);
 * the root fills its buffer, the other ranks start from 0x5A, and every rank checks every byte
 * afterwards (the root: that its buffer is unchanged), plus 64 guard bytes past the end that
 * must keep their 0xEE.  Rank 0 prints one line per sub-test, "ok NAME (T s)" or
 * "FAIL NAME: rank R: why", then a summary; the exit status is non-zero when a sub-test failed.
 * A sub-test that does not finish within --watchdog seconds prints "FAIL NAME: ... (hang)" and
 * ends the job instead of hanging it.
 *
 * Sub-tests: roots (every root, sizes around the threshold), large (64 MiB; 8 Mi + 3 MPI_INT),
 * types (a vector type: the gaps stay untouched), sequence (20 calls back to back, roots and
 * sizes changing), comms (dup, halves, reversed ranks, freed and made again), args (refused
 * arguments and intercommunicators return a status, on every rank, without communicating),
 * cycles (mln_finalize / mln_init with a communicator kept across: its set-up is found again,
 * set-ups and windows do not grow; made again when MLN_BCAST_LEADERS changes).
 */
#include "stripe_check.h"

#include "../bcast/bcast_int.h" /* mln_bcast_alive: set-ups and windows of the process */

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GUARD 64        /* bytes past the end of every receive buffer */
#define GUARD_BYTE 0xEE /* the guard's and the datatype gaps' content */
#define START_BYTE 0x5A /* a non-root buffer before the broadcast */

typedef struct bopts {
    const char *algo; /* auto, sme, hier, mpi */
    const char *threshold;
    const char *tests;
    int leaders, node_size, watchdog;
} bopts_t;

/* The per-rank test context: the checks of stripe_check.c work on `t`. */
typedef struct bctx {
    tctx_t t; /* t.comm: the base communicator, mln_comm_world(); t.thr: the threshold */
    const bopts_t *opt;
    mln_bcast_algo_t algo; /* --algo */
    int msg;               /* index of the next message (the pattern's `msg`) */
} bctx_t;

/* The nodes of a communicator as mln_bcast should see them. */
typedef struct shape {
    int nodes, min_node; /* number of nodes, fewest ranks on one */
} shape_t;

/* ---- what to expect --------------------------------------------------------------------- */

/* Collective over comm: blocks of --node-size ranks, or MPI's shared-memory groups. */
static shape_t shape_of(const bctx_t *b, MPI_Comm comm)
{
    shape_t s;
    int size, lrank, lsize, first;
    MPI_Comm node;

    MPI_Comm_size(comm, &size);
    if (b->opt->node_size > 0) {
        const int n = b->opt->node_size;
        s.nodes = (size + n - 1) / n;
        s.min_node = size - (s.nodes - 1) * n; /* the last block: at most n */
        return s;
    }
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    first = lrank == 0;
    MPI_Allreduce(&first, &s.nodes, 1, MPI_INT, MPI_SUM, comm);
    MPI_Allreduce(&lsize, &s.min_node, 1, MPI_INT, MPI_MIN, comm);
    MPI_Comm_free(&node);
    return s;
}

static const char *algo_name(mln_bcast_algo_t a)
{
    const char *name = mln_bcast_algo_name(a);
    return name ? name : "(out of range)";
}

/* mln_bcast_last_algo after a broadcast of `bytes` on a communicator of shape `s`. */
static void check_algo(bctx_t *b, const shape_t *s, int64_t bytes, const char *what)
{
    mln_bcast_algo_t want = MLN_BCAST_MPI, got;
    int want_leaders = 0, leaders = -1;

    if (bytes == 0)
        return; /* nothing to move: any path will do */
    if (bytes >= b->t.thr && s->nodes > 1 && b->algo != MLN_BCAST_MPI) {
        want_leaders = b->opt->leaders < s->min_node ? b->opt->leaders : s->min_node;
        if (b->algo == MLN_BCAST_HIER)
            want_leaders = 1;
        want = want_leaders > 1 ? MLN_BCAST_SME : MLN_BCAST_HIER;
    }
    got = mln_bcast_last_algo(&leaders);
    if (got != want || leaders != want_leaders)
        fail(&b->t,
             "%s: mln_bcast_last_algo says %s with %d leaders, expected %s with %d (%d nodes, "
             "fewest ranks on one %d)",
             what, algo_name(got), leaders, algo_name(want), want_leaders, s->nodes, s->min_node);
}

/* ---- one checked broadcast -------------------------------------------------------------- */

/* Guard bytes past the end (and the root's unchanged buffer) are checked by the caller. */
static int guard_intact(bctx_t *b, const uint8_t *guard, const char *what)
{
    for (int i = 0; i < GUARD; i++)
        if (guard[i] != GUARD_BYTE) {
            fail(&b->t, "%s: wrote past the end of the buffer (guard byte %d is 0x%02x)", what, i,
                 guard[i]);
            return 0;
        }
    return 1;
}

/* Broadcasts n bytes (MPI_BYTE) from root on comm (shape s) and checks them on every rank. */
static void bcast_bytes(bctx_t *b, MPI_Comm comm, const shape_t *s, int64_t n, int root,
                        const char *what)
{
    uint8_t *buf = xmalloc(n + GUARD);
    const int msg = b->msg++;
    int rank;
    char label[160];

    MPI_Comm_rank(comm, &rank);
    snprintf(label, sizeof(label), "%s: %lld B from root %d (msg %d)", what, (long long)n, root,
             msg);
    if (rank == root)
        fill(buf, n, root, msg);
    else
        memset(buf, START_BYTE, (size_t)n);
    memset(buf + n, GUARD_BYTE, GUARD);
    if (expect(&b->t, mln_bcast(buf, n, MPI_BYTE, root, comm), MLN_OK, label) &&
        check(&b->t, buf, n, root, msg, label) && guard_intact(b, buf + n, label))
        check_algo(b, s, n, label);
    free(buf);
}

/* ---- sub-tests -------------------------------------------------------------------------- */

/* Every root; sizes around the threshold, empty, one byte, odd. */
static void t_roots(bctx_t *b)
{
    const int64_t thr = b->t.thr;
    const int64_t sizes[] = {0, 1, 1000003, thr - 1, thr, thr + 1};
    const shape_t s = shape_of(b, b->t.comm);

    for (int root = 0; root < b->t.size; root++)
        for (int i = 0; i < (int)(sizeof(sizes) / sizeof(sizes[0])); i++)
            if (sizes[i] >= 0)
                bcast_bytes(b, b->t.comm, &s, sizes[i], root, "roots");
}

/* Element i of an int broadcast. */
static int32_t int_pat(int root, int msg, int64_t i)
{
    return (int32_t)((uint32_t)i * 2654435761u + (uint32_t)msg * 7919u + (uint32_t)root * 104729u);
}

/* 64 MiB of bytes from the last rank, then 8 Mi + 3 ints from rank 0, checked element-wise. */
static void t_large(bctx_t *b)
{
    const int64_t n = 8 * MIB + 3;
    const shape_t s = shape_of(b, b->t.comm);
    const int msg = b->msg++;
    int32_t *ints;
    int64_t wrong = 0, first = -1;

    bcast_bytes(b, b->t.comm, &s, 64 * MIB, b->t.size - 1, "large");
    ints = xmalloc(4 * n);
    for (int64_t i = 0; i < n; i++)
        ints[i] = b->t.rank == 0 ? int_pat(0, msg, i) : -1;
    if (!expect(&b->t, mln_bcast(ints, n, MPI_INT, 0, b->t.comm), MLN_OK, "large: 8 Mi + 3 ints"))
        goto out;
    for (int64_t i = 0; i < n; i++)
        if (ints[i] != int_pat(0, msg, i) && wrong++ == 0)
            first = i;
    if (wrong)
        fail(&b->t, "large: %lld of %lld ints wrong, first at %lld (got %d, want %d)",
             (long long)wrong, (long long)n, (long long)first, ints[first], int_pat(0, msg, first));
    else
        check_algo(b, &s, 4 * n, "large: 8 Mi + 3 ints");
out:
    free(ints);
}

/* A non-contiguous type, 7 x (1000 blocks of 3 ints, stride 5): the blocks arrive, the gaps of
 * the other ranks' buffers keep their GUARD_BYTE. */
static void t_types(bctx_t *b)
{
    enum { BLOCKS = 1000, BLEN = 3, STRIDE = 5, COUNT = 7 };
    const int64_t ext = (int64_t)(BLOCKS - 1) * STRIDE + BLEN; /* ints per element */
    const int64_t bytes = 4 * ext * COUNT;
    const int root = 1 % b->t.size, msg = b->msg++;
    const shape_t s = shape_of(b, b->t.comm);
    uint8_t *buf = xmalloc(bytes + GUARD);
    int64_t wrong = 0, first = -1;
    MPI_Datatype vec;

    MPI_Type_vector(BLOCKS, BLEN, STRIDE, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    if (b->t.rank == root)
        fill(buf, bytes, root, msg);
    else
        memset(buf, GUARD_BYTE, (size_t)bytes);
    memset(buf + bytes, GUARD_BYTE, GUARD);
    if (expect(&b->t, mln_bcast(buf, COUNT, vec, root, b->t.comm), MLN_OK, "types: vector")) {
        for (int64_t off = 0; off < bytes; off++) {
            const int data = b->t.rank == root || ((off / 4) % ext) % STRIDE < BLEN;
            const uint8_t want = data ? pat(root, msg, (uint64_t)off) : GUARD_BYTE;
            if (buf[off] != want && wrong++ == 0)
                first = off;
        }
        if (wrong)
            fail(&b->t, "types: %lld of %lld bytes wrong, first at %lld (%s; got 0x%02x)",
                 (long long)wrong, (long long)bytes, (long long)first,
                 ((first / 4) % ext) % STRIDE < BLEN ? "data" : "a gap", buf[first]);
        else if (guard_intact(b, buf + bytes, "types: vector"))
            check_algo(b, &s, (int64_t)4 * BLOCKS * BLEN * COUNT, "types: vector");
    }
    MPI_Type_free(&vec);
    free(buf);
}

/*
 * 20 broadcasts back to back, root i % P, 3 MiB + i and 20000 + i in turn, no barrier between:
 * a window reused while a slow rank still reads it shows up as wrong data.  One rank that is
 * not the root sleeps 3 ms before each call to make it slow; every buffer is checked again at
 * the end (nothing may write to it after its call returned).
 */
static void t_sequence(bctx_t *b)
{
    enum { N = 20 };
    const shape_t s = shape_of(b, b->t.comm);
    const int msg0 = b->msg;
    uint8_t *bufs[N];
    int64_t sizes[N];
    char label[96];

    b->msg += N;
    for (int i = 0; i < N; i++) {
        const int root = i % b->t.size;
        sizes[i] = i % 2 ? 20000 + i : 3 * MIB + i;
        bufs[i] = xmalloc(sizes[i] + GUARD);
        if (b->t.rank == root)
            fill(bufs[i], sizes[i], root, msg0 + i);
        else
            memset(bufs[i], START_BYTE, (size_t)sizes[i]);
        memset(bufs[i] + sizes[i], GUARD_BYTE, GUARD);
    }
    for (int i = 0; i < N; i++) {
        const int root = i % b->t.size;
        snprintf(label, sizeof(label), "sequence: broadcast %d (%lld B from root %d)", i,
                 (long long)sizes[i], root);
        if (b->t.rank != root && b->t.rank == (3 * i + 1) % b->t.size) {
            const struct timespec nap = {0, 3000000};
            nanosleep(&nap, NULL);
        }
        if (expect(&b->t, mln_bcast(bufs[i], sizes[i], MPI_BYTE, root, b->t.comm), MLN_OK, label) &&
            check(&b->t, bufs[i], sizes[i], root, msg0 + i, label))
            check_algo(b, &s, sizes[i], label);
    }
    for (int i = 0; i < N; i++) {
        snprintf(label, sizeof(label), "sequence: broadcast %d, checked again after all 20", i);
        if (b->t.ok && check(&b->t, bufs[i], sizes[i], i % b->t.size, msg0 + i, label))
            guard_intact(b, bufs[i] + sizes[i], label);
        free(bufs[i]);
    }
}

/* One broadcast above the threshold and one below on comm, then comm is freed. */
static void bcast_on(bctx_t *b, MPI_Comm *comm, int root, const char *what)
{
    const shape_t s = shape_of(b, *comm);
    const int64_t big = b->t.thr > 2 * MIB ? b->t.thr + 5 : 2 * MIB + 5;

    bcast_bytes(b, *comm, &s, big, root, what);
    bcast_bytes(b, *comm, &s, 100, root, what);
}

/* Communicators other than the base one: set-up cached per communicator, freed with it. */
static void t_comms(bctx_t *b)
{
    const int rank = b->t.rank, size = b->t.size;
    MPI_Comm comm;
    int hsize;

    MPI_Comm_dup(b->t.comm, &comm); /* twice on the dup: the cached set-up again */
    bcast_on(b, &comm, size - 1, "comms: dup");
    bcast_on(b, &comm, 0, "comms: dup, again");
    MPI_Comm_free(&comm);

    MPI_Comm_split(b->t.comm, rank % 2, rank, &comm); /* even and odd ranks */
    MPI_Comm_size(comm, &hsize);
    bcast_on(b, &comm, hsize - 1, rank % 2 ? "comms: odd half" : "comms: even half");
    MPI_Comm_free(&comm);

    MPI_Comm_split(b->t.comm, 0, size - 1 - rank, &comm); /* ranks in reverse order */
    bcast_on(b, &comm, 0, "comms: reversed");
    bcast_on(b, &comm, size > 1 ? 1 : 0, "comms: reversed");
    MPI_Comm_free(&comm);

    MPI_Comm_dup(b->t.comm, &comm); /* may reuse the freed handles: no stale set-up */
    bcast_on(b, &comm, size / 2, "comms: second dup");
    MPI_Comm_free(&comm);
    bcast_on(b, &b->t.comm, 0, "comms: base communicator after the others");
}

/* mln_finalize, then mln_init: the base communicator (mln_comm_world) is a new one. */
static void reinit(bctx_t *b, const char *what)
{
    mln_finalize();
    if (mln_init() != MLN_OK) {
        printf("FAIL cycles: rank %d: mln_init failed (%s)\n", b->t.rank, what);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    b->t.comm = mln_comm_world();
}

/*
 * mln_finalize / mln_init cycles with a communicator of the caller's kept across them (a dup):
 * a broadcast above the threshold on it in every cycle, checked, and then as many set-ups and
 * shared windows alive in the process in every cycle as in the second (the first also counts
 * the base communicator's, freed with it by mln_finalize): the set-up cached on the dup is
 * found again, not made anew beside the one the last cycle left.  Then MLN_BCAST_LEADERS
 * changed between cycles: the set-up is made again for it (what ran says so), in place of the
 * old one; and the dup freed takes its set-up and window with it.
 */
static void t_cycles(bctx_t *b)
{
    enum { CYCLES = 4 };
    const int64_t big = b->t.thr > 2 * MIB ? b->t.thr + 5 : 2 * MIB + 5;
    int setups[CYCLES], windows[CYCLES], s_free = 0, w_free = 0, leaders = 0;
    char label[96], num[32];
    uint8_t *buf = xmalloc(big);
    MPI_Comm comm;
    shape_t s;

    MPI_Comm_dup(b->t.comm, &comm);
    s = shape_of(b, comm);
    for (int c = 0; c < CYCLES; c++) {
        snprintf(label, sizeof(label), "cycles: mln_init number %d", c + 1);
        bcast_bytes(b, comm, &s, big, c % b->t.size, label);
        setups[c] = mln_bcast_alive(&windows[c]);
        if (c > 0 && (setups[c] != setups[1] || windows[c] != windows[1]))
            fail(&b->t, "%s: %d set-ups and %d windows alive, %d and %d after the second", label,
                 setups[c], windows[c], setups[1], windows[1]);
        reinit(b, label);
    }
    /* fewer leaders than the set-up was made for: hier (L = 1) where sme ran */
    setenv("MLN_BCAST_LEADERS", "1", 1);
    reinit(b, "MLN_BCAST_LEADERS=1");
    buf[0] = 1;
    if (expect(&b->t, mln_bcast(buf, big, MPI_BYTE, 0, comm), MLN_OK,
               "cycles: MLN_BCAST_LEADERS=1 after a cycle") &&
        b->algo != MLN_BCAST_MPI && s.nodes > 1 &&
        (mln_bcast_last_algo(&leaders) != MLN_BCAST_HIER || leaders != 1))
        fail(&b->t, "cycles: MLN_BCAST_LEADERS=1 after a cycle: %s with %d leaders ran, not hier",
             algo_name(mln_bcast_last_algo(NULL)), leaders);
    if (mln_bcast_alive(NULL) != setups[CYCLES - 1])
        fail(&b->t, "cycles: %d set-ups alive after MLN_BCAST_LEADERS changed, %d before",
             mln_bcast_alive(NULL), setups[CYCLES - 1]);
    snprintf(num, sizeof(num), "%d", b->opt->leaders);
    setenv("MLN_BCAST_LEADERS", num, 1);
    reinit(b, "MLN_BCAST_LEADERS as before");
    s_free = mln_bcast_alive(&w_free);
    MPI_Comm_free(&comm);
    if (b->algo != MLN_BCAST_MPI &&
        (mln_bcast_alive(&windows[0]) != s_free - 1 || windows[0] != w_free - (s.nodes > 1)))
        fail(&b->t, "cycles: the dup freed, %d set-ups and %d windows alive, %d and %d before",
             mln_bcast_alive(NULL), windows[0], s_free, w_free);
    free(buf);
}

/* Bad arguments get a status on every rank, before any communication (no hang, no crash). */
static void t_refused(bctx_t *b)
{
    const int64_t big = b->t.thr + 1 > 1 ? b->t.thr + 1 : 2; /* small: MPI_Bcast's path */
    const int64_t counts[2] = {1, big};
    uint8_t *buf = xmalloc(big);
    const char *const names[] = {"auto", "sme", "hier", "mpi"};
    MPI_Comm half, inter;
    char label[96];

    memset(buf, START_BYTE, (size_t)big);
    /* a valid small call first: the communicator is then known to mln_bcast's small path */
    expect(&b->t, mln_bcast(buf, 1, MPI_BYTE, 0, b->t.comm), MLN_OK, "args: a valid 1 B call");
    for (int i = 0; i < 2; i++) {
        const long long n = (long long)counts[i];
        snprintf(label, sizeof(label), "args: root -1, %lld B", n);
        expect(&b->t, mln_bcast(buf, counts[i], MPI_BYTE, -1, b->t.comm), MLN_ERR_ARG, label);
        snprintf(label, sizeof(label), "args: root = size (%d), %lld B", b->t.size, n);
        expect(&b->t, mln_bcast(buf, counts[i], MPI_BYTE, b->t.size, b->t.comm), MLN_ERR_ARG,
               label);
        snprintf(label, sizeof(label), "args: count -%lld", n);
        expect(&b->t, mln_bcast(buf, -counts[i], MPI_BYTE, 0, b->t.comm), MLN_ERR_ARG, label);
        snprintf(label, sizeof(label), "args: NULL buffer, %lld B", n);
        expect(&b->t, mln_bcast(NULL, counts[i], MPI_BYTE, 0, b->t.comm), MLN_ERR_ARG, label);
    }
    expect(&b->t, mln_bcast(NULL, 0, MPI_BYTE, 0, b->t.comm), MLN_OK,
           "args: NULL buffer with count 0 (valid, as in MPI_Bcast)");
    for (int64_t i = 0; i < big; i++)
        if (buf[i] != START_BYTE) {
            fail(&b->t, "args: a refused broadcast wrote to the buffer (byte %lld)", (long long)i);
            break;
        }

    if (b->t.size > 1) { /* an intercommunicator between the even and the odd ranks */
        MPI_Comm_split(b->t.comm, b->t.rank % 2, b->t.rank, &half);
        MPI_Intercomm_create(half, 0, b->t.comm, b->t.rank % 2 ? 0 : 1, 77, &inter);
        expect(&b->t, mln_bcast(buf, big, MPI_BYTE, 0, inter), MLN_ERR_UNSUPPORTED,
               "args: intercommunicator");
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);

        /* a communicator the small path knew, freed; a new one of 1 process may get its
         * handle: the old root must be refused there, not passed to MPI_Bcast */
        MPI_Comm known, one;
        MPI_Comm_dup(b->t.comm, &known);
        expect(&b->t, mln_bcast(buf, 1, MPI_BYTE, b->t.size - 1, known), MLN_OK,
               "args: 1 B on a dup");
        MPI_Comm_free(&known);
        MPI_Comm_split(b->t.comm, b->t.rank, 0, &one);
        expect(&b->t, mln_bcast(buf, 1, MPI_BYTE, b->t.size - 1, one), MLN_ERR_ARG,
               "args: the freed communicator's root on a new one of 1 process");
        MPI_Comm_free(&one);
    }

    for (int a = 0; a < 4; a++) {
        const char *name = mln_bcast_algo_name((mln_bcast_algo_t)a);
        if (name == NULL || strcmp(name, names[a]) != 0)
            fail(&b->t, "args: mln_bcast_algo_name(%d) is '%s', expected '%s'", a,
                 name ? name : "(NULL)", names[a]);
    }
    if (mln_bcast_algo_name((mln_bcast_algo_t)4) != NULL ||
        mln_bcast_algo_name((mln_bcast_algo_t)-1) != NULL)
        fail(&b->t, "args: mln_bcast_algo_name of 4 or -1 is not NULL");
    free(buf);

    /* the refused calls left nothing behind: a real broadcast still works */
    const shape_t s = shape_of(b, b->t.comm);
    bcast_bytes(b, b->t.comm, &s, big, b->t.size - 1, "args: after the refused calls");
}

/* ---- driver ----------------------------------------------------------------------------- */

typedef struct subtest {
    const char *name;
    void (*run)(bctx_t *b);
} subtest_t;

static const subtest_t subtests[] = {
    {"roots", t_roots}, {"large", t_large},  {"types", t_types},   {"sequence", t_sequence},
    {"comms", t_comms}, {"args", t_refused}, {"cycles", t_cycles}, {NULL, NULL}};

static const char *subtest_name(int i)
{
    return subtests[i].name;
}

static int usage(const char *why, int verbose)
{
    if (!verbose)
        return 2;
    fprintf(stderr,
            "mpi_bcast: %s\nusage: mpi_bcast [--algo auto|sme|hier|mpi] [--leaders L] "
            "[--threshold SIZE] [--node-size N] [--watchdog S] [--test all|NAME,...]\n"
            "sub-tests:",
            why);
    for (const subtest_t *s = subtests; s->name; s++)
        fprintf(stderr, " %s", s->name);
    fprintf(stderr, "\n");
    return 2;
}

/* --algo as mln_bcast_algo_t, or -1. */
static int algo_of(const char *name)
{
    for (int a = MLN_BCAST_AUTO; a <= MLN_BCAST_MPI; a++)
        if (!strcmp(name, algo_name((mln_bcast_algo_t)a)))
            return a;
    return -1;
}

static int parse_options(int argc, char **argv, int verbose, bopts_t *o)
{
    *o = (bopts_t){.algo = "auto",
                   .threshold = "16K",
                   .tests = "all",
                   .leaders = 4,
                   .node_size = 0,
                   .watchdog = 120};
    for (int i = 1; i < argc; i += 2) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int *num = NULL;
        if (val == NULL)
            return usage("an option without its value", verbose);
        if (!strcmp(argv[i], "--algo"))
            o->algo = val;
        else if (!strcmp(argv[i], "--threshold"))
            o->threshold = val;
        else if (!strcmp(argv[i], "--test"))
            o->tests = val;
        else if (!strcmp(argv[i], "--leaders"))
            num = &o->leaders;
        else if (!strcmp(argv[i], "--node-size"))
            num = &o->node_size;
        else if (!strcmp(argv[i], "--watchdog"))
            num = &o->watchdog;
        else
            return usage("unknown option", verbose);
        if (num != NULL && parse_count(val, num) != 0)
            return usage("a bad number", verbose);
    }
    if (o->leaders < 1)
        return usage("--leaders must be at least 1", verbose);
    if (!list_known(o->tests, subtest_name))
        return usage("unknown sub-test", verbose);
    return 0;
}

static int set_tunables(const bopts_t *o)
{
    char num[32];
    int rc = 0;

    rc |= setenv("MLN_BCAST_ALGO", o->algo, 1);
    snprintf(num, sizeof(num), "%d", o->leaders);
    rc |= setenv("MLN_BCAST_LEADERS", num, 1);
    rc |= setenv("MLN_BCAST_THRESHOLD", o->threshold, 1);
    snprintf(num, sizeof(num), "%d", o->node_size);
    rc |= setenv("MLN_NODE_SIZE", num, 1);
    return rc;
}

/* Runs one sub-test on every rank; 1 when it passed on all. */
static int run_subtest(bctx_t *b, const subtest_t *s)
{
    double t0 = subtest_begin(&b->t, s->name, (unsigned)b->opt->watchdog);

    s->run(b);
    return subtest_end(&b->t, s->name, t0);
}

int main(int argc, char **argv)
{
    bopts_t opt;
    bctx_t b = {0};
    shape_t world;
    int world_rank, rc, passed = 0, failed = 0;
    uint64_t thr = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    rc = parse_options(argc, argv, world_rank == 0, &opt);
    if (rc == 0 && algo_of(opt.algo) < 0)
        rc = usage("unknown --algo", world_rank == 0);
    if (rc == 0 && (mln_parse_size(opt.threshold, &thr) != MLN_OK || thr > INT64_MAX / 2))
        rc = usage("a bad --threshold", world_rank == 0);
    if (rc == 0 && set_tunables(&opt) != 0)
        rc = usage("setenv failed", 1);
    if (rc != 0) {
        MPI_Finalize();
        return rc;
    }
    watchdog_install();
    if (mln_init() != MLN_OK) {
        printf("FAIL init: rank %d: mln_init failed\n", world_rank);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    b.opt = &opt;
    b.algo = (mln_bcast_algo_t)algo_of(opt.algo);
    b.t.prog = "mpi_bcast";
    b.t.comm = mln_comm_world();
    b.t.thr = (int64_t)thr;
    b.t.partner = -1;
    MPI_Comm_rank(b.t.comm, &b.t.rank);
    MPI_Comm_size(b.t.comm, &b.t.size);
    world = shape_of(&b, b.t.comm);
    if (b.t.rank == 0) {
        printf("# mpi_bcast: algo %s, leaders %d, node size %d, %d ranks (%d nodes, fewest ranks "
               "on one %d), threshold %lld, tests %s\n",
               opt.algo, opt.leaders, opt.node_size, b.t.size, world.nodes, world.min_node,
               (long long)b.t.thr, opt.tests);
        fflush(stdout);
    }
    for (int i = 0; subtests[i].name; i++) {
        if (list_has(opt.tests, subtests[i].name, 1)) {
            if (run_subtest(&b, &subtests[i]))
                passed++;
            else
                failed++;
        }
    }
    if (b.t.rank == 0)
        printf("mpi_bcast: %d ok, %d failed\n", passed, failed);
    failed += finalize_checked(&b.t);
    return failed ? 1 : 0;
}
