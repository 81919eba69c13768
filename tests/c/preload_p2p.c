/*
 * preload_p2p.c - point-to-point under the interposition layer (issue 16), a plain MPI
 * program: the same binary runs alone and with LD_PRELOAD=libmultilane-preload.so, and checks
 * MPI's semantics itself (preload_check.h).
 *
 *   preload_p2p [PHASE[,PHASE...]]      (default: all)
 *
 * Phases, each over every ordered pair of ranks unless said otherwise:
 *   modes      Send Ssend Bsend Rsend Isend Issend Ibsend Irsend x 9 sizes (0 .. 1M+3)
 *              x contiguous / strided (vector) on each side, received with Recv, Irecv+Wait
 *              or Irecv+Test; the send buffer is overwritten as soon as MPI allows; an Issend
 *              must not complete before its receive is posted
 *   exchange   Sendrecv and Sendrecv_replace around a ring (all ranks at once), wildcards
 *   procnull   every call with MPI_PROC_NULL (each rank alone)
 *   comms      the same tag on MPI_COMM_WORLD, a dup and a split with reversed ranks
 *   self       messages to oneself on MPI_COMM_WORLD and MPI_COMM_SELF
 *   truncate   receives smaller than the message under MPI_ERRORS_RETURN (MPI_ERR_TRUNCATE)
 *   persistent, waits, status, cancel      (preload_req.c)
 *   probe, order, anysrc                    (preload_probe.c)
 */
#include "preload_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_SYNC 7 /* the ready / go handshakes */
#define TAG_DATA 100

/* A buffer for MPI_Buffer_attach: room for a few of the largest messages. */
#define BSEND_BYTES (16 * PC_MIB + 64 * MPI_BSEND_OVERHEAD)

static const char *lay_name(int layout)
{
    return layout == PC_VEC ? "vec" : "contig";
}

/* ---- modes ------------------------------------------------------------------------------ */

enum { M_SEND, M_SSEND, M_BSEND, M_RSEND, M_ISEND, M_ISSEND, M_IBSEND, M_IRSEND, M_N };
static const char *const mode_name[M_N] = {"Send",  "Ssend",  "Bsend",  "Rsend",
                                           "Isend", "Issend", "Ibsend", "Irsend"};

static void modes_send(pc_ctx_t *c, MPI_Comm comm, int mode, pc_buf_t *b, int peer, int tag,
                       const char *what)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int flag = -1;

    switch (mode) {
    case M_SEND:
        pc_mpi(c, what, MPI_Send(b->mem, b->count, b->type, peer, tag, comm));
        break;
    case M_SSEND:
        pc_mpi(c, what, MPI_Ssend(b->mem, b->count, b->type, peer, tag, comm));
        break;
    case M_BSEND: /* buffered: the receiver takes it only after we overwrote ours */
        pc_mpi(c, what, MPI_Bsend(b->mem, b->count, b->type, peer, tag, comm));
        pc_buf_set(b, PC_SCRIBBLE);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
        break;
    case M_RSEND:
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
        pc_mpi(c, what, MPI_Rsend(b->mem, b->count, b->type, peer, tag, comm));
        break;
    case M_ISEND:
        pc_mpi(c, what, MPI_Isend(b->mem, b->count, b->type, peer, tag, comm, &r));
        pc_mpi(c, what, MPI_Wait(&r, MPI_STATUS_IGNORE));
        break;
    case M_ISSEND: /* its receive is posted only after our go */
        pc_mpi(c, what, MPI_Issend(b->mem, b->count, b->type, peer, tag, comm, &r));
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        pc_eq(c, "Issend: MPI_Test before the receive is posted: flag", 0, flag);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
        pc_mpi(c, what, MPI_Wait(&r, MPI_STATUS_IGNORE));
        break;
    case M_IBSEND:
        pc_mpi(c, what, MPI_Ibsend(b->mem, b->count, b->type, peer, tag, comm, &r));
        pc_mpi(c, what, MPI_Wait(&r, MPI_STATUS_IGNORE));
        pc_buf_set(b, PC_SCRIBBLE);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
        break;
    case M_IRSEND:
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
        pc_mpi(c, what, MPI_Irsend(b->mem, b->count, b->type, peer, tag, comm, &r));
        pc_mpi(c, what, MPI_Wait(&r, MPI_STATUS_IGNORE));
        break;
    }
    pc_eq(c, "request after completion is MPI_REQUEST_NULL", 1, r == MPI_REQUEST_NULL);
    pc_buf_set(b, PC_SCRIBBLE); /* MPI says the buffer is ours again */
}

/* The receive of modes: Recv, Irecv + Wait or Irecv + a Test loop, by message number. */
static void modes_recv(pc_ctx_t *c, MPI_Comm comm, int mode, pc_buf_t *b, int peer, int tag,
                       int msg, const char *what, MPI_Status *st)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int flag = 0;

    if (mode == M_RSEND || mode == M_IRSEND) {
        pc_mpi(c, what, MPI_Irecv(b->mem, b->count, b->type, peer, tag, comm, &r));
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
        pc_mpi(c, what, MPI_Wait(&r, st));
        return;
    }
    if (mode == M_BSEND || mode == M_IBSEND || mode == M_ISSEND)
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
    if (msg % 2 == 0) {
        pc_mpi(c, what, MPI_Recv(b->mem, b->count, b->type, peer, tag, comm, st));
        return;
    }
    pc_mpi(c, what, MPI_Irecv(b->mem, b->count, b->type, peer, tag, comm, &r));
    if (msg % 4 == 1) {
        pc_mpi(c, what, MPI_Wait(&r, st));
        return;
    }
    while (!flag)
        pc_mpi(c, what, MPI_Test(&r, &flag, st));
}

static void modes_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    int me;

    (void)arg;
    MPI_Comm_rank(comm, &me);
    /* every size in every mode, each with two of the 4 layout pairs (contiguous / strided on
     * each side; the receiver's both ways), in turn: each size and each mode meets all four */
    for (int mode = 0; mode < M_N; mode++)
        for (int si = 0; si < PC_NSIZES; si++)
            for (int dt = 0; dt < 4; dt++) {
                const int msg = (mode * PC_NSIZES + si) * 4 + dt;
                if (dt != (mode + si) % 4 && dt != (mode + si + 2) % 4)
                    continue;
                const int slay = dt & 1, rlay = dt >> 1, tag = TAG_DATA + msg % 40;
                const size_t n = pc_sizes[si], cap = msg % 3 == 1 ? n + 5 : n;
                char what[160];
                pc_buf_t b;
                MPI_Status st;

                snprintf(what, sizeof(what), "%s %zu bytes %s -> %s (rank %d -> %d)",
                         mode_name[mode], n, lay_name(slay), lay_name(rlay), sender ? me : peer,
                         sender ? peer : me);
                pc_step(c, "%s", what);
                if (sender) {
                    pc_buf_init(&b, slay, n);
                    pc_buf_fill(&b, me, msg);
                    modes_send(c, comm, mode, &b, peer, tag, what);
                } else {
                    pc_buf_init(&b, rlay, cap);
                    modes_recv(c, comm, mode, &b, peer, tag, msg, what, &st);
                    pc_status(c, what, &st, peer, tag, &b, n);
                    pc_buf_check(c, what, &b, n, peer, msg);
                }
                pc_buf_free(&b);
            }
}

void p2p_modes(pc_ctx_t *c)
{
    void *bbuf = pc_xmalloc(BSEND_BYTES), *det;
    int detsize;

    MPI_Buffer_attach(bbuf, BSEND_BYTES);
    pc_pairs(c, MPI_COMM_WORLD, NULL, modes_pair);
    MPI_Buffer_detach(&det, &detsize);
    pc_eq(c, "MPI_Buffer_detach: the attached buffer", 1, det == bbuf);
    pc_eq(c, "MPI_Buffer_detach: its size", BSEND_BYTES, detsize);
    free(bbuf);
}

/* ---- exchange: Sendrecv and Sendrecv_replace around a ring ------------------------------- */

void p2p_exchange(pc_ctx_t *c)
{
    const int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;

    for (int si = 0; si < PC_NSIZES; si++)
        for (int dt = 0; dt < 4; dt++) {
            const int msg = si * 4 + dt, tag = TAG_DATA + msg;
            const size_t n = pc_sizes[si];
            const int src = msg % 3 == 2 ? MPI_ANY_SOURCE : left;
            const int rtag = msg % 5 == 4 ? MPI_ANY_TAG : tag;
            char what[160];
            pc_buf_t s, r, x;
            MPI_Status st;

            snprintf(what, sizeof(what), "Sendrecv %zu bytes %s -> %s%s%s", n, lay_name(dt & 1),
                     lay_name(dt >> 1), src == MPI_ANY_SOURCE ? " ANY_SOURCE" : "",
                     rtag == MPI_ANY_TAG ? " ANY_TAG" : "");
            pc_step(c, "%s", what);
            pc_buf_init(&s, dt & 1, n);
            pc_buf_fill(&s, c->rank, msg);
            pc_buf_init(&r, dt >> 1, n + (msg % 2 ? 3 : 0));
            if (pc_mpi(c, what,
                       MPI_Sendrecv(s.mem, s.count, s.type, right, tag, r.mem, r.count, r.type, src,
                                    rtag, MPI_COMM_WORLD, &st))) {
                pc_status(c, what, &st, left, tag, &r, n);
                pc_buf_check(c, what, &r, n, left, msg);
            }
            pc_buf_free(&s);
            pc_buf_free(&r);

            snprintf(what, sizeof(what), "Sendrecv_replace %zu bytes %s", n, lay_name(dt & 1));
            pc_step(c, "%s", what);
            pc_buf_init(&x, dt & 1, n);
            pc_buf_fill(&x, c->rank, msg + 1000);
            if (pc_mpi(c, what,
                       MPI_Sendrecv_replace(x.mem, x.count, x.type, right, tag, src, rtag,
                                            MPI_COMM_WORLD, &st))) {
                pc_status(c, what, &st, left, tag, &x, n);
                pc_buf_check(c, what, &x, n, left, msg + 1000);
            }
            pc_buf_free(&x);
        }
}

/* ---- MPI_PROC_NULL: every call completes at once; receives leave the buffer alone ---------- */

void p2p_procnull(pc_ctx_t *c)
{
    const int P = MPI_PROC_NULL, T = 3;
    const MPI_Comm W = MPI_COMM_WORLD;
    const size_t n = PC_MIB + 3;
    void *bbuf = pc_xmalloc(BSEND_BYTES), *det;
    pc_buf_t s, r;
    MPI_Request q[8];
    MPI_Status st, sts[8];
    MPI_Message m = MPI_MESSAGE_NULL;
    int flag = -1, detsize;

    MPI_Buffer_attach(bbuf, BSEND_BYTES);
    pc_buf_init(&s, PC_CONTIG, n);
    pc_buf_fill(&s, c->rank, 1);
    pc_buf_init(&r, PC_VEC, n);
    pc_mpi(c, "Send to MPI_PROC_NULL", MPI_Send(s.mem, s.count, s.type, P, T, W));
    pc_mpi(c, "Ssend to MPI_PROC_NULL", MPI_Ssend(s.mem, s.count, s.type, P, T, W));
    pc_mpi(c, "Bsend to MPI_PROC_NULL", MPI_Bsend(s.mem, s.count, s.type, P, T, W));
    pc_mpi(c, "Rsend to MPI_PROC_NULL", MPI_Rsend(s.mem, s.count, s.type, P, T, W));
    pc_mpi(c, "Isend to MPI_PROC_NULL", MPI_Isend(s.mem, s.count, s.type, P, T, W, &q[0]));
    pc_mpi(c, "Issend to MPI_PROC_NULL", MPI_Issend(s.mem, s.count, s.type, P, T, W, &q[1]));
    pc_mpi(c, "Ibsend to MPI_PROC_NULL", MPI_Ibsend(s.mem, s.count, s.type, P, T, W, &q[2]));
    pc_mpi(c, "Irsend to MPI_PROC_NULL", MPI_Irsend(s.mem, s.count, s.type, P, T, W, &q[3]));
    pc_mpi(c, "Irecv from MPI_PROC_NULL", MPI_Irecv(r.mem, r.count, r.type, P, T, W, &q[4]));
    pc_mpi(c, "Waitall on MPI_PROC_NULL requests", MPI_Waitall(5, q, sts));
    if (!pc_quirk(c, PC_QUIRK_PROCNULL_STATUS))
        pc_status_empty(c, "Irecv from MPI_PROC_NULL", &sts[4], P);

    pc_mpi(c, "Recv from MPI_PROC_NULL", MPI_Recv(r.mem, r.count, r.type, P, T, W, &st));
    pc_status_empty(c, "Recv from MPI_PROC_NULL", &st, P);
    pc_mpi(c, "Sendrecv with MPI_PROC_NULL",
           MPI_Sendrecv(s.mem, s.count, s.type, P, T, r.mem, r.count, r.type, P, T, W, &st));
    pc_status_empty(c, "Sendrecv with MPI_PROC_NULL", &st, P);
    pc_buf_check(c, "receives from MPI_PROC_NULL leave the buffer alone", &r, 0, P, 0);
    pc_mpi(c, "Sendrecv_replace with MPI_PROC_NULL",
           MPI_Sendrecv_replace(s.mem, s.count, s.type, P, T, P, T, W, &st));
    pc_status_empty(c, "Sendrecv_replace with MPI_PROC_NULL", &st, P);
    pc_buf_check(c, "Sendrecv_replace with MPI_PROC_NULL leaves the buffer", &s, n, c->rank, 1);

    pc_mpi(c, "Probe MPI_PROC_NULL", MPI_Probe(P, T, W, &st));
    pc_status_empty(c, "Probe MPI_PROC_NULL", &st, P);
    pc_mpi(c, "Iprobe MPI_PROC_NULL", MPI_Iprobe(P, MPI_ANY_TAG, W, &flag, &st));
    pc_eq(c, "Iprobe MPI_PROC_NULL: flag", 1, flag);
    pc_status_empty(c, "Iprobe MPI_PROC_NULL", &st, P);
    pc_mpi(c, "Mprobe MPI_PROC_NULL", MPI_Mprobe(P, T, W, &m, &st));
    pc_eq(c, "Mprobe MPI_PROC_NULL: message is MPI_MESSAGE_NO_PROC", 1, m == MPI_MESSAGE_NO_PROC);
    pc_status_empty(c, "Mprobe MPI_PROC_NULL", &st, P);
    pc_mpi(c, "Mrecv MPI_MESSAGE_NO_PROC", MPI_Mrecv(r.mem, r.count, r.type, &m, &st));
    pc_status_empty(c, "Mrecv MPI_MESSAGE_NO_PROC", &st, P);
    pc_eq(c, "Mrecv: message is then MPI_MESSAGE_NULL", 1, m == MPI_MESSAGE_NULL);
    flag = -1;
    pc_mpi(c, "Improbe MPI_PROC_NULL", MPI_Improbe(P, T, W, &flag, &m, &st));
    pc_eq(c, "Improbe MPI_PROC_NULL: flag", 1, flag);
    pc_eq(c, "Improbe MPI_PROC_NULL: message is MPI_MESSAGE_NO_PROC", 1, m == MPI_MESSAGE_NO_PROC);
    pc_mpi(c, "Imrecv MPI_MESSAGE_NO_PROC", MPI_Imrecv(r.mem, r.count, r.type, &m, &q[0]));
    pc_mpi(c, "Wait on Imrecv MPI_MESSAGE_NO_PROC", MPI_Wait(&q[0], &st));
    pc_status_empty(c, "Imrecv MPI_MESSAGE_NO_PROC", &st, P);

    pc_mpi(c, "Send_init MPI_PROC_NULL", MPI_Send_init(s.mem, s.count, s.type, P, T, W, &q[0]));
    pc_mpi(c, "Recv_init MPI_PROC_NULL", MPI_Recv_init(r.mem, r.count, r.type, P, T, W, &q[1]));
    for (int round = 0; round < 2; round++) {
        pc_mpi(c, "Startall MPI_PROC_NULL", MPI_Startall(2, q));
        pc_mpi(c, "Waitall persistent MPI_PROC_NULL", MPI_Waitall(2, q, sts));
        /* MPICH 5.0.2 gives the empty status of an inactive request here (MPI_ANY_SOURCE),
         * Open MPI 5 that of a receive from MPI_PROC_NULL: either is taken */
        if (sts[1].MPI_SOURCE == MPI_ANY_SOURCE)
            sts[1].MPI_SOURCE = P;
        pc_status_empty(c, "Recv_init MPI_PROC_NULL", &sts[1], P);
    }
    MPI_Request_free(&q[0]);
    MPI_Request_free(&q[1]);
    pc_buf_check(c, "receives from MPI_PROC_NULL leave the buffer alone", &r, 0, P, 0);
    pc_buf_free(&s);
    pc_buf_free(&r);
    MPI_Buffer_detach(&det, &detsize);
    free(bbuf);
}

/* ---- communicators: the same tag and ranks on world, a dup and a reversed split ---------- */

typedef struct comms {
    MPI_Comm comm[3]; /* world, dup, split (ranks reversed) */
} comms_t;

static void comms_pair(pc_ctx_t *c, MPI_Comm world, void *arg, int sender, int peer)
{
    static const size_t size[5] = {PC_MIB + 3, 64, 100 * PC_KIB, 10, PC_MIB + 3};
    static const int on[5] = {0, 1, 2, 0, 1}; /* the communicator of message i */
    const comms_t *cs = arg;
    const int T = 5;
    int me, rk[3], peer_in[3];
    pc_buf_t b[5];
    MPI_Request q[5];
    MPI_Status st[5];

    MPI_Comm_rank(world, &me);
    for (int k = 0; k < 3; k++) {
        MPI_Comm_rank(cs->comm[k], &rk[k]);
        peer_in[k] = k == 2 ? c->size - 1 - peer : peer;
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 5; i++) {
            pc_buf_init(&b[i], (i + round) % 2, size[i]);
            if (sender)
                pc_buf_fill(&b[i], rk[on[i]], 10 * round + i);
        }
        if (sender) { /* round 1: another order across communicators, the same within each */
            static const int order1[5] = {2, 1, 0, 4, 3};
            for (int j = 0; j < 5; j++) {
                const int i = round ? order1[j] : j;
                MPI_Isend(b[i].mem, b[i].count, b[i].type, peer_in[on[i]], T, cs->comm[on[i]],
                          &q[i]);
            }
            pc_mpi(c, "comms: Waitall of the sends", MPI_Waitall(5, q, MPI_STATUSES_IGNORE));
        } else if (round == 0) { /* in another order than sent: split, dup, world */
            const int order[5] = {2, 1, 4, 0, 3};
            for (int j = 0; j < 5; j++) {
                const int i = order[j], k = on[i];
                const int src = j % 2 ? MPI_ANY_SOURCE : peer_in[k];
                pc_mpi(c, "comms: Recv",
                       MPI_Recv(b[i].mem, b[i].count, b[i].type, src, j == 3 ? MPI_ANY_TAG : T,
                                cs->comm[k], &st[i]));
            }
        } else { /* every receive posted first, wildcards on world and split */
            for (int i = 0; i < 5; i++) {
                const int src = on[i] == 1 ? peer_in[1] : MPI_ANY_SOURCE;
                MPI_Irecv(b[i].mem, b[i].count, b[i].type, src, on[i] == 1 ? T : MPI_ANY_TAG,
                          cs->comm[on[i]], &q[i]);
            }
            pc_mpi(c, "comms: Waitall of the receives", MPI_Waitall(5, q, st));
        }
        for (int i = 0; !sender && i < 5; i++) {
            static const char *const cname[3] = {"MPI_COMM_WORLD", "dup", "split"};
            char what[128];
            snprintf(what, sizeof(what), "comms round %d: message %d (%zu bytes on %s)", round, i,
                     size[i], cname[on[i]]);
            pc_status(c, what, &st[i], peer_in[on[i]], T, &b[i], size[i]);
            pc_buf_check(c, what, &b[i], size[i], peer_in[on[i]], 10 * round + i);
        }
        for (int i = 0; i < 5; i++)
            pc_buf_free(&b[i]);
    }
}

void p2p_comms(pc_ctx_t *c)
{
    comms_t cs;

    cs.comm[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &cs.comm[1]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, c->size - 1 - c->rank, &cs.comm[2]);
    pc_pairs(c, MPI_COMM_WORLD, &cs, comms_pair);
    MPI_Comm_free(&cs.comm[1]);
    MPI_Comm_free(&cs.comm[2]);
}

/* ---- self: messages to oneself on MPI_COMM_WORLD and MPI_COMM_SELF -------------------------- */

void p2p_self(pc_ctx_t *c)
{
    const MPI_Comm comms[2] = {MPI_COMM_WORLD, MPI_COMM_SELF};

    for (int k = 0; k < 2; k++) {
        int me;
        MPI_Comm_rank(comms[k], &me);
        for (int si = 0; si < PC_NSIZES; si++) {
            const size_t n = pc_sizes[si];
            const int msg = 20 * k + si, tag = 40 + si;
            char what[128];
            pc_buf_t s, r, x;
            MPI_Request q[2];
            MPI_Status st[2];

            snprintf(what, sizeof(what), "%zu bytes to self on %s", n,
                     k ? "MPI_COMM_SELF" : "MPI_COMM_WORLD");
            pc_step(c, "%s", what);
            pc_buf_init(&s, si % 2, n);
            pc_buf_fill(&s, me, msg);
            pc_buf_init(&r, (si / 2) % 2, n + si % 3);
            MPI_Isend(s.mem, s.count, s.type, me, tag, comms[k], &q[0]);
            pc_mpi(c, what,
                   MPI_Recv(r.mem, r.count, r.type, si % 2 ? MPI_ANY_SOURCE : me,
                            si % 3 ? tag : MPI_ANY_TAG, comms[k], &st[1]));
            pc_mpi(c, what, MPI_Wait(&q[0], &st[0]));
            pc_status(c, what, &st[1], me, tag, &r, n);
            pc_buf_check(c, what, &r, n, me, msg);
            pc_buf_free(&r);

            snprintf(what, sizeof(what), "Sendrecv_replace %zu bytes with self on %s", n,
                     k ? "MPI_COMM_SELF" : "MPI_COMM_WORLD");
            pc_step(c, "%s", what);
            pc_buf_init(&x, (si + 1) % 2, n);
            pc_buf_fill(&x, me, msg + 100);
            pc_mpi(
                c, what,
                MPI_Sendrecv_replace(x.mem, x.count, x.type, me, tag, me, tag, comms[k], &st[0]));
            pc_status(c, what, &st[0], me, tag, &x, n);
            pc_buf_check(c, what, &x, n, me, msg + 100);
            pc_buf_free(&x);
            pc_buf_free(&s);
        }
    }
}

/* ---- truncate: a receive smaller than its message, under MPI_ERRORS_RETURN --------------- */

#define NTRUNC 9
static const size_t trunc_n[NTRUNC] = {100,        65,         64,         4097, 100 * PC_KIB,
                                       PC_MIB + 3, PC_MIB + 3, PC_MIB + 3, 64};
static const size_t trunc_cap[NTRUNC] = {50, 64, 63, 4096, 50 * PC_KIB, 4097, 64, PC_MIB + 2, 0};

static void trunc_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    (void)arg;
    for (int i = 0; i < NTRUNC; i++) {
        const size_t n = trunc_n[i], cap = trunc_cap[i], follow = 100 * PC_KIB + i;
        const int tag = 60 + i, how = i % 3; /* Recv, Irecv + Wait, Irecv + Waitall */
        static const char *const how_name[3] = {"Recv", "Irecv+Wait", "Irecv+Waitall"};
        char what[128];
        pc_buf_t f;

        snprintf(what, sizeof(what), "%s of %zu bytes into %zu", how_name[how], n, cap);
        pc_step(c, "%s", what);
        if (sender) {
            pc_buf_t b;
            pc_buf_init(&b, PC_CONTIG, n);
            pc_buf_fill(&b, c->rank, i);
            pc_mpi(c, what, MPI_Send(b.mem, b.count, b.type, peer, tag, comm));
            pc_buf_free(&b);
            pc_buf_init(&f, i % 2, follow); /* the communicator goes on working */
            pc_buf_fill(&f, c->rank, 100 + i);
            pc_mpi(c, what, MPI_Send(f.mem, f.count, f.type, peer, tag, comm));
        } else {
            uint8_t *mem = pc_xmalloc(n); /* room for all (a truncating MPI may write it) */
            MPI_Status st;
            MPI_Request q;
            int rc, cls = -1;

            if (how == 0) {
                rc = MPI_Recv(mem, (int)cap, MPI_BYTE, peer, tag, comm, &st);
            } else {
                MPI_Irecv(mem, (int)cap, MPI_BYTE, peer, tag, comm, &q);
                rc = how == 1 ? MPI_Wait(&q, &st) : MPI_Waitall(1, &q, &st);
            }
            if (how == 2) {
                pc_eq(c, "Waitall with a truncated receive returns MPI_ERR_IN_STATUS",
                      MPI_ERR_IN_STATUS, rc);
                rc = st.MPI_ERROR;
            }
            MPI_Error_class(rc, &cls);
            {
                char w[200];
                snprintf(w, sizeof(w), "%s: error class (MPI_ERR_TRUNCATE = %d)", what,
                         MPI_ERR_TRUNCATE);
                pc_eq(c, w, MPI_ERR_TRUNCATE, cls);
                snprintf(w, sizeof(w), "%s: status.MPI_SOURCE", what);
                pc_eq(c, w, peer, st.MPI_SOURCE);
                snprintf(w, sizeof(w), "%s: status.MPI_TAG", what);
                pc_eq(c, w, tag, st.MPI_TAG);
            }
            free(mem);
            snprintf(what, sizeof(what), "the message after a truncated one (%zu bytes)", follow);
            pc_buf_init(&f, i % 2, follow);
            pc_mpi(c, what, MPI_Recv(f.mem, f.count, f.type, peer, tag, comm, &st));
            pc_status(c, what, &st, peer, tag, &f, follow);
            pc_buf_check(c, what, &f, follow, peer, 100 + i);
        }
        pc_buf_free(&f);
    }
}

void p2p_truncate(pc_ctx_t *c)
{
    MPI_Comm comm;

    /* MPICH raises an error of MPI_Waitall on MPI_COMM_WORLD's handler (MPI 4.0 leaves the
     * handler of a multiple-completion call open), so both return errors for this phase */
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pc_pairs(c, comm, NULL, trunc_pair);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&comm);
}

/* ---- main ---------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*fn)(pc_ctx_t *c);
} phases[] = {
    {"modes", p2p_modes},
    {"exchange", p2p_exchange},
    {"procnull", p2p_procnull},
    {"comms", p2p_comms},
    {"self", p2p_self},
    {"truncate", p2p_truncate},
    {"persistent", req_persistent},
    {"waits", req_waits},
    {"status", req_status},
    {"cancel", req_cancel},
    {"probe", probe_sizes},
    {"order", probe_order},
    {"anysrc", probe_anysrc},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    const char *list = argc > 1 ? argv[1] : NULL;
    pc_ctx_t c;
    int rc;

    MPI_Init(&argc, &argv);
    pc_init(&c, "preload_p2p");
    for (int i = 0; phases[i].name; i++)
        if (pc_selected(list, phases[i].name)) {
            pc_phase(&c, phases[i].name);
            phases[i].fn(&c);
        }
    rc = pc_finish(&c);
    MPI_Finalize();
    return rc;
}
