/*
 * preload_probe.c - probes of an unmodified program, and the stash (docs/PRELOAD.md).
 *
 * A striped message is, for MPI, a 64-byte header: a probe that meets one must tell the
 * program the size of the message it announces, which only its bytes say.  So the layer takes
 * it off MPI, and with it every earlier message of the same sender on that communicator (in
 * order, with MPI_Improbe + MPI_Mrecv), into the communicator's stash: a prefix of that
 * sender's message stream.  Receives and probes look at the stash before MPI; a receive that
 * matches a stashed header goes on in the engine from that header, a stashed plain message is
 * copied (unpacked) into its buffer.  Since the stash holds a sender's oldest messages, MPI's
 * order (non-overtaking, first match) is kept.
 *
 * A matched probe (Mprobe, Improbe) of a stashed message returns a real MPI_Message: that of a
 * zero-byte message the layer sends to itself on a private communicator, which Mrecv and
 * Imrecv recognise and receive, delivering the stashed message instead.
 */
#include "preload_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#if MLN_PL_BIGCOUNT
#define MLN_PL_REAL_MRECV(b, c, d, m, s)                                                           \
    ((c) <= INT_MAX ? mln_pmpi.Mrecv(b, (int)(c), d, m, s) : mln_pmpi.Mrecv_c(b, c, d, m, s))
#define MLN_PL_REAL_IMRECV(b, c, d, m, r)                                                          \
    ((c) <= INT_MAX ? mln_pmpi.Imrecv(b, (int)(c), d, m, r) : mln_pmpi.Imrecv_c(b, c, d, m, r))
#else
#define MLN_PL_REAL_MRECV(b, c, d, m, s) mln_pmpi.Mrecv(b, (int)(c), d, m, s)
#define MLN_PL_REAL_IMRECV(b, c, d, m, r) mln_pmpi.Imrecv(b, (int)(c), d, m, r)
#endif

/* A message handle that stands for a stashed message. */
struct mln_pl_msg {
    MPI_Message handle;
    MPI_Comm comm;
    mln_pl_stash_t *entry;
    struct mln_pl_msg *next;
};

void mln_pl_stash_free(mln_pl_stash_t *e)
{
    free(e->data);
    free(e);
}

static int entry_matches(const mln_pl_stash_t *e, int source, int tag)
{
    return (source == MPI_ANY_SOURCE || source == e->source) &&
           (tag == MPI_ANY_TAG || tag == e->tag);
}

/* The first entry that (source, tag) matches; the entry before it in *prev (NULL: first). */
static mln_pl_stash_t *stash_find(mln_pl_comm_t *info, int source, int tag, mln_pl_stash_t **prev)
{
    mln_pl_stash_t *before = NULL;

    for (mln_pl_stash_t *e = info->stash; e; before = e, e = e->next)
        if (entry_matches(e, source, tag)) {
            if (prev)
                *prev = before;
            return e;
        }
    return NULL;
}

mln_pl_stash_t *mln_pl_stash_take(mln_pl_comm_t *info, int source, int tag)
{
    mln_pl_stash_t *prev = NULL, *e;

    if (info->stash == NULL)
        return NULL;
    e = stash_find(info, source, tag, &prev);
    if (e == NULL)
        return NULL;
    if (prev)
        prev->next = e->next;
    else
        info->stash = e->next;
    e->next = NULL;
    return e;
}

/* The status a probe or a receive of entry e reports. */
static void entry_status(const mln_pl_stash_t *e, MPI_Status *status)
{
    if (status == MPI_STATUS_IGNORE)
        return;
    status->MPI_SOURCE = e->source;
    status->MPI_TAG = e->tag; /* MPI_ERROR: left alone, as MPI's own probes do */
    MPI_Status_set_elements_x(status, MPI_BYTE, (MPI_Count)e->total);
    MPI_Status_set_cancelled(status, 0);
}

int mln_pl_recv_stashed(mln_pl_req_t *r, mln_pl_stash_t *e)
{
    MPI_Status st;
    MPI_Count room = mln_pl_bytes(r->count, r->dtype), size = 0, n;
    mln_status_t result = MLN_OK;
    int pos = 0;

    if (e->header) {
        mln_status_t s = mln_stripe_irecv_taken(r->buf, r->count, r->dtype, e->source, e->tag,
                                                r->comm, e->data, &r->eng);
        mln_pl_stash_free(e);
        return s; /* the caller puts r on the running list */
    }
    /* a plain message: its bytes, as MPI would have written them (whole elements) */
    memset(&st, 0, sizeof(st));
    n = (MPI_Count)e->len;
    if (n > room) {
        n = room;
        result = MLN_ERR_TRUNCATE;
    }
    MPI_Type_size_x(r->dtype, &size);
    if (n > 0 && size > 0 && n / size > 0) /* whole elements (a message cut inside an element
                                              leaves that element alone) */
        MPI_Unpack(e->data, (int)n, &pos, r->buf, (int)(n / size), r->dtype, r->comm);
    st.MPI_SOURCE = e->source;
    st.MPI_TAG = e->tag;
    MPI_Status_set_elements_x(&st, MPI_BYTE, n);
    mln_pl_stash_free(e);
    mln_pl_req_done(r, result, &st);
    return MLN_OK;
}

/* Takes from MPI every message of `source` on comm up to and including the first that `tag`
 * matches (the probed header), into the stash.  0 on success. */
static int drain(MPI_Comm comm, mln_pl_comm_t *info, int source, int tag)
{
    for (;;) {
        MPI_Message msg;
        MPI_Status st;
        MPI_Count n = 0;
        int flag = 0;
        mln_pl_stash_t *e, **tail;
        uint64_t total;

        if (mln_pmpi.Improbe(source, MPI_ANY_TAG, comm, &flag, &msg, &st) != MPI_SUCCESS || !flag)
            return -1; /* it was there a moment ago: another thread took it */
        MPI_Get_elements_x(&st, MPI_BYTE, &n);
        e = calloc(1, sizeof(*e));
        if (e == NULL || (e->data = malloc(n > 0 ? (size_t)n : 1)) == NULL) {
            free(e);
            return -1;
        }
        e->source = st.MPI_SOURCE;
        e->tag = st.MPI_TAG;
        e->len = e->total = (uint64_t)n;
        if (mln_pmpi.Mrecv(e->data, (int)n, MPI_BYTE, &msg, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            mln_pl_stash_free(e);
            return -1;
        }
        if (n == 64 && mln_stripe_header_total(e->data, &total)) {
            e->header = 1;
            e->total = total;
        }
        for (tail = &info->stash; *tail; tail = &(*tail)->next)
            ;
        *tail = e;
        if (tag == MPI_ANY_TAG || e->tag == tag)
            return 0;
    }
}

/* One look: the stash, then MPI (a header found there is stashed).  *found and the status. */
static int probe_once(MPI_Comm comm, mln_pl_comm_t *info, int source, int tag, int *found,
                      MPI_Status *status)
{
    MPI_Status st;
    MPI_Count n = 0;
    mln_pl_stash_t *e = info->stash ? stash_find(info, source, tag, NULL) : NULL;
    int rc;

    *found = 0;
    if (e != NULL) {
        entry_status(e, status);
        *found = 1;
        return MPI_SUCCESS;
    }
    if (status != MPI_STATUS_IGNORE) /* fields MPI leaves alone (MPI_ERROR) stay the caller's */
        st = *status;
    rc = mln_pmpi.Iprobe(source, tag, comm, found, &st);
    if (rc != MPI_SUCCESS || !*found)
        return rc;
    MPI_Get_elements_x(&st, MPI_BYTE, &n);
    if (n != 64 || st.MPI_SOURCE < 0 || st.MPI_SOURCE >= info->size ||
        !info->remote[st.MPI_SOURCE]) {
        if (status != MPI_STATUS_IGNORE)
            *status = st;
        return MPI_SUCCESS;
    }
    if (drain(comm, info, st.MPI_SOURCE, st.MPI_TAG) != 0)
        return MPI_ERR_INTERN;
    e = stash_find(info, st.MPI_SOURCE, st.MPI_TAG, NULL);
    entry_status(e, status);
    return MPI_SUCCESS;
}

int mln_pl_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    int rc;

    if (!mln_pl_p2p)
        return mln_pmpi.Iprobe(source, tag, comm, flag, status);
    if (MLN_PL_GRID(comm))
        return mln_pl_grid_probe(source, tag, comm, 0, flag, status);
    MLN_PL_LOCK();
    if (!mln_pl_recv_engine(comm, source)) {
        if (mln_stripe_busy() || mln_pl.running)
            mln_pl_progress();
        MLN_PL_UNLOCK();
        return mln_pmpi.Iprobe(source, tag, comm, flag, status);
    }
    mln_pl_progress();
    rc = probe_once(comm, mln_pl_comm(comm), source, tag, flag, status);
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    int rc, found = 0, spins = 0;

    if (!mln_pl_p2p)
        return mln_pmpi.Probe(source, tag, comm, status);
    if (MLN_PL_GRID(comm))
        return mln_pl_grid_probe(source, tag, comm, 1, NULL, status);
    MLN_PL_LOCK();
    if (!mln_pl_recv_engine(comm, source) && !mln_stripe_busy() && !mln_pl.running) {
        MLN_PL_UNLOCK();
        return mln_pmpi.Probe(source, tag, comm, status);
    }
    for (;;) {
        if (mln_pl_recv_engine(comm, source))
            rc = probe_once(comm, mln_pl_comm(comm), source, tag, &found, status);
        else
            rc = mln_pmpi.Iprobe(source, tag, comm, &found, status);
        if (rc != MPI_SUCCESS || found)
            break;
        mln_pl_progress();
        mln_pl_idle(&spins);
    }
    MLN_PL_UNLOCK();
    return rc;
}

/* ---- matched probes ------------------------------------------------------------------------ */

/* A real MPI_Message that stands for stash entry e (a zero-byte message to ourselves). */
static int msg_make(MPI_Comm comm, mln_pl_stash_t *e, MPI_Message *message)
{
    struct mln_pl_msg *m = calloc(1, sizeof(*m));
    MPI_Request sent;
    int rc;

    if (m == NULL)
        return MPI_ERR_NO_MEM;

    /* nonblocking: a blocking send to oneself may wait for its receive (MPICH's does) */
    rc = mln_pmpi.Isend(NULL, 0, MPI_BYTE, 0, 0, mln_pl.self, &sent);
    if (rc == MPI_SUCCESS)
        rc = mln_pmpi.Mprobe(0, 0, mln_pl.self, &m->handle, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) /* done once the stand-in is received (Mrecv) */
        rc = mln_pmpi.Request_free(&sent);
    if (rc != MPI_SUCCESS) {
        free(m);
        return rc;
    }
    m->comm = comm;
    m->entry = e;
    m->next = mln_pl.msgs;
    mln_pl.msgs = m;
    *message = m->handle;
    return MPI_SUCCESS;
}

/* The stash entry that message stands for (unlinked, its stand-in received), or NULL. */
static mln_pl_stash_t *msg_take(MPI_Message *message, MPI_Comm *comm)
{
    for (struct mln_pl_msg **pm = &mln_pl.msgs; *pm; pm = &(*pm)->next) {
        struct mln_pl_msg *m = *pm;
        mln_pl_stash_t *e = m->entry;
        if (m->handle != *message)
            continue;
        *pm = m->next;
        mln_pmpi.Mrecv(NULL, 0, MPI_BYTE, message, MPI_STATUS_IGNORE);
        *comm = m->comm;
        free(m);
        *message = MPI_MESSAGE_NULL;
        return e;
    }
    return NULL;
}

void mln_pl_msgs_fini(void)
{
    while (mln_pl.msgs) {
        struct mln_pl_msg *m = mln_pl.msgs;
        mln_pl.msgs = m->next;
        mln_pmpi.Mrecv(NULL, 0, MPI_BYTE, &m->handle, MPI_STATUS_IGNORE);
        mln_pl_stash_free(m->entry);
        free(m);
    }
}

/* One matched look: the stash, then MPI; a header MPI had is taken with its message. */
static int mprobe_once(MPI_Comm comm, mln_pl_comm_t *info, int source, int tag, int *found,
                       MPI_Message *message, MPI_Status *status)
{
    MPI_Status st;
    MPI_Count n = 0;
    mln_pl_stash_t *e = mln_pl_stash_take(info, source, tag);
    uint64_t total;
    int rc;

    *found = 0;
    if (e == NULL) {
        if (status != MPI_STATUS_IGNORE) /* fields MPI leaves alone stay the caller's */
            st = *status;
        rc = mln_pmpi.Improbe(source, tag, comm, found, message, &st);
        if (rc != MPI_SUCCESS || !*found)
            return rc;
        MPI_Get_elements_x(&st, MPI_BYTE, &n);
        if (n != 64 || st.MPI_SOURCE < 0 || st.MPI_SOURCE >= info->size ||
            !info->remote[st.MPI_SOURCE]) {
            if (status != MPI_STATUS_IGNORE)
                *status = st;
            return MPI_SUCCESS;
        }
        e = calloc(1, sizeof(*e));
        if (e == NULL || (e->data = malloc(64)) == NULL) {
            free(e);
            return MPI_ERR_NO_MEM;
        }
        rc = mln_pmpi.Mrecv(e->data, 64, MPI_BYTE, message, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            mln_pl_stash_free(e);
            return rc;
        }
        e->source = st.MPI_SOURCE;
        e->tag = st.MPI_TAG;
        e->len = e->total = 64;
        if (mln_stripe_header_total(e->data, &total)) {
            e->header = 1;
            e->total = total;
        }
    }
    *found = 1;
    entry_status(e, status);
    rc = msg_make(comm, e, message);
    if (rc != MPI_SUCCESS)
        mln_pl_stash_free(e);
    return rc;
}

int mln_pl_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                   MPI_Status *status)
{
    int rc;

    if (!mln_pl_p2p)
        return mln_pmpi.Improbe(source, tag, comm, flag, message, status);
    if (MLN_PL_GRID(comm))
        return mln_pl_grid_mprobe(source, tag, comm, 0, flag, message, status);
    MLN_PL_LOCK();
    if (!mln_pl_recv_engine(comm, source)) {
        if (mln_stripe_busy() || mln_pl.running)
            mln_pl_progress();
        MLN_PL_UNLOCK();
        return mln_pmpi.Improbe(source, tag, comm, flag, message, status);
    }
    mln_pl_progress();
    rc = mprobe_once(comm, mln_pl_comm(comm), source, tag, flag, message, status);
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    int rc, found = 0, spins = 0;

    if (!mln_pl_p2p)
        return mln_pmpi.Mprobe(source, tag, comm, message, status);
    if (MLN_PL_GRID(comm))
        return mln_pl_grid_mprobe(source, tag, comm, 1, NULL, message, status);
    MLN_PL_LOCK();
    if (!mln_pl_recv_engine(comm, source) && !mln_stripe_busy() && !mln_pl.running) {
        MLN_PL_UNLOCK();
        return mln_pmpi.Mprobe(source, tag, comm, message, status);
    }
    for (;;) {
        if (mln_pl_recv_engine(comm, source))
            rc = mprobe_once(comm, mln_pl_comm(comm), source, tag, &found, message, status);
        else
            rc = mln_pmpi.Improbe(source, tag, comm, &found, message, status);
        if (rc != MPI_SUCCESS || found)
            break;
        mln_pl_progress();
        mln_pl_idle(&spins);
    }
    MLN_PL_UNLOCK();
    return rc;
}

/* A receive of a stashed message, as a request of the layer. */
static int stashed_request(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Comm comm,
                           mln_pl_stash_t *e, MPI_Request *request)
{
    mln_pl_req_t *r = mln_pl_req_new(MLN_PL_RECV);
    mln_status_t st;
    int rc;

    if (r == NULL) {
        mln_pl_stash_free(e);
        return mln_pl_error(comm, MLN_ERR_NOMEM);
    }
    r->buf = buf;
    r->count = count;
    r->dtype = datatype;
    r->peer = e->source;
    r->tag = e->tag;
    r->comm = comm;
    rc = mln_pl_req_greq(r);
    if (rc != MPI_SUCCESS) {
        mln_pl_stash_free(e);
        free(r);
        return rc;
    }
    r->handle = r->greq;
    mln_pl_req_map_add(r);
    *request = r->handle;
    st = mln_pl_recv_stashed(r, e);
    if (st != MLN_OK) {
        mln_pl_req_done(r, st, NULL);
        return mln_pl_error(comm, st);
    }
    if (r->eng != MLN_REQUEST_NULL) {
        r->next_run = mln_pl.running;
        mln_pl.running = r;
    }
    return MPI_SUCCESS;
}

int mln_pl_Imrecv(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message,
                  MPI_Request *request)
{
    mln_pl_stash_t *e;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc;

    if (!mln_pl.on || (mln_pl.msgs == NULL && mln_pl.grid == NULL))
        return MLN_PL_REAL_IMRECV(buf, count, datatype, message, request);
    MLN_PL_LOCK();
    if (mln_pl_grid_mrecv(buf, count, datatype, message, request, NULL, &rc)) {
        MLN_PL_UNLOCK();
        return rc;
    }
    e = msg_take(message, &comm);
    rc = e ? stashed_request(buf, count, datatype, comm, e, request)
           : MLN_PL_REAL_IMRECV(buf, count, datatype, message, request);
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Mrecv(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message,
                 MPI_Status *status)
{
    MPI_Request req = MPI_REQUEST_NULL;
    mln_pl_stash_t *e;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc;

    if (!mln_pl.on || (mln_pl.msgs == NULL && mln_pl.grid == NULL))
        return MLN_PL_REAL_MRECV(buf, count, datatype, message, status);
    MLN_PL_LOCK();
    if (mln_pl_grid_mrecv(buf, count, datatype, message, NULL, status, &rc)) {
        MLN_PL_UNLOCK();
        return rc;
    }
    e = msg_take(message, &comm);
    if (e == NULL) {
        MLN_PL_UNLOCK();
        return MLN_PL_REAL_MRECV(buf, count, datatype, message, status);
    }
    rc = stashed_request(buf, count, datatype, comm, e, &req);
    if (req != MPI_REQUEST_NULL)
        rc = mln_pl_Wait(&req, status);
    MLN_PL_UNLOCK();
    return rc;
}
