/*
 * mpi_stripe_fixes.c - sub-tests of mpi_stripe for the defects a reading of the striping engine
 * found (docs/STRIPE.md "Failures" states the semantics they hold the engine to).  Each one
 * names its finding; each failed on the engine before the fix.
 *
 *   bigplain  plain (same-site) messages over 2 GiB arrive whole              (finding 1)
 *   upto      receive "up to N" of a derived type: exactly what MPI_Recv does  (2)
 *   gap       compute gaps longer than MLN_STRIPE_TIMEOUT are no failure       (3)
 *   tags      more messages in flight than chunk tags: none mixed up           (4)
 *   rabort    a receive that fails mid-message: nothing written after its
 *   sabort    error, later messages with the peer whole (and a failed send)   (4)
 *   inline    64-byte payloads matched out of order are never swapped          (5)
 *   listener  idle connections and wrong hellos are closed; an unused lane's
 *             end is no failure                                               (8, 9)
 *   outeof    a peer that ends our lanes is noticed                            (10)
 *   nak       a receive that fails before its CTS: the sender is told          (13)
 *   eintr     signals while lanes connect: tcp lanes all the same              (11)
 *
 * and for the early chunks that a tcp send puts on its lanes before the CTS (docs/STRIPE.md
 * "Early chunks"), which a first message never has (its lanes are still opening):
 *
 *   early        early chunks of messages not yet matched wait aside, within the budget
 *   early_limit  a sender with a larger MLN_STRIPE_EARLY: one error, no hang, no wrong byte
 *   nak_early, rabort_early, sabort_early   nak, rabort, sabort on a message sent early
 *
 * Most need options (testlist.txt): --tags N (a small tag space, reused soon), --fault SPEC
 * --fault-rank R (MLN_STRIPE_FAULT on rank R), --stripe-timeout S, --local 0.
 */
#define _GNU_SOURCE /* timer_create, sigaction */
#include "lane_tcp_int.h"
#include "stripe_check.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The striped traffic the fault sub-tests use: message 0 is the one that fails, 1..3 follow
 * on the same pair (and reuse its tags when the tag space is small). */
#define FAIL_SIZE (24 * MIB + 5)
#define LATER_SIZE (4 * MIB + 7)

static int64_t later_size(int i)
{
    return LATER_SIZE + 1000 * i;
}

/* Messages 1..3 from rank `from` to rank `to` of pair (0, 1), every byte checked. */
static void later_messages(tctx_t *t, int from, const char *what)
{
    char label[96];

    for (int i = 1; i <= 3; i++) {
        const int64_t n = later_size(i);
        snprintf(label, sizeof(label), "%s: message %d after the failed one", what, i);
        if (t->rank == from) {
            uint8_t *buf = xmalloc(n);
            fill(buf, n, t->rank, i);
            expect(t, mln_stripe_send(buf, n, MPI_BYTE, 1 - from, t->tag + i, t->comm), MLN_OK,
                   label);
            free(buf);
        } else {
            recv_check(t, n, n, from, t->tag + i, i, label);
        }
    }
}

/* After a receive returned an error, MPI and the lanes must not touch its buffer: it is
 * filled with 0xEE then, and checked after more traffic with the same peer. */
static void sentinel_check(tctx_t *t, const uint8_t *buf, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (buf[i] != 0xEE) {
            fail(t, "%s: byte %lld of the failed receive's buffer was written after its error",
                 what, (long long)i);
            return;
        }
}

/* ---- finding 1 ----------------------------------------------------------------------------- */

/* 2^32 + 100 and 2^31 + 12345 bytes, rank 0 to rank 1, into a buffer 7 bytes larger; with
 * --local 0 on one host these are plain MPI messages (about 8.6 GiB of memory). */
void t_bigplain(tctx_t *t)
{
    const int64_t sizes[2] = {((int64_t)1 << 32) + 100, ((int64_t)1 << 31) + 12345};
    uint8_t *buf;

    if (t->rank > 1)
        return;
    buf = xmalloc(sizes[0] + 7);
    for (int i = 0; i < 2; i++) {
        char label[64];
        snprintf(label, sizeof(label), "bigplain %lld B", (long long)sizes[i]);
        if (t->rank == 0) {
            fill(buf, sizes[i], 0, i);
            expect(t, mln_stripe_send(buf, sizes[i], MPI_BYTE, 1, t->tag + i, t->comm), MLN_OK,
                   label);
        } else {
            MPI_Status st;
            memset(buf, 0, (size_t)sizes[i]);
            if (expect(t, mln_stripe_recv(buf, sizes[i] + 7, MPI_BYTE, 0, t->tag + i, t->comm, &st),
                       MLN_OK, label) &&
                check_status(t, &st, 0, t->tag + i, sizes[i], label))
                check(t, buf, sizes[i], 0, i, label);
        }
    }
    free(buf);
}

/* ---- finding 2 ----------------------------------------------------------------------------- */

/* K doubles (MPI_DOUBLE) into N elements of {double, hole, double}: through mln_stripe_recv
 * and MPI_Recv into twin buffers, which must end up the same byte for byte, with the same
 * status.  K odd ends inside an element; 8 doubles are the 64-byte (inline) case; 80000 and
 * 80001 are striped (above the threshold). */
void t_upto(tctx_t *t)
{
    const int64_t ks[] = {20, 21, 8, 80000, 80001};
    const int nk = (int)(sizeof(ks) / sizeof(ks[0])), n = 100000;
    const int64_t bytes = (int64_t)n * 24;
    MPI_Datatype vec;
    MPI_Comm mpicomm;

    MPI_Comm_dup(t->comm, &mpicomm);
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    for (int dir = 0; dir < 2; dir++) {
        const int sender = (t->rank % 2) == dir;
        for (int i = 0; i < nk && t->partner >= 0; i++) {
            char label[64];
            snprintf(label, sizeof(label), "upto: %lld doubles into %d elements", (long long)ks[i],
                     n);
            if (sender) {
                uint8_t *out = xmalloc(ks[i] * 8);
                fill(out, ks[i] * 8, t->rank, i);
                expect(t, mln_stripe_send(out, ks[i], MPI_DOUBLE, t->partner, t->tag + i, t->comm),
                       MLN_OK, label);
                MPI_Send(out, (int)ks[i], MPI_DOUBLE, t->partner, t->tag + i, mpicomm);
                free(out);
            } else {
                uint8_t *mine = xmalloc(bytes), *ref = xmalloc(bytes);
                MPI_Status st, rst;
                int c1 = 0, c2 = 0;
                MPI_Count e1 = 0, e2 = 0;
                memset(mine, 0xEE, (size_t)bytes);
                memset(ref, 0xEE, (size_t)bytes);
                if (expect(t, mln_stripe_recv(mine, n, vec, t->partner, t->tag + i, t->comm, &st),
                           MLN_OK, label)) {
                    MPI_Recv(ref, n, vec, t->partner, t->tag + i, mpicomm, &rst);
                    MPI_Get_count(&st, vec, &c1);
                    MPI_Get_count(&rst, vec, &c2);
                    MPI_Get_elements_x(&st, vec, &e1);
                    MPI_Get_elements_x(&rst, vec, &e2);
                    if (c1 != c2 || e1 != e2 || st.MPI_SOURCE != rst.MPI_SOURCE ||
                        st.MPI_TAG != rst.MPI_TAG)
                        fail(t, "%s: status count %d elements %lld, MPI says %d and %lld", label,
                             c1, (long long)e1, c2, (long long)e2);
                    for (int64_t b = 0; b < bytes && t->ok; b++)
                        if (mine[b] != ref[b])
                            fail(t, "%s: byte %lld is 0x%02x, MPI_Recv leaves 0x%02x", label,
                                 (long long)b, mine[b], ref[b]);
                } else {
                    MPI_Recv(ref, n, vec, t->partner, t->tag + i, mpicomm, &rst);
                }
                free(mine);
                free(ref);
            }
        }
        MPI_Barrier(t->comm);
    }
    MPI_Type_free(&vec);
    MPI_Comm_free(&mpicomm);
}

/* ---- finding 3 ----------------------------------------------------------------------------- */

/* The rank that is `away` sleeps longer than MLN_STRIPE_TIMEOUT in the middle of a 64 MiB
 * message while its partner waits: it calls mln_stripe_test until the message is under way
 * (its CTS settled: the request is in DATA state), then sleeps.  MPI would just be late; so
 * must the library.  Round 0: the sender is away; round 1: the receiver. */
void t_gap(tctx_t *t)
{
    const int64_t n = 64 * MIB + 3;
    const unsigned gap = 2u * (unsigned)t->opt->stripe_timeout + 1u;

    if (pair_only(t, "gap"))
        return;
    for (int round = 0; round < 2 && t->ok; round++) {
        const int sender = t->rank % 2 == 0, away = sender == (round == 0);
        uint8_t *buf = xmalloc(n);
        mln_request_t req = MLN_REQUEST_NULL;
        MPI_Status st;
        mln_status_t rc;
        char label[64];

        snprintf(label, sizeof(label), "gap: %s away for %u s", round ? "receiver" : "sender", gap);
        if (sender) {
            fill(buf, n, t->rank, round);
            rc = mln_stripe_isend(buf, n, MPI_BYTE, t->partner, t->tag + round, t->comm, &req);
        } else {
            memset(buf, 0, (size_t)n);
            rc = mln_stripe_irecv(buf, n, MPI_BYTE, t->partner, t->tag + round, t->comm, &req);
        }
        if (expect(t, rc, MLN_OK, label)) {
            if (away) {
                int done = 0;
                while (!done && req->state != MLN_REQ_DATA)
                    mln_stripe_test(&req, &done, &st);
                if (done) /* then the gap would test nothing */
                    fail(t, "%s: the message was done before the gap", label);
                sleep(gap);
            }
            rc = req == MLN_REQUEST_NULL ? MLN_OK : mln_stripe_wait(&req, &st);
            if (expect(t, rc, MLN_OK, label) && !sender &&
                check_status(t, &st, t->partner, t->tag + round, n, label))
                check(t, buf, n, t->partner, round, label);
            if (rc != MLN_OK && !sender) { /* then nothing may write into it any more */
                memset(buf, 0xEE, (size_t)n);
                sleep(2);
                MPI_Barrier(t->comm);
                sentinel_check(t, buf, n, label);
            } else if (rc != MLN_OK) {
                sleep(2);
                MPI_Barrier(t->comm);
            }
        }
        free(buf);
        MPI_Barrier(t->comm);
    }
}

/* ---- finding 4 ----------------------------------------------------------------------------- */

/* 12 messages of 1-2 MiB in flight at once each way, on 12 tags, the receives posted first in
 * one order and then in the other.  With --tags 32 (8 chunks per message) they need three
 * times the chunk tags there are: ranges must wait for retired ones, never overlap. */
void t_tags(tctx_t *t)
{
    enum { N = 12 };
    uint8_t *out[N], *in[N];
    mln_request_t reqs[2 * N];
    MPI_Status st[2 * N];

    if (pair_only(t, "tags"))
        return;
    for (int round = 0; round < 2 && t->ok; round++) {
        for (int i = 0; i < N; i++) {
            const int64_t n = MIB + 1000 * i + 1;
            const int j = round ? N - 1 - i : i; /* posting order of the receives */
            out[i] = xmalloc(n);
            in[j] = xmalloc(MIB + 1000 * j + 1);
            fill(out[i], n, t->rank, 100 * round + i);
            reqs[j] = reqs[N + i] = MLN_REQUEST_NULL;
            expect(t,
                   mln_stripe_irecv(in[j], MIB + 1000 * j + 1, MPI_BYTE, t->partner, t->tag + j,
                                    t->comm, &reqs[j]),
                   MLN_OK, "tags: irecv");
        }
        MPI_Barrier(t->comm);
        for (int i = 0; i < N; i++)
            expect(t,
                   mln_stripe_isend(out[i], MIB + 1000 * i + 1, MPI_BYTE, t->partner, t->tag + i,
                                    t->comm, &reqs[N + i]),
                   MLN_OK, "tags: isend");
        if (expect(t, mln_stripe_waitall(2 * N, reqs, st), MLN_OK, "tags: waitall"))
            for (int i = 0; i < N && t->ok; i++) {
                char label[64];
                snprintf(label, sizeof(label), "tags round %d: message %d", round, i);
                if (check_status(t, &st[i], t->partner, t->tag + i, MIB + 1000 * i + 1, label))
                    check(t, in[i], MIB + 1000 * i + 1, t->partner, 100 * round + i, label);
            }
        for (int i = 0; i < N; i++) {
            free(out[i]);
            free(in[i]);
        }
        MPI_Barrier(t->comm);
    }
}

/* Message 0 from rank 0 to rank 1 fails on purpose (MLN_STRIPE_FAULT on `struck`, which
 * returns `own`; the other side returns MLN_ERR_PEER); then messages 1..3 both ways. */
static void failed_message(tctx_t *t, int struck, mln_status_t own, const char *what)
{
    uint8_t *buf;

    if (pair_only(t, what))
        return;
    buf = xmalloc(FAIL_SIZE);
    if (t->rank == 0) {
        mln_status_t rc;
        fill(buf, FAIL_SIZE, 0, 0);
        rc = mln_stripe_send(buf, FAIL_SIZE, MPI_BYTE, 1, t->tag, t->comm);
        /* a send may have completed (all its bytes handed to the network) before the receive
         * failed: MPI_Send says nothing about the receive either */
        if (!(struck == 1 && own == MLN_ERR_SYS && rc == MLN_OK))
            expect(t, rc, struck == 0 ? own : MLN_ERR_PEER, what);
    } else {
        memset(buf, 0, FAIL_SIZE);
        expect(t, mln_stripe_recv(buf, FAIL_SIZE, MPI_BYTE, 0, t->tag, t->comm, MPI_STATUS_IGNORE),
               struck == 1 ? own : MLN_ERR_PEER, what);
        memset(buf, 0xEE, FAIL_SIZE);
    }
    later_messages(t, 0, what);
    later_messages(t, 1, what);
    MPI_Barrier(t->comm);
    if (t->rank == 1)
        sentinel_check(t, buf, FAIL_SIZE, what);
    free(buf);
}

/* ---- early chunks ------------------------------------------------------------------------ */

/* One striped message each way between ranks 0 and 1, checked: the lanes are up after it, so
 * that the next message sends early chunks.  It is the first striped send and receive of each
 * rank (the fault hooks count it). */
static void warm_up(tctx_t *t, const char *what)
{
    char label[96];

    snprintf(label, sizeof(label), "%s: warm-up", what);
    for (int from = 0; from < 2; from++) {
        if (t->rank == from) {
            uint8_t *buf = xmalloc(LATER_SIZE);
            fill(buf, LATER_SIZE, t->rank, 9);
            expect(t, mln_stripe_send(buf, LATER_SIZE, MPI_BYTE, 1 - from, t->tag + 9, t->comm),
                   MLN_OK, label);
            free(buf);
        } else {
            recv_check(t, LATER_SIZE, LATER_SIZE, from, t->tag + 9, 9, label);
        }
    }
}

#define EARLY_MSGS 4
#define EARLY_SIZE (8 * MIB + 3) /* chunks of 512 KiB: 2 MiB early on 4 lanes */

/*
 * Rank 0 isends EARLY_MSGS messages (tags +1..); rank 1 receives the last one first, then the
 * others from the last to the first, so that the early chunks of those wait aside until their
 * headers match (MLN_STRIPE_EARLY bounds how many went early).  all_ok: every message arrives
 * whole; else (a sender whose budget is larger than ours) each receive is whole or fails, one
 * that failed is never written after, and later messages between the pair are whole.
 */
static void early_order(tctx_t *t, int all_ok, const char *what)
{
    char label[96];
    uint8_t *bufs[EARLY_MSGS];
    mln_status_t rcs[EARLY_MSGS];

    if (pair_only(t, what))
        return;
    warm_up(t, what);
    if (t->rank == 0) {
        mln_request_t reqs[EARLY_MSGS];
        for (int i = 0; i < EARLY_MSGS; i++) {
            bufs[i] = xmalloc(EARLY_SIZE);
            fill(bufs[i], EARLY_SIZE, 0, i);
            if (!expect(t,
                        mln_stripe_isend(bufs[i], EARLY_SIZE, MPI_BYTE, 1, t->tag + 1 + i, t->comm,
                                         &reqs[i]),
                        MLN_OK, what))
                reqs[i] = MLN_REQUEST_NULL;
        }
        for (int i = 0; i < EARLY_MSGS; i++) {
            const mln_status_t rc = mln_stripe_wait(&reqs[i], MPI_STATUS_IGNORE);
            snprintf(label, sizeof(label), "%s: send %d", what, i);
            if (all_ok || (rc != MLN_OK && rc != MLN_ERR_PEER))
                expect(t, rc, MLN_OK, label);
            free(bufs[i]);
        }
    } else {
        for (int k = 0; k < EARLY_MSGS; k++) {
            const int i = EARLY_MSGS - 1 - k;
            MPI_Status st;
            bufs[i] = xmalloc(EARLY_SIZE);
            memset(bufs[i], 0, EARLY_SIZE);
            rcs[i] =
                mln_stripe_recv(bufs[i], EARLY_SIZE, MPI_BYTE, 0, t->tag + 1 + i, t->comm, &st);
            snprintf(label, sizeof(label), "%s: receive %d", what, i);
            if (rcs[i] == MLN_OK) {
                if (check_status(t, &st, 0, t->tag + 1 + i, EARLY_SIZE, label))
                    check(t, bufs[i], EARLY_SIZE, 0, i, label);
            } else if (all_ok) {
                expect(t, rcs[i], MLN_OK, label);
            } else {
                printf("%s: failed as it may: %s\n", label, mln_status_str(rcs[i]));
            }
            memset(bufs[i], 0xEE, EARLY_SIZE);
        }
    }
    later_messages(t, 0, what);
    later_messages(t, 1, what);
    MPI_Barrier(t->comm);
    for (int i = 0; t->rank == 1 && i < EARLY_MSGS; i++) {
        snprintf(label, sizeof(label), "%s: receive %d", what, i);
        sentinel_check(t, bufs[i], EARLY_SIZE, label);
        free(bufs[i]);
    }
}

void t_early(tctx_t *t)
{
    early_order(t, 1, "early");
}

/* --early 64M --early-rank 0: rank 0 sends more early bytes than rank 1 keeps aside. */
void t_early_limit(tctx_t *t)
{
    early_order(t, 0, "early_limit");
}

/* --fault KIND:2... : as rabort, sabort and nak, on a message that goes early. */
void t_rabort_early(tctx_t *t)
{
    if (t->rank < 2)
        warm_up(t, "rabort_early");
    failed_message(t, 1, MLN_ERR_SYS, "rabort_early");
}

void t_sabort_early(tctx_t *t)
{
    if (t->rank < 2)
        warm_up(t, "sabort_early");
    failed_message(t, 0, MLN_ERR_SYS, "sabort_early");
}

void t_nak_early(tctx_t *t)
{
    if (t->rank < 2)
        warm_up(t, "nak_early");
    failed_message(t, 1, MLN_ERR_NOMEM, "nak_early");
}

/* --fault rabort:1:BYTES --fault-rank 1: rank 1's receive fails once BYTES landed. */
void t_rabort(tctx_t *t)
{
    failed_message(t, 1, MLN_ERR_SYS, "rabort");
}

/* --fault sabort:1:BYTES --fault-rank 0: rank 0's send fails once BYTES went to the lanes. */
void t_sabort(tctx_t *t)
{
    failed_message(t, 0, MLN_ERR_SYS, "sabort");
}

/* ---- finding 13 ---------------------------------------------------------------------------- */

/* --fault nak:1 --fault-rank 1: rank 1's receive fails before its CTS (as out of memory). */
void t_nak(tctx_t *t)
{
    failed_message(t, 1, MLN_ERR_NOMEM, "nak");
}

/* ---- finding 5 ----------------------------------------------------------------------------- */

/* Rank 1 sends a 64-byte message on tag A, then inline_tags + 2 more on tag B (so one of them
 * has the first one's payload tag); rank 0 receives all of tag B first, then tag A. */
void t_inline(tctx_t *t)
{
    const int n = mln_stripe_engine()->inline_tags + 2;
    uint8_t buf[64];

    if (t->rank > 1)
        return;
    for (int i = 0; i <= n && t->ok; i++) {
        const int tag = i == 0 ? t->tag : t->tag + 1;
        char label[64];
        snprintf(label, sizeof(label), "inline: message %d of %d", i, n);
        if (t->rank == 1) {
            fill(buf, 64, 1, i);
            expect(t, mln_stripe_send(buf, 64, MPI_BYTE, 0, tag, t->comm), MLN_OK, label);
        } else if (i > 0) {
            recv_check(t, 64, 64, 1, t->tag + 1, i, label);
        }
    }
    if (t->rank == 0)
        recv_check(t, 64, 64, 1, t->tag, 0, "inline: the first message, received last");
}

/* ---- findings 8 and 9 ---------------------------------------------------------------------- */

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;

    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* 4 MiB each way between ranks 0 and 1, for `seconds`. */
static void exchange_for(tctx_t *t, double seconds, int round0)
{
    const int64_t n = 4 * MIB;
    uint8_t *out = xmalloc(n), *in = xmalloc(n);
    const double t0 = MPI_Wtime();
    int go = 1;

    for (int round = round0; go && t->ok; round++) {
        mln_request_t reqs[2] = {MLN_REQUEST_NULL, MLN_REQUEST_NULL};
        MPI_Status st[2];
        fill(out, n, t->rank, round);
        expect(t, mln_stripe_irecv(in, n, MPI_BYTE, 1 - t->rank, t->tag, t->comm, &reqs[0]), MLN_OK,
               "exchange");
        expect(t, mln_stripe_isend(out, n, MPI_BYTE, 1 - t->rank, t->tag, t->comm, &reqs[1]),
               MLN_OK, "exchange");
        if (expect(t, mln_stripe_waitall(2, reqs, st), MLN_OK, "exchange"))
            check(t, in, n, 1 - t->rank, round, "exchange");
        go = MPI_Wtime() - t0 < seconds;
        MPI_Bcast(&go, 1, MPI_INT, 0, t->comm); /* both stop after the same round */
    }
    free(out);
    free(in);
}

/* 1 when the peer closed fd (recv says end of stream, or an error); 0 while it is open. */
static int peer_closed(int fd)
{
    char b;
    const ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/*
 * tcp, ranks 0 and 1.  Rank 1 opens 200 connections to rank 0's listener that never say
 * hello, one lane whose hello names another destination, and one good lane it then closes
 * unused.  Over the next 7 s of striped traffic (the hello deadline is 5 s) rank 0 closes the
 * 200 and the wrong one, keeps no more descriptors than before, and the unused lane's end
 * breaks nothing: the traffic goes on over tcp lanes.
 */
void t_listener(tctx_t *t)
{
    enum { IDLE = 200 };
    mln_stripe_t *s = mln_stripe_engine();
    int port = -1, fds_before = -1, idle[IDLE], wrong = -1, unused = -1;

    if (pair_only(t, "listener"))
        return;
    exchange_for(t, 0, 0); /* lanes both ways, then count */
    fds_before = open_fds();
    port = mln_tcp_listen_port(s);
    MPI_Bcast(&port, 1, MPI_INT, 0, t->comm);
    if (t->rank == 1) {
        for (int i = 0; i < IDLE; i++)
            idle[i] = mln_tcp_test_connect(s, 0, -1, 0, 0);
        wrong = mln_tcp_test_connect(s, 0, 0, 4, 2); /* hello to world rank 2, not 0 */
        unused = mln_tcp_test_connect(s, 0, 63, 64, 0);
        if (idle[IDLE - 1] < 0 || wrong < 0 || unused < 0)
            fail(t, "listener: cannot connect to rank 0's listener at port %d", port);
    }
    MPI_Barrier(t->comm);
    exchange_for(t, 1.0, 1);
    if (t->rank == 1 && unused >= 0)
        close(unused); /* a lane that never carried a frame ends */
    exchange_for(t, 6.5, 100);
    if (t->rank == 0) {
        const int after = open_fds();
        if (after > fds_before + 16)
            fail(t, "listener: %d descriptors open, %d before the 200 idle connections", after,
                 fds_before);
    } else {
        int closed = 0;
        for (int i = 0; i < IDLE; i++)
            if (idle[i] >= 0) {
                closed += peer_closed(idle[i]);
                close(idle[i]);
            }
        if (closed < IDLE)
            fail(t, "listener: rank 0 closed %d of %d connections that said no hello", closed,
                 IDLE);
        if (wrong >= 0 && !peer_closed(wrong))
            fail(t, "listener: a lane whose hello names world rank 2 was accepted by rank 0");
        if (!mln_tcp_lanes_up(s, 0))
            fail(t, "listener: the tcp lanes to rank 0 are down after an unused lane ended");
        if (wrong >= 0)
            close(wrong);
    }
    if (t->rank == 0 && s->tcp_failed[1])
        fail(t, "listener: rank 0 gave up its tcp lanes to rank 1");
}

/* ---- finding 10 ---------------------------------------------------------------------------- */

/* tcp, ranks 0 and 1: rank 0 ends its lanes from rank 1 (as after a bad frame), then sends rank
 * 1 a striped message but leaves it in its socket for 2 s.  Rank 1, busy with that receive,
 * must see its own lanes to rank 0 end (readable with an end of stream, whatever errno holds);
 * its next message to rank 0 arrives all the same (over mpi lanes). */
void t_outeof(tctx_t *t)
{
    mln_stripe_t *s = mln_stripe_engine();
    const int64_t n = 32 * MIB + 1;
    uint8_t *buf = NULL;
    mln_request_t req = MLN_REQUEST_NULL;
    int seen = 0;

    if (pair_only(t, "outeof"))
        return;
    exchange_for(t, 0, 0);
    buf = xmalloc(n);
    if (t->rank == 0)
        mln_tcp_in_lost(s, 1, MLN_ERR_PEER);
    MPI_Barrier(t->comm);
    if (t->rank == 0) {
        fill(buf, n, 0, 7);
        expect(t, mln_stripe_isend(buf, n, MPI_BYTE, 1, t->tag, t->comm, &req), MLN_OK,
               "outeof: isend");
        sleep(2);
        expect(t, mln_stripe_wait(&req, MPI_STATUS_IGNORE), MLN_OK, "outeof: send");
    } else {
        const double t0 = MPI_Wtime();
        int done = 0;
        expect(t, mln_stripe_irecv(buf, n, MPI_BYTE, 0, t->tag, t->comm, &req), MLN_OK,
               "outeof: irecv");
        while (!seen && !done && MPI_Wtime() - t0 < 20.0) { /* a bound against a hang */
            if (mln_stripe_test(&req, &done, MPI_STATUS_IGNORE) != MLN_OK)
                fail(t, "outeof: the receive failed");
            seen = !mln_tcp_lanes_up(s, 0);
        }
        if (!seen)
            fail(t, "outeof: rank 1 did not notice that rank 0 ended its lanes (receive %s)",
                 done ? "done" : "still running after 20 s");
        if (!done && expect(t, mln_stripe_wait(&req, MPI_STATUS_IGNORE), MLN_OK, "outeof: receive"))
            done = 1;
        if (done)
            check(t, buf, n, 0, 7, "outeof: receive");
    }
    MPI_Barrier(t->comm);
    if (t->rank == 1) {
        fill(buf, n, 1, 8);
        expect(t, mln_stripe_send(buf, n, MPI_BYTE, 0, t->tag + 1, t->comm), MLN_OK,
               "outeof: send after the lanes ended");
    } else {
        recv_check(t, n, n, 1, t->tag + 1, 8, "outeof: after the lanes ended");
    }
    free(buf);
}

/* ---- finding 11 ---------------------------------------------------------------------------- */

static volatile sig_atomic_t signals_seen;

static void on_signal(int sig)
{
    (void)sig;
    signals_seen = signals_seen + 1;
}

/* tcp, the first striped messages of the run: a signal every 100 us (as a sampling profiler
 * sends, without SA_RESTART) while the lanes connect and carry 4 MiB each way, twice.  The lanes
 * must come up (EINTR is no failed connect) and every byte arrive. */
void t_eintr(tctx_t *t)
{
    struct sigaction sa = {.sa_handler = on_signal}, old;
    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
    struct itimerspec its = {.it_interval = {0, 100000}, .it_value = {0, 100000}};
    timer_t timer;

    if (pair_only(t, "eintr"))
        return;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, &old) != 0 || timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) {
        fail(t, "eintr: cannot set up the signal timer: %s", strerror(errno));
        return;
    }
    timer_settime(timer, 0, &its, NULL);
    exchange_for(t, 0, 0); /* the first striped messages: the lanes open under the signals */
    exchange_for(t, 0, 1);
    timer_delete(timer);
    sigaction(SIGUSR1, &old, NULL);
    if (!mln_tcp_lanes_up(mln_stripe_engine(), 1 - t->rank))
        fail(t, "eintr: the tcp lanes to rank %d are not up (%d signals during the run)",
             1 - t->rank, (int)signals_seen);
    else
        fprintf(stderr, "mpi_stripe: rank %d: eintr: tcp lanes up, %d signals\n", t->rank,
                (int)signals_seen);
}
