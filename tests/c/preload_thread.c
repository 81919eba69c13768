/*
 * preload_thread.c - point-to-point from several threads at once under the interposition layer
 * (issue 16), a plain MPI program (preload_check.h): MPI_Init_thread(MPI_THREAD_MULTIPLE),
 * then NTHREADS threads per rank, each with its own tags, exchange plain and striped messages
 * with every other rank concurrently: Isend/Irecv + Waitall, blocking Send/Ssend/Recv in rank
 * order, Sendrecv around a ring, ANY_SOURCE receives, Mprobe + Mrecv.  Every byte checked.
 *
 *   preload_thread [THREADS]      (2 .. 8; default 3)
 *
 * Without MPI_THREAD_MULTIPLE it prints "SKIP: ..." and PASS.
 */
#include "preload_check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NROUNDS 3
#define NTS 5
static const size_t thr_size[NTS] = {10, 64, 4097, 100 * PC_KIB, PC_MIB + 3};

typedef struct worker {
    pc_ctx_t c; /* this thread's own: its failures are summed at the end */
    int tag0;   /* this thread's tags: tag0 .. tag0 + 99 */
    pthread_t tid;
} worker_t;

static void check_recv(pc_ctx_t *c, const char *what, const MPI_Status *st, pc_buf_t *b, int src,
                       int tag, size_t n, int msg)
{
    pc_status(c, what, st, src, tag, b, n);
    pc_buf_check(c, what, b, n, src, msg);
}

/* Irecv from every peer, Isend to every peer, Waitall. */
static void exchange_all(worker_t *w, int round)
{
    pc_ctx_t *c = &w->c;
    const int np = c->size, nq = 2 * NTS * np;
    pc_buf_t *b = pc_xmalloc(sizeof(*b) * (size_t)nq);
    MPI_Request *q = pc_xmalloc(sizeof(*q) * (size_t)nq);
    MPI_Status *st = pc_xmalloc(sizeof(*st) * (size_t)nq);

    for (int p = 0; p < np; p++)
        for (int si = 0; si < NTS; si++) {
            const int j = 2 * (p * NTS + si), tag = w->tag0 + si;
            q[j] = q[j + 1] = MPI_REQUEST_NULL;
            if (p == c->rank)
                continue;
            pc_buf_init(&b[j], (si + round) % 2, thr_size[si]);
            MPI_Irecv(b[j].mem, b[j].count, b[j].type, p, tag, MPI_COMM_WORLD, &q[j]);
            pc_buf_init(&b[j + 1], (si + round + 1) % 2, thr_size[si]);
            pc_buf_fill(&b[j + 1], c->rank, 100 * round + si + 10 * p);
            MPI_Isend(b[j + 1].mem, b[j + 1].count, b[j + 1].type, p, tag, MPI_COMM_WORLD,
                      &q[j + 1]);
        }
    pc_mpi(c, "Isend/Irecv with every peer: Waitall", MPI_Waitall(nq, q, st));
    for (int p = 0; p < np; p++)
        for (int si = 0; si < NTS; si++) {
            const int j = 2 * (p * NTS + si);
            char what[96];
            if (p == c->rank)
                continue;
            snprintf(what, sizeof(what), "Irecv round %d from rank %d, %zu bytes", round, p,
                     thr_size[si]);
            check_recv(c, what, &st[j], &b[j], p, w->tag0 + si, thr_size[si],
                       100 * round + si + 10 * c->rank);
            pc_buf_free(&b[j]);
            pc_buf_free(&b[j + 1]);
        }
    free(b);
    free(q);
    free(st);
}

/* Blocking: with each peer in rank order, the lower rank sends first (Ssend in odd rounds). */
static void blocking_pairs(worker_t *w, int round)
{
    pc_ctx_t *c = &w->c;

    for (int p = 0; p < c->size; p++) {
        if (p == c->rank)
            continue;
        for (int half = 0; half < 2; half++) {
            const int sending = (c->rank < p) == (half == 0);
            for (int si = 0; si < NTS; si++) {
                const int tag = w->tag0 + 20 + si, msg = 100 * round + 50 + si;
                pc_buf_t b;
                MPI_Status st;
                char what[96];
                pc_buf_init(&b, si % 2, thr_size[si]);
                if (sending) {
                    pc_buf_fill(&b, c->rank, msg);
                    snprintf(what, sizeof(what), "%s to rank %d, %zu bytes",
                             round % 2 ? "Ssend" : "Send", p, thr_size[si]);
                    pc_mpi(c, what,
                           round % 2 ? MPI_Ssend(b.mem, b.count, b.type, p, tag, MPI_COMM_WORLD)
                                     : MPI_Send(b.mem, b.count, b.type, p, tag, MPI_COMM_WORLD));
                } else {
                    snprintf(what, sizeof(what), "Recv round %d from rank %d, %zu bytes", round, p,
                             thr_size[si]);
                    pc_mpi(c, what, MPI_Recv(b.mem, b.count, b.type, p, tag, MPI_COMM_WORLD, &st));
                    check_recv(c, what, &st, &b, p, tag, thr_size[si], msg);
                }
                pc_buf_free(&b);
            }
        }
    }
}

/* Sendrecv around the ring, then ANY_SOURCE receives (Recv and Mprobe + Mrecv) of the thread's
 * tag from every peer. */
static void ring_and_any(worker_t *w, int round)
{
    pc_ctx_t *c = &w->c;
    const int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    const int tag = w->tag0 + 40;

    for (int si = 0; si < NTS; si++) {
        const int msg = 100 * round + 70 + si;
        pc_buf_t s, r;
        MPI_Status st;
        char what[96];

        snprintf(what, sizeof(what), "Sendrecv round %d, %zu bytes", round, thr_size[si]);
        pc_buf_init(&s, si % 2, thr_size[si]);
        pc_buf_fill(&s, c->rank, msg);
        pc_buf_init(&r, (si + 1) % 2, thr_size[si]);
        pc_mpi(c, what,
               MPI_Sendrecv(s.mem, s.count, s.type, right, tag, r.mem, r.count, r.type, left, tag,
                            MPI_COMM_WORLD, &st));
        check_recv(c, what, &st, &r, left, tag, thr_size[si], msg);
        pc_buf_free(&s);
        pc_buf_free(&r);
    }
    for (int si = 0; si < NTS; si++) {
        const int msg = 100 * round + 80 + si, nin = c->size - 1;
        const int atag = w->tag0 + 50 + si; /* a peer may be at the next size already */
        const size_t n = thr_size[si];
        pc_buf_t s, r;
        MPI_Request *q = pc_xmalloc(sizeof(*q) * (size_t)c->size);
        int *seen = calloc((size_t)c->size, sizeof(int));
        int k = 0;

        pc_buf_init(&s, PC_CONTIG, n);
        pc_buf_fill(&s, c->rank, msg);
        for (int p = 0; p < c->size; p++)
            if (p != c->rank)
                MPI_Isend(s.mem, s.count, s.type, p, atag, MPI_COMM_WORLD, &q[k++]);
        for (int j = 0; j < nin; j++) {
            MPI_Status st;
            MPI_Message m;
            char what[96];
            pc_buf_init(&r, j % 2, n);
            snprintf(what, sizeof(what), "%s round %d, %zu bytes",
                     j % 2 ? "Mprobe(ANY_SOURCE) + Mrecv" : "Recv(ANY_SOURCE)", round, n);
            if (j % 2) {
                MPI_Mprobe(MPI_ANY_SOURCE, atag, MPI_COMM_WORLD, &m, &st);
                pc_mpi(c, what, MPI_Mrecv(r.mem, r.count, r.type, &m, &st));
            } else {
                pc_mpi(c, what,
                       MPI_Recv(r.mem, r.count, r.type, MPI_ANY_SOURCE, atag, MPI_COMM_WORLD, &st));
            }
            if (st.MPI_SOURCE < 0 || st.MPI_SOURCE >= c->size || st.MPI_SOURCE == c->rank ||
                seen[st.MPI_SOURCE]++) {
                pc_fail(c, what, "a message from rank %d (twice, or not a peer)", st.MPI_SOURCE);
            } else {
                check_recv(c, what, &st, &r, st.MPI_SOURCE, atag, n, msg);
            }
            pc_buf_free(&r);
        }
        pc_mpi(c, "ANY_SOURCE round: Waitall of the sends", MPI_Waitall(k, q, MPI_STATUSES_IGNORE));
        pc_buf_free(&s);
        free(q);
        free(seen);
    }
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;

    for (int round = 0; round < NROUNDS; round++) {
        exchange_all(w, round);
        blocking_pairs(w, round);
        ring_and_any(w, round);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1, nthreads = argc > 1 ? atoi(argv[1]) : 3, rc;
    pc_ctx_t c;
    worker_t *w;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    pc_init(&c, "preload_thread");
    if (nthreads < 2 || nthreads > 8) {
        if (c.rank == 0)
            fprintf(stderr, "usage: preload_thread [THREADS (2 .. 8)]\n");
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (c.rank == 0)
            printf("preload_thread: SKIP: MPI_THREAD_MULTIPLE not provided (got %d)\n", provided);
        rc = pc_finish(&c);
        MPI_Finalize();
        return rc;
    }
    pc_phase(&c, "threads");
    w = calloc((size_t)nthreads, sizeof(*w));
    for (int t = 0; t < nthreads; t++) {
        w[t].c = c;
        w[t].c.thread = t;
        w[t].tag0 = 1000 + 100 * t;
        if (pthread_create(&w[t].tid, NULL, worker_main, &w[t]) != 0) {
            fprintf(stderr, "preload_thread: pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_join(w[t].tid, NULL);
        c.nfail += w[t].c.nfail;
    }
    free(w);
    rc = pc_finish(&c);
    MPI_Finalize();
    return rc;
}
