/*
 * mpi_stripe.c - striped point-to-point (mln_stripe_*) against MPI's semantics, every byte
 * checked.  One program, sub-tests chosen with --test; it sets the MLN_STRIPE_* tunables from
 * its options before mln_init, so the same test runs each backend:
 *
 *   mpi_stripe --backend tcp|mpi|helper [--lanes N|auto] [--lanes-max N] [--helpers K] [--local
 * 0|1]
 *              [--threshold SIZE] [--progress call|thread] [--fault SPEC]
 *              [--stripe-timeout S] [--stripe-port P] [--watchdog S] [--until FILE]
 *              [--test all|NAME[,NAME...]]
 *
 * Ranks pair up (r, r^1) in mln_comm_world(); with helpers (--backend helper) the last K ranks
 * of every node never return from mln_init, so 2 application ranks and K = 1 on one host run at
 * np 3.  On one host --local 1 (the default) makes messages above the threshold stripe over
 * loopback; --local 0 leaves them plain MPI unless the peer is on another site (test bed).
 *
 * Every payload byte is f(sender, message index, offset).  Rank 0 prints one line per
 * sub-test, "ok NAME (T s)" or "FAIL NAME: rank R: why", then a summary; the exit status is
 * non-zero when a sub-test failed.  A sub-test that does not finish within --watchdog seconds
 * prints "FAIL NAME: ... (hang)" and ends the job instead of hanging it.
 *
 * "all" runs every sub-test but `big` (2^31 + 12345 bytes: about 4.3 GiB per pair) and
 * `fault` (MLN_STRIPE_FAULT on rank 0: tcp only; it runs first, and the sub-tests after it
 * then exercise the fallback to the mpi lane).  Those two and `args` are in
 * mpi_stripe_edges.c; the pattern and the checks in stripe_check.c.  Neither are `blackhole`,
 * `kill` and `stranger` (mpi_stripe_faults.c), which need the test bed and a test that strikes
 * from outside (tests/python/test_stripe_faults.py).
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "stripe_check.h"
#include "stripe_int.h" /* mln_stripe_engine, mln_tcp_lanes_open */

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- sub-tests -------------------------------------------------------------------------- */

/* Sizes around every edge: empty, the 64-byte header size, the threshold, odd, 4 MiB. */
static void sizes_body(tctx_t *t, int sender)
{
    const int64_t sizes[] = {0,          1,      63,         64,      65,         1000003,
                             t->thr - 1, t->thr, t->thr + 1, 4 * MIB, 4 * MIB + 1};
    const int n = (int)(sizeof(sizes) / sizeof(sizes[0]));
    int tags[16];

    for (int i = 0; i < n; i++)
        tags[i] = t->tag + i;
    if (sender) {
        send_all(t, t->partner, n, sizes, tags, 0);
        return;
    }
    for (int i = 0; i < n; i++) /* a larger buffer for every other one: count is the sent one */
        recv_check(t, sizes[i], sizes[i] + (i % 2) * 7, t->partner, tags[i], i, "sizes");
}

static void t_sizes(tctx_t *t)
{
    both_directions(t, sizes_body);
}

/* Non-overtaking on one tag: small and large alternate; each must arrive in order. */
static void order_body(tctx_t *t, int sender)
{
    enum { N = 10 };
    int64_t sizes[N];
    int tags[N];
    mln_request_t reqs[N];
    MPI_Status st[N];
    uint8_t *bufs[N];
    const int64_t cap = 2 * MIB;

    for (int i = 0; i < N; i++) {
        sizes[i] = i % 2 ? MIB + 2 * i + 1 : 100 + i;
        tags[i] = t->tag;
    }
    if (sender) {
        send_all(t, t->partner, N, sizes, tags, 0);
        return;
    }
    for (int i = 0; i < N; i++) {
        bufs[i] = xmalloc(cap);
        if (!expect(t,
                    mln_stripe_irecv(bufs[i], cap, MPI_BYTE, t->partner, t->tag, t->comm, &reqs[i]),
                    MLN_OK, "order: irecv"))
            reqs[i] = MLN_REQUEST_NULL;
    }
    if (expect(t, mln_stripe_waitall(N, reqs, st), MLN_OK, "order: waitall")) {
        for (int i = 0; i < N; i++) {
            char label[64];
            snprintf(label, sizeof(label), "order: receive %d", i);
            if (reqs[i] != MLN_REQUEST_NULL)
                fail(t, "%s: waitall left the request non-null", label);
            if (check_status(t, &st[i], t->partner, t->tag, sizes[i], label))
                check(t, bufs[i], sizes[i], t->partner, i, label);
        }
    }
    for (int i = 0; i < N; i++)
        free(bufs[i]);
}

static void t_order(tctx_t *t)
{
    both_directions(t, order_body);
}

/* MPI_ANY_SOURCE / MPI_ANY_TAG: every other rank sends 3 messages to rank 0, three rounds. */
static int64_t any_size(int src, int k)
{
    const int64_t base[3] = {MIB + 3, 100, 600 * KIB + 5};
    return base[k] + src;
}

static void t_anysrc(tctx_t *t)
{
    const int nsrc = t->size - 1, nrecv = 3 * (t->size - 1);
    const int64_t cap = MIB + 3 + t->size;
    /* round 0: ANY_SOURCE + ANY_TAG; 1: ANY_SOURCE by tag, tags posted in reverse;
     * 2: by source with ANY_TAG. */
    for (int round = 0; round < 3; round++) {
        const int tag0 = t->tag + 10 * round;
        if (t->rank != 0) {
            const int64_t sizes[3] = {any_size(t->rank, 0), any_size(t->rank, 1),
                                      any_size(t->rank, 2)};
            const int tags[3] = {tag0, tag0 + 1, tag0 + 2};
            send_all(t, 0, 3, sizes, tags, 3 * round);
        } else {
            uint8_t *bufs = xmalloc(cap * nrecv);
            mln_request_t *reqs = xmalloc((int64_t)sizeof(*reqs) * nrecv);
            MPI_Status *st = xmalloc((int64_t)sizeof(*st) * nrecv);
            int *want_k = xmalloc((int64_t)sizeof(int) * nrecv); /* -1: any */
            int *want_src = xmalloc((int64_t)sizeof(int) * nrecv);
            int *last_k = xmalloc((int64_t)sizeof(int) * t->size);
            int *seen = calloc((size_t)t->size * 3, sizeof(int));

            for (int j = 0; j < nrecv; j++) {
                int src = MPI_ANY_SOURCE, tag = MPI_ANY_TAG;
                want_k[j] = -1;
                want_src[j] = -1;
                if (round == 1) {
                    want_k[j] = 2 - j / nsrc;
                    tag = tag0 + want_k[j];
                } else if (round == 2) {
                    want_src[j] = src = 1 + j / 3;
                    want_k[j] = j % 3;
                }
                if (!expect(t,
                            mln_stripe_irecv(bufs + cap * j, cap, MPI_BYTE, src, tag, t->comm,
                                             &reqs[j]),
                            MLN_OK, "anysrc: irecv"))
                    reqs[j] = MLN_REQUEST_NULL;
            }
            if (expect(t, mln_stripe_waitall(nrecv, reqs, st), MLN_OK, "anysrc: waitall")) {
                for (int s = 0; s < t->size; s++)
                    last_k[s] = -1;
                for (int j = 0; j < nrecv && t->ok; j++) {
                    const int s = st[j].MPI_SOURCE, k = st[j].MPI_TAG - tag0;
                    char label[96];
                    snprintf(label, sizeof(label), "anysrc round %d: receive %d (from %d, tag +%d)",
                             round, j, s, k);
                    if (s < 1 || s >= t->size || k < 0 || k > 2) {
                        fail(t, "%s: no such message was sent", label);
                        break;
                    }
                    if ((want_k[j] >= 0 && k != want_k[j]) ||
                        (want_src[j] >= 0 && s != want_src[j]) || seen[s * 3 + k]++) {
                        fail(t, "%s: wrong match (wanted source %d tag +%d; seen %d times)", label,
                             want_src[j], want_k[j], seen[s * 3 + k]);
                        break;
                    }
                    if (round != 1 && k <= last_k[s]) /* MPI order per source */
                        fail(t, "%s: overtook tag +%d from the same source", label, last_k[s]);
                    last_k[s] = k;
                    if (check_status(t, &st[j], s, tag0 + k, any_size(s, k), label))
                        check(t, bufs + cap * j, any_size(s, k), s, 3 * round + k, label);
                }
            }
            free(seen);
            free(last_k);
            free(want_src);
            free(want_k);
            free(st);
            free(reqs);
            free(bufs);
        }
        MPI_Barrier(t->comm);
    }
}

/* Simultaneous A<->B exchange of large messages: isend + irecv, then waitall. */
static void t_exchange(tctx_t *t)
{
    const int64_t sizes[] = {8 * MIB + 3, t->thr + 1, 3 * MIB + 7};

    if (t->partner < 0)
        return;
    for (int round = 0; round < 3; round++) {
        const int64_t n = sizes[round];
        uint8_t *out = xmalloc(n), *in = xmalloc(n);
        mln_request_t reqs[2] = {MLN_REQUEST_NULL, MLN_REQUEST_NULL};
        MPI_Status st[2];
        char label[64];

        snprintf(label, sizeof(label), "exchange %lld B", (long long)n);
        fill(out, n, t->rank, round);
        memset(in, 0, (size_t)n);
        if (expect(t, mln_stripe_irecv(in, n, MPI_BYTE, t->partner, t->tag, t->comm, &reqs[0]),
                   MLN_OK, label) &&
            expect(t, mln_stripe_isend(out, n, MPI_BYTE, t->partner, t->tag, t->comm, &reqs[1]),
                   MLN_OK, label) &&
            expect(t, mln_stripe_waitall(2, reqs, st), MLN_OK, label) &&
            check_status(t, &st[0], t->partner, t->tag, n, label))
            check(t, in, n, t->partner, round, label);
        free(out);
        free(in);
    }
}

/* MLN_STRIPE_LANES=auto (--lanes auto): rounds of four 4 MiB messages each way until both
 * ranks' lanes to their partner grew past auto's first level (its first measurement always
 * tries twice the lanes; --lanes-max caps it), then eight more rounds on whatever level it
 * chose; every byte checked, the lane counts within [1, MLN_STRIPE_LANES_MAX].  tcp only; the
 * communicator is the world (no helper ranks with tcp).  Each round's bytes are compared with
 * the expected ones in one memcmp (check() names the first wrong byte where they differ): auto
 * measures only intervals in which a send moved for 80% of the time, and a byte-by-byte check of
 * 16 MiB between rounds (slow under the sanitizers) left too few of them: 368 rounds of 400 to
 * grow once, none in 400 another time, where 20-40 do otherwise. */
static void t_auto(tctx_t *t)
{
    enum { N = 4, MAX_ROUNDS = 400, AFTER = 8 };
    const int64_t n = 4 * MIB + 5;
    const int first = t->opt->lanes_max < 4 ? t->opt->lanes_max : 4;
    const int want = 2 * first < t->opt->lanes_max ? 2 * first : t->opt->lanes_max;
    uint8_t *out = xmalloc(N * n), *in = xmalloc(N * n), *want_in = xmalloc(N * n);
    int grown = 0, after = 0, round = 0, open = 0, used = 0;

    if (t->partner < 0 || t->opt->lanes != 0 || strcmp(t->opt->backend, "tcp") != 0) {
        if (t->opt->lanes != 0 || strcmp(t->opt->backend, "tcp") != 0)
            fail(t, "auto: needs --backend tcp --lanes auto");
        free(out);
        free(in);
        free(want_in);
        return;
    }
    for (int i = 0; i < N; i++) {
        fill(out + i * n, n, t->rank, i);
        fill(want_in + i * n, n, t->partner, i);
    }
    for (; round < MAX_ROUNDS && after < AFTER && t->ok; round++) {
        mln_request_t reqs[2 * N];
        MPI_Status st[2 * N];
        int mine, both = 0;

        memset(in, 0, (size_t)(N * n));
        for (int i = 0; i < N; i++) {
            reqs[i] = reqs[N + i] = MLN_REQUEST_NULL;
            expect(t,
                   mln_stripe_irecv(in + i * n, n, MPI_BYTE, t->partner, t->tag + i, t->comm,
                                    &reqs[i]),
                   MLN_OK, "auto: irecv");
        }
        for (int i = 0; i < N; i++)
            expect(t,
                   mln_stripe_isend(out + i * n, n, MPI_BYTE, t->partner, t->tag + i, t->comm,
                                    &reqs[N + i]),
                   MLN_OK, "auto: isend");
        if (!expect(t, mln_stripe_waitall(2 * N, reqs, st), MLN_OK, "auto: waitall"))
            break;
        for (int i = 0; i < N; i++)
            if (!check_status(t, &st[i], t->partner, t->tag + i, n, "auto") ||
                (memcmp(in + i * n, want_in + i * n, (size_t)n) != 0 &&
                 !check(t, in + i * n, n, t->partner, i, "auto")))
                break;
        open = mln_tcp_lanes_open(mln_stripe_engine(), t->partner);
        used = mln_stripe_lanes_used(t->partner);
        if (used < 1 || used > t->opt->lanes_max || used > open)
            fail(t, "auto: %d lanes used of %d open (MLN_STRIPE_LANES_MAX %d)", used, open,
                 t->opt->lanes_max);
        mine = open >= want;
        MPI_Allreduce(&mine, &both, 1, MPI_INT, MPI_LAND, t->comm);
        grown |= both;
        after += grown;
    }
    if (t->ok && !grown)
        fail(t,
             "auto: after %d rounds %d lanes open to rank %d, expected %d (auto's first "
             "level, measured, tries twice the lanes)",
             round, open, t->partner, want);
    if (t->ok && t->rank == 0)
        printf("# auto: %d rounds, %d lanes open, %d used at the end\n", round, open, used);
    free(out);
    free(in);
    free(want_in);
}

/* A lane's TCP_NOTSENT_LOWAT where `lanes` take a peer's chunks: MLN_STRIPE_NOTSENT (256K by
 * default) split over them, 16K at least (all of it when smaller). */
static int notsent_want(int lanes)
{
    const int total = (int)mln_stripe_engine()->cfg->stripe_notsent;

    return total / lanes > 16384 ? total / lanes : total < 16384 ? total : 16384;
}

/* MLN_STRIPE_LANES=auto, lone messages (tcp_auto.c): a 1 MiB ping-pong, every message alone on
 * the lanes, until both ranks saw a lone message take another lane count than auto's first level
 * (a class's first level, once timed, always tries half or twice its lanes), then eight more
 * round trips;
 * every 16th round four messages each way at once instead (not alone: the streaming level).
 * Every byte and status checked, the counts within [1, MLN_STRIPE_LANES_MAX], and after each lone
 * message lane 0's TCP_NOTSENT_LOWAT split over the lanes that message took (not the streaming
 * level's).  Run before any other striped traffic, so that the first level is auto's first. */
static void t_lone(tctx_t *t)
{
    enum { N = 4, MAX_ROUNDS = 2000, AFTER = 8 };
    const int64_t n = MIB + 3;
    const int first = t->opt->lanes_max < 4 ? t->opt->lanes_max : 4;
    uint8_t *out = xmalloc(N * n), *in = xmalloc(N * n);
    int moved = 0, after = 0, round = 0, used = 0, most = 0, least = INT_MAX;

    if (t->partner < 0 || t->opt->lanes != 0 || strcmp(t->opt->backend, "tcp") != 0 ||
        t->opt->lanes_max <= first) {
        if (t->opt->lanes != 0 || strcmp(t->opt->backend, "tcp") != 0 || t->opt->lanes_max <= first)
            fail(t, "lone: needs --backend tcp --lanes auto --lanes-max above 4");
        free(out);
        free(in);
        return;
    }
    for (int i = 0; i < N; i++)
        fill(out + i * n, n, t->rank, i);
    for (; round < MAX_ROUNDS && after < AFTER && t->ok; round++) {
        const int k = round % 16 == 15 ? N : 1; /* messages each way this round */
        mln_request_t reqs[2 * N];
        MPI_Status st[2 * N];
        int mine, both = 0, notsent;

        memset(in, 0, (size_t)(k * n));
        if (k == 1 && t->rank < t->partner) { /* ping, then pong */
            if (!expect(t, mln_stripe_send(out, n, MPI_BYTE, t->partner, t->tag, t->comm), MLN_OK,
                        "lone: send") ||
                !expect(t, mln_stripe_recv(in, n, MPI_BYTE, t->partner, t->tag, t->comm, st),
                        MLN_OK, "lone: recv"))
                break;
        } else if (k == 1) {
            if (!expect(t, mln_stripe_recv(in, n, MPI_BYTE, t->partner, t->tag, t->comm, st),
                        MLN_OK, "lone: recv") ||
                !expect(t, mln_stripe_send(out, n, MPI_BYTE, t->partner, t->tag, t->comm), MLN_OK,
                        "lone: send"))
                break;
        } else {
            for (int i = 0; i < k; i++)
                expect(t,
                       mln_stripe_irecv(in + i * n, n, MPI_BYTE, t->partner, t->tag + i, t->comm,
                                        &reqs[i]),
                       MLN_OK, "lone: irecv");
            for (int i = 0; i < k; i++)
                expect(t,
                       mln_stripe_isend(out + i * n, n, MPI_BYTE, t->partner, t->tag + i, t->comm,
                                        &reqs[k + i]),
                       MLN_OK, "lone: isend");
            if (!expect(t, mln_stripe_waitall(2 * k, reqs, st), MLN_OK, "lone: waitall"))
                break;
        }
        for (int i = 0; i < k; i++)
            if (!check_status(t, &st[i], t->partner, t->tag + i, n, "lone") ||
                !check(t, in + i * n, n, t->partner, i, "lone"))
                break;
        used = mln_stripe_lanes_used(t->partner);
        notsent = mln_tcp_lane_notsent(mln_stripe_engine(), t->partner, 0);
        if (used < 1 || used > t->opt->lanes_max)
            fail(t, "lone: %d lanes used (MLN_STRIPE_LANES_MAX %d)", used, t->opt->lanes_max);
        else if (k == 1 && mln_stripe_engine()->cfg->stripe_notsent > 0 &&
                 notsent != notsent_want(used))
            fail(t,
                 "lone: a message over %d lanes left lane 0 a TCP_NOTSENT_LOWAT of %d, expected "
                 "%d",
                 used, notsent, notsent_want(used));
        if (k == 1 && used > most)
            most = used;
        if (k == 1 && used < least)
            least = used;
        mine = most > first || least < first;
        MPI_Allreduce(&mine, &both, 1, MPI_INT, MPI_LAND, t->comm);
        moved |= both;
        after += moved;
    }
    if (t->ok && !moved)
        fail(t,
             "lone: after %d round trips this rank's lone messages took %d to %d lanes, expected "
             "another count than auto's first level, %d (timed, it tries half or twice the lanes)",
             round, least, most, first);
    if (t->ok && t->rank == 0)
        printf("# lone: %d rounds, lone messages took %d to %d lanes, %d at the end\n", round,
               least, most, used);
    free(out);
    free(in);
}

/* Chunk size and lane count together (issue 20): one message of 1 MiB each way at a time on a
 * fixed --lanes N (4, 32 and 64 in the testlist: chunks of 64, 32 and 16 KiB); every lane to the
 * partner must have carried payload bytes of each message, and every byte is checked.  Then each
 * lane's TCP_NOTSENT_LOWAT: MLN_STRIPE_NOTSENT split over the N lanes, at least 16 KiB. */
static void t_spread(tctx_t *t)
{
    enum { ROUNDS = 4 };
    const int64_t n = MIB;
    const int lanes = t->opt->lanes;
    uint8_t *out = xmalloc(n), *in = xmalloc(n);
    uint64_t *before = xmalloc((size_t)(lanes > 0 ? lanes : 1) * sizeof(*before));

    if (t->partner < 0 || lanes <= 0 || strcmp(t->opt->backend, "tcp") != 0) {
        if (lanes <= 0 || strcmp(t->opt->backend, "tcp") != 0)
            fail(t, "spread: needs --backend tcp --lanes N");
        free(out);
        free(in);
        free(before);
        return;
    }
    fill(out, n, t->rank, 0);
    for (int round = 0; round < ROUNDS && t->ok; round++) {
        mln_request_t reqs[2] = {MLN_REQUEST_NULL, MLN_REQUEST_NULL};
        MPI_Status st[2];
        int idle = 0, open;

        for (int i = 0; i < lanes; i++)
            before[i] = mln_tcp_lane_written(mln_stripe_engine(), t->partner, i);
        memset(in, 0, (size_t)n);
        expect(t, mln_stripe_irecv(in, n, MPI_BYTE, t->partner, t->tag, t->comm, &reqs[0]), MLN_OK,
               "spread: irecv");
        expect(t, mln_stripe_isend(out, n, MPI_BYTE, t->partner, t->tag, t->comm, &reqs[1]), MLN_OK,
               "spread: isend");
        if (!expect(t, mln_stripe_waitall(2, reqs, st), MLN_OK, "spread: waitall") ||
            !check_status(t, &st[0], t->partner, t->tag, n, "spread") ||
            !check(t, in, n, t->partner, 0, "spread"))
            break;
        open = mln_tcp_lanes_open(mln_stripe_engine(), t->partner);
        for (int i = 0; i < lanes; i++)
            idle += mln_tcp_lane_written(mln_stripe_engine(), t->partner, i) == before[i];
        if (open != lanes || idle > 0)
            fail(t, "spread: a %lld-byte message over %d lanes (%d open) left %d of them idle",
                 (long long)n, lanes, open, idle);
        MPI_Barrier(t->comm);
    }
    /* MLN_STRIPE_NOTSENT (256K by default) is the peer's, split over its lanes: 64K each of 4,
     * 16K (the least) each of 32 */
    for (int i = 0; t->ok && i < lanes; i++) {
        const int want = notsent_want(lanes);
        const int got = mln_tcp_lane_notsent(mln_stripe_engine(), t->partner, i);
        if (got != want)
            fail(t, "spread: lane %d of %d has TCP_NOTSENT_LOWAT %d, expected %d", i, lanes, got,
                 want);
    }
    if (t->ok && t->rank == 0)
        printf("# spread: %d messages of %lld bytes, every one on all %d lanes (%d unsent bytes "
               "a lane at most)\n",
               ROUNDS, (long long)n, lanes,
               mln_tcp_lane_notsent(mln_stripe_engine(), t->partner, 0));
    free(out);
    free(in);
    free(before);
}

/* 64 messages of mixed sizes in flight each way at once, five tags interleaved. */
static int64_t many_size(tctx_t *t, int i)
{
    switch (i % 4) {
    case 0:
        return MIB + 3 * i;
    case 1:
        return 100 + i;
    case 2:
        return t->thr + 1 + i;
    default:
        return 64;
    }
}

static void t_many(tctx_t *t)
{
    enum { N = 64 };
    uint8_t *out[N], *in[N];
    mln_request_t reqs[2 * N];
    MPI_Status st[2 * N];

    if (t->partner < 0)
        return;
    for (int i = 0; i < N; i++) {
        const int64_t n = many_size(t, i);
        out[i] = xmalloc(n);
        in[i] = xmalloc(n);
        fill(out[i], n, t->rank, i);
        reqs[i] = reqs[N + i] = MLN_REQUEST_NULL;
        expect(t,
               mln_stripe_irecv(in[i], n, MPI_BYTE, t->partner, t->tag + i % 5, t->comm, &reqs[i]),
               MLN_OK, "many: irecv");
    }
    for (int i = 0; i < N; i++)
        expect(t,
               mln_stripe_isend(out[i], many_size(t, i), MPI_BYTE, t->partner, t->tag + i % 5,
                                t->comm, &reqs[N + i]),
               MLN_OK, "many: isend");
    if (expect(t, mln_stripe_waitall(2 * N, reqs, st), MLN_OK, "many: waitall")) {
        for (int i = 0; i < N && t->ok; i++) {
            char label[64];
            snprintf(label, sizeof(label), "many: receive %d", i);
            if (check_status(t, &st[i], t->partner, t->tag + i % 5, many_size(t, i), label))
                check(t, in[i], many_size(t, i), t->partner, i, label);
        }
    }
    for (int i = 0; i < N; i++) {
        free(out[i]);
        free(in[i]);
    }
}

/*
 * MPI's progress rule: waiting for one request moves the others.  The waiter has a striped
 * receive posted that it does not wait for yet, and waits first for a plain message that the
 * partner handles only after its blocking striped send, which needs the waiter's CTS.  Round 0
 * waits for a plain send just under the threshold (a rendezvous in both MPIs), round 1 for a
 * plain receive posted after the striped one.
 */
static void progress_body(tctx_t *t, int waiter)
{
    const int64_t big = 4 * MIB + 1, plain = t->thr - 1;
    uint8_t *bbuf = xmalloc(big), *pbuf = xmalloc(plain);

    for (int round = 0; round < 2 && t->ok; round++) {
        char label[64];
        MPI_Status st;

        snprintf(label, sizeof(label), "progress round %d", round);
        if (waiter) {
            mln_request_t rbig = MLN_REQUEST_NULL, rplain = MLN_REQUEST_NULL;
            expect(t, mln_stripe_irecv(bbuf, big, MPI_BYTE, t->partner, t->tag, t->comm, &rbig),
                   MLN_OK, label);
            if (round == 0) {
                fill(pbuf, plain, t->rank, 1);
                expect(t,
                       mln_stripe_isend(pbuf, plain, MPI_BYTE, t->partner, t->tag + 1, t->comm,
                                        &rplain),
                       MLN_OK, label);
                expect(t, mln_stripe_wait(&rplain, &st), MLN_OK, label);
            } else {
                expect(t,
                       mln_stripe_irecv(pbuf, plain, MPI_BYTE, t->partner, t->tag + 1, t->comm,
                                        &rplain),
                       MLN_OK, label);
                if (expect(t, mln_stripe_wait(&rplain, &st), MLN_OK, label) &&
                    check_status(t, &st, t->partner, t->tag + 1, plain, label))
                    check(t, pbuf, plain, t->partner, 1, label);
            }
            if (expect(t, mln_stripe_wait(&rbig, &st), MLN_OK, label) &&
                check_status(t, &st, t->partner, t->tag, big, label))
                check(t, bbuf, big, t->partner, 0, label);
        } else {
            fill(bbuf, big, t->rank, 0);
            expect(t, mln_stripe_send(bbuf, big, MPI_BYTE, t->partner, t->tag, t->comm), MLN_OK,
                   label);
            if (round == 0) {
                if (expect(t,
                           mln_stripe_recv(pbuf, plain, MPI_BYTE, t->partner, t->tag + 1, t->comm,
                                           &st),
                           MLN_OK, label) &&
                    check_status(t, &st, t->partner, t->tag + 1, plain, label))
                    check(t, pbuf, plain, t->partner, 1, label);
            } else {
                fill(pbuf, plain, t->rank, 1);
                expect(t, mln_stripe_send(pbuf, plain, MPI_BYTE, t->partner, t->tag + 1, t->comm),
                       MLN_OK, label);
            }
        }
    }
    free(bbuf);
    free(pbuf);
}

static void t_progress(tctx_t *t)
{
    both_directions(t, progress_body);
}

/* Blocking mln_stripe_send / mln_stripe_recv. */
static void blocking_body(tctx_t *t, int sender)
{
    const int64_t sizes[] = {4 * MIB + 1, 100, 0, t->thr + 1};

    for (int i = 0; i < 4; i++) {
        const int64_t n = sizes[i];
        uint8_t *buf = xmalloc(n);
        MPI_Status st;
        char label[64];

        snprintf(label, sizeof(label), "blocking %lld B", (long long)n);
        if (sender) {
            fill(buf, n, t->rank, i);
            expect(t, mln_stripe_send(buf, n, MPI_BYTE, t->partner, t->tag + i, t->comm), MLN_OK,
                   label);
        } else if (expect(t,
                          mln_stripe_recv(buf, n, MPI_BYTE, t->partner, t->tag + i, t->comm, &st),
                          MLN_OK, label) &&
                   check_status(t, &st, t->partner, t->tag + i, n, label)) {
            check(t, buf, n, t->partner, i, label);
        }
        free(buf);
    }
}

static void t_blocking(tctx_t *t)
{
    both_directions(t, blocking_body);
}

/* mln_stripe_test in a polling loop on a large exchange. */
static void t_test(tctx_t *t)
{
    const int64_t n = 8 * MIB + 1;
    uint8_t *out, *in;
    mln_request_t rreq = MLN_REQUEST_NULL, sreq = MLN_REQUEST_NULL;
    MPI_Status st;
    int rdone = 0, sdone = 0;
    long polls = 0;

    if (t->partner < 0)
        return;
    out = xmalloc(n);
    in = xmalloc(n);
    fill(out, n, t->rank, 0);
    if (expect(t, mln_stripe_irecv(in, n, MPI_BYTE, t->partner, t->tag, t->comm, &rreq), MLN_OK,
               "test: irecv") &&
        expect(t, mln_stripe_isend(out, n, MPI_BYTE, t->partner, t->tag, t->comm, &sreq), MLN_OK,
               "test: isend")) {
        while ((!rdone || !sdone) && t->ok) {
            if (!rdone)
                expect(t, mln_stripe_test(&rreq, &rdone, &st), MLN_OK, "test: receive");
            if (!sdone)
                expect(t, mln_stripe_test(&sreq, &sdone, MPI_STATUS_IGNORE), MLN_OK, "test: send");
            polls++;
        }
        if (t->ok && (rreq != MLN_REQUEST_NULL || sreq != MLN_REQUEST_NULL))
            fail(t, "test: done but the request is not MLN_REQUEST_NULL");
        if (t->ok && check_status(t, &st, t->partner, t->tag, n, "test"))
            check(t, in, n, t->partner, 0, "test");
        if (polls < 2)
            fprintf(stderr, "mpi_stripe: rank %d: test: done after %ld poll(s)\n", t->rank, polls);
    }
    free(out);
    free(in);
}

/* Datatypes: MPI_INT counts, a vector (packed) both ways, a contiguous derived type. */
static void check_vector(tctx_t *t, const uint8_t *buf, int blocks, int blen, int stride, int msg,
                         int packed, const char *what)
{
    const int64_t esz = 8, bytes = (int64_t)blocks * blen * esz;
    int64_t wrong = 0;

    for (int64_t b = 0; b < bytes; b++) { /* byte b of the packed stream */
        const int64_t off = (b / (blen * esz)) * stride * esz + b % (blen * esz);
        if (buf[packed ? b : off] != pat(t->partner, msg, (uint64_t)off))
            wrong++;
    }
    if (!packed) { /* the holes of the receive buffer keep their 0xEE */
        for (int64_t i = 0; i < blocks - 1; i++)
            for (int64_t h = (i * stride + blen) * esz; h < (i + 1) * stride * esz; h++)
                wrong += buf[h] != 0xEE;
    }
    if (wrong)
        fail(t, "%s: %lld wrong bytes", what, (long long)wrong);
}

static void types_body(tctx_t *t, int sender)
{
    const int blocks = 200000, blen = 2, stride = 3, nint = 300001;
    const int64_t ext = ((int64_t)(blocks - 1) * stride + blen) * 8;
    MPI_Datatype vec, trip;
    MPI_Status st;
    MPI_Count elems = -1;
    int count = -1;
    uint8_t *buf = xmalloc(ext);
    int *ints = xmalloc(4 * (int64_t)400000);

    MPI_Type_vector(blocks, blen, stride, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    MPI_Type_contiguous(3, MPI_INT, &trip);
    MPI_Type_commit(&trip);
    if (sender) {
        fill((uint8_t *)ints, 4 * (int64_t)nint, t->rank, 0);
        expect(t, mln_stripe_send(ints, nint, MPI_INT, t->partner, t->tag, t->comm), MLN_OK,
               "types: MPI_INT send");
        for (int msg = 1; msg <= 2; msg++) {
            fill(buf, ext, t->rank, msg);
            expect(t, mln_stripe_send(buf, 1, vec, t->partner, t->tag + msg, t->comm), MLN_OK,
                   "types: vector send");
        }
        fill((uint8_t *)ints, 12 * (int64_t)100000, t->rank, 3);
        expect(t, mln_stripe_send(ints, 100000, trip, t->partner, t->tag + 3, t->comm), MLN_OK,
               "types: contiguous type send");
    } else {
        /* 300001 ints into room for 400000: count in ints and in bytes */
        if (expect(t, mln_stripe_recv(ints, 400000, MPI_INT, t->partner, t->tag, t->comm, &st),
                   MLN_OK, "types: MPI_INT recv") &&
            check_status(t, &st, t->partner, t->tag, 4 * (int64_t)nint, "types: MPI_INT")) {
            MPI_Get_count(&st, MPI_INT, &count);
            MPI_Get_elements_x(&st, MPI_INT, &elems);
            if (count != nint || elems != nint)
                fail(t, "types: MPI_INT status count %d elements %lld, expected %d", count,
                     (long long)elems, nint);
            check(t, (uint8_t *)ints, 4 * (int64_t)nint, t->partner, 0, "types: MPI_INT");
        }
        /* the vector into the same vector: data in the blocks, holes untouched */
        memset(buf, 0xEE, (size_t)ext);
        if (expect(t, mln_stripe_recv(buf, 1, vec, t->partner, t->tag + 1, t->comm, &st), MLN_OK,
                   "types: vector recv")) {
            MPI_Get_count(&st, vec, &count);
            MPI_Get_elements_x(&st, vec, &elems);
            if (count != 1 || elems != (MPI_Count)blocks * blen || st.MPI_SOURCE != t->partner)
                fail(t, "types: vector status count %d elements %lld source %d", count,
                     (long long)elems, st.MPI_SOURCE);
            check_vector(t, buf, blocks, blen, stride, 1, 0, "types: vector into vector");
        }
        /* the vector into bytes: the packed stream */
        if (expect(t, mln_stripe_recv(buf, ext, MPI_BYTE, t->partner, t->tag + 2, t->comm, &st),
                   MLN_OK, "types: vector into bytes") &&
            check_status(t, &st, t->partner, t->tag + 2, (int64_t)blocks * blen * 8,
                         "types: vector into bytes"))
            check_vector(t, buf, blocks, blen, stride, 2, 1, "types: vector into bytes");
        if (expect(t, mln_stripe_recv(ints, 100000, trip, t->partner, t->tag + 3, t->comm, &st),
                   MLN_OK, "types: contiguous type recv")) {
            MPI_Get_count(&st, trip, &count);
            if (count != 100000)
                fail(t, "types: contiguous type count %d, expected 100000", count);
            check(t, (uint8_t *)ints, 12 * (int64_t)100000, t->partner, 3, "types: contiguous");
        }
    }
    MPI_Type_free(&trip);
    MPI_Type_free(&vec);
    free(ints);
    free(buf);
}

static void t_types(tctx_t *t)
{
    both_directions(t, types_body);
}

/* Too-small receive buffers get MLN_ERR_TRUNCATE and hold the first bytes; the next message on
 * the same tag still arrives whole.  `truncate`: striped messages (a header on the wire) and
 * the 64-byte inline one; `truncate_plain`: plain MPI messages (up to the threshold).  A plain
 * message is MPI's own, so its truncation goes through the communicator's error handler as with
 * MPI_Recv: these cases run with MPI_ERRORS_RETURN (under MPI_ERRORS_ARE_FATAL MPI aborts). */
typedef struct trunc_case {
    int64_t size, cap;
} trunc_case_t;

static void truncate_cases_on(tctx_t *t, int sender, const trunc_case_t *c, int n);

static void truncate_cases(tctx_t *t, int sender, const trunc_case_t *c, int n)
{
    MPI_Errhandler old;

    MPI_Comm_get_errhandler(t->comm, &old);
    MPI_Comm_set_errhandler(t->comm, MPI_ERRORS_RETURN);
    truncate_cases_on(t, sender, c, n);
    MPI_Comm_set_errhandler(t->comm, old);
    MPI_Errhandler_free(&old);
}

static void truncate_cases_on(tctx_t *t, int sender, const trunc_case_t *c, int n)
{
    if (sender) {
        uint8_t *bufs[8];
        mln_request_t reqs[8];
        for (int i = 0; i < n; i++) {
            bufs[i] = xmalloc(c[i].size);
            fill(bufs[i], c[i].size, t->rank, i);
            if (!expect(t,
                        mln_stripe_isend(bufs[i], c[i].size, MPI_BYTE, t->partner, t->tag, t->comm,
                                         &reqs[i]),
                        MLN_OK, "truncate: isend"))
                reqs[i] = MLN_REQUEST_NULL;
        }
        for (int i = 0; i < n; i++) { /* the sender of a truncated message: as MPI, no error */
            mln_status_t rc = mln_stripe_wait(&reqs[i], MPI_STATUS_IGNORE);
            if (rc != MLN_OK && rc != MLN_ERR_TRUNCATE)
                fail(t, "truncate: send %d (%lld B into %lld): %s", i, (long long)c[i].size,
                     (long long)c[i].cap, mln_status_str(rc));
            free(bufs[i]);
        }
        return;
    }
    for (int i = 0; i < n; i++) {
        uint8_t *buf = xmalloc(c[i].cap);
        mln_request_t req = MLN_REQUEST_NULL;
        char label[96];

        snprintf(label, sizeof(label), "%lld B into %lld B", (long long)c[i].size,
                 (long long)c[i].cap);
        if (expect(t, mln_stripe_irecv(buf, c[i].cap, MPI_BYTE, t->partner, t->tag, t->comm, &req),
                   MLN_OK, label)) {
            MPI_Status st;
            mln_status_t rc = mln_stripe_wait(&req, &st);
            if (c[i].size <= c[i].cap) {
                if (expect(t, rc, MLN_OK, label) &&
                    check_status(t, &st, t->partner, t->tag, c[i].size, label))
                    check(t, buf, c[i].size, t->partner, i, label);
            } else if (expect(t, rc, MLN_ERR_TRUNCATE, label)) {
                check(t, buf, c[i].cap, t->partner, i, label); /* holds the first bytes */
            }
        }
        free(buf);
    }
}

static void truncate_body(tctx_t *t, int sender)
{
    const trunc_case_t c[] = {{MIB + 17, 512 * KIB},
                              {2 * MIB + 1, 4 * MIB},
                              {64, 63},
                              {MIB, 64},
                              {t->thr + 1, t->thr},
                              {MIB, 10},
                              {4 * MIB, 4 * MIB}};
    truncate_cases(t, sender, c, (int)(sizeof(c) / sizeof(c[0])));
}

static void truncate_plain_body(tctx_t *t, int sender)
{
    const trunc_case_t c[] = {{1000, 500}, {100, 100},           {65, 64}, {2000, 2000},
                              {100, 10},   {t->thr, t->thr - 1}, {10, 10}};
    truncate_cases(t, sender, c, (int)(sizeof(c) / sizeof(c[0])));
}

static void t_truncate(tctx_t *t)
{
    both_directions(t, truncate_body);
}

static void t_truncate_plain(tctx_t *t)
{
    both_directions(t, truncate_plain_body);
}

/* ---- driver ----------------------------------------------------------------------------- */

typedef struct subtest {
    const char *name;
    void (*run)(tctx_t *t);
    int in_all; /* part of --test all */
    int watchdog_factor;
} subtest_t;

/* In running order: fault first (what follows then runs on the fallback), eintr and lone before
 * any other striped traffic (they are about opening lanes), big last. */
static const subtest_t subtests[] = {
    {"fault", t_fault, 0, 1},
    {"eintr", t_eintr, 0, 1},
    {"lone", t_lone, 0, 2}, /* before other striped traffic: from auto's first level */
    {"sizes", t_sizes, 1, 1},
    {"order", t_order, 1, 1},
    {"anysrc", t_anysrc, 1, 1},
    {"exchange", t_exchange, 1, 1},
    {"auto", t_auto, 0, 2},
    {"spread", t_spread, 0, 1},
    {"many", t_many, 1, 1},
    {"blocking", t_blocking, 1, 1},
    {"test", t_test, 1, 1},
    {"types", t_types, 1, 1},
    {"truncate", t_truncate, 1, 1},
    {"args", t_args, 1, 1},
    {"truncate_plain", t_truncate_plain, 1, 1},
    {"progress", t_progress, 1, 1},
    {"upto", t_upto, 1, 1},
    {"tags", t_tags, 1, 1},
    {"inline", t_inline, 0, 1},
    {"gap", t_gap, 0, 1},
    {"rabort", t_rabort, 0, 1},
    {"sabort", t_sabort, 0, 1},
    {"nak", t_nak, 0, 1},
    {"early", t_early, 0, 1},
    {"early_limit", t_early_limit, 0, 1},
    {"nak_early", t_nak_early, 0, 1},
    {"rabort_early", t_rabort_early, 0, 1},
    {"sabort_early", t_sabort_early, 0, 1},
    {"listener", t_listener, 0, 1},
    {"outeof", t_outeof, 0, 1},
    {"blackhole", t_blackhole, 0, 1},
    {"kill", t_kill, 0, 1},
    {"stranger", t_stranger, 0, 1},
    {"bigplain", t_bigplain, 0, 4},
    {"big", t_big, 0, 4},
    {NULL, NULL, 0, 0},
};

/* 1 when sub-test s is in the comma-separated list (or in "all"). */
static int selected(const char *list, const subtest_t *s)
{
    return list_has(list, s->name, s->in_all);
}

static const char *subtest_name(int i)
{
    return subtests[i].name;
}

static int usage(const char *why, int verbose)
{
    if (!verbose)
        return 2;
    fprintf(stderr,
            "mpi_stripe: %s\nusage: mpi_stripe --backend tcp|mpi|helper [--lanes N|auto] "
            "[--lanes-max N] "
            "[--helpers K] [--local 0|1] [--threshold SIZE] [--progress call|thread] [--fault "
            "reset:LANE:BYTES] "
            "[--stripe-timeout S] [--stripe-port P] [--tags N] [--fault-rank R] [--early SIZE "
            "--early-rank R] [--until FILE] "
            "[--watchdog S] "
            "[--test all|NAME,...]\nsub-tests:",
            why);
    for (const subtest_t *s = subtests; s->name; s++)
        fprintf(stderr, " %s%s", s->name, s->in_all ? "" : "(not in all)");
    fprintf(stderr, "\n");
    return 2;
}

static int parse_options(int argc, char **argv, int verbose, options_t *o, uint64_t *thr)
{
    const char *why;

    stripe_options_init(o);
    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int taken;
        if (val == NULL)
            return usage("an option without its value", verbose);
        if (!strcmp(argv[i], "--test"))
            o->tests = val;
        else if (!strcmp(argv[i], "--until"))
            o->until = val;
        else if (!strcmp(argv[i], "--fault")) {
            o->fault = val;
            o->fault_set = 1;
        } else if ((taken = stripe_option(o, argv[i], val)) == 0)
            return usage("unknown option", verbose);
        else if (taken < 0)
            return usage("a bad number", verbose);
        i++;
    }
    if ((why = stripe_options_check(o, thr)) != NULL)
        return usage(why, verbose);
    if (!list_known(o->tests, subtest_name))
        return usage("unknown sub-test", verbose);
    if (selected(o->tests, &subtests[0]) && strcmp(o->backend, "tcp"))
        return usage("the fault sub-test needs --backend tcp", verbose);
    return 0;
}

/* Runs one sub-test on every application rank; 1 when it passed on all. */
static int run_subtest(tctx_t *t, const subtest_t *s, int index)
{
    double t0 = subtest_begin(t, s->name, (unsigned)(t->opt->watchdog * s->watchdog_factor));

    t->tag = 1000 * (index + 1);
    s->run(t);
    return subtest_end(t, s->name, t0);
}

int main(int argc, char **argv)
{
    options_t opt;
    tctx_t t = {0};
    int world_rank, world_size, rc, passed = 0, failed = 0;
    uint64_t thr = 0;

    world_rank = stripe_mpi_init(&argc, &argv, "mpi_stripe");
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    rc = parse_options(argc, argv, world_rank == 0, &opt, &thr);
    /* the fault hook on one rank only: by default the sender of the fault sub-test (world rank
     * 0 is application rank 0) */
    if (rc == 0 && stripe_tunables_set(&opt, (opt.fault_set || selected(opt.tests, &subtests[0])) &&
                                                     world_rank == opt.fault_rank
                                                 ? opt.fault
                                                 : NULL) != 0)
        rc = usage("setenv failed", 1);
    if (rc == 0 && opt.early != NULL && world_rank == opt.early_rank &&
        setenv("MLN_STRIPE_EARLY", opt.early, 1) != 0)
        rc = usage("setenv failed", 1);
    if (rc != 0) {
        MPI_Finalize();
        return rc;
    }
    stripe_mln_init(world_rank);
    t.opt = &opt;
    t.comm = mln_comm_world();
    t.thr = (int64_t)thr;
    MPI_Comm_rank(t.comm, &t.rank);
    MPI_Comm_size(t.comm, &t.size);
    t.partner = (t.rank ^ 1) < t.size ? t.rank ^ 1 : -1;
    if (t.rank == 0) {
        printf("# mpi_stripe: backend %s, %d lanes, %d application ranks of %d, threshold %lld, "
               "local %d, tests %s\n",
               mln_stripe_backend_name(), mln_stripe_lanes(), t.size, world_size, (long long)t.thr,
               opt.local, opt.tests);
        fflush(stdout);
    }
    if (t.size < 2) {
        if (t.rank == 0)
            printf("mpi_stripe: 1 application rank: nothing to test\n");
    } else {
        for (int i = 0; subtests[i].name; i++) {
            if (selected(opt.tests, &subtests[i])) {
                if (run_subtest(&t, &subtests[i], i))
                    passed++;
                else
                    failed++;
            }
        }
        if (t.rank == 0)
            printf("mpi_stripe: %d ok, %d failed\n", passed, failed);
    }
    failed += finalize_checked(&t);
    return failed ? 1 : 0;
}
