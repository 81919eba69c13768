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

int64_t pattern_wrong(const uint8_t *buf, int64_t n, int sender, int msg, int64_t *first)
{
    int64_t wrong = 0;

    *first = -1;
    for (int64_t b = 0; b < n; b += 512) {
        const uint8_t base = (uint8_t)(pat(sender, msg, (uint64_t)b) - (uint8_t)(b * 7));
        const int64_t end = n - b < 512 ? n - b : 512;
        int64_t bad = 0;
        for (int64_t i = 0; i < end; i++)
            bad += buf[b + i] != (uint8_t)((b + i) * 7 + base);
        if (bad && *first < 0)
            for (int64_t i = 0; *first < 0; i++)
                if (buf[b + i] != pat(sender, msg, (uint64_t)(b + i)))
                    *first = b + i;
        wrong += bad;
    }
    return wrong;
}

/* 1 when buf[0..n) holds message `msg` of `sender`; else records the first wrong byte. */
int check(tctx_t *t, const uint8_t *buf, int64_t n, int sender, int msg, const char *what)
{
    int64_t first;
    const int64_t wrong = pattern_wrong(buf, n, sender, msg, &first);

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

void watchdog_arm(unsigned limit, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(watchdog_msg, sizeof(watchdog_msg), fmt, ap);
    va_end(ap);
    alarm(limit);
}

double subtest_begin(tctx_t *t, const char *name, unsigned limit)
{
    double t0;

    t->ok = 1;
    t->why[0] = '\0';
    MPI_Barrier(t->comm);
    t0 = MPI_Wtime();
    watchdog_arm(limit, "FAIL %s: rank %d: not done within %u s (hang; --watchdog)\n", name,
                 t->rank, limit);
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

    watchdog_arm(
        60, "FAIL finalize: rank %d: mln_finalize + MPI_Finalize not done within 60 s (hang)\n",
        t->rank);
    if (mln_finalize() != MLN_OK) {
        fprintf(stderr, "%s: rank %d: mln_finalize failed\n", t->prog ? t->prog : "mpi_stripe",
                t->rank);
        failed = 1;
    }
    MPI_Finalize();
    alarm(0);
    return failed;
}

/* ---- options and start-up shared by the striped tests ------------------------------------- */

void stripe_options_init(options_t *o)
{
    *o = (options_t){.backend = "tcp",
                     .tests = "all",
                     .fault = "reset:0:262144",
                     .threshold = "256K",
                     .progress = "call",
                     .lanes = 4,
                     .lanes_max = 64,
                     .helpers = 1,
                     .local = 1,
                     .stripe_timeout = 10,
                     .watchdog = 120,
                     .tags = 0,
                     .fault_rank = 0};
}

int stripe_option(options_t *o, const char *name, const char *val)
{
    int *num = NULL;

    if (!strcmp(name, "--backend"))
        o->backend = val;
    else if (!strcmp(name, "--threshold"))
        o->threshold = val;
    else if (!strcmp(name, "--progress") && (!strcmp(val, "call") || !strcmp(val, "thread")))
        o->progress = val;
    else if (!strcmp(name, "--lanes") && !strcmp(val, "auto"))
        o->lanes = 0;
    else if (!strcmp(name, "--lanes"))
        num = &o->lanes;
    else if (!strcmp(name, "--lanes-max"))
        num = &o->lanes_max;
    else if (!strcmp(name, "--helpers"))
        num = &o->helpers;
    else if (!strcmp(name, "--local"))
        num = &o->local;
    else if (!strcmp(name, "--stripe-timeout"))
        num = &o->stripe_timeout;
    else if (!strcmp(name, "--stripe-port"))
        num = &o->stripe_port;
    else if (!strcmp(name, "--watchdog"))
        num = &o->watchdog;
    else if (!strcmp(name, "--tags"))
        num = &o->tags;
    else if (!strcmp(name, "--fault-rank"))
        num = &o->fault_rank;
    else if (!strcmp(name, "--early"))
        o->early = val;
    else if (!strcmp(name, "--early-rank"))
        num = &o->early_rank;
    else
        return 0;
    return num != NULL && parse_count(val, num) != 0 ? -1 : 1;
}

const char *stripe_options_check(const options_t *o, uint64_t *threshold)
{
    if (strcmp(o->backend, "tcp") && strcmp(o->backend, "mpi") && strcmp(o->backend, "helper"))
        return "unknown backend";
    if (mln_parse_size(o->threshold, threshold) != MLN_OK)
        return "a bad --threshold";
    if (o->stripe_port > 65535)
        return "a bad --stripe-port (0 to 65535)";
    return NULL;
}

int stripe_tunables_set(const options_t *o, const char *fault)
{
    char num[32];
    int rc = 0;

    rc |= setenv("MLN_STRIPE_BACKEND", o->backend, 1);
    snprintf(num, sizeof(num), "%d", o->lanes);
    rc |= setenv("MLN_STRIPE_LANES", o->lanes > 0 ? num : "auto", 1);
    snprintf(num, sizeof(num), "%d", o->lanes_max);
    rc |= setenv("MLN_STRIPE_LANES_MAX", num, 1);
    snprintf(num, sizeof(num), "%d", o->helpers);
    rc |= setenv("MLN_STRIPE_HELPERS", num, 1);
    rc |= setenv("MLN_STRIPE_LOCAL", o->local ? "1" : "0", 1);
    rc |= setenv("MLN_STRIPE_THRESHOLD", o->threshold, 1);
    snprintf(num, sizeof(num), "%d", o->stripe_timeout);
    rc |= setenv("MLN_STRIPE_TIMEOUT", num, 1);
    rc |= setenv("MLN_STRIPE_PROGRESS", o->progress, 1);
    snprintf(num, sizeof(num), "%d", o->tags);
    rc |= setenv("MLN_STRIPE_TAGS", num, 1);
    if (o->stripe_port > 0) {
        snprintf(num, sizeof(num), "%d", o->stripe_port);
        rc |= setenv("MLN_STRIPE_PORT", num, 1);
    }
    if (fault != NULL)
        rc |= setenv("MLN_STRIPE_FAULT", fault, 1);
    return rc;
}

int stripe_mpi_init(int *argc, char ***argv, const char *prog)
{
    int want_multiple = 0, provided = 0, rank = 0;

    /* --progress thread: the library's progress thread calls MPI, hence THREAD_MULTIPLE */
    for (int i = 1; i + 1 < *argc; i++)
        if (!strcmp((*argv)[i], "--progress") && !strcmp((*argv)[i + 1], "thread"))
            want_multiple = 1;
    if (want_multiple)
        MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (want_multiple && provided < MPI_THREAD_MULTIPLE && rank == 0)
        fprintf(stderr, "%s: MPI gives thread level %d, not MPI_THREAD_MULTIPLE\n", prog, provided);
    return rank;
}

void stripe_mln_init(int world_rank)
{
    watchdog_install();
    if (mln_init() != MLN_OK) { /* helper ranks do not come back from here */
        printf("FAIL init: rank %d: mln_init failed\n", world_rank);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int pair_only(tctx_t *t, const char *name)
{
    if (t->size == 2)
        return 0;
    if (t->rank == 0)
        fprintf(stderr, "mpi_stripe: %s runs on 2 application ranks only (here %d): skipped\n",
                name, t->size);
    return 1;
}
