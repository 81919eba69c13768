/*
 * preload_check.c - the pattern, the buffers, the checks and the phase driver of the
 * interposition layer's tests (preload_check.h).  MPI only: no Multilane header.
 */
#include "preload_check.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const size_t pc_sizes[PC_NSIZES] = {0, 1, 63, 64, 65, 4095, 4097, 100 * PC_KIB, PC_MIB + 3};

/* The watchdog's message and the step it names: globals, because a signal handler cannot take
 * a pointer (and they are written by the main thread only). */
static char pc_watchdog_msg[160];
static char pc_watchdog_step[400];

static void pc_watchdog_fire(int sig)
{
    ssize_t n;

    (void)sig;
    n = write(STDERR_FILENO, pc_watchdog_msg, strlen(pc_watchdog_msg));
    n = write(STDERR_FILENO, pc_watchdog_step, strlen(pc_watchdog_step));
    (void)n;
    _exit(3);
}

void pc_step(const pc_ctx_t *c, const char *fmt, ...)
{
    char step[200];
    va_list ap;

    if (c->thread >= 0)
        return;
    va_start(ap, fmt);
    vsnprintf(step, sizeof(step), fmt, ap);
    va_end(ap);
    snprintf(pc_watchdog_step, sizeof(pc_watchdog_step), "%s: rank %d: %s: last step: %s\n",
             c->prog, c->rank, c->phase, step);
}

/* The known deviations (PC_QUIRK_*) of the MPI this program runs on. */
static int pc_quirks_of_mpi(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    const char *m;
    int len = 0;

    MPI_Get_library_version(v, &len);
    if (!strncmp(v, "Open MPI v4.", 12) || !strncmp(v, "Open MPI v3.", 12))
        return PC_QUIRK_BSEND_INIT_ONCE;
    if (!strncmp(v, "MPICH Version:", 14)) {
        m = v + 14 + strspn(v + 14, " \t");
        if (*m >= '1' && *m <= '4' && m[1] == '.')
            return PC_QUIRK_PROCNULL_STATUS | PC_QUIRK_UNDEFINED_STATUS;
    }
    return 0;
}

void pc_init(pc_ctx_t *c, const char *prog)
{
    memset(c, 0, sizeof(*c));
    c->prog = prog;
    c->thread = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    snprintf(c->phase, sizeof(c->phase), "init");
    signal(SIGALRM, pc_watchdog_fire);
    c->quirks = pc_quirks_of_mpi();
}

int pc_quirk(pc_ctx_t *c, int q)
{
    static const char *const note[3] = {
        "Open MPI 4 sends wrong data when a Bsend_init request is started a second time: "
        "each is made anew before its Start",
        "MPICH 4 leaves the status of an Irecv from MPI_PROC_NULL completed by Waitall unset: "
        "not checked",
        "MPICH 4 leaves the status of Waitany / Testany with no active request unset: not "
        "checked"};

    if (!(c->quirks & q))
        return 0;
    if (c->rank == 0 && c->thread < 0 && !(c->noted & q)) {
        for (int i = 0; i < 3; i++)
            if (q == 1 << i)
                printf("%s: note: %s\n", c->prog, note[i]);
        fflush(stdout);
    }
    c->noted |= q;
    return 1;
}

void pc_fail(pc_ctx_t *c, const char *what, const char *fmt, ...)
{
    char msg[400], thr[24] = "";
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->thread >= 0)
        snprintf(thr, sizeof(thr), " thread %d", c->thread);
    fprintf(stderr, "%s: rank %d%s: %s: %s: %s\n", c->prog, c->rank, thr, c->phase, what, msg);
    c->nfail++;
}

int pc_eq(pc_ctx_t *c, const char *what, long long want, long long got)
{
    if (want == got)
        return 1;
    pc_fail(c, what, "expected %lld, got %lld", want, got);
    return 0;
}

int pc_mpi(pc_ctx_t *c, const char *what, int rc)
{
    char err[MPI_MAX_ERROR_STRING] = "";
    int len = 0;

    if (rc == MPI_SUCCESS)
        return 1;
    MPI_Error_string(rc, err, &len);
    pc_fail(c, what, "expected MPI_SUCCESS, got %d (%s)", rc, err);
    return 0;
}

void pc_phase(pc_ctx_t *c, const char *name)
{
    pc_barrier(MPI_COMM_WORLD);
    snprintf(c->phase, sizeof(c->phase), "%s", name);
    alarm(0);
    pc_watchdog_step[0] = '\0';
    snprintf(pc_watchdog_msg, sizeof(pc_watchdog_msg), "%s: rank %d: %s: FAIL: hang (%d s)\n",
             c->prog, c->rank, name, PC_WATCHDOG_S);
    alarm(PC_WATCHDOG_S);
}

int pc_finish(pc_ctx_t *c)
{
    int total = 0;

    alarm(0);
    MPI_Allreduce(&c->nfail, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (c->rank == 0) {
        if (total == 0)
            printf("%s: %d ranks: PASS\n", c->prog, c->size);
        else
            printf("%s: %d ranks: FAIL: %d failed checks\n", c->prog, c->size, total);
        fflush(stdout);
    }
    return total == 0 ? 0 : 1;
}

int pc_selected(const char *list, const char *name)
{
    const size_t len = strlen(name);

    if (!list || !strcmp(list, "all"))
        return 1;
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        if (n == len && !strncmp(p, name, n))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

void *pc_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* ---- buffers --------------------------------------------------------------------------- */

void pc_buf_init(pc_buf_t *b, int layout, size_t nbytes)
{
    const size_t nfull = nbytes / PC_VBLOCK, rest = nbytes % PC_VBLOCK;

    memset(b, 0, sizeof(*b));
    b->layout = layout;
    b->nbytes = nbytes;
    b->span = layout == PC_VEC ? (nfull + (rest > 0)) * PC_VSTRIDE : nbytes;
    b->mem = pc_xmalloc(b->span);
    memset(b->mem, PC_GUARD, b->span);
    if (layout == PC_CONTIG) {
        b->type = MPI_BYTE;
        b->count = (int)nbytes;
        b->esize = 1;
        return;
    }
    b->owned = 1;
    if (rest == 0) { /* blocks: one element each */
        MPI_Datatype blk;
        MPI_Type_contiguous(PC_VBLOCK, MPI_BYTE, &blk);
        MPI_Type_create_resized(blk, 0, PC_VSTRIDE, &b->type);
        MPI_Type_free(&blk);
        b->count = (int)nfull;
        b->esize = PC_VBLOCK;
    } else if (nfull == 0) {
        MPI_Type_contiguous((int)rest, MPI_BYTE, &b->type);
        b->count = 1;
        b->esize = nbytes;
    } else { /* the whole blocks, then the rest: one element */
        MPI_Datatype vec, parts[2];
        int lens[2] = {1, (int)rest};
        MPI_Aint disp[2] = {0, (MPI_Aint)(nfull * PC_VSTRIDE)};
        MPI_Type_vector((int)nfull, PC_VBLOCK, PC_VSTRIDE, MPI_BYTE, &vec);
        parts[0] = vec;
        parts[1] = MPI_BYTE;
        MPI_Type_create_struct(2, lens, disp, parts, &b->type);
        MPI_Type_free(&vec);
        b->count = 1;
        b->esize = nbytes;
    }
    MPI_Type_commit(&b->type);
}

void pc_buf_free(pc_buf_t *b)
{
    if (b->owned)
        MPI_Type_free(&b->type);
    free(b->mem);
    b->mem = NULL;
}

static inline size_t pc_buf_off(const pc_buf_t *b, size_t i)
{
    return b->layout == PC_VEC ? i / PC_VBLOCK * PC_VSTRIDE + i % PC_VBLOCK : i;
}

/* 1 when byte `off` of a PC_VEC buffer holds no data (a gap, or past the last data byte). */
static int pc_buf_gap(const pc_buf_t *b, size_t off)
{
    return off % PC_VSTRIDE >= PC_VBLOCK ||
           off / PC_VSTRIDE * PC_VBLOCK + off % PC_VSTRIDE >= b->nbytes;
}

void pc_buf_fill(pc_buf_t *b, int sender, int msg)
{
    for (size_t i = 0; i < b->nbytes; i++)
        b->mem[pc_buf_off(b, i)] = pc_pat(sender, msg, i);
}

void pc_buf_set(pc_buf_t *b, uint8_t v)
{
    for (size_t i = 0; i < b->nbytes; i++)
        b->mem[pc_buf_off(b, i)] = v;
}

int pc_buf_check(pc_ctx_t *c, const char *what, const pc_buf_t *b, size_t got, int sender, int msg)
{
    size_t nbad = 0, first = 0;
    unsigned want1 = 0, got1 = 0;

    for (size_t i = 0; i < b->nbytes; i++) {
        const uint8_t w = i < got ? pc_pat(sender, msg, i) : PC_GUARD;
        const uint8_t g = b->mem[pc_buf_off(b, i)];
        if (g != w && nbad++ == 0) {
            first = i;
            want1 = w;
            got1 = g;
        }
    }
    if (nbad) {
        pc_fail(c, what,
                "data byte %zu of %zu (%zu received, from rank %d, message %d): expected 0x%02x, "
                "got 0x%02x (%zu wrong bytes)",
                first, b->nbytes, got, sender, msg, want1, got1, nbad);
        return 0;
    }
    if (b->layout == PC_VEC)
        for (size_t o = 0; o < b->span; o++)
            if (b->mem[o] != PC_GUARD && pc_buf_gap(b, o)) {
                pc_fail(c, what,
                        "gap byte at offset %zu of a strided buffer: expected 0x%02x, got 0x%02x",
                        o, PC_GUARD, b->mem[o]);
                return 0;
            }
    return 1;
}

int pc_buf_count(const pc_buf_t *b, size_t bytes)
{
    return bytes % b->esize ? MPI_UNDEFINED : (int)(bytes / b->esize);
}

int pc_status(pc_ctx_t *c, const char *what, const MPI_Status *st, int src, int tag,
              const pc_buf_t *b, size_t bytes)
{
    char w[200];
    int count = -2, elems = -2, canc = -2, ok = 1;

    snprintf(w, sizeof(w), "%s: status.MPI_SOURCE", what);
    ok &= pc_eq(c, w, src, st->MPI_SOURCE);
    snprintf(w, sizeof(w), "%s: status.MPI_TAG", what);
    ok &= pc_eq(c, w, tag, st->MPI_TAG);
    MPI_Get_count(st, b->type, &count);
    snprintf(w, sizeof(w), "%s: MPI_Get_count", what);
    ok &= pc_eq(c, w, pc_buf_count(b, bytes), count);
    MPI_Get_elements(st, b->type, &elems);
    snprintf(w, sizeof(w), "%s: MPI_Get_elements", what);
    ok &= pc_eq(c, w, (long long)bytes, elems);
    MPI_Test_cancelled(st, &canc);
    snprintf(w, sizeof(w), "%s: MPI_Test_cancelled", what);
    ok &= pc_eq(c, w, 0, canc);
    return ok;
}

int pc_status_empty(pc_ctx_t *c, const char *what, const MPI_Status *st, int src)
{
    char w[200];
    int count = -2, canc = -2, ok = 1;

    snprintf(w, sizeof(w), "%s: empty status.MPI_SOURCE", what);
    ok &= pc_eq(c, w, src, st->MPI_SOURCE);
    snprintf(w, sizeof(w), "%s: empty status.MPI_TAG", what);
    ok &= pc_eq(c, w, MPI_ANY_TAG, st->MPI_TAG);
    MPI_Get_count(st, MPI_BYTE, &count);
    snprintf(w, sizeof(w), "%s: empty status: MPI_Get_count", what);
    ok &= pc_eq(c, w, 0, count);
    MPI_Test_cancelled(st, &canc);
    snprintf(w, sizeof(w), "%s: empty status: MPI_Test_cancelled", what);
    ok &= pc_eq(c, w, 0, canc);
    return ok;
}

void pc_barrier(MPI_Comm comm)
{
    const struct timespec nap = {0, 200 * 1000};
    MPI_Request r;
    int done = 0;

    MPI_Ibarrier(comm, &r);
    for (MPI_Test(&r, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&r, &done, MPI_STATUS_IGNORE))
        nanosleep(&nap, NULL);
}

void pc_pairs(pc_ctx_t *c, MPI_Comm comm, void *arg,
              void (*fn)(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer))
{
    int me, n;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++) {
            if (s == d)
                continue;
            if (me == s)
                fn(c, comm, arg, 1, d);
            else if (me == d)
                fn(c, comm, arg, 0, s);
            pc_barrier(comm);
        }
}
