/*
 * preload_req.c - requests under the interposition layer (issue 16): the phases persistent,
 * waits, status and cancel of preload_p2p (a plain MPI program; preload_check.h).
 *
 *   persistent  Send_init Ssend_init Bsend_init Rsend_init + Recv_init, started 3 times (Start,
 *               Startall), completed with Waitall / Waitany / Testall / Waitsome / Wait, new data
 *               each time; inactive requests then act as null ones; Request_free; Isend +
 *               Request_free (the message still arrives)
 *   waits       Wait Test Waitall Testall Waitany Testany Waitsome Testsome on arrays that mix
 *               plain and striped receives and sends, a message to oneself (same host),
 *               MPI_REQUEST_NULL, a persistent request never started and one started
 *   status      Request_get_status: not complete before the message is sent; completes by
 *               polling it alone; leaves the request to Wait; on MPI_REQUEST_NULL
 *   cancel      unmatched receives (named, ANY_SOURCE, ANY_TAG, persistent) are cancelled and
 *               take no message; a matched or completed one is not cancelled and gets its data
 */
#include "preload_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_SYNC 7
#define BSEND_BYTES (16 * PC_MIB + 64 * MPI_BSEND_OVERHEAD)

/* ---- persistent ----------------------------------------------------------------------------- */

#define NPERS 8
enum { P_SEND, P_SSEND, P_BSEND, P_RSEND };
static const int pers_mode[NPERS] = {P_SEND, P_SSEND, P_BSEND, P_RSEND,
                                     P_SEND, P_SSEND, P_BSEND, P_SEND};
static const size_t pers_size[NPERS] = {PC_MIB + 3, 64,         100 * PC_KIB, 4097,
                                        0,          PC_MIB + 1, PC_MIB + 3,   63};

static void pers_init(pc_ctx_t *c, MPI_Comm comm, int sender, int peer, pc_buf_t *b, MPI_Request *q)
{
    for (int i = 0; i < NPERS; i++) {
        const int tag = 20 + i;
        int rc;
        pc_buf_init(&b[i], (i + sender) % 2, pers_size[i] + (!sender && i % 3 == 0 ? 7 : 0));
        if (!sender)
            rc = MPI_Recv_init(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
        else if (pers_mode[i] == P_SEND)
            rc = MPI_Send_init(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
        else if (pers_mode[i] == P_SSEND)
            rc = MPI_Ssend_init(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
        else if (pers_mode[i] == P_BSEND)
            rc = MPI_Bsend_init(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
        else
            rc = MPI_Rsend_init(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
        pc_mpi(c, "persistent: *_init", rc);
    }
}

/* Completes every request of q (all active) with the round's call; statuses into st. */
static void pers_complete(pc_ctx_t *c, int round, MPI_Request *q, MPI_Status *st)
{
    int seen[NPERS] = {0}, left = NPERS, flag = 0, idx, out, idxs[NPERS];
    MPI_Status sts[NPERS];

    switch (round) {
    case 0:
        pc_mpi(c, "persistent: Waitall", MPI_Waitall(NPERS, q, st));
        return;
    case 1:
        while (left > 0) {
            pc_mpi(c, "persistent: Waitany", MPI_Waitany(NPERS, q, &idx, &sts[0]));
            if (idx == MPI_UNDEFINED || seen[idx]) {
                pc_fail(c, "persistent: Waitany", "index %d returned with %d requests active", idx,
                        left);
                return;
            }
            seen[idx] = 1;
            st[idx] = sts[0];
            left--;
        }
        pc_mpi(c, "persistent: Waitany", MPI_Waitany(NPERS, q, &idx, &sts[0]));
        pc_eq(c, "persistent: Waitany on inactive requests: index", MPI_UNDEFINED, idx);
        return;
    case 2:
        while (!flag)
            pc_mpi(c, "persistent: Testall", MPI_Testall(NPERS, q, &flag, st));
        return;
    default:
        while (left > 0) {
            pc_mpi(c, "persistent: Waitsome", MPI_Waitsome(NPERS, q, &out, idxs, sts));
            if (out == MPI_UNDEFINED || out < 1) {
                pc_fail(c, "persistent: Waitsome", "outcount %d with %d requests active", out,
                        left);
                return;
            }
            for (int k = 0; k < out; k++) {
                st[idxs[k]] = sts[k];
                left -= !seen[idxs[k]];
                seen[idxs[k]] = 1;
            }
        }
    }
}

static void pers_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    int me;
    pc_buf_t b[NPERS];
    MPI_Request q[NPERS];
    MPI_Status st[NPERS];

    (void)arg;
    MPI_Comm_rank(comm, &me);
    pers_init(c, comm, sender, peer, b, q);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < NPERS; i++) {
            if (sender && round > 0 && pers_mode[i] == P_BSEND &&
                pc_quirk(c, PC_QUIRK_BSEND_INIT_ONCE)) {
                MPI_Request_free(&q[i]);
                MPI_Bsend_init(b[i].mem, b[i].count, b[i].type, peer, 20 + i, comm, &q[i]);
            }
            if (sender)
                pc_buf_fill(&b[i], me, 10 * round + i);
            else
                pc_buf_set(&b[i], PC_GUARD);
        }
        if (sender) /* the Rsend_init's receive is started before our go */
            MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
        if (round % 2 == 0)
            for (int i = 0; i < NPERS; i++)
                pc_mpi(c, "persistent: Start", MPI_Start(&q[i]));
        else
            pc_mpi(c, "persistent: Startall", MPI_Startall(NPERS, q));
        if (!sender)
            MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
        pers_complete(c, sender ? 3 - round : round, q, st);
        for (int i = 0; i < NPERS; i++) {
            char what[128];
            snprintf(what, sizeof(what), "persistent round %d: request %d (%zu bytes)", round, i,
                     pers_size[i]);
            pc_eq(c, "persistent: a completed persistent request stays allocated", 1,
                  q[i] != MPI_REQUEST_NULL);
            if (sender) {
                pc_buf_set(&b[i], PC_SCRIBBLE);
            } else {
                pc_status(c, what, &st[i], peer, 20 + i, &b[i], pers_size[i]);
                pc_buf_check(c, what, &b[i], pers_size[i], peer, 10 * round + i);
            }
        }
    }
    { /* inactive persistent requests act as null ones */
        MPI_Status s;
        int flag = -1, idx = -1, idxs[NPERS];
        pc_mpi(c, "Wait on an inactive request", MPI_Wait(&q[0], &s));
        pc_status_empty(c, "Wait on an inactive request", &s, MPI_ANY_SOURCE);
        pc_mpi(c, "Test on an inactive request", MPI_Test(&q[1], &flag, &s));
        pc_eq(c, "Test on an inactive request: flag", 1, flag);
        pc_status_empty(c, "Test on an inactive request", &s, MPI_ANY_SOURCE);
        flag = -1;
        pc_mpi(c, "Request_get_status on an inactive request",
               MPI_Request_get_status(q[2], &flag, &s));
        pc_eq(c, "Request_get_status on an inactive request: flag", 1, flag);
        pc_status_empty(c, "Request_get_status on an inactive request", &s, MPI_ANY_SOURCE);
        flag = -1;
        pc_mpi(c, "Testany on inactive requests", MPI_Testany(NPERS, q, &idx, &flag, &s));
        pc_eq(c, "Testany on inactive requests: flag", 1, flag);
        pc_eq(c, "Testany on inactive requests: index", MPI_UNDEFINED, idx);
        pc_mpi(c, "Waitsome on inactive requests", MPI_Waitsome(NPERS, q, &idx, idxs, st));
        pc_eq(c, "Waitsome on inactive requests: outcount", MPI_UNDEFINED, idx);
        pc_mpi(c, "Waitall on inactive requests", MPI_Waitall(NPERS, q, st));
        pc_status_empty(c, "Waitall on inactive requests", &st[3], MPI_ANY_SOURCE);
    }
    for (int i = 0; i < NPERS; i++) {
        pc_mpi(c, "persistent: Request_free", MPI_Request_free(&q[i]));
        pc_eq(c, "Request_free sets MPI_REQUEST_NULL", 1, q[i] == MPI_REQUEST_NULL);
        pc_buf_free(&b[i]);
    }

    /* Isend + Request_free: the message still goes; the buffer is ours again after the ack */
    for (int k = 0; k < 3; k++) {
        const size_t n = k == 0 ? PC_MIB + 3 : k == 1 ? 64 : 4097;
        pc_buf_t x;
        MPI_Request r;
        MPI_Status s;
        char what[96];

        snprintf(what, sizeof(what), "Isend + Request_free of %zu bytes", n);
        pc_step(c, "%s", what);
        pc_buf_init(&x, k % 2, n);
        if (sender) {
            pc_buf_fill(&x, me, 50 + k);
            pc_mpi(c, what, MPI_Isend(x.mem, x.count, x.type, peer, 29, comm, &r));
            pc_mpi(c, what, MPI_Request_free(&r));
            MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
        } else {
            pc_mpi(c, what, MPI_Recv(x.mem, x.count, x.type, peer, 29, comm, &s));
            pc_status(c, what, &s, peer, 29, &x, n);
            pc_buf_check(c, what, &x, n, peer, 50 + k);
            MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
        }
        pc_buf_free(&x);
    }
}

void req_persistent(pc_ctx_t *c)
{
    void *bbuf = pc_xmalloc(BSEND_BYTES), *det;
    int detsize;

    MPI_Buffer_attach(bbuf, BSEND_BYTES);
    pc_pairs(c, MPI_COMM_WORLD, NULL, pers_pair);
    MPI_Buffer_detach(&det, &detsize);
    free(bbuf);
}

/* ---- waits: every completion call on arrays of plain, striped, null and inactive ---------- */

#define NW 12
enum { W_PEER, W_NULL, W_SELF_RECV, W_SELF_SEND, W_PERS_IDLE, W_PERS };
static const int w_kind[NW] = {W_PEER, W_PEER, W_NULL, W_PEER, W_SELF_RECV, W_PERS_IDLE,
                               W_PEER, W_PERS, W_NULL, W_PEER, W_SELF_SEND, W_PEER};
static const size_t w_size[NW] = {PC_MIB + 3,       10, 0, 64,           100 * PC_KIB, 4097, 4097,
                                  100 * PC_KIB + 7, 0,  0, 100 * PC_KIB, PC_MIB + 3};
enum { F_WAIT, F_TEST, F_WAITALL, F_TESTALL, F_WAITANY, F_TESTANY, F_WAITSOME, F_TESTSOME, F_N };
static const char *const fam_name[F_N] = {"Wait",    "Test",    "Waitall",  "Testall",
                                          "Waitany", "Testany", "Waitsome", "Testsome"};

/* Completes every active request of q with the family's call; done[i]: times i completed. */
static void waits_run(pc_ctx_t *c, int fam, MPI_Request *q, MPI_Status *st, int *done, int nactive)
{
    int flag = 0, idx = -1, out = -1, idxs[NW], left = nactive;
    MPI_Status s, sts[NW];
    char what[64];

    snprintf(what, sizeof(what), "%s", fam_name[fam]);
    pc_step(c, "%s", what);
    switch (fam) {
    case F_WAIT:
        for (int i = 0; i < NW; i++)
            pc_mpi(c, what, MPI_Wait(&q[i], &st[i]));
        for (int i = 0; i < NW; i++)
            done[i]++;
        return;
    case F_TEST:
        for (int i = 0; i < NW; i++)
            for (flag = 0; !flag;)
                pc_mpi(c, what, MPI_Test(&q[i], &flag, &st[i]));
        for (int i = 0; i < NW; i++)
            done[i]++;
        return;
    case F_WAITALL:
    case F_TESTALL:
        if (fam == F_WAITALL)
            pc_mpi(c, what, MPI_Waitall(NW, q, st));
        while (fam == F_TESTALL && !flag)
            pc_mpi(c, what, MPI_Testall(NW, q, &flag, st));
        for (int i = 0; i < NW; i++)
            done[i]++;
        return;
    case F_WAITANY:
    case F_TESTANY:
        for (;;) {
            flag = 1;
            if (fam == F_WAITANY)
                pc_mpi(c, what, MPI_Waitany(NW, q, &idx, &s));
            else
                pc_mpi(c, what, MPI_Testany(NW, q, &idx, &flag, &s));
            if (!flag)
                continue;
            if (idx == MPI_UNDEFINED)
                break;
            if (idx < 0 || idx >= NW) {
                pc_fail(c, what, "index %d", idx);
                return;
            }
            done[idx]++;
            st[idx] = s;
            left--;
        }
        pc_eq(c, "no active request left: MPI_UNDEFINED only once all completed", 0, left);
        if (!pc_quirk(c, PC_QUIRK_UNDEFINED_STATUS))
            pc_status_empty(c, "index MPI_UNDEFINED", &s, MPI_ANY_SOURCE);
        return;
    default:
        for (;;) {
            if (fam == F_WAITSOME)
                pc_mpi(c, what, MPI_Waitsome(NW, q, &out, idxs, sts));
            else
                pc_mpi(c, what, MPI_Testsome(NW, q, &out, idxs, sts));
            if (out == MPI_UNDEFINED)
                break;
            if (fam == F_WAITSOME && out < 1)
                pc_fail(c, what, "outcount %d with requests active", out);
            for (int k = 0; k < out; k++) {
                if (idxs[k] < 0 || idxs[k] >= NW) {
                    pc_fail(c, what, "index %d", idxs[k]);
                    return;
                }
                done[idxs[k]]++;
                st[idxs[k]] = sts[k];
                left--;
            }
        }
        pc_eq(c, "no active request left: MPI_UNDEFINED only once all completed", 0, left);
    }
}

static void waits_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    int me;

    (void)arg;
    MPI_Comm_rank(comm, &me);
    for (int fam = 0; fam < F_N; fam++) {
        pc_buf_t b[NW];
        MPI_Request q[NW];
        MPI_Status st[NW];
        int done[NW] = {0}, nactive = 0;

        for (int j = 0; j < NW; j++) { /* the sender posts in reverse order */
            const int i = sender ? NW - 1 - j : j, tag = 30 + i, msg = 100 * fam + i;
            const int src = i == 6 ? MPI_ANY_SOURCE : peer;
            pc_buf_init(&b[i], (i + fam) % 2, w_size[i]);
            q[i] = MPI_REQUEST_NULL;
            if (w_kind[i] == W_SELF_SEND || (sender && w_kind[i] != W_SELF_RECV))
                pc_buf_fill(&b[i], me, msg);
            switch (w_kind[i]) {
            case W_NULL:
                break;
            case W_PEER:
                if (sender)
                    MPI_Isend(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
                else
                    MPI_Irecv(b[i].mem, b[i].count, b[i].type, src, tag, comm, &q[i]);
                break;
            case W_SELF_RECV:
                MPI_Irecv(b[i].mem, b[i].count, b[i].type, me, 34, comm, &q[i]);
                break;
            case W_SELF_SEND:
                MPI_Isend(b[i].mem, b[i].count, b[i].type, me, 34, comm, &q[i]);
                break;
            case W_PERS_IDLE:
            case W_PERS:
                if (sender)
                    MPI_Send_init(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
                else
                    MPI_Recv_init(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &q[i]);
                if (w_kind[i] == W_PERS)
                    MPI_Start(&q[i]);
                break;
            }
            nactive += w_kind[i] != W_NULL && w_kind[i] != W_PERS_IDLE;
        }
        waits_run(c, fam, q, st, done, nactive);
        for (int i = 0; i < NW; i++) {
            const int k = w_kind[i], active = k != W_NULL && k != W_PERS_IDLE;
            const int all = fam <= F_TESTALL; /* these report every entry */
            char what[128];
            snprintf(what, sizeof(what), "%s: entry %d (%s, %zu bytes)", fam_name[fam], i,
                     k == W_NULL        ? "MPI_REQUEST_NULL"
                     : k == W_PERS_IDLE ? "persistent, never started"
                     : k == W_PERS      ? "persistent"
                     : k == W_SELF_RECV ? "from self"
                     : k == W_SELF_SEND ? "to self"
                     : sender           ? "send"
                                        : "receive",
                     w_size[i]);
            if (!pc_eq(c, what, all || active ? 1 : 0, done[i]))
                continue;
            pc_eq(c, "after completion: null unless persistent", k == W_PERS || k == W_PERS_IDLE,
                  q[i] != MPI_REQUEST_NULL);
            if (!active && all)
                pc_status_empty(c, what, &st[i], MPI_ANY_SOURCE);
            if (k == W_SELF_RECV || (!sender && (k == W_PEER || k == W_PERS))) {
                const int from = k == W_SELF_RECV ? me : peer;
                const int msg = 100 * fam + (k == W_SELF_RECV ? 10 : i);
                pc_status(c, what, &st[i], from, k == W_SELF_RECV ? 34 : 30 + i, &b[i], w_size[i]);
                pc_buf_check(c, what, &b[i], w_size[i], from, msg);
            }
        }
        for (int i = 0; i < NW; i++) {
            if (q[i] != MPI_REQUEST_NULL)
                MPI_Request_free(&q[i]);
            pc_buf_free(&b[i]);
        }
    }
}

void req_waits(pc_ctx_t *c)
{
    pc_pairs(c, MPI_COMM_WORLD, NULL, waits_pair);
}

/* ---- status: Request_get_status ---------------------------------------------------------- */

static void status_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    static const size_t size[4] = {10, 64, PC_MIB + 3, 100 * PC_KIB};
    int me;

    (void)arg;
    MPI_Comm_rank(comm, &me);
    for (int k = 0; k < 4; k++) {
        const size_t n = size[k];
        const int tag = 70 + k;
        pc_buf_t b;
        MPI_Request q;
        MPI_Status s, s2;
        int flag = -1;
        char what[96];

        snprintf(what, sizeof(what), "Request_get_status, %zu bytes", n);
        pc_step(c, "%s", what);
        pc_buf_init(&b, k % 2, n);
        if (sender) {
            pc_buf_fill(&b, me, 70 + k);
            MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
            MPI_Isend(b.mem, b.count, b.type, peer, tag, comm, &q);
            for (flag = 0; !flag;)
                pc_mpi(c, what, MPI_Request_get_status(q, &flag, &s));
            pc_eq(c, "Request_get_status leaves the request", 1, q != MPI_REQUEST_NULL);
            pc_mpi(c, what, MPI_Wait(&q, &s));
        } else {
            MPI_Irecv(b.mem, b.count, b.type, peer, tag, comm, &q);
            pc_mpi(c, what, MPI_Request_get_status(q, &flag, &s));
            pc_eq(c, "Request_get_status before the message is sent: flag", 0, flag);
            MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
            for (flag = 0; !flag;)
                pc_mpi(c, what, MPI_Request_get_status(q, &flag, &s));
            pc_eq(c, "Request_get_status leaves the request", 1, q != MPI_REQUEST_NULL);
            pc_status(c, what, &s, peer, tag, &b, n);
            pc_buf_check(c, what, &b, n, peer, 70 + k);
            pc_mpi(c, what, MPI_Wait(&q, &s2));
            pc_status(c, "Wait after Request_get_status", &s2, peer, tag, &b, n);
        }
        pc_eq(c, "Wait after Request_get_status: request null", 1, q == MPI_REQUEST_NULL);
        pc_buf_free(&b);
    }
    if (!sender) {
        MPI_Status s;
        int flag = -1;
        pc_mpi(c, "Request_get_status(MPI_REQUEST_NULL)",
               MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &s));
        pc_eq(c, "Request_get_status(MPI_REQUEST_NULL): flag", 1, flag);
        pc_status_empty(c, "Request_get_status(MPI_REQUEST_NULL)", &s, MPI_ANY_SOURCE);
    }
}

void req_status(pc_ctx_t *c)
{
    pc_pairs(c, MPI_COMM_WORLD, NULL, status_pair);
}

/* ---- cancel ---------------------------------------------------------------------------------- */

static void cancel_check(pc_ctx_t *c, const char *what, MPI_Request *q, int want)
{
    MPI_Status s;
    int canc = -1;
    char w[160];

    pc_mpi(c, what, MPI_Cancel(q));
    pc_mpi(c, what, MPI_Wait(q, &s));
    MPI_Test_cancelled(&s, &canc);
    snprintf(w, sizeof(w), "%s: MPI_Test_cancelled", what);
    pc_eq(c, w, want, canc);
}

static void cancel_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    static const size_t size[3] = {PC_MIB + 3, 64, 100 * PC_KIB};
    MPI_Comm quiet = *(MPI_Comm *)arg; /* nothing is ever sent on it */
    int me;
    pc_buf_t b[4];
    MPI_Request q[4];
    MPI_Status s;

    MPI_Comm_rank(comm, &me);
    for (int i = 0; i < 3; i++) {
        pc_buf_init(&b[i], i % 2, size[i]);
        if (sender)
            pc_buf_fill(&b[i], me, 80 + i);
    }
    if (sender) { /* only once the receiver cancelled its unmatched receives */
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
        for (int i = 0; i < 3; i++)
            MPI_Isend(b[i].mem, b[i].count, b[i].type, peer, 80 + i, comm, &q[i]);
        pc_mpi(c, "cancel: Waitall of the sends", MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    } else {
        pc_buf_init(&b[3], PC_CONTIG, 64);
        MPI_Irecv(b[0].mem, b[0].count, b[0].type, peer, 80, comm, &q[0]);
        MPI_Irecv(b[1].mem, b[1].count, b[1].type, MPI_ANY_SOURCE, 81, comm, &q[1]);
        MPI_Recv_init(b[2].mem, b[2].count, b[2].type, peer, 82, comm, &q[2]);
        MPI_Start(&q[2]);
        MPI_Irecv(b[3].mem, b[3].count, b[3].type, MPI_ANY_SOURCE, MPI_ANY_TAG, quiet, &q[3]);
        cancel_check(c, "Cancel an unmatched Irecv", &q[0], 1);
        cancel_check(c, "Cancel an unmatched Irecv(ANY_SOURCE)", &q[1], 1);
        cancel_check(c, "Cancel an unmatched persistent receive", &q[2], 1);
        cancel_check(c, "Cancel an unmatched Irecv(ANY_SOURCE, ANY_TAG)", &q[3], 1);
        for (int i = 0; i < 4; i++)
            pc_buf_check(c, "a cancelled receive leaves its buffer", &b[i], 0, peer, 80 + i);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
        /* the messages went to the receives after the cancelled ones */
        MPI_Start(&q[2]);
        pc_mpi(c, "persistent receive started again after its cancel", MPI_Wait(&q[2], &s));
        pc_status(c, "persistent receive after cancel", &s, peer, 82, &b[2], size[2]);
        pc_buf_check(c, "persistent receive after cancel", &b[2], size[2], peer, 82);
        MPI_Request_free(&q[2]);
        for (int i = 0; i < 2; i++) {
            pc_mpi(c, "Recv after a cancelled receive",
                   MPI_Recv(b[i].mem, b[i].count, b[i].type, peer, 80 + i, comm, &s));
            pc_status(c, "Recv after a cancelled receive", &s, peer, 80 + i, &b[i], size[i]);
            pc_buf_check(c, "Recv after a cancelled receive", &b[i], size[i], peer, 80 + i);
        }
        pc_buf_free(&b[3]);
    }
    for (int i = 0; i < 3; i++)
        pc_buf_free(&b[i]);

    /* matched (a later message of the same source and tag was received) or completed:
     * Cancel does nothing; the data arrives */
    for (int k = 0; k < 6; k++) {
        const size_t n = k % 3 == 0 ? 10 : k % 3 == 1 ? 64 : PC_MIB + 3;
        const int tag = 90 + k, completed = k >= 3;
        char what[96];
        pc_buf_t x;
        MPI_Request r;

        snprintf(what, sizeof(what), "Cancel a %s receive of %zu bytes",
                 completed ? "completed" : "matched", n);
        pc_step(c, "%s", what);
        pc_buf_init(&x, k % 2, n);
        if (sender) {
            pc_buf_fill(&x, me, 90 + k);
            MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
            MPI_Isend(x.mem, x.count, x.type, peer, tag, comm, &r);
            if (!completed)
                MPI_Send(NULL, 0, MPI_BYTE, peer, tag, comm);
            pc_mpi(c, what, MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            int flag = 0, canc = -1;
            MPI_Irecv(x.mem, x.count, x.type, peer, tag, comm, &r);
            MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
            if (completed)
                while (!flag)
                    MPI_Request_get_status(r, &flag, &s);
            else
                MPI_Recv(NULL, 0, MPI_BYTE, peer, tag, comm, MPI_STATUS_IGNORE);
            pc_mpi(c, what, MPI_Cancel(&r));
            pc_mpi(c, what, MPI_Wait(&r, &s));
            MPI_Test_cancelled(&s, &canc);
            if (pc_eq(c, "Cancel of a matched receive: MPI_Test_cancelled", 0, canc)) {
                pc_status(c, what, &s, peer, tag, &x, n);
                pc_buf_check(c, what, &x, n, peer, 90 + k);
            }
        }
        pc_buf_free(&x);
    }
}

void req_cancel(pc_ctx_t *c)
{
    MPI_Comm quiet;

    MPI_Comm_dup(MPI_COMM_WORLD, &quiet);
    pc_pairs(c, MPI_COMM_WORLD, &quiet, cancel_pair);
    MPI_Comm_free(&quiet);
}
