/*
 * halo.c - the halo plan (docs/HALO.md): creation with the pairing agreed once (halo_pairs.c),
 * the choice of the mode (asked for, MLN_HALO_MODE, or auto: every usable mode timed with checked
 * payloads, the fastest kept), and the calls that run and describe it.  The modes are in
 * halo_modes.c.
 */
#include "halo_int.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[MLN_HALO_NMODES] = {
    "auto", "p2p", "neighbor", "rma-fence", "rma-pscw", "rma-passive", "rma-single"};

const char *mln_halo_mode_name(mln_halo_mode_t mode)
{
    return (int)mode >= 0 && mode < MLN_HALO_NMODES ? mode_names[mode] : NULL;
}

mln_status_t mln_halo_mode_parse(const char *name, mln_halo_mode_t *mode)
{
    for (int m = 0; name != NULL && m < MLN_HALO_NMODES; m++)
        if (strcmp(name, mode_names[m]) == 0) {
            if (mode != NULL)
                *mode = (mln_halo_mode_t)m;
            return MLN_OK;
        }
    return MLN_ERR_ARG;
}

mln_halo_mode_t mln_halo_mode(const mln_halo_plan_t *plan)
{
    return plan != NULL ? plan->mode : MLN_HALO_AUTO;
}

int mln_halo_size(const mln_halo_plan_t *plan)
{
    return plan != NULL ? plan->nnbrs : 0;
}

int mln_halo_neighbor(const mln_halo_plan_t *plan, int k)
{
    return plan != NULL && k >= 0 && k < plan->nnbrs ? plan->nbrs[k] : MPI_UNDEFINED;
}

mln_status_t mln_halo_timing(const mln_halo_plan_t *plan, mln_halo_mode_t mode,
                             mln_halo_state_t *state, double *seconds)
{
    if (plan == NULL || mode <= MLN_HALO_AUTO || mode >= MLN_HALO_NMODES)
        return MLN_ERR_ARG;
    if (state != NULL)
        *state = plan->state[mode];
    if (seconds != NULL)
        *seconds = plan->seconds[mode];
    return MLN_OK;
}

int mln_halo_describe(const mln_halo_plan_t *plan, char *buf, size_t len)
{
    static const char *const state_text[] = {"untried", "", "wrong data", "disabled",
                                             "not for these arguments"};
    size_t at = 0;
    int n;

    if (plan == NULL)
        return snprintf(buf, len, "(no plan)");
    n = snprintf(buf, len, "%s (%s", mode_names[plan->mode], plan->why);
    for (int m = MLN_HALO_P2P; n >= 0 && m < MLN_HALO_NMODES; m++) {
        at += (size_t)n;
        if (plan->state[m] == MLN_HALO_UNTRIED)
            n = 0;
        else if (plan->state[m] == MLN_HALO_TIMED)
            n = snprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, "%s%s %.1f us",
                         m == MLN_HALO_P2P ? ": " : ", ", mode_names[m], plan->seconds[m] * 1e6);
        else
            n = snprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, "%s%s %s",
                         m == MLN_HALO_P2P ? ": " : ", ", mode_names[m],
                         state_text[plan->state[m]]);
    }
    if (n < 0)
        return n;
    at += (size_t)n;
    n = snprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, ")");
    return n < 0 ? n : (int)(at + (size_t)n);
}

void mln_halo_free(mln_halo_plan_t **plan)
{
    mln_halo_plan_t *p = plan != NULL ? *plan : NULL;
    const mln_halo_ops_t *ops = p != NULL ? mln_halo_ops(p->mode) : NULL;

    if (p == NULL)
        return;
    if (ops != NULL && p->comm != MPI_COMM_NULL)
        ops->teardown(p);
    if (p->comm != MPI_COMM_NULL)
        MPI_Comm_free(&p->comm);
    if (p->type != MPI_DATATYPE_NULL)
        MPI_Type_free(&p->type);
    free(p->nbrs);
    free(p->peer);
    free(p->send_count);
    free(p->recv_count);
    free(p->reqs);
    free(p);
    *plan = NULL;
}

/* ---- modes disabled on this MPI (H5) -------------------------------------------------- */

/*
 * Modes that gave wrong data or hung on an MPI in tests/c/mpi_halo.c, by a string of
 * MPI_Get_library_version; docs/HALO.md ("Status per MPI") has the evidence and the
 * reproducers.  MLN_HALO_DISABLE=none turns the list off (to re-test a new release).
 */
static const struct {
    const char *library; /* found in MPI_Get_library_version's text */
    mln_halo_mode_t mode;
    const char *why;
} builtin_disabled[] = {
    {"MPICH", MLN_HALO_RMA_FENCE,
     "MPICH 5.0 across hosts (OFI/tcp): a fence leaves small puts incomplete at the target, "
     "docs/bugs/mpich-fence-put.c"},
    {"MPICH", MLN_HALO_RMA_SINGLE,
     "MPICH 5.0 across hosts (OFI/tcp): a fence leaves small puts incomplete at the target, "
     "docs/bugs/mpich-fence-put.c"},
    {NULL, MLN_HALO_AUTO, NULL}, /* the end */
};

/* The modes MLN_HALO_DISABLE names ("builtin", "none" or mode names, comma-separated), as a
 * bit mask; MLN_ERR_CONFIG for a word that is none of these. */
static mln_status_t disabled_modes(const char *spec, unsigned *mask)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "", word[32];
    int len = 0;
    const char *at = spec;

    *mask = 0;
    while (*at != '\0') {
        size_t w = strcspn(at, ",");
        mln_halo_mode_t m;
        if (w >= sizeof(word))
            w = sizeof(word) - 1;
        memcpy(word, at, w);
        word[w] = '\0';
        at += strcspn(at, ",");
        at += *at == ',';
        if (strcmp(word, "none") == 0)
            continue;
        if (strcmp(word, "builtin") == 0) {
            if (lib[0] == '\0')
                MPI_Get_library_version(lib, &len);
            for (size_t i = 0; builtin_disabled[i].library != NULL; i++)
                if (strstr(lib, builtin_disabled[i].library) != NULL)
                    *mask |= 1u << builtin_disabled[i].mode;
            continue;
        }
        if (mln_halo_mode_parse(word, &m) != MLN_OK || m == MLN_HALO_AUTO) {
            MLN_ERROR("MLN_HALO_DISABLE='%s': '%s' is not a mode (p2p, neighbor, rma-fence, "
                      "rma-pscw, rma-passive, rma-single), 'builtin' or 'none'",
                      spec, word);
            return MLN_ERR_CONFIG;
        }
        *mask |= 1u << m;
    }
    return MLN_OK;
}

/* Why `mode` is disabled here, for messages. */
static const char *disabled_why(mln_halo_mode_t mode)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;

    MPI_Get_library_version(lib, &len);
    for (size_t i = 0; builtin_disabled[i].library != NULL; i++)
        if (builtin_disabled[i].mode == mode && strstr(lib, builtin_disabled[i].library) != NULL)
            return builtin_disabled[i].why;
    return "named in MLN_HALO_DISABLE";
}

mln_status_t mln_halo_disabled(mln_halo_mode_t mode, int *disabled, const char **why)
{
    mln_context_t *ctx = mln_context();
    unsigned mask = 0;
    mln_status_t st;

    if (ctx == NULL)
        return MLN_ERR_NOT_INIT;
    if (mln_halo_mode_name(mode) == NULL || disabled == NULL)
        return MLN_ERR_ARG;
    if ((st = disabled_modes(ctx->cfg.halo_disable, &mask)) != MLN_OK)
        return st;
    *disabled = mode != MLN_HALO_AUTO && (mask & (1u << mode)) != 0;
    if (why != NULL)
        *why = *disabled ? disabled_why(mode) : NULL;
    return MLN_OK;
}

/* ---- creation --------------------------------------------------------------------------- */

/* The arguments every rank can check alone (each rank then agrees with the others). */
static int args_bad(MPI_Comm comm, int nnbrs, const int *nbrs, const int64_t *send_counts,
                    const int64_t *recv_counts, MPI_Datatype type, mln_halo_mode_t mode)
{
    int size = 0, inter = 0;

    if (comm == MPI_COMM_NULL || type == MPI_DATATYPE_NULL || nnbrs < 0 ||
        mln_halo_mode_name(mode) == NULL || (nnbrs > 0 && (!nbrs || !send_counts || !recv_counts)))
        return 1;
    MPI_Comm_test_inter(comm, &inter);
    if (inter)
        return 1;
    MPI_Comm_size(comm, &size);
    for (int k = 0; k < nnbrs; k++)
        if ((nbrs[k] != MPI_PROC_NULL && (nbrs[k] < 0 || nbrs[k] >= size)) || send_counts[k] < 0 ||
            recv_counts[k] < 0 || send_counts[k] > INT_MAX || recv_counts[k] > INT_MAX)
            return 1;
    return 0;
}

/* MLN_HALO_FAULT, a test hook: "" (none), "setup:RANK[:MODE]" or "exchange:RANK:I" into the
 * plan; MLN_ERR_CONFIG for anything else. */
static mln_status_t fault_parse(const char *spec, mln_halo_plan_t *p)
{
    char name[32] = "";
    long long iter = -1;
    int used = 0, named = 0;

    p->fault_rank = -1;
    p->fault_mode = MLN_HALO_AUTO;
    p->fault_iter = -1;
    if (spec[0] == '\0')
        return MLN_OK;
    if (sscanf(spec, "exchange:%d:%lld%n", &p->fault_rank, &iter, &used) == 2 &&
        spec[used] == '\0' && iter >= 0) {
        p->fault_iter = iter;
        return MLN_OK;
    }
    if (sscanf(spec, "setup:%d%n", &p->fault_rank, &used) == 1 &&
        (spec[used] == '\0' ||
         (sscanf(spec + used, ":%31[a-z0-9-]%n", name, &named) == 1 && spec[used + named] == '\0' &&
          mln_halo_mode_parse(name, &p->fault_mode) == MLN_OK && p->fault_mode != MLN_HALO_AUTO)))
        return MLN_OK;
    MLN_ERROR("MLN_HALO_FAULT='%s': expected setup:RANK, setup:RANK:MODE or exchange:RANK:I "
              "(a test hook)",
              spec);
    p->fault_rank = -1;
    return MLN_ERR_CONFIG;
}

/* A plan with room for n entries (NULL if memory is short). */
static mln_halo_plan_t *plan_new(int n)
{
    mln_halo_plan_t *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->comm = MPI_COMM_NULL;
    p->graph = MPI_COMM_NULL;
    p->type = MPI_DATATYPE_NULL;
    p->group = MPI_GROUP_NULL;
    p->mode = MLN_HALO_AUTO;
    p->fault_rank = -1;
    p->fault_iter = -1;
    p->nnbrs = n;
    p->nbrs = calloc((size_t)n + 1, sizeof(int));
    p->peer = calloc((size_t)n + 1, sizeof(int));
    p->send_count = calloc((size_t)n + 1, sizeof(int));
    p->recv_count = calloc((size_t)n + 1, sizeof(int));
    p->reqs = calloc((size_t)2 * n + 1, sizeof(MPI_Request));
    if (!p->nbrs || !p->peer || !p->send_count || !p->recv_count || !p->reqs)
        mln_halo_free(&p);
    return p;
}

/* Sets up `mode` on the plan (collective); the plan runs it from iteration 0. */
static mln_status_t mode_start(mln_halo_plan_t *p, mln_halo_mode_t mode)
{
    mln_status_t st;

    p->fail_setup = p->fault_iter < 0 && p->rank == p->fault_rank &&
                    (p->fault_mode == MLN_HALO_AUTO || p->fault_mode == mode);
    if (p->fail_setup)
        MLN_WARN("MLN_HALO_FAULT: the set-up of %s fails on this rank (a test hook)",
                 mode_names[mode]);
    st = mln_halo_ops(mode)->setup(p);

    if (st == MLN_OK) {
        p->mode = mode;
        p->iter = 0;
        p->failed = MLN_OK;
    }
    return st;
}

static void mode_stop(mln_halo_plan_t *p)
{
    mln_halo_ops(p->mode)->teardown(p);
    p->mode = MLN_HALO_AUTO;
}

/* One exchange in the plan's mode, without mln_halo_exchange's argument checks (auto's trial
 * passes buffers of its own). */
static mln_status_t exchange_once(mln_halo_plan_t *p, const void *const *sendbufs,
                                  void *const *recvbufs)
{
    mln_status_t st = mln_halo_ops(p->mode)->exchange(p, sendbufs, recvbufs);

    p->iter += st == MLN_OK;
    return st;
}

/* auto's trial payload: byte j of entry k of rank r in iteration it */
static unsigned char trial_byte(int r, int64_t it, int k, size_t j)
{
    return (unsigned char)((unsigned)r * 151u + (unsigned)it * 37u + (unsigned)k * 17u +
                           (unsigned)j * 7u + 1u);
}

/* auto's trial: TRIAL_ROUNDS rounds over the candidate modes in turn (one timed sample of each
 * per round), so that a slow or fast spell of the machine falls on every mode alike rather than
 * on whichever mode was being timed then; the first round also checks the bytes. */
enum { TRIAL_CHECKED = 4, TRIAL_ROUNDS = 5, TRIAL_WARM = 2 };

/*
 * One sample of mode m: the mode set up; then in round 0 TRIAL_CHECKED iterations with every
 * byte checked on every rank (a mode with one wrong byte anywhere is WRONG, *s untouched), in
 * later rounds TRIAL_WARM untimed ones; then `iters` iterations timed from a barrier, max over
 * ranks, into *s; the mode torn down.
 */
static mln_status_t trial(mln_halo_plan_t *p, mln_halo_mode_t m, unsigned char **sb,
                          unsigned char **rb, int64_t iters, int round, double *s)
{
    int wrong = 0, any_wrong = 0;
    double t0, mine, all = 0.0;
    mln_status_t st;

    MLN_CHECK(mode_start(p, m), st, out);
    for (int64_t it = 0; it < (round == 0 ? TRIAL_CHECKED : TRIAL_WARM); it++) {
        for (int k = 0; k < p->nnbrs && round == 0; k++) {
            if (p->nbrs[k] == MPI_PROC_NULL)
                continue;
            for (size_t j = 0; j < (size_t)p->send_count[k] * (size_t)p->esize; j++)
                sb[k][j] = trial_byte(p->rank, it, k, j);
            for (size_t j = 0; j < (size_t)p->recv_count[k] * (size_t)p->esize; j++)
                rb[k][j] = (unsigned char)~trial_byte(p->nbrs[k], it, p->peer[k], j);
        }
        MLN_CHECK(exchange_once(p, (const void *const *)sb, (void *const *)rb), st, stop);
        for (int k = 0; k < p->nnbrs && round == 0 && !wrong; k++)
            for (size_t j = 0; p->nbrs[k] != MPI_PROC_NULL &&
                               j < (size_t)p->recv_count[k] * (size_t)p->esize && !wrong;
                 j++)
                wrong = rb[k][j] != trial_byte(p->nbrs[k], it, p->peer[k], j);
    }
    MLN_MPI_CHECK(MPI_Allreduce(&wrong, &any_wrong, 1, MPI_INT, MPI_MAX, p->comm), st, stop);
    if (any_wrong) {
        p->state[m] = MLN_HALO_WRONG;
        if (p->rank == 0)
            MLN_WARN("mln_halo_create (auto): %s delivered wrong data; not used (docs/HALO.md)",
                     mode_names[m]);
        goto stop;
    }
    MLN_MPI_CHECK(MPI_Barrier(p->comm), st, stop);
    t0 = MPI_Wtime();
    for (int64_t i = 0; i < iters; i++)
        MLN_CHECK(exchange_once(p, (const void *const *)sb, (void *const *)rb), st, stop);
    mine = (MPI_Wtime() - t0) / (double)iters;
    MLN_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, p->comm), st, stop);
    p->state[m] = MLN_HALO_TIMED;
    *s = all;
stop:
    mode_stop(p);
out:
    return st;
}

/* The median of n samples (n <= TRIAL_ROUNDS; sorts them). */
static double median(double *t, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[n / 2];
}

/* auto: every candidate tried, the fastest correct one kept (the same choice on every rank:
 * the times are maxima over ranks). */
static mln_status_t choose(mln_halo_plan_t *p, unsigned disabled)
{
    unsigned char **sb = calloc((size_t)p->nnbrs + 1, sizeof(*sb));
    unsigned char **rb = calloc((size_t)p->nnbrs + 1, sizeof(*rb));
    double samples[MLN_HALO_NMODES][TRIAL_ROUNDS] = {{0.0}};
    mln_halo_mode_t best = MLN_HALO_AUTO;
    int nomem = sb == NULL || rb == NULL;
    mln_status_t st = MLN_OK;
    char line[512];

    for (int k = 0; k < p->nnbrs && !nomem; k++) {
        sb[k] = malloc((size_t)p->send_count[k] * (size_t)p->esize + 1);
        rb[k] = malloc((size_t)p->recv_count[k] * (size_t)p->esize + 1);
        nomem = sb[k] == NULL || rb[k] == NULL;
    }
    if (nomem)
        MLN_ERROR("mln_halo_create (auto): out of memory for the trial buffers");
    MLN_CHECK(mln_halo_agree(p->comm, nomem ? MLN_ERR_NOMEM : MLN_OK), st, out);
    for (int m = MLN_HALO_P2P; m < MLN_HALO_NMODES; m++)
        if (disabled & (1u << m))
            p->state[m] = MLN_HALO_DISABLED;
        else if (!p->contiguous)
            /* the trial checks bytes, so it needs them contiguous: p2p without a trial */
            p->state[m] = m == MLN_HALO_P2P ? MLN_HALO_UNTRIED : MLN_HALO_UNUSABLE;
    for (int r = 0; r < TRIAL_ROUNDS && p->contiguous; r++)
        for (int m = MLN_HALO_P2P; m < MLN_HALO_NMODES; m++)
            if (p->state[m] == (r == 0 ? MLN_HALO_UNTRIED : MLN_HALO_TIMED))
                MLN_CHECK(trial(p, (mln_halo_mode_t)m, sb, rb, p->iters_auto, r, &samples[m][r]),
                          st, out);
    for (int m = MLN_HALO_P2P; m < MLN_HALO_NMODES; m++) {
        if (p->state[m] != MLN_HALO_TIMED)
            continue;
        p->seconds[m] = median(samples[m], TRIAL_ROUNDS);
        if (best == MLN_HALO_AUTO || p->seconds[m] < p->seconds[best])
            best = (mln_halo_mode_t)m;
    }
    if (best == MLN_HALO_AUTO && !p->contiguous && !(disabled & (1u << MLN_HALO_P2P)))
        best = MLN_HALO_P2P;
    if (best == MLN_HALO_AUTO) {
        MLN_ERROR("mln_halo_create (auto): no usable mode (every one disabled or wrong)");
        st = MLN_ERR_UNSUPPORTED;
        goto out;
    }
    MLN_CHECK(mode_start(p, best), st, out);
    mln_halo_describe(p, line, sizeof(line));
    if (p->rank == 0)
        MLN_INFO("mln_halo_create: %s", line);
out:
    for (int k = 0; k < p->nnbrs && sb != NULL && rb != NULL; k++) {
        free(sb[k]);
        free(rb[k]);
    }
    free(sb);
    free(rb);
    return st;
}

/* Local reasons to refuse, in the order of their codes (the highest wins everywhere). */
enum { OK_HERE, BAD_ARGS, NO_MEMORY, BAD_CONFIG, MODE_DISABLED, MODE_UNUSABLE, MPI_FAILED };

mln_status_t mln_halo_create(MPI_Comm comm, int nnbrs, const int *nbrs, const int *peer_index,
                             const int64_t *send_counts, const int64_t *recv_counts,
                             MPI_Datatype type, mln_halo_mode_t mode, mln_halo_plan_t **plan)
{
    static const mln_status_t code_status[] = {
        MLN_OK,         MLN_ERR_ARG,         MLN_ERR_NOMEM,
        MLN_ERR_CONFIG, MLN_ERR_UNSUPPORTED, MLN_ERR_UNSUPPORTED,
        MLN_ERR_MPI};
    mln_context_t *ctx = mln_context();
    mln_halo_plan_t *p = NULL;
    const char *why = "asked for";
    unsigned disabled = 0;
    int code = OK_HERE, any = 0, esize = 0, contiguous = 0;
    MPI_Count offset = 0;
    mln_status_t st = MLN_OK;

    if (plan == NULL || comm == MPI_COMM_NULL) { /* nobody to agree with */
        MLN_ERROR("mln_halo_create: %s is NULL", plan == NULL ? "plan" : "the communicator");
        return MLN_ERR_ARG;
    }
    if (ctx == NULL) {
        MLN_ERROR("mln_halo_create before mln_init");
        return MLN_ERR_NOT_INIT;
    }
    if (mode == MLN_HALO_AUTO && ctx->cfg.halo_mode != MLN_HALO_AUTO) {
        mode = (mln_halo_mode_t)ctx->cfg.halo_mode;
        why = "MLN_HALO_MODE";
    }
    if (args_bad(comm, nnbrs, nbrs, send_counts, recv_counts, type, mode))
        code = BAD_ARGS;
    else if (disabled_modes(ctx->cfg.halo_disable, &disabled) != MLN_OK)
        code = BAD_CONFIG;
    else if (mode != MLN_HALO_AUTO && (disabled & (1u << mode)))
        code = MODE_DISABLED;
    else if (MPI_Type_size(type, &esize) != MPI_SUCCESS)
        code = MODE_UNUSABLE;
    else if (!(contiguous = mln_type_contiguous(type, 2, &offset) && offset == 0) &&
             mln_halo_is_rma(mode))
        code = MODE_UNUSABLE;
    else if ((p = plan_new(nnbrs)) == NULL)
        code = NO_MEMORY;
    else if (MPI_Comm_rank(comm, &p->rank) != MPI_SUCCESS ||
             fault_parse(ctx->cfg.halo_fault, p) != MLN_OK)
        code = BAD_CONFIG;
    else if (MPI_Type_dup(type, &p->type) != MPI_SUCCESS)
        code = MPI_FAILED;
    /* every rank learns the outcome before any other collective call */
    MLN_MPI_CHECK(MPI_Allreduce(&code, &any, 1, MPI_INT, MPI_MAX, comm), st, out);
    if (any != OK_HERE) {
        if (code == MODE_DISABLED)
            MLN_ERROR("mln_halo_create: mode %s is disabled on this MPI (%s); docs/HALO.md",
                      mode_names[mode], disabled_why(mode));
        else if (code == MODE_UNUSABLE)
            MLN_ERROR("mln_halo_create: mode %s needs a contiguous datatype", mode_names[mode]);
        else if (code == NO_MEMORY)
            MLN_ERROR("mln_halo_create: out of memory for %d neighbours", nnbrs);
        else if (code == MPI_FAILED)
            MLN_ERROR("mln_halo_create: MPI_Type_dup failed");
        else if (code == BAD_ARGS || code == OK_HERE)
            MLN_ERROR("mln_halo_create: invalid arguments on %s (neighbours, counts, type, "
                      "mode or an intercommunicator)",
                      code == BAD_ARGS ? "this rank" : "another rank");
        st = code_status[any];
        goto out;
    }
    p->why = mode == MLN_HALO_AUTO ? "auto" : why;
    p->esize = esize;
    p->contiguous = contiguous;
    p->iters_auto = ctx->cfg.halo_auto_iters;
    for (int k = 0; k < nnbrs; k++) {
        p->nbrs[k] = nbrs[k];
        p->send_count[k] = (int)send_counts[k];
        p->recv_count[k] = (int)recv_counts[k];
    }
    /* a copy without the caller's topology: Open MPI 5.0 fails neighbour collectives on a
     * graph made from a Cartesian communicator (docs/bugs/ompi-graph-from-cart.c) */
    MLN_MPI_CHECK(MPI_Comm_split(comm, 0, p->rank, &p->comm), st, out);
    /* errors come back as statuses (the windows and the graph inherit it or set their own) */
    MLN_MPI_CHECK(MPI_Comm_set_errhandler(p->comm, MPI_ERRORS_RETURN), st, split);
split: /* a local step: agreed before the pairing's exchange (halo_modes.c has the rule) */
    MLN_CHECK(mln_halo_agree(p->comm, st), st, out);
    MLN_CHECK(mln_halo_pair(p, peer_index), st, out);
    if (mode == MLN_HALO_AUTO)
        MLN_CHECK(choose(p, disabled), st, out);
    else
        MLN_CHECK(mode_start(p, mode), st, out);
    *plan = p;
    return MLN_OK;
out:
    mln_halo_free(&p);
    return st;
}

mln_status_t mln_halo_create_cart(MPI_Comm cart, int radius, int64_t count, MPI_Datatype type,
                                  mln_halo_mode_t mode, mln_halo_plan_t **plan)
{
    int topo = MPI_UNDEFINED, ndims = 0, n = 0, *nbrs = NULL, *peer = NULL;
    int64_t *counts = NULL;
    mln_status_t st;

    if (plan == NULL || cart == MPI_COMM_NULL) {
        MLN_ERROR("mln_halo_create_cart: %s is NULL", plan == NULL ? "plan" : "the communicator");
        return MLN_ERR_ARG;
    }
    if (MPI_Topo_test(cart, &topo) != MPI_SUCCESS || topo != MPI_CART)
        MLN_ERROR("mln_halo_create_cart: the communicator has no Cartesian topology");
    else if (radius < 1 || count < 0)
        MLN_ERROR("mln_halo_create_cart: radius %d and count %lld (radius >= 1, count >= 0)",
                  radius, (long long)count);
    else if (MPI_Cartdim_get(cart, &ndims) == MPI_SUCCESS && ndims <= INT_MAX / 2 / radius)
        n = 2 * ndims * radius;
    nbrs = calloc((size_t)n + 1, sizeof(int));
    peer = calloc((size_t)n + 1, sizeof(int));
    counts = calloc((size_t)n + 1, sizeof(int64_t));
    if (!nbrs || !peer || !counts)
        n = -1; /* refused on every rank by mln_halo_create's agreement */
    for (int d = 0; d < ndims && n > 0; d++)
        for (int h = 1; h <= radius; h++) {
            int e = 2 * (d * radius + h - 1);
            MPI_Cart_shift(cart, d, h, &nbrs[e], &nbrs[e + 1]); /* h down, h up */
            peer[e] = e + 1; /* my down side meets the up side of the rank below */
            peer[e + 1] = e;
            counts[e] = counts[e + 1] = count;
        }
    if (n == 0 && !(topo == MPI_CART && radius >= 1 && count >= 0 && ndims == 0))
        n = -1;
    st = mln_halo_create(cart, n, nbrs, peer, counts, counts, type, mode, plan);
    free(nbrs);
    free(peer);
    free(counts);
    return st;
}

/* Bytes of entry k's buffer that the alias check compares: all of them for a contiguous type;
 * else 1 for a non-empty buffer, so that only equal addresses meet (a strided type's buffers
 * may interleave in one array, a column sent and the next one received, and share no byte:
 * telling that apart needs the type map). */
static uintptr_t alias_span(const mln_halo_plan_t *p, int count)
{
    return p->contiguous ? (uintptr_t)count * (uintptr_t)p->esize : (uintptr_t)(count > 0);
}

static int spans_meet(const void *a, uintptr_t na, const void *b, uintptr_t nb)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

/*
 * A receive buffer that shares memory with a send buffer or another receive buffer: erroneous
 * in p2p and neighbor (MPI receives into memory that a pending send reads or another receive
 * writes), harmless in the RMA modes (they copy out after the puts are done).  Refused in every
 * mode, so that a program's outcome does not depend on the mode (auto's trial, with buffers of
 * its own, cannot see it).  Before any communication: the plan stays as it was.
 */
static int buffers_alias(const mln_halo_plan_t *p, const void *const *sendbufs,
                         void *const *recvbufs)
{
    for (int k = 0; k < p->nnbrs; k++) {
        const uintptr_t nk = p->nbrs[k] == MPI_PROC_NULL ? 0 : alias_span(p, p->recv_count[k]);
        for (int j = 0; j < p->nnbrs && nk > 0; j++) {
            const char *with = NULL;
            if (p->nbrs[j] == MPI_PROC_NULL)
                continue;
            if (spans_meet(recvbufs[k], nk, sendbufs[j], alias_span(p, p->send_count[j])))
                with = "sendbufs";
            else if (j < k &&
                     spans_meet(recvbufs[k], nk, recvbufs[j], alias_span(p, p->recv_count[j])))
                with = "recvbufs";
            if (with != NULL) {
                MLN_ERROR("mln_halo_exchange: recvbufs[%d] shares memory with %s[%d] (erroneous "
                          "in p2p and neighbor: refused in every mode)",
                          k, with, j);
                return 1;
            }
        }
    }
    return 0;
}

/*
 * A failed exchange cannot be undone: it may have failed on this rank only, after its
 * neighbours (or some of them) completed theirs, so the ranks no longer agree on the iteration
 * (its parity picks the RMA modes' half) nor on what is in flight.  So the plan refuses every
 * later exchange with MLN_ERR_STATE, at once and without communicating, and can only be freed.
 * Argument errors are found before anything moves and leave the plan as it was.
 */
mln_status_t mln_halo_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                               void *const *recvbufs)
{
    int64_t it;
    mln_status_t st;

    if (p == NULL || (p->nnbrs > 0 && (sendbufs == NULL || recvbufs == NULL))) {
        MLN_ERROR("mln_halo_exchange: %s is NULL", p == NULL ? "the plan" : "a buffer list");
        return MLN_ERR_ARG;
    }
    if (p->failed != MLN_OK) {
        MLN_ERROR("mln_halo_exchange: exchange %lld of this plan failed (%s), so the ranks may be "
                  "at different iterations: the plan takes no more (free it, on every rank)",
                  (long long)p->failed_iter, mln_status_str(p->failed));
        return MLN_ERR_STATE;
    }
    if (buffers_alias(p, sendbufs, recvbufs))
        return MLN_ERR_ARG;
    it = p->iter;
    st = exchange_once(p, sendbufs, recvbufs);
    if (st == MLN_OK && p->rank == p->fault_rank && it == p->fault_iter) {
        MLN_WARN("MLN_HALO_FAULT: exchange %lld fails on this rank after its data moved (a test "
                 "hook)",
                 (long long)it);
        st = MLN_ERR_MPI;
    }
    if (st != MLN_OK) {
        p->failed = st;
        p->failed_iter = it;
    }
    return st;
}
