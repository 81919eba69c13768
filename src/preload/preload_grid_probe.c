/*
 * preload_grid_probe.c - probes on grid communicators (grid mode, preload_grid.c).
 *
 * A probe looks where a receive would (the relay's arrived messages, MPI's own on the site's
 * duplicate) after a progress pass, so that receives posted before it take their messages
 * first; it does not take.  With MPI_ANY_SOURCE the origin where it found the message is looked
 * at first by the next wildcard receive, so that Probe + Recv(ANY_SOURCE) meet one message.
 * A matched probe (Mprobe, Improbe) takes: a same-site message keeps MPI's own MPI_Message
 * (MPI_Mrecv/Imrecv of it run on the duplicate, the status translated); another site's gets a
 * stand-in (a zero-byte message to ourselves, as preload_probe.c does) and its bytes.
 */
#include "preload_grid.h"

#include <stdlib.h>
#include <string.h>

/* One look for a message (source, tag): *flag, the status; matched: taken, *message. */
static int probe_once(mln_pl_grid_t *g, mln_pl_gcomm_t *c, int source, int tag, int matched,
                      int *flag, MPI_Message *message, MPI_Status *status)
{
    const int any = source == MPI_ANY_SOURCE;
    const int look_local = any || mln_pl_grid_is_local(c, source), look_remote = any || !look_local;
    MPI_Status st;
    int rc = MPI_SUCCESS;

    *flag = 0;
    if (status != MPI_STATUS_IGNORE) /* fields MPI's probes leave alone stay the caller's */
        st = *status;
    else
        memset(&st, 0, sizeof(st));
    for (int pass = 0; pass < 2 && !*flag; pass++) {
        int remote = pass == 0 ? g->remote_first : !g->remote_first;
        if (remote && look_remote) {
            mln_relay_msg_t *m = mln_pl_grid_arrived(g, c, source, tag);
            if (m == NULL)
                continue;
            mln_pl_grid_remote_status(c, m, (MPI_Count)m->len, &st);
            *flag = 1;
            if (matched) {
                grid_msg_t *gm = calloc(1, sizeof(*gm));
                MPI_Request sent;
                /* a stand-in MPI_Message: a zero-byte message to ourselves */
                if (gm == NULL)
                    return MPI_ERR_NO_MEM;
                rc = mln_pmpi.Isend(NULL, 0, MPI_BYTE, 0, 0, mln_pl.self, &sent);
                if (rc == MPI_SUCCESS)
                    rc = mln_pmpi.Mprobe(0, 0, mln_pl.self, &gm->handle, MPI_STATUS_IGNORE);
                if (rc == MPI_SUCCESS)
                    rc = mln_pmpi.Request_free(&sent);
                if (rc != MPI_SUCCESS) {
                    free(gm);
                    return rc;
                }
                mln_relay_take(g->relay, m);
                gm->m = m;
                gm->c = c;
                gm->next = g->msgs;
                g->msgs = gm;
                *message = gm->handle;
            }
        } else if (!remote && look_local) {
            MPI_Message msg = MPI_MESSAGE_NULL;
            rc = mln_pl_grid_local_probe(c, source, tag, matched, flag, &msg, &st);
            if (rc != MPI_SUCCESS)
                return rc;
            if (*flag && matched) {
                grid_msg_t *gm = calloc(1, sizeof(*gm));
                if (gm == NULL)
                    return MPI_ERR_NO_MEM;
                gm->handle = *message = msg;
                gm->c = c;
                gm->next = g->msgs;
                g->msgs = gm;
            }
        } else {
            continue;
        }
        if (*flag && any) /* a wildcard receive next meets the same message first */
            g->remote_first = remote;
    }
    if (*flag && status != MPI_STATUS_IGNORE)
        *status = st;
    return rc;
}

static int probe_loop(int source, int tag, MPI_Comm comm, int blocking, int matched, int *flag,
                      MPI_Message *message, MPI_Status *status)
{
    mln_pl_grid_t *g = mln_pl.grid;
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    int rc, found = 0, spins = 0;

    if (source != MPI_ANY_SOURCE && source != MPI_PROC_NULL && (source < 0 || source >= c->size))
        return mln_pl_grid_fail(MPI_ERR_RANK);
    MLN_PL_LOCK();
    for (;;) {
        mln_pl_progress();           /* posted receives take their messages first */
        if (source == MPI_PROC_NULL) /* MPI's own answer */
            rc = matched ? mln_pmpi.Improbe(source, tag, c->local, &found, message, status)
                         : mln_pmpi.Iprobe(source, tag, c->local, &found, status);
        else
            rc = probe_once(g, c, source, tag, matched, &found, message, status);
        if (rc != MPI_SUCCESS || found || !blocking)
            break;
        mln_pl_idle(&spins);
    }
    MLN_PL_UNLOCK();
    if (flag != NULL)
        *flag = found;
    return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail(rc);
}

int mln_pl_grid_probe(int source, int tag, MPI_Comm comm, int blocking, int *flag,
                      MPI_Status *status)
{
    return probe_loop(source, tag, comm, blocking, 0, flag, NULL, status);
}

int mln_pl_grid_mprobe(int source, int tag, MPI_Comm comm, int blocking, int *flag,
                       MPI_Message *message, MPI_Status *status)
{
    return probe_loop(source, tag, comm, blocking, 1, flag, message, status);
}

int mln_pl_grid_mrecv(void *buf, MPI_Count count, MPI_Datatype dtype, MPI_Message *message,
                      MPI_Request *request, MPI_Status *status, int *rc)
{
    mln_pl_grid_t *g = mln_pl.grid;
    grid_msg_t *gm = NULL, **pp;
    mln_pl_req_t *r;
    MPI_Request req = MPI_REQUEST_NULL;

    if (g == NULL || g->msgs == NULL)
        return 0;
    for (pp = &g->msgs; *pp; pp = &(*pp)->next)
        if ((*pp)->handle == *message) {
            gm = *pp;
            *pp = gm->next;
            break;
        }
    if (gm == NULL)
        return 0;
    r = mln_pl_req_new(MLN_PL_RECV);
    if (r == NULL || mln_pl_req_greq(r) != MPI_SUCCESS) {
        free(r);
        *rc = mln_pl_grid_fail(MPI_ERR_NO_MEM);
        return 1;
    }
    r->grid = 1;
    r->gc = gm->c;
    r->buf = buf;
    r->count = count;
    r->dtype = dtype;
    r->comm = gm->c->handle;
    r->handle = r->greq;
    mln_pl_req_map_add(r);
    if (gm->m != NULL) { /* another site's: its stand-in is received, its bytes unpacked */
        mln_pmpi.Mrecv(NULL, 0, MPI_BYTE, message, MPI_STATUS_IGNORE);
        mln_pl_grid_remote_deliver(g, r, gm->m, 1);
    } else {
        mln_pl_grid_local_deliver(g, r, message);
    }
    *message = MPI_MESSAGE_NULL;
    free(gm);
    if (request != NULL) {
        *request = r->handle;
        *rc = MPI_SUCCESS;
    } else {
        req = r->handle;
        *rc = mln_pl_Wait(&req, status);
    }
    return 1;
}
