/*
 * preload_probe.c - probes, wildcards and ordering under the interposition layer (issue 16):
 * the phases probe, order and anysrc of preload_p2p (a plain MPI program; preload_check.h).
 *
 *   probe   Iprobe / Improbe find nothing before a message is sent; then every size through
 *           Probe (named and ANY_SOURCE + ANY_TAG; twice: a probe takes nothing), an Iprobe
 *           loop, Mprobe + Mrecv, Improbe + Imrecv, Mprobe + Imrecv: the probe's status says
 *           the message's true source, tag and size (MPI_Get_count sizes the receive buffer)
 *   order   ten messages of mixed sizes (plain and striped) on one tag are received in the
 *           order sent: named and wildcard Recv, preposted Irecv + Waitall / Waitsome, Probe +
 *           Recv, Mprobe + Mrecv, two interleaved tags received tag by tag
 *   anysrc  every other rank sends 3 messages to one rank, which takes them with ANY_SOURCE
 *           (and ANY_TAG) receives and probes: each message once, each source's in order
 */
#include "preload_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_SYNC 7

/* A receive sized from a probe's status: checks it, receives into a fresh buffer, checks
 * that.  how: 0 Recv(source, tag of the status), 1 Mrecv, 2 Imrecv + Wait, 3 Imrecv + Test. */
static void recv_probed(pc_ctx_t *c, MPI_Comm comm, const char *what, const MPI_Status *pst,
                        MPI_Message *m, int how, int layout, int src, int tag, size_t n, int msg)
{
    int count = -1, flag = 0;
    char w[200];
    pc_buf_t b;
    MPI_Request r;
    MPI_Status st;

    snprintf(w, sizeof(w), "%s: the probe's status.MPI_SOURCE", what);
    pc_eq(c, w, src, pst->MPI_SOURCE);
    snprintf(w, sizeof(w), "%s: the probe's status.MPI_TAG", what);
    pc_eq(c, w, tag, pst->MPI_TAG);
    MPI_Get_count(pst, MPI_BYTE, &count);
    snprintf(w, sizeof(w), "%s: MPI_Get_count(MPI_BYTE) of the probe's status", what);
    pc_eq(c, w, (long long)n, count);
    /* sized from the status, as a user would (the message's own size too, should they differ,
     * so that a wrong count is reported as such and not as a truncation) */
    pc_buf_init(&b, layout, count > 0 && (size_t)count > n ? (size_t)count : n);
    switch (how) {
    case 0:
        pc_mpi(c, what, MPI_Recv(b.mem, b.count, b.type, pst->MPI_SOURCE, pst->MPI_TAG, comm, &st));
        break;
    case 1:
        pc_mpi(c, what, MPI_Mrecv(b.mem, b.count, b.type, m, &st));
        break;
    default:
        pc_mpi(c, what, MPI_Imrecv(b.mem, b.count, b.type, m, &r));
        if (how == 2)
            pc_mpi(c, what, MPI_Wait(&r, &st));
        while (how == 3 && !flag)
            pc_mpi(c, what, MPI_Test(&r, &flag, &st));
    }
    if (how)
        pc_eq(c, "the message handle after its receive is MPI_MESSAGE_NULL", 1,
              *m == MPI_MESSAGE_NULL);
    pc_status(c, what, &st, src, tag, &b, n);
    pc_buf_check(c, what, &b, n, src, msg);
    pc_buf_free(&b);
}

/* ---- probe ------------------------------------------------------------------------------- */

static void probe_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    static const char *const vname[6] = {"Probe(peer, tag)",        "Probe(ANY_SOURCE, ANY_TAG)",
                                         "Iprobe(ANY_SOURCE, tag)", "Mprobe(peer, ANY_TAG)",
                                         "Improbe(ANY, ANY)",       "Mprobe + Imrecv"};
    int me, flag = -1;
    MPI_Status st;
    MPI_Message m = MPI_MESSAGE_NULL;

    (void)arg;
    MPI_Comm_rank(comm, &me);
    if (sender) {
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm, MPI_STATUS_IGNORE);
    } else {
        pc_mpi(c, "Iprobe before any send", MPI_Iprobe(peer, MPI_ANY_TAG, comm, &flag, &st));
        pc_eq(c, "Iprobe before any send: flag", 0, flag);
        flag = -1;
        pc_mpi(c, "Improbe before any send",
               MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &m, &st));
        pc_eq(c, "Improbe before any send: flag", 0, flag);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_SYNC, comm);
    }
    for (int si = 0; si < PC_NSIZES; si++)
        for (int v = 0; v < 6; v++) {
            const size_t n = pc_sizes[si];
            const int msg = 6 * si + v, tag = 200 + msg, layout = msg % 2;
            char what[128];

            snprintf(what, sizeof(what), "%s of %zu bytes", vname[v], n);
            pc_step(c, "%s", what);
            if (sender) {
                pc_buf_t b;
                MPI_Request r;
                pc_buf_init(&b, (msg / 2) % 2, n);
                pc_buf_fill(&b, me, msg);
                if (v % 3 == 0) {
                    pc_mpi(c, what, MPI_Send(b.mem, b.count, b.type, peer, tag, comm));
                } else if (v % 3 == 1) {
                    pc_mpi(c, what, MPI_Ssend(b.mem, b.count, b.type, peer, tag, comm));
                } else {
                    MPI_Isend(b.mem, b.count, b.type, peer, tag, comm, &r);
                    pc_mpi(c, what, MPI_Wait(&r, MPI_STATUS_IGNORE));
                }
                pc_buf_free(&b);
                continue;
            }
            flag = 0;
            switch (v) {
            case 0: { /* twice: a probe leaves the message */
                MPI_Status st2;
                int c1 = -1, c2 = -2;
                pc_mpi(c, what, MPI_Probe(peer, tag, comm, &st));
                pc_mpi(c, what, MPI_Probe(peer, tag, comm, &st2));
                MPI_Get_count(&st, MPI_BYTE, &c1);
                MPI_Get_count(&st2, MPI_BYTE, &c2);
                pc_eq(c, "Probe twice: the same count", c1, c2);
                recv_probed(c, comm, what, &st2, NULL, 0, layout, peer, tag, n, msg);
                break;
            }
            case 1:
                pc_mpi(c, what, MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
                recv_probed(c, comm, what, &st, NULL, 0, layout, peer, tag, n, msg);
                break;
            case 2:
                while (!flag)
                    pc_mpi(c, what, MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &flag, &st));
                recv_probed(c, comm, what, &st, NULL, 0, layout, peer, tag, n, msg);
                break;
            case 3:
                pc_mpi(c, what, MPI_Mprobe(peer, MPI_ANY_TAG, comm, &m, &st));
                recv_probed(c, comm, what, &st, &m, 1, layout, peer, tag, n, msg);
                break;
            case 4:
                while (!flag)
                    pc_mpi(c, what, MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &m, &st));
                recv_probed(c, comm, what, &st, &m, 2, layout, peer, tag, n, msg);
                break;
            default:
                pc_mpi(c, what, MPI_Mprobe(MPI_ANY_SOURCE, tag, comm, &m, &st));
                recv_probed(c, comm, what, &st, &m, 3, layout, peer, tag, n, msg);
            }
        }
}

void probe_sizes(pc_ctx_t *c)
{
    pc_pairs(c, MPI_COMM_WORLD, NULL, probe_pair);
}

/* ---- order: non-overtaking ----------------------------------------------------------------- */

#define NORD 10
#define NROUND 7
static const size_t ord_size[NORD] = {PC_MIB + 3, 10, 64, 100 * PC_KIB, 0, 4097, 65,
                                      PC_MIB + 3, 1,  63};
static const char *const ord_name[NROUND] = {"Recv(peer, tag)",
                                             "Recv(ANY_SOURCE, ANY_TAG)",
                                             "Irecv(ANY_SOURCE) + Waitall",
                                             "Irecv(ANY_TAG) + Waitsome",
                                             "Probe + Recv",
                                             "Recv / Mprobe + Mrecv",
                                             "two tags, one after the other"};

static void order_send(pc_ctx_t *c, MPI_Comm comm, int round, int peer, int tag)
{
    pc_buf_t b[NORD];
    MPI_Request q[NORD];
    int me;

    MPI_Comm_rank(comm, &me);
    for (int i = 0; i < NORD; i++) {
        const int t = round == 6 && i % 2 ? tag + 1 : tag;
        pc_buf_init(&b[i], (i + round) % 2, ord_size[i]);
        pc_buf_fill(&b[i], me, 20 * round + i);
        if (round == 0 || round == 2)
            pc_mpi(c, "order: Send", MPI_Send(b[i].mem, b[i].count, b[i].type, peer, t, comm));
        else if (round == 4)
            pc_mpi(c, "order: Ssend", MPI_Ssend(b[i].mem, b[i].count, b[i].type, peer, t, comm));
        else if (i % 3 == 0)
            MPI_Issend(b[i].mem, b[i].count, b[i].type, peer, t, comm, &q[i]);
        else
            MPI_Isend(b[i].mem, b[i].count, b[i].type, peer, t, comm, &q[i]);
    }
    if (round != 0 && round != 2 && round != 4)
        pc_mpi(c, "order: Waitall of the sends", MPI_Waitall(NORD, q, MPI_STATUSES_IGNORE));
    for (int i = 0; i < NORD; i++)
        pc_buf_free(&b[i]);
}

static void order_pair(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer)
{
    const int tag = 300, cap_extra = 5;

    (void)arg;
    for (int round = 0; round < NROUND; round++) {
        pc_buf_t b[NORD];
        MPI_Request q[NORD];
        MPI_Status st[NORD];
        int got[NORD] = {0};

        pc_step(c, "order round %d (%s), %s rank %d", round, ord_name[round],
                sender ? "sending to" : "receiving from", peer);
        if (sender) {
            order_send(c, comm, round, peer, tag);
            continue;
        }
        for (int i = 0; i < NORD; i++)
            pc_buf_init(&b[i], (i + round + 1) % 2, PC_MIB + 3 + cap_extra);
        for (int i = 0; i < NORD; i++) {
            q[i] = MPI_REQUEST_NULL;
            if (round == 2)
                MPI_Irecv(b[i].mem, b[i].count, b[i].type, MPI_ANY_SOURCE, tag, comm, &q[i]);
            else if (round == 3)
                MPI_Irecv(b[i].mem, b[i].count, b[i].type, peer, MPI_ANY_TAG, comm, &q[i]);
        }
        if (round == 2)
            pc_mpi(c, "order: Waitall", MPI_Waitall(NORD, q, st));
        for (int left = NORD; round == 3 && left > 0;) {
            int out = 0, idx[NORD];
            MPI_Status s[NORD];
            pc_mpi(c, "order: Waitsome", MPI_Waitsome(NORD, q, &out, idx, s));
            for (int k = 0; k < out && out != MPI_UNDEFINED; k++, left--)
                st[idx[k]] = s[k];
            if (out == MPI_UNDEFINED)
                break;
        }
        for (int j = 0; j < NORD; j++) {
            /* round 6: the odd messages (tag + 1) first, then the even ones */
            const int i = round == 6 ? (j < NORD / 2 ? 2 * j + 1 : 2 * (j - NORD / 2)) : j;
            const int t = round == 6 && i % 2 ? tag + 1 : tag;
            MPI_Status ps;
            MPI_Message m;
            int n = -1;

            switch (round) {
            case 0:
            case 6:
                pc_mpi(c, "order: Recv",
                       MPI_Recv(b[i].mem, b[i].count, b[i].type, peer, t, comm, &st[i]));
                break;
            case 1:
                pc_mpi(c, "order: Recv",
                       MPI_Recv(b[i].mem, b[i].count, b[i].type, MPI_ANY_SOURCE, MPI_ANY_TAG, comm,
                                &st[i]));
                break;
            case 4:
                MPI_Probe(peer, tag, comm, &ps);
                MPI_Get_count(&ps, MPI_BYTE, &n);
                pc_eq(c, "order: Probe: MPI_Get_count", (long long)ord_size[i], n);
                pc_mpi(c, "order: Recv after Probe",
                       MPI_Recv(b[i].mem, b[i].count, b[i].type, ps.MPI_SOURCE, ps.MPI_TAG, comm,
                                &st[i]));
                break;
            case 5:
                if (i % 2 == 0) {
                    pc_mpi(c, "order: Recv",
                           MPI_Recv(b[i].mem, b[i].count, b[i].type, peer, tag, comm, &st[i]));
                    break;
                }
                MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &m, &ps);
                MPI_Get_count(&ps, MPI_BYTE, &n);
                pc_eq(c, "order: Mprobe: MPI_Get_count", (long long)ord_size[i], n);
                pc_mpi(c, "order: Mrecv", MPI_Mrecv(b[i].mem, b[i].count, b[i].type, &m, &st[i]));
                break;
            default:
                break;
            }
            got[i] = 1;
        }
        for (int i = 0; i < NORD; i++) {
            char what[128];
            snprintf(what, sizeof(what), "order, %s: message %d of %d (%zu bytes)", ord_name[round],
                     i, NORD, ord_size[i]);
            if (!pc_eq(c, what, 1, got[i]))
                continue;
            pc_status(c, what, &st[i], peer, round == 6 && i % 2 ? tag + 1 : tag, &b[i],
                      ord_size[i]);
            pc_buf_check(c, what, &b[i], ord_size[i], peer, 20 * round + i);
        }
        for (int i = 0; i < NORD; i++)
            pc_buf_free(&b[i]);
    }
}

void probe_order(pc_ctx_t *c)
{
    pc_pairs(c, MPI_COMM_WORLD, NULL, order_pair);
}

/* ---- anysrc: many senders, one receiver ----------------------------------------------------- */

#define NANY 3
#define NAROUND 5

static size_t any_size(int src, int k)
{
    return k == 0 ? PC_MIB + 3 + (size_t)src : k == 1 ? 100 + (size_t)src : 64;
}

/* One message taken by root: from its status, checks that it is the next of its source. */
static void any_got(pc_ctx_t *c, const char *what, const MPI_Status *st, pc_buf_t *b, int round,
                    int *next)
{
    const int src = st->MPI_SOURCE, k = st->MPI_TAG - 400;
    char w[160];

    if (src < 0 || src >= c->size || src == c->rank || k < 0 || k >= NANY) {
        pc_fail(c, what, "a message from source %d with tag %d", src, st->MPI_TAG);
        return;
    }
    snprintf(w, sizeof(w), "%s: the next message of rank %d (by its tag)", what, src);
    pc_eq(c, w, next[src], k);
    next[src] = k + 1;
    pc_status(c, what, st, src, 400 + k, b, any_size(src, k));
    pc_buf_check(c, what, b, any_size(src, k), src, 10 * round + k);
}

static void anysrc_root(pc_ctx_t *c, int root)
{
    const MPI_Comm W = MPI_COMM_WORLD;
    const int nmsg = NANY * (c->size - 1);
    const size_t cap = PC_MIB + 3 + (size_t)c->size;
    static const char *const rname[NAROUND] = {
        "Recv(ANY_SOURCE, ANY_TAG)", "Irecv(ANY_SOURCE, tag) by tag in reverse + Waitall",
        "Probe(ANY, ANY) + Recv", "Irecv(ANY_SOURCE, ANY_TAG) + Waitany",
        "Improbe(ANY, ANY) + Mrecv"};

    for (int round = 0; round < NAROUND; round++) {
        pc_step(c, "anysrc to rank %d, round %d (%s)", root, round, rname[round]);
        if (c->rank != root) {
            pc_buf_t b[NANY];
            MPI_Request q[NANY];
            for (int k = 0; k < NANY; k++) {
                pc_buf_init(&b[k], (k + round) % 2, any_size(c->rank, k));
                pc_buf_fill(&b[k], c->rank, 10 * round + k);
                MPI_Isend(b[k].mem, b[k].count, b[k].type, root, 400 + k, W, &q[k]);
            }
            pc_mpi(c, "anysrc: Waitall of the sends", MPI_Waitall(NANY, q, MPI_STATUSES_IGNORE));
            for (int k = 0; k < NANY; k++)
                pc_buf_free(&b[k]);
        } else {
            pc_buf_t *b = pc_xmalloc(sizeof(*b) * (size_t)nmsg);
            MPI_Request *q = pc_xmalloc(sizeof(*q) * (size_t)nmsg);
            MPI_Status *st = pc_xmalloc(sizeof(*st) * (size_t)nmsg);
            int *next = calloc((size_t)c->size, sizeof(int));
            char what[128];

            snprintf(what, sizeof(what), "anysrc to rank %d, %s", root, rname[round]);
            for (int j = 0; j < nmsg; j++)
                pc_buf_init(&b[j], j % 2, cap);
            for (int j = 0; j < nmsg && (round == 1 || round == 3); j++) {
                const int tag = round == 1 ? 400 + NANY - 1 - j / (c->size - 1) : MPI_ANY_TAG;
                MPI_Irecv(b[j].mem, b[j].count, b[j].type, MPI_ANY_SOURCE, tag, W, &q[j]);
            }
            if (round == 1) {
                pc_mpi(c, what, MPI_Waitall(nmsg, q, st));
                for (int j = 0; j < nmsg; j++) { /* by tag in reverse: sources in any order */
                    const int k = NANY - 1 - j / (c->size - 1);
                    next[st[j].MPI_SOURCE >= 0 && st[j].MPI_SOURCE < c->size ? st[j].MPI_SOURCE
                                                                             : 0] = k;
                    pc_eq(c, "anysrc: Irecv by tag: the tag", 400 + k, st[j].MPI_TAG);
                    any_got(c, what, &st[j], &b[j], round, next);
                }
            }
            for (int j = 0; j < nmsg && round != 1; j++) {
                MPI_Status s, ps;
                MPI_Message m;
                int idx = j, flag = 0, n = -1;
                if (round == 0) {
                    pc_mpi(c, what,
                           MPI_Recv(b[j].mem, b[j].count, b[j].type, MPI_ANY_SOURCE, MPI_ANY_TAG, W,
                                    &s));
                } else if (round == 2) { /* the buffer sized from the probe */
                    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, W, &ps);
                    MPI_Get_count(&ps, MPI_BYTE, &n);
                    pc_buf_free(&b[j]);
                    pc_buf_init(&b[j], j % 2, n > 0 ? (size_t)n : 0);
                    pc_mpi(c, what,
                           MPI_Recv(b[j].mem, b[j].count, b[j].type, ps.MPI_SOURCE, ps.MPI_TAG, W,
                                    &s));
                } else if (round == 3) { /* checked below, in the order posted */
                    pc_mpi(c, what, MPI_Waitany(nmsg, q, &idx, &s));
                    if (idx >= 0 && idx < nmsg)
                        st[idx] = s;
                    else
                        pc_fail(c, what, "Waitany index %d", idx);
                    continue;
                } else {
                    while (!flag)
                        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, W, &flag, &m, &ps);
                    pc_mpi(c, what, MPI_Mrecv(b[j].mem, b[j].count, b[j].type, &m, &s));
                }
                any_got(c, what, &s, &b[idx], round, next);
            }
            for (int j = 0; j < nmsg && round == 3; j++) /* each source's in the order posted */
                any_got(c, what, &st[j], &b[j], round, next);
            for (int j = 0; j < nmsg; j++)
                pc_buf_free(&b[j]);
            free(b);
            free(q);
            free(st);
            free(next);
        }
        pc_barrier(W); /* a wildcard of the next round takes nothing of this one */
    }
}

void probe_anysrc(pc_ctx_t *c)
{
    anysrc_root(c, 0);
    if (c->size > 1)
        anysrc_root(c, c->size - 1);
}
