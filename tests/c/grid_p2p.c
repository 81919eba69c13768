/*
 * grid_p2p.c - point-to-point on the grid's MPI_COMM_WORLD (`multilane grid run`: one MPI job
 * per site, joined by the relays; docs/PRELOAD.md "Grid mode"), a PLAIN MPI program: it calls
 * no Multilane function, so the same binary runs as one ordinary MPI job (the proof that it is
 * right about MPI) and across sites under libmultilane-preload.so (2 sites x 2 ranks, say).
 *
 * It uses nothing but point-to-point, MPI_Barrier, Comm_size/Comm_rank and the error handler of
 * MPI_COMM_WORLD (what grid mode offers), and checks with global ranks: per-pair order (many
 * small messages, then large ones between small ones), MPI_ANY_SOURCE / MPI_ANY_TAG from local
 * and remote senders mixed (statuses, counts, per-sender order), Probe/Iprobe then Recv of the
 * probed size, Mprobe/Improbe + Mrecv/Imrecv, Ssend (not complete before its receive is
 * posted), a Sendrecv ring and Sendrecv_replace, persistent requests, Waitany/Waitsome/Testall,
 * truncation (MPI_ERRORS_RETURN), MPI_PROC_NULL, a derived datatype, cancel of a receive,
 * 8 MiB messages (pattern-verified), barriers; under MLN_GRID_SITES also the size it gives and
 * the refusal of MPI_Win_create on MPI_COMM_WORLD.  Rank 0 prints "ok NAME" per check (or
 * "FAIL NAME"), every failing rank one line saying what, and the exit status is 1 on any.
 *
 * Fault modes:  grid_p2p abort [RANK]  rank RANK (default 1) calls MPI_Abort(MPI_COMM_WORLD, 7)
 * after the first barrier, the others wait in MPI_Recv (every site must end, exit status 7);
 * grid_p2p hang  every rank prints "waiting rank R" and waits in MPI_Recv for ever (a gateway
 * killed now must end every site).
 */
#define _DEFAULT_SOURCE /* usleep */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, fails, fails_before; /* failures: all, and before this check */

#define BAD(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "FAIL rank %d: ", rank);                                                   \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        fails++;                                                                                   \
    } while (0)

/* Every rank's failures of check `name` summed on rank 0 (point-to-point only), its verdict;
 * a barrier too (the verdict goes back to every rank). */
static void agree(const char *name)
{
    int total = fails - fails_before;

    fails_before = fails;

    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            int f = 0;
            MPI_Recv(&f, 1, MPI_INT, r, 9000, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += f;
        }
        printf("%s %s\n", total ? "FAIL" : "ok", name);
        fflush(stdout);
        for (int r = 1; r < size; r++) /* nobody starts the next check before all are done */
            MPI_Send(&total, 1, MPI_INT, r, 9002, MPI_COMM_WORLD);
    } else {
        MPI_Send(&total, 1, MPI_INT, 0, 9000, MPI_COMM_WORLD);
        MPI_Recv(&total, 1, MPI_INT, 0, 9002, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

static unsigned char pat(int from, int to, size_t i, int salt)
{
    return (unsigned char)(i * 131u + (size_t)from * 17u + (size_t)to * 7u + (size_t)salt);
}

static void fill(unsigned char *b, size_t n, int from, int to, int salt)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(from, to, i, salt);
}

static size_t verify(const unsigned char *b, size_t n, int from, int to, int salt)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += b[i] != pat(from, to, i, salt);
    return bad;
}

static int count_of(const MPI_Status *st, MPI_Datatype t)
{
    int c = -1;
    MPI_Get_count(st, t, &c);
    return c;
}

/* ---- checks ------------------------------------------------------------------------------ */

static void check_size(void)
{
    const char *sites = getenv("MLN_GRID_SITES");
    int want = 0;

    if (sites != NULL) /* "a:2,b:2": the grid's size is the sum */
        for (const char *p = strchr(sites, ':'); p != NULL; p = strchr(p + 1, ':'))
            want += atoi(p + 1);
    if (size < 2 || rank < 0 || rank >= size || (want > 0 && size != want))
        BAD("size %d rank %d (MLN_GRID_SITES says %d)", size, rank, want);
    agree("size");
}

/* Many small messages per pair, then 256 KiB ones between small ones: each pair's order. */
static void check_order(void)
{
    enum { SMALL = 200, BIG = 6, BIGN = 256 * 1024 };
    const int n = SMALL + 2 * BIG;
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)size * (size_t)n);
    int *vals = malloc(sizeof(int) * (size_t)size * SMALL);
    unsigned char *big = malloc(BIGN), *rbig = malloc(BIGN);
    int nreq = 0;

    for (int d = 0; d < size; d++) {
        if (d == rank)
            continue;
        for (int i = 0; i < SMALL; i++) {
            vals[d * SMALL + i] = i;
            MPI_Isend(&vals[d * SMALL + i], 1, MPI_INT, d, 11, MPI_COMM_WORLD, &reqs[nreq++]);
        }
    }
    fill(big, BIGN, rank, 0, 3);
    for (int s = 0; s < size; s++) {
        if (s == rank)
            continue;
        for (int i = 0; i < SMALL; i++) {
            int v = -1;
            MPI_Recv(&v, 1, MPI_INT, s, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (v != i) {
                BAD("order: from %d message %d carried %d", s, i, v);
                break;
            }
        }
    }
    MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
    /* large and small interleaved, same tag: the receiver must see them in send order */
    nreq = 0;
    for (int d = 0; d < size; d++) {
        if (d == rank)
            continue;
        for (int k = 0; k < BIG; k++) {
            MPI_Isend(big, BIGN, MPI_BYTE, d, 12, MPI_COMM_WORLD, &reqs[nreq++]);
            vals[d * SMALL + k] = 1000 + k;
            MPI_Isend(&vals[d * SMALL + k], (int)sizeof(int), MPI_BYTE, d, 12, MPI_COMM_WORLD,
                      &reqs[nreq++]);
        }
    }
    for (int s = 0; s < size; s++) {
        if (s == rank)
            continue;
        for (int k = 0; k < BIG; k++) {
            MPI_Status st;
            int v = -1;
            MPI_Recv(rbig, BIGN, MPI_BYTE, s, 12, MPI_COMM_WORLD, &st);
            if (count_of(&st, MPI_BYTE) != BIGN || verify(rbig, BIGN, s, 0, 3) != 0)
                BAD("order: big message %d from %d: count %d, bad bytes", k, s,
                    count_of(&st, MPI_BYTE));
            MPI_Recv(&v, (int)sizeof(int), MPI_BYTE, s, 12, MPI_COMM_WORLD, &st);
            if (v != 1000 + k || count_of(&st, MPI_BYTE) != (int)sizeof(int))
                BAD("order: small message %d from %d after a big one carried %d", k, s, v);
        }
    }
    MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
    free(reqs);
    free(vals);
    free(big);
    free(rbig);
    agree("order");
}

/* Every other rank sends M messages (tag 100 + sender) to root; root takes them all with
 * MPI_ANY_SOURCE / MPI_ANY_TAG (and once with a fixed tag), local and remote senders mixed. */
static void any_source_to(int root)
{
    enum { M = 30 };
    if (rank != root) {
        int v[M][3];
        MPI_Request reqs[M];
        for (int i = 0; i < M; i++) {
            v[i][0] = rank * 1000 + i; /* 1 to 3 elements: the first says who and which */
            v[i][1] = v[i][2] = -5;
            MPI_Isend(v[i], 1 + i % 3, MPI_INT, root, 100 + rank, MPI_COMM_WORLD, &reqs[i]);
        }
        MPI_Waitall(M, reqs, MPI_STATUSES_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD); /* nothing else comes to root's wildcard receives */
        return;
    }
    int *next = calloc((size_t)size, sizeof(int));
    for (int got = 0; got < M * (size - 1); got++) {
        int v[3] = {-1, -1, -1};
        MPI_Status st;
        MPI_Recv(v, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        int s = st.MPI_SOURCE;
        if (s < 0 || s >= size || s == root || st.MPI_TAG != 100 + s ||
            v[0] != s * 1000 + next[s] || count_of(&st, MPI_INT) != 1 + next[s] % 3) {
            BAD("any_source: source %d tag %d count %d carried %d, expected message %d", s,
                st.MPI_TAG, count_of(&st, MPI_INT), v[0], s >= 0 && s < size ? next[s] : -1);
            break;
        }
        next[s]++;
    }
    free(next);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void check_any_source(void)
{
    any_source_to(0);
    any_source_to(size - 1);
    agree("any_source");
}

/* Probe (any source) then a receive of the probed size; Iprobe of a given source. */
static void check_probe(void)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    const int n = 10 * rank + 7, nl = 10 * left + 7;
    int *out = malloc(sizeof(int) * (size_t)n);
    MPI_Request req;
    MPI_Status st;
    int flag = 0;

    for (int i = 0; i < n; i++)
        out[i] = rank * 1000 + i;
    MPI_Isend(out, n, MPI_INT, right, 5, MPI_COMM_WORLD, &req);
    MPI_Probe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
    int c = count_of(&st, MPI_INT);
    if (st.MPI_SOURCE != left || st.MPI_TAG != 5 || c != nl)
        BAD("probe: source %d tag %d count %d, expected %d 5 %d", st.MPI_SOURCE, st.MPI_TAG, c,
            left, nl);
    int *in = malloc(sizeof(int) * (size_t)(c > 0 ? c : 1));
    MPI_Recv(in, c, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
    for (int i = 0; i < c && i < nl; i++)
        if (in[i] != left * 1000 + i) {
            BAD("probe: element %d is %d", i, in[i]);
            break;
        }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* Iprobe until it comes, from a given source */
    MPI_Isend(out, n, MPI_INT, right, 6, MPI_COMM_WORLD, &req);
    while (!flag)
        MPI_Iprobe(left, 6, MPI_COMM_WORLD, &flag, &st);
    if (st.MPI_SOURCE != left || count_of(&st, MPI_INT) != nl)
        BAD("iprobe: source %d count %d", st.MPI_SOURCE, count_of(&st, MPI_INT));
    MPI_Recv(in, nl, MPI_INT, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* matched probes */
    MPI_Message msg;
    MPI_Isend(out, n, MPI_INT, right, 7, MPI_COMM_WORLD, &req);
    MPI_Mprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &msg, &st);
    if (st.MPI_SOURCE != left || count_of(&st, MPI_INT) != nl)
        BAD("mprobe: source %d count %d", st.MPI_SOURCE, count_of(&st, MPI_INT));
    memset(in, 0, sizeof(int) * (size_t)nl);
    MPI_Mrecv(in, nl, MPI_INT, &msg, &st);
    if (st.MPI_SOURCE != left || count_of(&st, MPI_INT) != nl || in[nl - 1] != left * 1000 + nl - 1)
        BAD("mrecv: source %d count %d last %d", st.MPI_SOURCE, count_of(&st, MPI_INT), in[nl - 1]);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Isend(out, n, MPI_INT, right, 8, MPI_COMM_WORLD, &req);
    flag = 0;
    while (!flag)
        MPI_Improbe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st);
    MPI_Request rr;
    memset(in, 0, sizeof(int) * (size_t)nl);
    MPI_Imrecv(in, nl, MPI_INT, &msg, &rr);
    MPI_Wait(&rr, &st);
    if (st.MPI_SOURCE != left || st.MPI_TAG != 8 || in[nl - 1] != left * 1000 + nl - 1)
        BAD("imrecv: source %d tag %d last %d", st.MPI_SOURCE, st.MPI_TAG, in[nl - 1]);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    free(in);
    free(out);
    agree("probe");
}

/* MPI_Issend is not complete before its receive is posted (after a barrier), then is. */
static void check_ssend(void)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int v = rank, w = -1, flag = 0;
    MPI_Request req;

    MPI_Issend(&v, 1, MPI_INT, right, 20, MPI_COMM_WORLD, &req);
    for (int i = 0; i < 50 && !flag; i++) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        usleep(1000);
    }
    if (flag)
        BAD("ssend: complete before its receive was posted");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Recv(&w, 1, MPI_INT, left, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!flag)
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (w != left)
        BAD("ssend: got %d from %d", w, left);
    /* and the blocking form, in a ring: even ranks send first */
    if (rank % 2 == 0) {
        MPI_Ssend(&v, 1, MPI_INT, right, 21, MPI_COMM_WORLD);
        MPI_Recv(&w, 1, MPI_INT, left, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&w, 1, MPI_INT, left, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Ssend(&v, 1, MPI_INT, right, 21, MPI_COMM_WORLD);
    }
    if (w != left)
        BAD("ssend ring: got %d from %d", w, left);
    agree("ssend");
}

static void check_sendrecv(void)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[4] = {rank, rank + 1, rank + 2, rank + 3}, in[4] = {-1, -1, -1, -1};
    MPI_Status st;

    MPI_Sendrecv(out, 4, MPI_INT, right, 30, in, 4, MPI_INT, left, 30, MPI_COMM_WORLD, &st);
    if (in[0] != left || in[3] != left + 3 || st.MPI_SOURCE != left || st.MPI_TAG != 30 ||
        count_of(&st, MPI_INT) != 4)
        BAD("sendrecv: got %d..%d source %d tag %d", in[0], in[3], st.MPI_SOURCE, st.MPI_TAG);
    MPI_Sendrecv_replace(out, 4, MPI_INT, left, 31, right, 31, MPI_COMM_WORLD, &st);
    if (out[0] != right || out[3] != right + 3 || st.MPI_SOURCE != right)
        BAD("sendrecv_replace: got %d..%d from %d", out[0], out[3], st.MPI_SOURCE);
    /* ANY_SOURCE ring with a derived (strided) type on the send side */
    MPI_Datatype vec;
    int strided[8], got[4] = {0};
    for (int i = 0; i < 8; i++)
        strided[i] = i % 2 ? -1 : rank * 10 + i / 2;
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Sendrecv(strided, 1, vec, right, 32, got, 4, MPI_INT, MPI_ANY_SOURCE, 32, MPI_COMM_WORLD,
                 &st);
    if (got[0] != left * 10 || got[3] != left * 10 + 3 || st.MPI_SOURCE != left)
        BAD("sendrecv vector: got %d %d from %d", got[0], got[3], st.MPI_SOURCE);
    /* and the receive side strided */
    int spread[8], plain4[4] = {rank * 10, rank * 10 + 1, rank * 10 + 2, rank * 10 + 3};
    for (int i = 0; i < 8; i++)
        spread[i] = -7;
    MPI_Sendrecv(plain4, 4, MPI_INT, right, 33, spread, 1, vec, left, 33, MPI_COMM_WORLD, &st);
    for (int i = 0; i < 8; i++)
        if (spread[i] != (i % 2 ? -7 : left * 10 + i / 2)) {
            BAD("recv into vector: element %d is %d", i, spread[i]);
            break;
        }
    if (count_of(&st, MPI_INT) != 4)
        BAD("recv into vector: count %d", count_of(&st, MPI_INT));
    MPI_Type_free(&vec);
#if (defined(MPI_VERSION) && MPI_VERSION >= 4) ||                                                  \
    (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
    /* MPI-4's MPI_Isendrecv and MPI_Isendrecv_replace: the status is the receive's (MPICH
     * 5.0.2's own leaves it unset: checked there under the layer only, the data always) */
    MPI_Request req;
    int in2[4] = {-1, -1, -1, -1};
#ifdef MPICH_VERSION
    const int status_set = getenv("LD_PRELOAD") != NULL;
#else
    const int status_set = 1;
#endif
    MPI_Isendrecv(plain4, 4, MPI_INT, left, 35, in2, 4, MPI_INT, right, 35, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, &st);
    if (in2[0] != right * 10 || in2[3] != right * 10 + 3 ||
        (status_set && (st.MPI_SOURCE != right || count_of(&st, MPI_INT) != 4)))
        BAD("isendrecv: got %d %d from %d", in2[0], in2[3], st.MPI_SOURCE);
    MPI_Isendrecv_replace(in2, 4, MPI_INT, right, 36, MPI_ANY_SOURCE, 36, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, &st);
    if (in2[0] != rank * 10 || in2[3] != rank * 10 + 3 || (status_set && st.MPI_SOURCE != left))
        BAD("isendrecv_replace: got %d %d from %d", in2[0], in2[3], st.MPI_SOURCE);
#endif
    agree("sendrecv");
}

static void check_persistent(void)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out = 0, in = -1;
    MPI_Request reqs[2];

    MPI_Recv_init(&in, 1, MPI_INT, left, 40, MPI_COMM_WORLD, &reqs[0]);
    MPI_Send_init(&out, 1, MPI_INT, right, 40, MPI_COMM_WORLD, &reqs[1]);
    for (int it = 0; it < 5; it++) {
        out = rank * 100 + it;
        MPI_Startall(2, reqs);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        if (in != left * 100 + it)
            BAD("persistent: iteration %d got %d", it, in);
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);
    agree("persistent");
}

/* Irecv from everybody, then Waitany / Waitsome / Testall. */
static void check_multi(void)
{
    MPI_Request *rr = malloc(sizeof(MPI_Request) * (size_t)size);
    MPI_Request *sr = malloc(sizeof(MPI_Request) * (size_t)size);
    int *in = malloc(sizeof(int) * (size_t)size), *idx = malloc(sizeof(int) * (size_t)size);
    MPI_Status *sts = malloc(sizeof(MPI_Status) * (size_t)size);

    for (int variant = 0; variant < 3; variant++) {
        int left = 0;
        for (int s = 0; s < size; s++) {
            in[s] = -1;
            MPI_Irecv(&in[s], 1, MPI_INT, s, 50 + variant, MPI_COMM_WORLD, &rr[s]);
        }
        for (int d = 0; d < size; d++)
            MPI_Isend(&rank, 1, MPI_INT, d, 50 + variant, MPI_COMM_WORLD, &sr[d]);
        left = size;
        while (left > 0) {
            if (variant == 0) {
                int i;
                MPI_Status st;
                MPI_Waitany(size, rr, &i, &st);
                if (i < 0 || i >= size || st.MPI_SOURCE != i || in[i] != i)
                    BAD("waitany: index %d source %d value %d", i, st.MPI_SOURCE,
                        i >= 0 && i < size ? in[i] : -1);
                left--;
            } else if (variant == 1) {
                int n = 0;
                MPI_Waitsome(size, rr, &n, idx, sts);
                for (int k = 0; k < n; k++)
                    if (sts[k].MPI_SOURCE != idx[k] || in[idx[k]] != idx[k])
                        BAD("waitsome: index %d source %d", idx[k], sts[k].MPI_SOURCE);
                left -= n;
            } else {
                int flag = 0;
                MPI_Testall(size, rr, &flag, sts);
                if (flag) {
                    for (int s = 0; s < size; s++)
                        if (sts[s].MPI_SOURCE != s || in[s] != s)
                            BAD("testall: %d source %d value %d", s, sts[s].MPI_SOURCE, in[s]);
                    left = 0;
                }
            }
        }
        MPI_Waitall(size, sr, MPI_STATUSES_IGNORE);
    }
    free(rr);
    free(sr);
    free(in);
    free(idx);
    free(sts);
    agree("waitany_waitsome_testall");
}

static void check_truncate(void)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[100], in[50], cls = 0, rc;
    MPI_Request req, rr;
    MPI_Status st;

    for (int i = 0; i < 100; i++)
        out[i] = i;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Isend(out, 100, MPI_INT, right, 60, MPI_COMM_WORLD, &req);
    rc = MPI_Recv(in, 50, MPI_INT, left, 60, MPI_COMM_WORLD, &st);
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_TRUNCATE)
        BAD("truncate: MPI_Recv returned class %d, not MPI_ERR_TRUNCATE", cls);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Isend(out, 100, MPI_INT, right, 61, MPI_COMM_WORLD, &req);
    MPI_Irecv(in, 50, MPI_INT, MPI_ANY_SOURCE, 61, MPI_COMM_WORLD, &rr);
    rc = MPI_Wait(&rr, &st);
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_TRUNCATE)
        BAD("truncate: MPI_Wait returned class %d, not MPI_ERR_TRUNCATE", cls);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (getenv("MLN_GRID_SITES") != NULL) { /* grid mode refuses windows across sites */
        MPI_Win win = MPI_WIN_NULL;
        rc = MPI_Win_create(in, sizeof(in), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        if (rc == MPI_SUCCESS)
            BAD("refuse: MPI_Win_create on MPI_COMM_WORLD succeeded across sites");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    agree("truncate");
}

static void check_proc_null(void)
{
    int v = 1, w = 42;
    MPI_Status st;
    MPI_Request req;

    MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 70, MPI_COMM_WORLD);
    MPI_Recv(&w, 1, MPI_INT, MPI_PROC_NULL, 70, MPI_COMM_WORLD, &st);
    if (st.MPI_SOURCE != MPI_PROC_NULL || st.MPI_TAG != MPI_ANY_TAG ||
        count_of(&st, MPI_INT) != 0 || w != 42)
        BAD("proc_null: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG,
            count_of(&st, MPI_INT));
    MPI_Irecv(&w, 1, MPI_INT, MPI_PROC_NULL, 70, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, &st);
#if !defined(MPICH_NUMVERSION) || MPICH_NUMVERSION >= 40100000
    /* (MPICH 4.0.2's own MPI_Irecv from MPI_PROC_NULL completes with source 0, tag 0) */
    if (st.MPI_SOURCE != MPI_PROC_NULL)
        BAD("proc_null irecv: source %d", st.MPI_SOURCE);
#endif
    MPI_Sendrecv(&v, 1, MPI_INT, MPI_PROC_NULL, 71, &w, 1, MPI_INT, MPI_PROC_NULL, 71,
                 MPI_COMM_WORLD, &st);
    agree("proc_null");
}

static void check_cancel(void)
{
    int w = 0, cancelled = 0;
    MPI_Request req;
    MPI_Status st;

    MPI_Irecv(&w, 1, MPI_INT, (rank + 1) % size, 80, MPI_COMM_WORLD, &req); /* never sent */
    MPI_Cancel(&req);
    MPI_Wait(&req, &st);
    MPI_Test_cancelled(&st, &cancelled);
    if (!cancelled)
        BAD("cancel: an unmatched receive was not cancelled");
    agree("cancel");
}

/* 8 MiB both ways round the ring, pattern-checked. */
static void check_large(void)
{
    const size_t n = 8u << 20;
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    unsigned char *o1 = malloc(n), *o2 = malloc(n), *i1 = malloc(n), *i2 = malloc(n);
    MPI_Request reqs[4];
    MPI_Status sts[4];

    fill(o1, n, rank, right, 1);
    fill(o2, n, rank, left, 2);
    memset(i1, 0, n);
    memset(i2, 0, n);
    MPI_Irecv(i1, (int)n, MPI_BYTE, left, 90, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(i2, (int)n, MPI_BYTE, right, 91, MPI_COMM_WORLD, &reqs[1]);
    MPI_Isend(o1, (int)n, MPI_BYTE, right, 90, MPI_COMM_WORLD, &reqs[2]);
    MPI_Isend(o2, (int)n, MPI_BYTE, left, 91, MPI_COMM_WORLD, &reqs[3]);
    MPI_Waitall(4, reqs, sts);
    size_t b1 = verify(i1, n, left, rank, 1), b2 = verify(i2, n, right, rank, 2);
    if (b1 || b2 || count_of(&sts[0], MPI_BYTE) != (int)n || sts[1].MPI_SOURCE != right)
        BAD("large: %zu and %zu bad bytes, count %d", b1, b2, count_of(&sts[0], MPI_BYTE));
    /* blocking, with a double count: Get_count in the receive's datatype */
    if (rank % 2 == 0) {
        MPI_Send(o1, (int)(n / 8), MPI_DOUBLE, right, 92, MPI_COMM_WORLD);
        MPI_Recv(i1, (int)(n / 8), MPI_DOUBLE, left, 92, MPI_COMM_WORLD, &sts[0]);
    } else {
        MPI_Recv(i1, (int)(n / 8), MPI_DOUBLE, left, 92, MPI_COMM_WORLD, &sts[0]);
        MPI_Send(o1, (int)(n / 8), MPI_DOUBLE, right, 92, MPI_COMM_WORLD);
    }
    if (count_of(&sts[0], MPI_DOUBLE) != (int)(n / 8) || count_of(&sts[0], MPI_INT) != (int)(n / 4))
        BAD("large blocking: count %d doubles", count_of(&sts[0], MPI_DOUBLE));
    if (verify(i1, n, left, rank, 1) != 0)
        BAD("large blocking: bad bytes");
    free(o1);
    free(o2);
    free(i1);
    free(i2);
    agree("large");
}

static void check_barrier(void)
{
    for (int i = 0; i < 5; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    agree("barrier");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (strcmp(mode, "abort") == 0) {
        int who = argc > 2 ? atoi(argv[2]) : 1, w = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == who % size) {
            printf("aborting rank %d\n", rank);
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, 7);
        }
        MPI_Recv(&w, 1, MPI_INT, who % size, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        BAD("abort: rank %d's MPI_Abort did not end this rank", who);
        return 1;
    }
    if (strcmp(mode, "hang") == 0) {
        int w = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        printf("waiting rank %d\n", rank);
        fflush(stdout);
        MPI_Recv(&w, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        BAD("hang: a message came");
        return 1;
    }
    check_size();
    check_order();
    check_any_source();
    check_probe();
    check_ssend();
    check_sendrecv();
    check_persistent();
    check_multi();
    check_truncate();
    check_proc_null();
    check_cancel();
    check_large();
    check_barrier();
    {
        int total = fails; /* the verdict: every rank's failures, on rank 0 */
        if (rank == 0) {
            for (int r = 1; r < size; r++) {
                int f = 0;
                MPI_Recv(&f, 1, MPI_INT, r, 9001, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                total += f;
            }
            printf(total ? "FAIL grid_p2p: %d failed checks\n" : "PASS grid_p2p (%d ranks)\n",
                   total ? total : size);
        } else {
            MPI_Send(&fails, 1, MPI_INT, 0, 9001, MPI_COMM_WORLD);
        }
        MPI_Finalize();
        return fails || total ? 1 : 0;
    }
}
