/*
 * stripe_check.c - the data pattern and the checks shared by the striped point-to-point tests,
 * and the sub-test driver that they and the broadcast test share.
 */
#include "stripe_check.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fail(tctx_t *t, const char *fmt, ...)
{
    char msg[WHY_LEN];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: rank %d: %s\n", t->prog ? t->prog : "mpi_stripe", t->rank, msg);
    if (t->ok)
        snprintf(t->why, sizeof(t->why), "%s", msg);
    t->ok = 0;
}

/* ---- data pattern ----------------------------------------------------------------------- */

/* pat() is off * 7 plus a term constant over each aligned 512-byte block: fill and check go
 * block by block so that the compiler vectorises the inner loops (2 GiB in about a second). */
void fill(uint8_t *buf, int64_t n, int sender, int msg)
{
    for (int64_t b = 0; b < n; b += 512) {
        const uint8_t base = (uint8_t)(pat(sender, msg, (uint64_t)b) - (uint8_t)(b * 7));
        const int64_t end = n - b < 512 ? n - b : 512;
        for (int64_t i = 0; i < end; i++)
            buf[b + i] = (uint8_t)((b + i) * 7 + base);
    }
}

/* 1 when buf[0..n) holds message `msg` of `sender`; else records the first wrong byte. */
int check(tctx_t *t, const uint8_t *buf, int64_t n, int sender, int msg, const char *what)
{
    int64_t wrong = 0, first = -1;

    for (int64_t b = 0; b < n; b += 512) {
        const uint8_t base = (uint8_t)(pat(sender, msg, (uint64_t)b) - (uint8_t)(b * 7));
        const int64_t end = n - b < 512 ? n - b : 512;
        int64_t bad = 0;
        for (int64_t i = 0; i < end; i++)
            bad += buf[b + i] != (uint8_t)((b + i) * 7 + base);
        if (bad && first < 0)
            for (int64_t i = 0; first < 0; i++)
                if (buf[b + i] != pat(sender, msg, (uint64_t)(b + i)))
                    first = b + i;
        wrong += bad;
    }
    if (wrong)
        fail(t, "%s: %lld of %lld bytes wrong, first at offset %lld (got 0x%02x, want 0x%02x)",
             what, (long long)wrong, (long long)n, (long long)first, buf[first],
             pat(sender, msg, (uint64_t)first));
    return wrong == 0;
}

void *xmalloc(int64_t n)
{
    void *p = malloc((size_t)(n > 0 ? n : 1));
    if (p == NULL) {
        fprintf(stderr, "mpi_stripe: out of memory (%lld bytes)\n", (long long)n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* ---- checks on statuses ----------------------------------------------------------------- */

int expect(tctx_t *t, mln_status_t got, mln_status_t want, const char *what)
{
    if (got == want)
        return 1;
    fail(t, "%s: returned %s, expected %s", what, mln_status_str(got), mln_status_str(want));
    return 0;
}

/* Source, tag and byte count of a receive's MPI_Status. */
int check_status(tctx_t *t, const MPI_Status *st, int src, int tag, int64_t bytes, const char *what)
{
    MPI_Count n = -1;
    int count = -1;

    MPI_Get_elements_x(st, MPI_BYTE, &n);
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || n != bytes) {
        fail(t, "%s: status source %d tag %d count %lld, expected %d %d %lld", what, st->MPI_SOURCE,
             st->MPI_TAG, (long long)n, src, tag, (long long)bytes);
        return 0;
    }
    if (bytes <= INT32_MAX) {
        MPI_Get_count(st, MPI_BYTE, &count);
        if (count != bytes) {
            fail(t, "%s: MPI_Get_count says %d bytes, expected %lld", what, count,
                 (long long)bytes);
            return 0;
        }
    }
    return 1;
}

/* Receives `n` bytes posted with capacity `cap` from `src` (message `msg`) and checks all. */
void recv_check(tctx_t *t, int64_t n, int64_t cap, int src, int tag, int msg, const char *what)
{
    uint8_t *buf = xmalloc(cap);
    MPI_Status st;
    mln_request_t req = MLN_REQUEST_NULL;
    char label[96];

    snprintf(label, sizeof(label), "%s (%lld B, msg %d)", what, (long long)n, msg);
    if (expect(t, mln_stripe_irecv(buf, cap, MPI_BYTE, src, tag, t->comm, &req), MLN_OK, label) &&
        expect(t, mln_stripe_wait(&req, &st), MLN_OK, label)) {
        if (req != MLN_REQUEST_NULL)
            fail(t, "%s: wait left the request non-null", label);
        if (check_status(t, &st, src, tag, n, label))
            check(t, buf, n, src, msg, label);
    }
    free(buf);
}

/* Sends count messages sizes[i] (message index msg0 + i, tag tags[i]) to dest, waits each. */
void send_all(tctx_t *t, int dest, int count, const int64_t *sizes, const int *tags, int msg0)
{
    uint8_t **bufs = xmalloc((int64_t)sizeof(*bufs) * count);
    mln_request_t *reqs = xmalloc((int64_t)sizeof(*reqs) * count);
    char label[96];

    for (int i = 0; i < count; i++) {
        bufs[i] = xmalloc(sizes[i]);
        fill(bufs[i], sizes[i], t->rank, msg0 + i);
        snprintf(label, sizeof(label), "isend %lld B (msg %d)", (long long)sizes[i], msg0 + i);
        if (!expect(t,
                    mln_stripe_isend(bufs[i], sizes[i], MPI_BYTE, dest, tags[i], t->comm, &reqs[i]),
                    MLN_OK, label))
            reqs[i] = MLN_REQUEST_NULL;
    }
    for (int i = 0; i < count; i++) {
        snprintf(label, sizeof(label), "send wait %lld B (msg %d)", (long long)sizes[i], msg0 + i);
        expect(t, mln_stripe_wait(&reqs[i], MPI_STATUS_IGNORE), MLN_OK, label);
        free(bufs[i]);
    }
    free(reqs);
    free(bufs);
}

/* Runs body(t, sender) twice: even ranks send to odd ones, then the other way. */
void both_directions(tctx_t *t, void (*body)(tctx_t *, int sender))
{
    for (int dir = 0; dir < 2; dir++) {
        if (t->partner >= 0)
            body(t, (t->rank % 2) == dir);
        MPI_Barrier(t->comm);
    }
}

/* ---- the sub-test driver ------------------------------------------------------------------ */

/* The watchdog's message: the one global, because a signal handler cannot take a pointer. */
static char watchdog_msg[WHY_LEN];

static void watchdog_fire(int sig)
{
    (void)sig;
    ssize_t n = write(STDOUT_FILENO, watchdog_msg, strlen(watchdog_msg));
    (void)n;
    _exit(3);
}

void watchdog_install(void)
{
    signal(SIGALRM, watchdog_fire);
}

int list_has(const char *list, const char *name, int in_all)
{
    const size_t len = strlen(name);

    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        if ((n == len && strncmp(p, name, n) == 0) || (n == 3 && !strncmp(p, "all", 3) && in_all))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

int list_known(const char *list, const char *(*name_of)(int index))
{
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        int known = n == 3 && !strncmp(p, "all", 3);
        for (int i = 0; name_of(i) != NULL && !known; i++)
            known = strlen(name_of(i)) == n && !strncmp(p, name_of(i), n);
        if (!known)
            return 0;
        p += n + (p[n] == ',');
    }
    return 1;
}

int parse_count(const char *text, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);

    if (*end || end == text || v < 0 || v > 100000)
        return -1;
    *out = (int)v;
    return 0;
}

double subtest_begin(tctx_t *t, const char *name, unsigned limit)
{
    double t0;

    snprintf(watchdog_msg, sizeof(watchdog_msg),
             "FAIL %s: rank %d: not done within %u s (hang; --watchdog)\n", name, t->rank, limit);
    t->ok = 1;
    t->why[0] = '\0';
    MPI_Barrier(t->comm);
    t0 = MPI_Wtime();
    alarm(limit);
    return t0;
}

int subtest_end(tctx_t *t, const char *name, double t0)
{
    int first = 0, bad;

    MPI_Barrier(t->comm);
    alarm(0);
    bad = t->ok ? t->size : t->rank;
    MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, t->comm);
    if (first < t->size)
        MPI_Bcast(t->why, WHY_LEN, MPI_CHAR, first, t->comm);
    if (t->rank == 0) {
        if (first < t->size)
            printf("FAIL %s: rank %d: %s\n", name, first, t->why);
        else
            printf("ok %s (%.2f s)\n", name, MPI_Wtime() - t0);
        fflush(stdout);
    }
    return first == t->size;
}

int finalize_checked(tctx_t *t)
{
    int failed = 0;

    snprintf(watchdog_msg, sizeof(watchdog_msg),
             "FAIL finalize: rank %d: mln_finalize + MPI_Finalize not done within 60 s (hang)\n",
             t->rank);
    alarm(60);
    if (mln_finalize() != MLN_OK) {
        fprintf(stderr, "%s: rank %d: mln_finalize failed\n", t->prog ? t->prog : "mpi_stripe",
                t->rank);
        failed = 1;
    }
    MPI_Finalize();
    alarm(0);
    return failed;
}
