/*
 * preload_req.c - the layer's requests and every Wait/Test variant (docs/PRELOAD.md).
 *
 * A request the layer runs is an MPI generalized request: the engine moves the message, the
 * layer calls MPI_Grequest_complete when it is done, and MPI's own wait or test then frees it
 * and fills the status through the query callback.  A wait on an array that mixes them with
 * plain requests runs MPI's own test on a copy of the array (a persistent request of the layer
 * stands there as its current generalized request), moving the engine between two tests, and
 * copies back what MPI completed.  A wait on plain requests alone while the engine is idle is
 * MPI's own wait: no cost.
 */
#include "preload_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the map: program's handle -> request ------------------------------------------------ */

static uint64_t key_of(MPI_Request h)
{
    uint64_t k = 0;
    memcpy(&k, &h, sizeof(h) < sizeof(k) ? sizeof(h) : sizeof(k));
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

mln_pl_req_t *mln_pl_req_find(MPI_Request handle)
{
    if (mln_pl.map_used == 0 || handle == MPI_REQUEST_NULL)
        return NULL;
    for (size_t i = key_of(handle) & (mln_pl.map_cap - 1);; i = (i + 1) & (mln_pl.map_cap - 1)) {
        if (mln_pl.map[i].r == NULL)
            return NULL;
        if (mln_pl.map[i].handle == handle)
            return mln_pl.map[i].r;
    }
}

static int map_grow(void)
{
    size_t cap = mln_pl.map_cap ? mln_pl.map_cap * 2 : 64;
    struct mln_pl_slot *old = mln_pl.map, *map = calloc(cap, sizeof(*map));
    size_t oldcap = mln_pl.map_cap;

    if (map == NULL)
        return -1;
    mln_pl.map = map;
    mln_pl.map_cap = cap;
    for (size_t j = 0; j < oldcap; j++) {
        if (old[j].r == NULL)
            continue;
        size_t i = key_of(old[j].handle) & (cap - 1);
        while (map[i].r != NULL)
            i = (i + 1) & (cap - 1);
        map[i] = old[j];
    }
    free(old);
    return 0;
}

void mln_pl_req_map_add(mln_pl_req_t *r)
{
    if ((mln_pl.map_used + 1) * 2 > mln_pl.map_cap && map_grow() != 0)
        abort(); /* out of memory for a few pointers: nothing sensible is left */
    size_t i = key_of(r->handle) & (mln_pl.map_cap - 1);
    while (mln_pl.map[i].r != NULL)
        i = (i + 1) & (mln_pl.map_cap - 1);
    mln_pl.map[i].handle = r->handle;
    mln_pl.map[i].r = r;
    mln_pl.map_used++;
}

/* Removes r, found under `handle`.  Neither r nor any other entry is read: an array wait
 * removes the requests MPI completed (and freed: greq_free) one after another, so the others
 * may be gone too; the map keeps each handle itself. */
static void map_del_at(MPI_Request handle, const mln_pl_req_t *r)
{
    const size_t mask = mln_pl.map_cap - 1;
    size_t i, j;

    if (mln_pl.map_used == 0)
        return;
    for (i = key_of(handle) & mask; mln_pl.map[i].r != r; i = (i + 1) & mask)
        if (mln_pl.map[i].r == NULL)
            return;
    mln_pl.map[i].r = NULL;
    mln_pl.map_used--;
    /* backward shift: entries after the hole that belong before it move up */
    for (j = (i + 1) & mask; mln_pl.map[j].r != NULL; j = (j + 1) & mask) {
        size_t home = key_of(mln_pl.map[j].handle) & mask;
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            mln_pl.map[i] = mln_pl.map[j];
            mln_pl.map[j].r = NULL;
            i = j;
        }
    }
}

void mln_pl_req_map_del(mln_pl_req_t *r)
{
    map_del_at(r->handle, r);
}

/* ---- generalized requests ------------------------------------------------------------------ */

static int greq_query(void *extra, MPI_Status *status)
{
    const mln_pl_req_t *r = extra;

    if (status != MPI_STATUS_IGNORE)
        *status = r->status;
    return MPI_SUCCESS; /* an error is returned (and its handler called) by the wrapper */
}

/* Called by MPI inside its wait, test or free of the request, which the layer always makes
 * itself, holding its lock, after taking r out of its map: no lock here (MPI may hold its own
 * while it calls us, and another thread of ours may wait for MPI's while holding ours). */
static int greq_free(void *extra)
{
    mln_pl_req_t *r = extra;

    if (r->persistent) /* one operation of it: the request itself stays */
        return MPI_SUCCESS;
    free(r->copy);
    free(r);
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS; /* MPI_Cancel's wrapper did what could be done */
}

mln_pl_req_t *mln_pl_req_new(mln_pl_op_t op)
{
    mln_pl_req_t *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->op = op;
    r->handle = r->greq = MPI_REQUEST_NULL;
    r->eng = MLN_REQUEST_NULL;
    r->error = MPI_SUCCESS;
    return r;
}

int mln_pl_req_greq(mln_pl_req_t *r)
{
    return mln_pmpi.Grequest_start(greq_query, greq_free, greq_cancel, r, &r->greq);
}

static void running_del(mln_pl_req_t *r)
{
    for (mln_pl_req_t **pp = &mln_pl.running; *pp; pp = &(*pp)->next_run)
        if (*pp == r) {
            *pp = r->next_run;
            r->next_run = NULL;
            return;
        }
}

static int code_of(mln_status_t st)
{
    switch (st) {
    case MLN_OK:
        return MPI_SUCCESS;
    case MLN_ERR_TRUNCATE:
        return MPI_ERR_TRUNCATE;
    case MLN_ERR_ARG:
        return MPI_ERR_ARG;
    case MLN_ERR_NOMEM:
        return MPI_ERR_NO_MEM;
    default:
        return MPI_ERR_OTHER;
    }
}

void mln_pl_req_done(mln_pl_req_t *r, mln_status_t st, const MPI_Status *status)
{
    r->done = 1;
    r->eng = MLN_REQUEST_NULL;
    if (status != NULL)
        r->status = *status;
    r->error = code_of(st);
    r->status.MPI_ERROR = r->error;
    if (r->detached) { /* a buffered send nobody waits for */
        free(r->copy);
        free(r);
        return;
    }
    if (r->greq != MPI_REQUEST_NULL)
        mln_pmpi.Grequest_complete(r->greq);
    if (!r->freed)
        return;
    /* MPI_Request_free came first: nobody will wait for it */
    if (r->persistent) {
        MPI_Request h = r->handle;
        mln_pmpi.Request_free(&r->greq);
        mln_pl_req_map_del(r);
        mln_pmpi.Request_free(&h);
        free(r->copy);
        free(r);
    } else {
        MPI_Request g = r->greq; /* MPI writes the handle after greq_free freed r */
        mln_pl_req_map_del(r);
        mln_pmpi.Request_free(&g);
    }
}

/* The engine's request of r is complete: take its result. */
static void take_result(mln_pl_req_t *r)
{
    MPI_Status st;
    mln_status_t s;

    memset(&st, 0, sizeof(st));
    running_del(r);
    s = mln_stripe_wait(&r->eng, &st);
    mln_pl_req_done(r, s, &st);
}

void mln_pl_progress(void)
{
    mln_pl_req_t *r, *next;

    mln_stripe_poll();
    for (r = mln_pl.running; r; r = next) {
        next = r->next_run;
        if (mln_stripe_done(r->eng))
            take_result(r);
    }
    if (mln_pl.pairs)
        mln_pl_pairs_progress();
    if (mln_pl.grid)
        mln_pl_grid_progress();
}

int mln_pl_test_quiet(MPI_Request *request, MPI_Status *status)
{
    mln_pl_req_t *r = mln_pl_req_find(*request);
    int flag = 0;

    if (r == NULL) { /* MPI's own: its single-request test leaves MPI_ERROR to us */
        int rc = mln_pmpi.Test(request, &flag, status);
        if (rc != MPI_SUCCESS)
            flag = 1;
        if (flag && status != MPI_STATUS_IGNORE)
            status->MPI_ERROR = rc;
        return flag;
    }
    if (!r->done)
        return 0;
    if (status != MPI_STATUS_IGNORE)
        *status = r->status;
    {
        MPI_Request g = r->greq;
        mln_pl_req_map_del(r); /* MPI frees it now (greq_free) */
        mln_pmpi.Test(&g, &flag, MPI_STATUS_IGNORE);
    }
    *request = MPI_REQUEST_NULL;
    return 1;
}

void mln_pl_drain(int detached_only)
{
    int spins = 0;

    for (;;) {
        int left = 0;
        mln_pl_progress();
        for (mln_pl_req_t *r = mln_pl.running; r; r = r->next_run)
            left |= r->detached || !detached_only;
        if (!left)
            return;
        mln_pl_idle(&spins);
    }
}

/* Until r's operation is complete.  Single-threaded, the engine's own wait (it sleeps in
 * poll() while only lanes move, and waits in MPI_Wait when only one plain operation is
 * left); with threads, passes that let the lock go between them. */
static void finish(mln_pl_req_t *r)
{
    int spins = 0;

    while (!r->done) {
        if (!mln_pl.threaded && r->eng != MLN_REQUEST_NULL) {
            take_result(r);
            return;
        }
        mln_pl_progress();
        if (!r->done)
            mln_pl_idle(&spins);
    }
}

void mln_pl_flush(void)
{
    if (!mln_pl.on)
        return;
    MLN_PL_LOCK();
    mln_pl_drain(1);
    MLN_PL_UNLOCK();
}

/* ---- polling MPI's own requests while the engine has work ------------------------------- */

int mln_pl_poll(MPI_Request *request)
{
    int flag = 0, rc, spins = 0;

    MLN_PL_LOCK();
    for (;;) {
        rc = mln_pmpi.Test(request, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            break;
        mln_pl_progress();
        mln_pl_idle(&spins);
    }
    MLN_PL_UNLOCK();
    return rc;
}

/* The layer's communicator for blocking collectives on comm (see mln_pl_comm_t.coll): an
 * MPI_Comm_create over the same group (MPI_Comm_dup where comm has a topology, for the
 * neighbourhood collectives), made where every rank of comm is and nothing of the program can
 * be pending on comm: as the program makes comm (mln_pl_comm_born; MPI_COMM_WORLD in
 * MPI_Init).  Open MPI allocates a communicator's id with nonblocking collectives on the
 * parent, which would meet nonblocking collectives the program left pending there.  Its
 * errors return: mln_pl_coll_wait gives them to comm's handler. */
static MPI_Comm coll_make(MPI_Comm comm)
{
    MPI_Comm cc = MPI_COMM_NULL;
    MPI_Group g;
    int topo = MPI_UNDEFINED, rc;

    MPI_Topo_test(comm, &topo);
    if (topo != MPI_UNDEFINED) {
        rc = mln_pmpi.Comm_dup(comm, &cc);
    } else {
        rc = MPI_Comm_group(comm, &g);
        if (rc == MPI_SUCCESS) {
            rc = mln_pmpi.Comm_create(comm, g, &cc);
            MPI_Group_free(&g);
        }
    }
    if (rc != MPI_SUCCESS || cc == MPI_COMM_NULL) {
        fprintf(stderr,
                "multilane-preload: no communicator for blocking collectives (MPI error "
                "%d): they run on the program's communicator as nonblocking ones\n",
                rc);
        return comm;
    }
    MPI_Comm_set_errhandler(cc, MPI_ERRORS_RETURN);
    return cc;
}

/* comm's communicator for blocking collectives, made now if it has none; where comm does
 * not span sites, MPI_COMM_NULL. */
static MPI_Comm coll_get(MPI_Comm comm)
{
    mln_pl_comm_t *info;
    MPI_Comm cc = MPI_COMM_NULL;

    MLN_PL_LOCK();
    info = mln_pl_comm(comm);
    if (info != NULL && info->spans) {
        if (info->coll == MPI_COMM_NULL) {
            /* not under the lock: a collective may wait for a thread of this process that
             * needs the layer to send what a peer waits for before it joins */
            MLN_PL_UNLOCK();
            cc = coll_make(comm);
            MLN_PL_LOCK();
            info = mln_pl_comm(comm);
            if (info != NULL)
                info->coll = cc;
        }
        cc = info != NULL ? info->coll : MPI_COMM_NULL;
    }
    MLN_PL_UNLOCK();
    return cc;
}

void mln_pl_comm_born(MPI_Comm comm)
{
    if (mln_pl.on && mln_pl.coll_progress && comm != MPI_COMM_NULL)
        coll_get(comm);
}

/* A communicator the layer did not see made (MPI_Comm_idup, a spawned or connected one) gets
 * its communicator at its first blocking collective, where every rank is; on Open MPI the
 * program must then have no nonblocking collective pending on it (see coll_make). */
MPI_Comm mln_pl_coll_comm(MPI_Comm comm)
{
    if (!mln_pl.on || !mln_pl.coll_progress || mln_pl_revoked(comm))
        return MPI_COMM_NULL;
    return coll_get(comm);
}

int mln_pl_coll_wait(MPI_Comm comm, int rc, MPI_Request *request)
{
    if (rc == MPI_SUCCESS)
        rc = mln_pl_poll(request);
    if (rc != MPI_SUCCESS)
        MPI_Comm_call_errhandler(comm, rc);
    return rc;
}

/* ---- wait and test ------------------------------------------------------------------------ */

/* Completes one of ours through MPI's own call on its generalized request (wait or test). */
static int complete_one(MPI_Request *req, mln_pl_req_t *r, int wait, int *flag, MPI_Status *status)
{
    MPI_Request greq;
    MPI_Comm comm = r->comm;
    int err, rc, persistent = r->persistent, one = 1;

    if (persistent && !r->active) /* inactive: MPI's answer for its own persistent request */
        return wait ? mln_pmpi.Wait(req, status) : mln_pmpi.Test(req, flag, status);
    if (wait)
        finish(r);
    else if (!r->done)
        mln_pl_progress();
    if (!r->done) {
        *flag = 0;
        return MPI_SUCCESS;
    }
    err = r->error;
    greq = r->greq;
    if (!persistent)
        mln_pl_req_map_del(r); /* MPI frees it now (greq_free) */
    rc = wait ? mln_pmpi.Wait(&greq, status) : mln_pmpi.Test(&greq, flag ? flag : &one, status);
    if (persistent) {
        r->active = 0;
        r->greq = MPI_REQUEST_NULL;
    } else {
        *req = MPI_REQUEST_NULL; /* r is gone (greq_free) */
    }
    if (rc == MPI_SUCCESS && err != MPI_SUCCESS)
        rc = mln_pl_error(comm, err == MPI_ERR_TRUNCATE ? MLN_ERR_TRUNCATE : MLN_ERR_PEER);
    return rc;
}

/* A plain request while the engine has work: MPI's test, the engine, again. */
static int poll_plain(MPI_Request *req, MPI_Status *status)
{
    int flag = 0, rc, spins = 0;

    for (;;) {
        rc = mln_pmpi.Test(req, &flag, status);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        mln_pl_progress();
        mln_pl_idle(&spins);
    }
}

int mln_pl_Wait(MPI_Request *request, MPI_Status *status)
{
    mln_pl_req_t *r;
    int rc;

    if (!mln_pl.on)
        return mln_pmpi.Wait(request, status);
    MLN_PL_LOCK();
    r = mln_pl_req_find(*request);
    if (r != NULL)
        rc = complete_one(request, r, 1, NULL, status);
    else if (MLN_PL_BUSY())
        rc = poll_plain(request, status);
    else {
        MLN_PL_UNLOCK();
        return mln_pmpi.Wait(request, status);
    }
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    mln_pl_req_t *r;
    int rc;

    if (!mln_pl.on)
        return mln_pmpi.Test(request, flag, status);
    MLN_PL_LOCK();
    r = mln_pl_req_find(*request);
    if (r != NULL) {
        rc = complete_one(request, r, 0, flag, status);
    } else {
        if (MLN_PL_BUSY())
            mln_pl_progress();
        rc = mln_pmpi.Test(request, flag, status);
    }
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    mln_pl_req_t *r;
    int rc;

    if (!mln_pl.on)
        return mln_pmpi.Request_get_status(request, flag, status);
    MLN_PL_LOCK();
    if (MLN_PL_BUSY())
        mln_pl_progress();
    r = mln_pl_req_find(request);
    if (r != NULL && (!r->persistent || r->active)) {
        if (r->done) {
            rc = mln_pmpi.Request_get_status(r->greq, flag, status);
        } else {
            *flag = 0;
            rc = MPI_SUCCESS;
        }
    } else {
        rc = mln_pmpi.Request_get_status(request, flag, status);
    }
    MLN_PL_UNLOCK();
    return rc;
}

/* ---- the array variants ------------------------------------------------------------------- */

typedef enum { MULTI_ALL, MULTI_ANY, MULTI_SOME } multi_kind_t;

/* True when nothing of ours is in the array and the engine is idle: MPI's own call. */
static int all_plain(int n, const MPI_Request reqs[])
{
    if (!mln_pl.on)
        return 1;
    if (MLN_PL_BUSY())
        return 0;
    for (int i = 0; i < n && mln_pl.map_used > 0; i++)
        if (mln_pl_req_find(reqs[i]) != NULL)
            return 0;
    return 1;
}

typedef struct multi {
    multi_kind_t kind;
    int wait, n;
    MPI_Request *reqs;
    int *flag, *index, *outcount, *indices;
    MPI_Status *statuses;
} multi_t;

static int multi_test(const multi_t *m, MPI_Request *tmp, int *done)
{
    int rc;

    switch (m->kind) {
    case MULTI_ALL:
        rc = mln_pmpi.Testall(m->n, tmp, done, m->statuses);
        break;
    case MULTI_ANY:
        rc = mln_pmpi.Testany(m->n, tmp, m->index, done, m->statuses);
        break;
    default:
        rc = mln_pmpi.Testsome(m->n, tmp, m->outcount, m->indices, m->statuses);
        *done = *m->outcount != 0; /* MPI_UNDEFINED (nothing active) ends the wait too */
        break;
    }
    return rc;
}

/* The general case: a copy of the array for MPI, the engine between two tests. */
static int multi_run(const multi_t *m)
{
    MPI_Request stack_tmp[16];
    mln_pl_req_t *stack_pls[16];
    int stack_errs[16];
    MPI_Comm stack_comms[16];
    unsigned char stack_pers[16];
    MPI_Request *tmp = stack_tmp;
    mln_pl_req_t **pls = stack_pls;
    int *errs = stack_errs;
    MPI_Comm *comms = stack_comms;
    unsigned char *pers = stack_pers; /* persistent ones of ours: MPI never frees them */
    MPI_Status stack_sts[16], *sts = stack_sts;
    multi_t mt = *m;
    int rc = MPI_SUCCESS, done = 0, spins = 0, n = m->n, failed = -1;

    if (n > 16) {
        tmp = malloc(sizeof(*tmp) * (size_t)n);
        pls = malloc(sizeof(*pls) * (size_t)n);
        errs = malloc(sizeof(*errs) * (size_t)n);
        comms = malloc(sizeof(*comms) * (size_t)n);
        pers = malloc((size_t)n);
        sts = malloc(sizeof(*sts) * (size_t)n);
        if (!tmp || !pls || !errs || !comms || !pers || !sts) {
            rc = MPI_ERR_NO_MEM;
            goto out;
        }
    }
    /* MPI's test gets statuses even where the program ignores them: with ignored statuses
     * MPICH 4.0.2's Testall may take a fast path that asserts that every request is a plain
     * send or receive (an array of >64 requests, generalized ones first, aborts there) */
    if (m->statuses == MPI_STATUSES_IGNORE || m->statuses == MPI_STATUS_IGNORE)
        mt.statuses = sts;
    for (int i = 0; i < n; i++) {
        mln_pl_req_t *r = mln_pl_req_find(m->reqs[i]);
        pls[i] = r;
        pers[i] = r != NULL && r->persistent;
        comms[i] = r ? r->comm : MPI_COMM_NULL;
        tmp[i] = r && r->persistent && r->active ? r->greq : m->reqs[i];
        if (r && m->wait && m->kind == MULTI_ALL && (!r->persistent || r->active))
            finish(r); /* all of them are needed anyway: the engine's own wait */
    }
    for (;;) {
        mln_pl_progress();
        for (int i = 0; i < n; i++)
            errs[i] =
                pls[i] && tmp[i] != MPI_REQUEST_NULL && pls[i]->done ? pls[i]->error : MPI_SUCCESS;
        done = 0;
        rc = multi_test(&mt, tmp, &done);
        if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
            break;
        if (done || !m->wait)
            break;
        mln_pl_idle(&spins);
    }
    /* copy back: a persistent request of ours keeps its handle; the rest is MPI's result.
     * From here on pls[i] of a request MPI completed is gone (greq_free): compared, never
     * read. */
    for (int i = 0; i < n; i++) {
        if (pers[i]) {
            if (tmp[i] == MPI_REQUEST_NULL && pls[i]->active) {
                pls[i]->active = 0;
                pls[i]->greq = MPI_REQUEST_NULL;
            }
        } else {
            if (pls[i] != NULL && tmp[i] == MPI_REQUEST_NULL) /* MPI freed it (greq_free) */
                map_del_at(m->reqs[i], pls[i]);
            m->reqs[i] = tmp[i];
        }
    }
    if (m->flag)
        *m->flag = done;
    if (!done && m->kind != MULTI_SOME)
        goto out;
    /* errors of ours that completed now: MPI saw generalized requests that succeeded */
    for (int i = 0; i < n; i++) {
        int completed = pls[i] != NULL && errs[i] != MPI_SUCCESS &&
                        (m->kind == MULTI_ALL || (m->kind == MULTI_ANY && *m->index == i));
        if (m->kind == MULTI_SOME && pls[i] != NULL && errs[i] != MPI_SUCCESS)
            for (int k = 0; k < *m->outcount && *m->outcount != MPI_UNDEFINED; k++)
                completed |= m->indices[k] == i;
        if (!completed)
            continue;
        if (failed < 0)
            failed = i;
        if (m->kind != MULTI_ANY && m->statuses != MPI_STATUSES_IGNORE) {
            int at = i;
            if (m->kind == MULTI_SOME)
                for (int k = 0; k < *m->outcount; k++)
                    if (m->indices[k] == i)
                        at = k;
            m->statuses[at].MPI_ERROR = errs[i];
        }
    }
    if (failed >= 0) {
        int code = m->kind == MULTI_ANY ? errs[failed] : MPI_ERR_IN_STATUS;
        if (m->kind != MULTI_ANY && m->statuses != MPI_STATUSES_IGNORE && rc == MPI_SUCCESS) {
            /* MPI_ERR_IN_STATUS: every completed status says its own result */
            int cnt = m->kind == MULTI_ALL ? n : *m->outcount;
            for (int k = 0; k < cnt; k++) {
                int i = m->kind == MULTI_ALL ? k : m->indices[k];
                if (errs[i] == MPI_SUCCESS)
                    m->statuses[k].MPI_ERROR = MPI_SUCCESS;
            }
        }
        MPI_Comm_call_errhandler(comms[failed], code);
        rc = code;
    }
out:
    if (n > 16) {
        free(tmp);
        free(pls);
        free(errs);
        free(comms);
        free(pers);
        free(sts);
    }
    return rc;
}

static int multi(const multi_t *m)
{
    int rc;

    MLN_PL_LOCK();
    rc = multi_run(m);
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
    multi_t m = {MULTI_ALL, 1, count, array_of_requests, NULL, NULL, NULL, NULL, array_of_statuses};

    if (all_plain(count, array_of_requests))
        return mln_pmpi.Waitall(count, array_of_requests, array_of_statuses);
    return multi(&m);
}

int mln_pl_Testall(int count, MPI_Request array_of_requests[], int *flag,
                   MPI_Status array_of_statuses[])
{
    multi_t m = {MULTI_ALL, 0, count, array_of_requests, flag, NULL, NULL, NULL, array_of_statuses};

    if (all_plain(count, array_of_requests))
        return mln_pmpi.Testall(count, array_of_requests, flag, array_of_statuses);
    return multi(&m);
}

int mln_pl_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    multi_t m = {MULTI_ANY, 1, count, array_of_requests, NULL, index, NULL, NULL, status};

    if (all_plain(count, array_of_requests))
        return mln_pmpi.Waitany(count, array_of_requests, index, status);
    return multi(&m);
}

int mln_pl_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                   MPI_Status *status)
{
    multi_t m = {MULTI_ANY, 0, count, array_of_requests, flag, index, NULL, NULL, status};

    if (all_plain(count, array_of_requests))
        return mln_pmpi.Testany(count, array_of_requests, index, flag, status);
    return multi(&m);
}

int mln_pl_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                    int array_of_indices[], MPI_Status array_of_statuses[])
{
    multi_t m = {MULTI_SOME, 1,        incount,          array_of_requests, NULL,
                 NULL,       outcount, array_of_indices, array_of_statuses};

    if (all_plain(incount, array_of_requests))
        return mln_pmpi.Waitsome(incount, array_of_requests, outcount, array_of_indices,
                                 array_of_statuses);
    return multi(&m);
}

int mln_pl_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                    int array_of_indices[], MPI_Status array_of_statuses[])
{
    multi_t m = {MULTI_SOME, 0,        incount,          array_of_requests, NULL,
                 NULL,       outcount, array_of_indices, array_of_statuses};

    if (all_plain(incount, array_of_requests))
        return mln_pmpi.Testsome(incount, array_of_requests, outcount, array_of_indices,
                                 array_of_statuses);
    return multi(&m);
}

/* ---- cancel, free, start ------------------------------------------------------------------ */

int mln_pl_Cancel(MPI_Request *request)
{
    mln_pl_req_t *r;
    int cancelled = 0;

    if (!mln_pl.on)
        return mln_pmpi.Cancel(request);
    MLN_PL_LOCK();
    r = mln_pl_req_find(*request);
    if (r == NULL) {
        MLN_PL_UNLOCK();
        return mln_pmpi.Cancel(request);
    }
    /* a receive whose message has not been matched can be; a send never is (MPI allows it) */
    if (r->grid && !r->done && r->op == MLN_PL_RECV)
        mln_pl_grid_cancel(r);
    else if (!r->done && r->op == MLN_PL_RECV && r->eng != MLN_REQUEST_NULL &&
             mln_stripe_cancel(&r->eng, &cancelled) == MLN_OK && cancelled)
        take_result(r);
    MLN_PL_UNLOCK();
    return MPI_SUCCESS;
}

int mln_pl_Request_free(MPI_Request *request)
{
    mln_pl_req_t *r;

    if (!mln_pl.on)
        return mln_pmpi.Request_free(request);
    MLN_PL_LOCK();
    r = mln_pl_req_find(*request);
    if (r == NULL) {
        MLN_PL_UNLOCK();
        return mln_pmpi.Request_free(request);
    }
    if (r->persistent && r->active && !r->done) {
        r->freed = 1; /* mln_pl_req_done frees it */
    } else if (r->persistent) {
        MPI_Request h = r->handle;
        if (r->active)
            mln_pmpi.Request_free(&r->greq);
        mln_pl_req_map_del(r);
        mln_pmpi.Request_free(&h);
        free(r->copy);
        free(r);
    } else if (r->done) {
        MPI_Request g = r->greq; /* greq_free frees r; MPI then writes the handle */
        mln_pl_req_map_del(r);
        mln_pmpi.Request_free(&g);
    } else {
        r->freed = 1;
    }
    *request = MPI_REQUEST_NULL;
    MLN_PL_UNLOCK();
    return MPI_SUCCESS;
}

static int start_one(MPI_Request *request)
{
    mln_pl_req_t *r = mln_pl_req_find(*request);

    if (r == NULL)
        return mln_pmpi.Start(request);
    if (r->active) {
        MPI_Comm_call_errhandler(r->comm, MPI_ERR_REQUEST);
        return MPI_ERR_REQUEST; /* started twice: MPI says erroneous, we say so */
    }
    return mln_pl_start(r);
}

int mln_pl_Start(MPI_Request *request)
{
    int rc;

    if (!mln_pl.on)
        return mln_pmpi.Start(request);
    MLN_PL_LOCK();
    rc = start_one(request);
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Startall(int count, MPI_Request array_of_requests[])
{
    int rc = MPI_SUCCESS;

    if (!mln_pl.on || mln_pl.map_used == 0)
        return mln_pmpi.Startall(count, array_of_requests);
    MLN_PL_LOCK();
    for (int i = 0; i < count && rc == MPI_SUCCESS; i++)
        rc = start_one(&array_of_requests[i]);
    MLN_PL_UNLOCK();
    return rc;
}
