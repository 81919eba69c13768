/*
 * stripe_api.c - the public calls of striped point-to-point (multilane.h) and the engine's
 * life cycle; the protocol and the progress engine are in stripe.c.
 */
#include "stripe_hooks.h"
#include "stripe_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static mln_stripe_t *mln_the_stripe;

mln_stripe_t *mln_stripe_engine(void)
{
    return mln_the_stripe;
}

/* ---- the API ----------------------------------------------------------------------------- */

static void status_fill(const mln_req_t *r, MPI_Status *status)
{
    if (status == MPI_STATUS_IGNORE)
        return;
    status->MPI_ERROR = r->result == MLN_OK             ? MPI_SUCCESS
                        : r->result == MLN_ERR_TRUNCATE ? MPI_ERR_TRUNCATE
                                                        : MPI_ERR_OTHER;
    if (r->is_send) /* MPI defines only the error of a send's status */
        return;
    status->MPI_SOURCE = r->st_source;
    status->MPI_TAG = r->st_tag;
    MPI_Status_set_elements_x(status, MPI_BYTE, (MPI_Count)r->st_bytes);
    MPI_Status_set_cancelled(status, r->cancelled);
}

/* Completes a DONE request: unpack, status, free. */
static mln_status_t req_complete(mln_stripe_t *s, mln_req_t **request, MPI_Status *status)
{
    mln_req_t *r = *request;
    mln_status_t st = r->result;

    if (!r->is_send && r->packed && (st == MLN_OK || st == MLN_ERR_TRUNCATE) &&
        mln_stripe_req_unpack(r) != MLN_OK)
        st = MLN_ERR_MPI;
    status_fill(r, status);
    mln_stripe_req_free(s, r);
    *request = MLN_REQUEST_NULL;
    return st;
}

/* A request that outlived its engine (mln_finalize came first; a new mln_init does not adopt
 * it): freed, with MLN_ERR_NOT_INIT while no engine runs, MLN_ERR_STATE otherwise. */
static mln_status_t req_orphan(const mln_stripe_t *s, mln_req_t **request, MPI_Status *status)
{
    mln_req_t *r = *request;

    MLN_ERROR("mln_stripe: a request of a library instance already finalized");
    r->result = s == NULL ? MLN_ERR_NOT_INIT : MLN_ERR_STATE;
    return req_complete(NULL, request, status);
}

static int is_orphan(const mln_stripe_t *s, const mln_req_t *r)
{
    return s == NULL || r->owner != s;
}

mln_status_t mln_stripe_isend_mode(const void *buf, int64_t count, MPI_Datatype datatype, int dest,
                                   int tag, MPI_Comm comm, int sync, mln_request_t *request)
{
    mln_stripe_t *s = mln_the_stripe;
    mln_req_t *r = NULL;
    mln_status_t st;

    if (request == NULL) {
        MLN_ERROR("mln_stripe_isend: request is NULL");
        return MLN_ERR_ARG;
    }
    mln_stripe_lock(s);
    st = mln_stripe_req_new(s, buf, count, datatype, dest, tag, comm, 1, &r);
    if (st != MLN_OK)
        goto out;
    r->sync = sync;
    st = mln_stripe_send_start(s, r);
    if (st != MLN_OK) {
        if (r->state != MLN_REQ_DONE && (r->prev || r->next || s->active == r))
            mln_stripe_active_del(s, r);
        mln_stripe_req_free(s, r);
        goto out;
    }
    *request = r;
    mln_stripe_progress(s, 0);
out:
    mln_stripe_unlock(s);
    return st;
}

mln_status_t mln_stripe_isend(const void *buf, int64_t count, MPI_Datatype datatype, int dest,
                              int tag, MPI_Comm comm, mln_request_t *request)
{
    return mln_stripe_isend_mode(buf, count, datatype, dest, tag, comm, 0, request);
}

mln_status_t mln_stripe_irecv(void *buf, int64_t count, MPI_Datatype datatype, int source, int tag,
                              MPI_Comm comm, mln_request_t *request)
{
    mln_stripe_t *s = mln_the_stripe;
    mln_req_t *r = NULL;
    mln_status_t st;

    if (request == NULL) {
        MLN_ERROR("mln_stripe_irecv: request is NULL");
        return MLN_ERR_ARG;
    }
    mln_stripe_lock(s);
    st = mln_stripe_req_new(s, buf, count, datatype, source, tag, comm, 0, &r);
    if (st != MLN_OK)
        goto out;
    st = mln_stripe_recv_start(s, r);
    if (st != MLN_OK) {
        mln_stripe_req_free(s, r);
        goto out;
    }
    *request = r;
out:
    mln_stripe_unlock(s);
    return st;
}

mln_status_t mln_stripe_wait(mln_request_t *request, MPI_Status *status)
{
    mln_stripe_t *s = mln_the_stripe;
    mln_status_t st;

    if (request == NULL)
        return MLN_ERR_ARG;
    if (*request == MLN_REQUEST_NULL)
        return MLN_OK;
    if (is_orphan(s, *request))
        return req_orphan(s, request, status);
    mln_stripe_lock(s);
    mln_stripe_progress_until(s, request, 1);
    st = req_complete(s, request, status);
    mln_stripe_unlock(s);
    return st;
}

mln_status_t mln_stripe_test(mln_request_t *request, int *done, MPI_Status *status)
{
    mln_stripe_t *s = mln_the_stripe;
    mln_status_t st = MLN_OK;

    if (request == NULL || done == NULL)
        return MLN_ERR_ARG;
    *done = 0;
    if (*request == MLN_REQUEST_NULL) {
        *done = 1;
        return MLN_OK;
    }
    if (is_orphan(s, *request)) {
        *done = 1;
        return req_orphan(s, request, status);
    }
    mln_stripe_lock(s);
    if ((*request)->state != MLN_REQ_DONE)
        mln_stripe_progress(s, 0);
    if ((*request)->state == MLN_REQ_DONE) {
        *done = 1;
        st = req_complete(s, request, status);
    }
    mln_stripe_unlock(s);
    return st;
}

mln_status_t mln_stripe_waitall(int count, mln_request_t requests[], MPI_Status *statuses)
{
    mln_stripe_t *s = mln_the_stripe;
    mln_status_t first = MLN_OK, st;

    if (count < 0 || (count > 0 && requests == NULL))
        return MLN_ERR_ARG;
    if (count == 0)
        return MLN_OK;
    for (int i = 0; i < count; i++) /* requests of a finalized instance: done at once */
        if (requests[i] != MLN_REQUEST_NULL && is_orphan(s, requests[i])) {
            st = req_orphan(s, &requests[i],
                            statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i]);
            first = first == MLN_OK ? st : first;
        }
    if (s == NULL)
        return first;
    mln_stripe_lock(s);
    mln_stripe_progress_until(s, requests, count);
    for (int i = 0; i < count; i++) {
        if (requests[i] == MLN_REQUEST_NULL)
            continue;
        st = req_complete(s, &requests[i],
                          statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i]);
        if (st != MLN_OK && first == MLN_OK)
            first = st;
    }
    mln_stripe_unlock(s);
    return first;
}

mln_status_t mln_stripe_send(const void *buf, int64_t count, MPI_Datatype datatype, int dest,
                             int tag, MPI_Comm comm)
{
    mln_request_t req = MLN_REQUEST_NULL;
    mln_status_t st = mln_stripe_isend(buf, count, datatype, dest, tag, comm, &req);

    return st != MLN_OK ? st : mln_stripe_wait(&req, MPI_STATUS_IGNORE);
}

mln_status_t mln_stripe_recv(void *buf, int64_t count, MPI_Datatype datatype, int source, int tag,
                             MPI_Comm comm, MPI_Status *status)
{
    mln_request_t req = MLN_REQUEST_NULL;
    mln_status_t st = mln_stripe_irecv(buf, count, datatype, source, tag, comm, &req);

    return st != MLN_OK ? st : mln_stripe_wait(&req, status);
}

const char *mln_stripe_backend_name(void)
{
    static const char *const names[] = {"tcp", "helper", "mpi"};
    mln_stripe_t *s = mln_the_stripe;

    return s ? names[s->backend] : "none";
}

int mln_stripe_lanes(void)
{
    mln_stripe_t *s = mln_the_stripe;

    if (s == NULL)
        return 0;
    return s->backend == MLN_STRIPE_HELPER ? 2 * (int)s->cfg->stripe_helpers + 1
                                           : (int)s->cfg->stripe_lanes;
}

int mln_stripe_lanes_used(int peer_world)
{
    mln_stripe_t *s = mln_the_stripe;

    if (s == NULL || peer_world < 0 || peer_world >= s->wsize)
        return 0;
    if (s->backend == MLN_STRIPE_TCP && !s->tcp_failed[peer_world])
        return mln_tcp_lanes_active(s, peer_world);
    return mln_stripe_lanes() > 0 ? mln_stripe_lanes() : mln_stripe_lanes_fixed(s);
}

MPI_Comm mln_comm_world(void)
{
    return mln_the_stripe ? mln_the_stripe->app : MPI_COMM_NULL;
}

/* ---- life cycle -------------------------------------------------------------------------- */

/* Every rank must agree on the backend and the helper count. */
static mln_status_t check_agreement(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    int mine[2] = {s->backend, (int)s->cfg->stripe_helpers}, lo[2], hi[2];

    MLN_MPI_CHECK(MPI_Allreduce(mine, lo, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD), st, out);
    MLN_MPI_CHECK(MPI_Allreduce(mine, hi, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD), st, out);
    if (lo[0] != hi[0] || (s->backend == MLN_STRIPE_HELPER && lo[1] != hi[1])) {
        MLN_ERROR("MLN_STRIPE_BACKEND and MLN_STRIPE_HELPERS must be the same on every rank");
        st = MLN_ERR_CONFIG;
    }
out:
    return st;
}

/* ---- the progress thread (MLN_STRIPE_PROGRESS=thread) ----------------------------------------
 *
 * Moves striped data while the application computes between its calls: it takes the engine
 * lock, makes one non-blocking pass, lets go, and naps briefly when nothing moved (20 us with
 * requests active, 0.5 ms without).  It calls MPI (MPI_Test on the library's requests), hence
 * MPI_THREAD_MULTIPLE. */
static void *progress_thread(void *arg)
{
    mln_stripe_t *s = arg;

    for (;;) {
        int moved = 0, busy, stop;
        pthread_mutex_lock(&s->lock);
        stop = s->thread_stop;
        busy = s->active != NULL;
        if (!stop && busy)
            moved = mln_stripe_progress(s, 0);
        pthread_mutex_unlock(&s->lock);
        if (stop)
            return NULL;
        if (!moved) {
            struct timespec ts = {0, busy ? 20000L : 500000L};
            nanosleep(&ts, NULL);
        }
    }
}

static void progress_thread_start(mln_stripe_t *s)
{
    if (pthread_mutex_init(&s->lock, NULL) != 0)
        return;
    s->thread_on = 1;
    if (pthread_create(&s->thread, NULL, progress_thread, s) != 0) {
        MLN_WARN("MLN_STRIPE_PROGRESS=thread: cannot start the thread: progress in calls only");
        s->thread_on = 0;
        pthread_mutex_destroy(&s->lock);
        return;
    }
    MLN_DEBUG("progress thread started");
}

static void progress_thread_stop(mln_stripe_t *s)
{
    if (!s->thread_on)
        return;
    pthread_mutex_lock(&s->lock);
    s->thread_stop = 1;
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->thread_on = 0;
    pthread_mutex_destroy(&s->lock);
}

/* MLN_STRIPE_PROGRESS=thread calls MPI from a second thread. */
static mln_status_t check_thread_level(const mln_stripe_t *s)
{
    int provided = MPI_THREAD_SINGLE;

    if (s->cfg->stripe_progress != 1)
        return MLN_OK;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        MLN_ERROR("MLN_STRIPE_PROGRESS=thread needs MPI_Init_thread with MPI_THREAD_MULTIPLE "
                  "(this process has level %d)",
                  provided);
        return MLN_ERR_CONFIG;
    }
    return MLN_OK;
}

/* The engine and its per-world-rank tables. */
static void free_rank_tables(mln_stripe_t *s)
{
    free(s->tcp_failed);
    free(s->host_of);
    free(s->site_of);
    free(s);
}

/*
 * With the helper backend the helper ranks call MPI_Finalize and exit at the application's
 * mln_finalize, yet stay in MPI_COMM_WORLD: a later mln_init, whose set-up is collective over
 * MPI_COMM_WORLD, would wait for them for ever.  This process-wide fact (like MPI's own
 * "finalized") makes that mln_init fail at once instead, on every application rank.
 */
static int helpers_gone;

/* Chunk and inline tags on the control comm: up to MPI_TAG_UB, or MLN_STRIPE_TAGS. */
static mln_status_t tags_setup(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    int *ub = NULL, flag = 0;

    MLN_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag), st, out);
    s->tag_ub = flag && ub ? *ub : 32767;
    s->inline_tags = s->tag_ub >= (1 << 20) ? (1 << 16) : 1024;
    s->data_tag_hi = s->tag_ub;
    if (s->cfg->stripe_tags > 0) { /* the test hook: a small space, reused soon */
        const int64_t n = s->cfg->stripe_tags;
        s->inline_tags = n / 8 > 0 ? (int)(n / 8) : 1;
        if (MLN_TAG_INLINE + s->inline_tags + n - 1 > (int64_t)s->tag_ub || n < 8) {
            MLN_ERROR("MLN_STRIPE_TAGS=%lld does not fit MPI_TAG_UB %d (or is below 8)",
                      (long long)n, s->tag_ub);
            return MLN_ERR_CONFIG;
        }
        s->data_tag_hi = MLN_TAG_INLINE + s->inline_tags + (int)n - 1;
    }
    s->data_tag_lo = s->data_tag_next = MLN_TAG_INLINE + s->inline_tags;
out:
    return st;
}

static int any_remote(const mln_stripe_t *s)
{
    for (int r = 0; r < s->wsize; r++)
        if (r != s->wrank && mln_stripe_peer_remote(s, r))
            return 1;
    return 0;
}

mln_status_t mln_stripe_init(mln_context_t *ctx, mln_stripe_t **out)
{
    mln_status_t st = MLN_OK;
    mln_stripe_t *s;

    if (helpers_gone) {
        MLN_ERROR("mln_init: the helper ranks of MLN_STRIPE_BACKEND=helper left at the first "
                  "mln_finalize (they called MPI_Finalize): the library cannot start again in "
                  "this job");
        return MLN_ERR_STATE;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return MLN_ERR_NOMEM;
    s->ctx = ctx;
    s->cfg = &ctx->cfg;
    s->backend = ctx->cfg.stripe_backend;
    s->wrank = ctx->world_rank;
    s->wsize = ctx->world_size;
    s->ctrl = s->app = MPI_COMM_NULL;
    s->ctl_req = MPI_REQUEST_NULL;
    s->next_msg_id = 1;
    MLN_CHECK(check_agreement(s), st, err_free);
    MLN_CHECK(check_thread_level(s), st, err_free);
    MLN_CHECK(mln_fault_parse(s->cfg->stripe_fault, mln_stripe_lanes_cap(s), &s->fault), st,
              err_free);
    MLN_CHECK(tags_setup(s), st, err_free);
    MLN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s->ctrl), st, err_free);
    s->tcp_failed = calloc((size_t)s->wsize, sizeof(int));
    if (s->tcp_failed == NULL) {
        st = MLN_ERR_NOMEM;
        goto err_free;
    }
    MLN_CHECK(mln_sitemap_build(s), st, err_free);
    s->lanes[MLN_LANE_MPI] = &mln_lane_mpi_ops;
    if (s->backend == MLN_STRIPE_TCP)
        s->lanes[MLN_LANE_TCP] = &mln_lane_tcp_ops;
    if (s->backend == MLN_STRIPE_HELPER)
        s->lanes[MLN_LANE_HELPER] = &mln_lane_helper_ops;
    for (int k = 0; k < MLN_LANE_KINDS; k++)
        if (s->lanes[k] && s->lanes[k]->open)
            MLN_CHECK(s->lanes[k]->open(s), st, err_lanes);
    if (s->backend != MLN_STRIPE_HELPER) /* helper_open split it off */
        MLN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s->app), st, err_lanes);
    /* Control messages pass only between remote peers; a rank with none posts no receive for
     * them: a pending MPI_ANY_SOURCE receive slows every other message of the process (MPICH's
     * ch4 then polls shared memory and network for it: +0.5 us per message between two
     * processes of a host, measured with NetPIPE). */
    if (!mln_helper_is_helper(s) && any_remote(s)) /* helpers: none (lane_helper.c) */
        MLN_MPI_CHECK(MPI_Irecv(&s->ctl_in, (int)sizeof(s->ctl_in), MPI_BYTE, MPI_ANY_SOURCE,
                                MLN_TAG_CTL, s->ctrl, &s->ctl_req),
                      st, err_lanes);
    mln_the_stripe = s;
    if (s->backend == MLN_STRIPE_HELPER)
        helpers_gone = 1; /* from the first mln_finalize on (mln_stripe_fini) */
    if (s->cfg->stripe_progress == 1 && !mln_helper_is_helper(s))
        progress_thread_start(s);
    MLN_DEBUG("striping: backend %s, %d lanes, threshold %llu, chunk %llu, tags %d..%d",
              mln_stripe_backend_name(), mln_stripe_lanes(),
              (unsigned long long)s->cfg->stripe_threshold,
              (unsigned long long)s->cfg->stripe_chunk, s->data_tag_lo, s->data_tag_hi);
    *out = s;
    return MLN_OK;

err_lanes:
    if (s->app != MPI_COMM_NULL)
        MPI_Comm_free(&s->app);
    for (int k = 0; k < MLN_LANE_KINDS; k++)
        if (s->lanes[k] && s->lanes[k]->close)
            s->lanes[k]->close(s);
err_free:
    if (s->ctrl != MPI_COMM_NULL)
        MPI_Comm_free(&s->ctrl);
    free_rank_tables(s);
    return st;
}

/* A request still active at mln_finalize: MPI lets go of its memory where it can (receives are
 * cancelled), and it stays for the user's wait, which returns MLN_ERR_NOT_INIT (or
 * MLN_ERR_STATE under a later mln_init): never a use after free. */
static void req_orphan_at_fini(mln_stripe_t *s, mln_req_t *r)
{
    for (int k = 0; k < MLN_LANE_KINDS; k++)
        if (s->lanes[k] && s->lanes[k]->req_free)
            s->lanes[k]->req_free(s, r);
    if (r->mreq != MPI_REQUEST_NULL && !r->is_send) {
        MPI_Cancel(&r->mreq);
        MPI_Wait(&r->mreq, MPI_STATUS_IGNORE);
    }
    if (r->mreq != MPI_REQUEST_NULL) /* a send: MPI finishes it on its own */
        MPI_Request_free(&r->mreq);
    if (r->mreq2 != MPI_REQUEST_NULL)
        MPI_Request_free(&r->mreq2);
    r->tags_held = 0;
    r->state = MLN_REQ_DONE;
    r->owner = NULL;
    mln_stripe_active_del(s, r);
}

void mln_stripe_fini(mln_stripe_t *s)
{
    if (s == NULL)
        return;
    progress_thread_stop(s);
    /* mln_finalize is collective: no rank closes its lanes while a peer may still read the end
     * of a message from them (a socket closed with data unread on it is reset, and what the
     * peer had not yet read is lost: a broadcast's last striped segment, seen under load).  A
     * barrier that moves the engine while it waits. */
    if (s->app != MPI_COMM_NULL && any_remote(s)) {
        MPI_Request all = MPI_REQUEST_NULL;
        int done = 0;
        if (MPI_Ibarrier(s->app, &all) == MPI_SUCCESS)
            while (MPI_Test(&all, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
                if (!mln_stripe_progress(s, 0))
                    sched_yield();
    }
    if (s->nactive > 0)
        MLN_WARN("mln_finalize: %d striped requests still active (never waited for)", s->nactive);
    while (s->active)
        req_orphan_at_fini(s, s->active);
    while (s->zombies) { /* the header or payload of a freed request: small, sent eagerly */
        mln_req_t *z = s->zombies;
        s->zombies = z->next;
        MPI_Wait(&z->mreq, MPI_STATUS_IGNORE);
        MPI_Wait(&z->mreq2, MPI_STATUS_IGNORE);
        free(z->pack);
        free(z);
    }
    mln_stripe_ctl_fini(s);
    mln_stripe_inline_fini(s);
    for (int k = 0; k < MLN_LANE_KINDS; k++)
        if (s->lanes[k] && s->lanes[k]->close)
            s->lanes[k]->close(s);
    if (s->app != MPI_COMM_NULL)
        MPI_Comm_free(&s->app);
    if (s->ctrl != MPI_COMM_NULL)
        MPI_Comm_free(&s->ctrl);
    if (mln_the_stripe == s)
        mln_the_stripe = NULL;
    free_rank_tables(s);
}

/* ---- the module (init.c) ------------------------------------------------------------------ */

static mln_status_t p2p_init(mln_context_t *ctx)
{
    mln_status_t st = mln_stripe_init(ctx, &ctx->stripe);

    if (st != MLN_OK || !mln_helper_is_helper(ctx->stripe))
        return st;
    /* A helper rank forwards until the application finalizes, then leaves the job. */
    st = mln_helper_serve(ctx->stripe);
    mln_finalize();
    MPI_Finalize();
    exit(st == MLN_OK ? 0 : 1);
}

static void p2p_fini(mln_context_t *ctx)
{
    mln_stripe_fini(ctx->stripe);
    ctx->stripe = NULL;
}

const mln_module_t mln_module_p2p = {.name = "p2p", .init = p2p_init, .fini = p2p_fini};
