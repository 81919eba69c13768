/*
 * stripe_inline.c - user messages of exactly 64 bytes (8 doubles: common).
 *
 * A 64-byte message on the user's (comm, tag) is always a header, so a user message of that
 * size goes as a header with MLN_HDR_INLINE, and its bytes follow on the control comm as
 * {msg id, 64 bytes} with tag MLN_TAG_INLINE + msg id % inline_tags.  That tag is not unique:
 * the receiver matches headers in the order the user posts receives (any tags, any
 * communicators), so the payload that comes first on a tag may belong to a header it has not
 * matched yet.  The receiver therefore takes payloads with MPI_Improbe + MPI_Mrecv, checks the
 * id, and hands a payload that is not the one it wants to the receive that wants it, or keeps
 * it aside until that header is matched.  A payload never lands in the wrong receive.
 *
 * Cost: one header and one 72-byte message, as two eager MPI messages.
 */
#include "stripe_int.h"

#include <stdlib.h>
#include <string.h>

static int inline_tag(const mln_stripe_t *s, uint64_t msg_id)
{
    return MLN_TAG_INLINE + (int)(msg_id % (uint64_t)s->inline_tags);
}

mln_status_t mln_stripe_inline_send(mln_stripe_t *s, mln_req_t *r, int dest_world)
{
    mln_status_t st = MLN_OK;

    r->inl.msg_id = r->msg_id;
    memcpy(r->inl.data, r->buf, MLN_STRIPE_HDR_SIZE);
    r->state = MLN_REQ_INLINE;
    if (r->sync) /* MPI_Ssend's promise: done once the receiver matched the header */
        MLN_MPI_CHECK(
            MPI_Issend(&r->hdr, MLN_STRIPE_HDR_SIZE, MPI_BYTE, r->peer, r->tag, r->comm, &r->mreq),
            st, out);
    else
        MLN_MPI_CHECK(
            MPI_Isend(&r->hdr, MLN_STRIPE_HDR_SIZE, MPI_BYTE, r->peer, r->tag, r->comm, &r->mreq),
            st, out);
    MLN_MPI_CHECK(MPI_Isend(&r->inl, (int)sizeof(r->inl), MPI_BYTE, dest_world,
                            inline_tag(s, r->msg_id), s->ctrl, &r->mreq2),
                  st, out);
out:
    return st;
}

/* The payload of r arrived: into the user's buffer (cut to its size, as MPI would). */
static void deliver(mln_stripe_t *s, mln_req_t *r, const mln_stripe_inline_t *p)
{
    const uint64_t n = r->cap < MLN_STRIPE_HDR_SIZE ? r->cap : MLN_STRIPE_HDR_SIZE;

    if (n > 0) /* an empty receive may have no buffer (NULL) */
        memcpy(r->buf, p->data, (size_t)n);
    r->st_bytes = n;
    mln_stripe_req_finish(s, r, n < MLN_STRIPE_HDR_SIZE ? MLN_ERR_TRUNCATE : MLN_OK);
}

/* The receive in INLINE state that waits for (src, msg_id), or NULL. */
static mln_req_t *waiting_for(mln_stripe_t *s, int src, uint64_t msg_id)
{
    for (mln_req_t *r = s->active; r; r = r->next)
        if (!r->is_send && r->state == MLN_REQ_INLINE && r->peer_world == src &&
            r->msg_id == msg_id)
            return r;
    return NULL;
}

/* An inline header was matched: its payload may be here already. */
void mln_stripe_inline_expect(mln_stripe_t *s, mln_req_t *r)
{
    r->state = MLN_REQ_INLINE;
    for (mln_inline_stash_t **pp = &s->stash; *pp; pp = &(*pp)->next) {
        mln_inline_stash_t *e = *pp;
        if (e->src == r->peer_world && e->payload.msg_id == r->msg_id) {
            *pp = e->next;
            deliver(s, r, &e->payload);
            free(e);
            return;
        }
    }
}

/* Takes the payloads that have arrived for r's tag from r's sender, until r has its own. */
static int take_payloads(mln_stripe_t *s, mln_req_t *r)
{
    const int src = r->peer_world, tag = inline_tag(s, r->msg_id);
    int moved = 0;

    while (r->state == MLN_REQ_INLINE) {
        mln_stripe_inline_t p;
        MPI_Message msg;
        MPI_Status mst;
        int flag = 0;
        mln_req_t *to;

        if (MPI_Improbe(src, tag, s->ctrl, &flag, &msg, &mst) != MPI_SUCCESS) {
            mln_stripe_req_fail(s, r, MLN_ERR_MPI);
            return 1;
        }
        if (!flag)
            return moved;
        moved = 1;
        if (MPI_Mrecv(&p, (int)sizeof(p), MPI_BYTE, &msg, &mst) != MPI_SUCCESS) {
            mln_stripe_req_fail(s, r, MLN_ERR_MPI);
            return 1;
        }
        to = p.msg_id == r->msg_id ? r : waiting_for(s, src, p.msg_id);
        if (to != NULL) {
            deliver(s, to, &p);
        } else { /* its header is not matched yet */
            mln_inline_stash_t *e = malloc(sizeof(*e));
            if (e == NULL) {
                mln_stripe_req_fail(s, r, MLN_ERR_NOMEM);
                return 1;
            }
            *e = (mln_inline_stash_t){.src = src, .payload = p, .next = s->stash};
            s->stash = e;
        }
    }
    return moved;
}

int mln_stripe_inline_progress(mln_stripe_t *s)
{
    int moved = 0;
    mln_req_t *next;

    for (mln_req_t *r = s->active; r; r = next) {
        next = r->next;
        if (!r->is_send && r->state == MLN_REQ_INLINE) {
            moved |= take_payloads(s, r);
            next = r->next; /* deliver() may have completed others: the list changed */
            if (r->state == MLN_REQ_DONE)
                next = s->active; /* r left the list: start over (every pass is short) */
        }
    }
    return moved;
}

void mln_stripe_inline_fini(mln_stripe_t *s)
{
    while (s->stash) {
        mln_inline_stash_t *e = s->stash;
        s->stash = e->next;
        free(e);
    }
}
