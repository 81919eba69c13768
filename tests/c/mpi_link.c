/*
 * mpi_link.c - the tcp lanes' link layer (src/link, docs/SECURITY.md) under MPI, 2 ranks (the
 * impostor 3): `mpi_link CASE,CASE,...`, each case MODE[/CIPHER]:TEST[:EXPECT] between an
 * mln_init and an mln_finalize of its own, MODE one of MLN_LINK_SECURITY's (auth, aead, none;
 * auth+mac is auth with MLN_LINK_PAYLOAD_MAC=1), CIPHER aes or chacha (default auto):
 *
 *   transfer  striped messages of several sizes both ways, every byte checked
 *   tamper    MLN_STRIPE_FAULT=tamper on rank 0: one payload bit of a frame flips on the wire
 *             after sealing.  EXPECT refused (aead, auth+mac): rank 1's receive fails with
 *             MLN_ERR_DATA and every byte of its buffer is either untouched or right (no byte
 *             of the spoilt frame landed); EXPECT wrong (auth, none: the payload is not
 *             protected there): the receive completes and the flipped bit is in the data,
 *             which proves that the fault does spoil the wire (EXPECT wrong)
 *   forge     MLN_STRIPE_FAULT=forge: one header bit flips: the receive fails (MLN_ERR_DATA),
 *             no wrong byte, in every mode (none: the frame checks catch that bit)
 *   mismatch  rank 1 asks for another mode than rank 0: mln_init fails on both ranks with
 *             MLN_ERR_CONFIG, no hang
 *   split     transfer, with MLN_STRIPE_FAULT=split on rank 0: a frame's payload tag (aead, auth
 *             with the payload MAC) goes out a pass after its payload; its send must wait for
 *             it (a send done, and freed, before it would close the lanes)
 *   impostor  (3 ranks) rank 2, which holds the job key, opens a lane to rank 1 in rank 0's
 *             name while ranks 0 and 1 exchange striped messages: without rank 0's secret
 *             key it cannot check rank 1's challenge nor answer it, rank 1 closes it, and the
 *             exchange goes on whole
 * After tamper and forge, messages both ways (the mpi lanes now) must arrive whole.
 * Rank 0 prints "ok TEST (MODE...)" or "FAIL ..." per case; a watchdog ends a hang with FAIL.
 */
#include "multilane.h"
#include "stripe_int.h" /* mln_tcp_test_impostor, mln_stripe_engine */

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define SENTINEL 0xa5

static char verdict[256];
static int rank_, failed_;

static void on_alarm(int sig)
{
    (void)sig;
    ssize_t n = write(STDOUT_FILENO, verdict, strlen(verdict));
    (void)n;
    _exit(3);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "mpi_link: rank %d: FAIL ", rank_);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failed_ = 1;
}

static uint8_t pat(int src, int round, int64_t i)
{
    const uint64_t x = (uint64_t)i * 2654435761u + (uint64_t)src * 97u + (uint64_t)round * 13u;
    return (uint8_t)(x >> 7);
}

static void fill(uint8_t *b, int64_t n, int src, int round)
{
    for (int64_t i = 0; i < n; i++)
        b[i] = pat(src, round, i);
}

/* Messages of `n` bytes both ways at once, checked: 1 when whole. */
static int exchange(int64_t n, int round)
{
    const int peer = 1 - rank_; /* (ranks 0 and 1) */
    uint8_t *out = malloc((size_t)n), *in = malloc((size_t)n);
    mln_request_t reqs[2] = {MLN_REQUEST_NULL, MLN_REQUEST_NULL};
    MPI_Status st[2];
    int ok = out != NULL && in != NULL;
    int count = -1;
    char what[64];

    snprintf(what, sizeof(what), "%lld bytes, round %d", (long long)n, round);
    if (ok) {
        fill(out, n, rank_, round);
        memset(in, 0, (size_t)n);
        ok = mln_stripe_irecv(in, n, MPI_BYTE, peer, round, MPI_COMM_WORLD, &reqs[0]) == MLN_OK &&
             mln_stripe_isend(out, n, MPI_BYTE, peer, round, MPI_COMM_WORLD, &reqs[1]) == MLN_OK &&
             mln_stripe_waitall(2, reqs, st) == MLN_OK;
        if (!ok)
            fail("exchange of %s: a call failed", what);
    }
    if (ok) {
        MPI_Get_count(&st[0], MPI_BYTE, &count);
        if (count != n || st[0].MPI_SOURCE != peer || st[0].MPI_TAG != round) {
            fail("exchange of %s: wrong status", what);
            ok = 0;
        }
        for (int64_t i = 0; ok && i < n; i++)
            if (in[i] != pat(peer, round, i)) {
                fail("exchange of %s: a wrong byte", what);
                ok = 0;
            }
    }
    free(out);
    free(in);
    return ok;
}

/* tamper and forge: 16 MiB from rank 0 to rank 1 with the fault on rank 0's lane 0. */
static void spoilt(const char *kase, const char *expect)
{
    const int64_t n = 16 * MIB + 5;
    uint8_t *buf = malloc((size_t)n);
    mln_request_t req = MLN_REQUEST_NULL;
    mln_status_t rc;
    int64_t wrong = 0, untouched = 0;

    if (buf == NULL)
        abort();
    if (rank_ == 0) {
        fill(buf, n, 0, 0);
        rc = mln_stripe_isend(buf, n, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &req);
    } else {
        memset(buf, SENTINEL, (size_t)n);
        rc = mln_stripe_irecv(buf, n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &req);
    }
    if (rc == MLN_OK)
        rc = mln_stripe_wait(&req, MPI_STATUS_IGNORE);
    if (rank_ == 1) {
        for (int64_t i = 0; i < n; i++) {
            wrong += buf[i] != pat(0, 0, i) && buf[i] != SENTINEL;
            untouched += buf[i] == SENTINEL && pat(0, 0, i) != SENTINEL;
        }
        fprintf(stderr,
                "mpi_link: rank 1: %s: the receive completed %s; %lld bytes wrong, %lld "
                "untouched\n",
                kase, mln_status_str(rc), (long long)wrong, (long long)untouched);
        if (!strcmp(expect, "refused") && (rc != MLN_ERR_DATA || wrong != 0))
            fail("%s: expected MLN_ERR_DATA and no wrong byte (%s)", kase, mln_status_str(rc));
        if (!strcmp(expect, "wrong") && (rc != MLN_OK || wrong == 0))
            fail("%s: expected the spoilt bit in the data (the mode does not protect the "
                 "payload), got %s",
                 kase, mln_status_str(rc));
    } else if (rc != MLN_OK && rc != MLN_ERR_PEER && rc != MLN_ERR_DATA) {
        fail("%s: rank 0's send completed %s", kase, mln_status_str(rc));
    }
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int round = 1; round <= 2; round++) /* the mpi lanes now */
        exchange(4 * MIB + round - 1, round);
}

/* split: messages from rank 0 to rank 1 only, so that rank 0's wait returns as soon as its
 * send is done; then rank 0's lanes must still be up. */
static void one_way(void)
{
    const int64_t n = 300000; /* 4 chunks: one frame per lane */
    uint8_t *buf = malloc((size_t)n);
    MPI_Status st;

    if (buf == NULL)
        abort();
    for (int round = 1; round <= 4; round++) {
        mln_request_t req = MLN_REQUEST_NULL;
        mln_status_t rc;
        if (rank_ == 0) {
            fill(buf, n, 0, round);
            rc = mln_stripe_isend(buf, n, MPI_BYTE, 1, round, MPI_COMM_WORLD, &req);
        } else {
            memset(buf, 0, (size_t)n);
            rc = mln_stripe_irecv(buf, n, MPI_BYTE, 0, round, MPI_COMM_WORLD, &req);
        }
        if (rc == MLN_OK)
            rc = mln_stripe_wait(&req, &st);
        if (rc != MLN_OK)
            fail("split: round %d: %s", round, mln_status_str(rc));
        for (int64_t i = 0; rank_ == 1 && rc == MLN_OK && i < n; i++)
            if (buf[i] != pat(0, round, i)) {
                fail("split: round %d: a wrong byte", round);
                break;
            }
        if (rank_ == 0 &&
            (!mln_tcp_lanes_up(mln_stripe_engine(), 1) || mln_stripe_engine()->tcp_failed[1]))
            fail("split: round %d: the tcp lanes to rank 1 are down after the send", round);
    }
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* impostor: ranks 0 and 1 exchange striped messages (their lanes make progress, the listener
 * answers) until rank 2 is done with its try and both have heard so. */
static void impostor(void)
{
    int rc = 1;

    if (rank_ == 2) {
        const int done = 1;
        sleep(1); /* the lanes between 0 and 1 are up */
        rc = mln_tcp_test_impostor(mln_stripe_engine(), 1, 0);
        fprintf(stderr, "mpi_link: rank 2: impostor as rank 0 at rank 1: %s\n",
                rc == 1   ? "closed by rank 1, as expected"
                : rc == 2 ? "its challenge CHECKED"
                : rc == 0 ? "not closed within 10 s"
                          : "no connection");
        if (rc != 1)
            fail("impostor: %d", rc);
        MPI_Send(&done, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
        MPI_Send(&done, 1, MPI_INT, 1, 99, MPI_COMM_WORLD);
    } else {
        int heard = 0, both = 0;
        for (int round = 1; !both && round < 10000; round++) {
            int flag = 0, other = 0;
            exchange(MIB + 7, 100 + round % 1000);
            if (!heard) {
                MPI_Iprobe(2, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                if (flag)
                    MPI_Recv(&heard, 1, MPI_INT, 2, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            MPI_Sendrecv(&heard, 1, MPI_INT, 1 - rank_, 98, &other, 1, MPI_INT, 1 - rank_, 98,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            both = heard && other;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static int usage(void)
{
    fprintf(stderr, "usage: mpi_link CASE[,CASE...]\n  CASE = MODE[/CIPHER]:TEST[:EXPECT], MODE "
                    "auth|aead|none|auth+mac, CIPHER aes|chacha, TEST "
                    "transfer|tamper|forge|split|mismatch|impostor, EXPECT refused|wrong\n");
    return 2;
}

/* One case, between mln_init and mln_finalize of its own (the library reads the tunables at
 * mln_init); 0 when the case itself is malformed. */
static int run_case(char *spec)
{
    char *mode = strtok(spec, ":"), *test = strtok(NULL, ":"), *expect = strtok(NULL, ":");
    char *cipher = mode ? strchr(mode, '/') : NULL;
    int size = 0, any = 0;
    mln_status_t rc;

    if (mode == NULL || test == NULL)
        return 0;
    if (cipher != NULL)
        *cipher++ = '\0';
    if (expect == NULL)
        expect = "refused";
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    snprintf(verdict, sizeof(verdict), "FAIL %s (%s): rank %d hangs\n", test, mode, rank_);
    alarm(120);
    setenv("MLN_LINK_SECURITY", strncmp(mode, "auth", 4) ? mode : "auth", 1);
    setenv("MLN_LINK_PAYLOAD_MAC", strcmp(mode, "auth+mac") ? "0" : "1", 1);
    setenv("MLN_LINK_CIPHER", cipher ? cipher : "auto", 1);
    if (!strcmp(test, "mismatch") && rank_ == 1)
        setenv("MLN_LINK_SECURITY", strcmp(mode, "aead") ? "aead" : "auth", 1);
    unsetenv("MLN_STRIPE_FAULT");
    /* split: no early frames, so that the split one is the last of its message to go out */
    setenv("MLN_STRIPE_EARLY", strcmp(test, "split") ? "4M" : "0", 1);
    if (rank_ == 0 &&
        (!strcmp(test, "tamper") || !strcmp(test, "forge") || !strcmp(test, "split"))) {
        char fault[64];
        snprintf(fault, sizeof(fault), "%s:%d:%d", test, strcmp(test, "split") ? 0 : 3,
                 strcmp(test, "split") ? 1048576 : 0); /* split: the lane written last */
        setenv("MLN_STRIPE_FAULT", fault, 1);
    }
    if (size != (!strcmp(test, "impostor") ? 3 : 2)) {
        fail("%s needs %d ranks", test, !strcmp(test, "impostor") ? 3 : 2);
    } else if (!strcmp(test, "mismatch")) {
        rc = mln_init();
        if (rc != MLN_ERR_CONFIG)
            fail("mismatch: mln_init returned %s, expected MLN_ERR_CONFIG", mln_status_str(rc));
        if (rc == MLN_OK)
            mln_finalize();
    } else if ((rc = mln_init()) != MLN_OK) {
        fail("mln_init: %s", mln_status_str(rc));
    } else {
        if (!strcmp(test, "split")) {
            one_way();
        } else if (!strcmp(test, "transfer")) {
            const int64_t sizes[] = {1, 65 * 1024, 300000, 4 * MIB + 3, 17 * MIB};
            for (int k = 0; k < 5; k++)
                exchange(sizes[k], k + 1);
            /* and the lanes are still up: a send completed before its last frame was out whole
             * would close them (then later messages go over the mpi lanes, whole but slow) */
            if (!mln_tcp_lanes_up(mln_stripe_engine(), 1 - rank_) ||
                mln_stripe_engine()->tcp_failed[1 - rank_])
                fail("transfer: the tcp lanes to rank %d are down after the messages", 1 - rank_);
        } else if (!strcmp(test, "impostor")) {
            impostor();
        } else if (!strcmp(test, "tamper") || !strcmp(test, "forge")) {
            spoilt(test, expect);
        } else {
            fail("unknown test %s", test);
        }
        mln_finalize();
    }
    MPI_Allreduce(&failed_, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank_ == 0)
        printf("%s %s (%s%s%s%s%s)\n", any ? "FAIL" : "ok", test, mode, cipher ? ", " : "",
               cipher ? cipher : "", strcmp(test, "tamper") ? "" : ", expect ",
               strcmp(test, "tamper") ? "" : expect);
    alarm(0);
    return 1;
}

int main(int argc, char **argv)
{
    int ok = 1;

    if (argc != 2)
        return usage();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    signal(SIGALRM, on_alarm);
    setenv("MLN_STRIPE_BACKEND", "tcp", 1);
    setenv("MLN_STRIPE_LANES", "4", 1);
    setenv("MLN_STRIPE_LOCAL", "1", 1); /* ranks of one host stripe over loopback */
    setenv("MLN_STRIPE_THRESHOLD", "64K", 1);
    setenv("MLN_STRIPE_TIMEOUT", "5", 1);
    for (char *save = NULL, *c = strtok_r(argv[1], ",", &save); c && ok;
         c = strtok_r(NULL, ",", &save))
        ok = run_case(c);
    if (!ok && rank_ == 0)
        usage();
    MPI_Finalize();
    return failed_ || !ok ? 1 : 0;
}
