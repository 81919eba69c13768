/*
 * diff_compare.c - what the striped side got against what MPI got, on each rank.
 *
 * Receives that name their source: MPI's matching is deterministic, so receive j of the striped
 * side must equal receive j of the twin: the return codes of post and completion, the status
 * (source, tag, MPI_Get_count and MPI_Get_elements_x with the receive's datatype, MPI_ERROR
 * where MPI defines it: a waitall that failed), the request freed, and every byte of the buffer
 * (holes, the tail past the message, slack: all that MPI leaves alone).  The twin is also held
 * to the schedule's own model (it must hold the message the model says MPI matches).
 *
 * MPI_ANY_SOURCE classes: matching may differ from run to run, so each receive's message is
 * identified on each side by status and payload (fill(sender, id)); every message must be
 * identified once, receives posted earlier must hold earlier messages of the same sender
 * (non-overtaking), and each striped receive must equal the twin's receive of the same message.
 * Sends: the return codes of post and completion.
 */
#include "diff.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void diff_mismatch(diff_ctx_t *c, const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (++c->mismatches <= c->report)
        printf("MISMATCH rank %d, %s: %s\n", c->rank, c->where, msg);
    else if (c->mismatches == c->report + 1)
        printf("MISMATCH rank %d: more mismatches are counted, not printed (--report)\n", c->rank);
    fflush(stdout);
}

static const char *rank_name(int rank, char *buf, size_t len)
{
    if (rank == MPI_ANY_SOURCE)
        return "any";
    if (rank == MPI_PROC_NULL)
        return "proc-null";
    snprintf(buf, len, "%d", rank);
    return buf;
}

static const char *tag_name(int tag, char *buf, size_t len)
{
    if (tag == MPI_ANY_TAG)
        return "any";
    snprintf(buf, len, "%d", tag);
    return buf;
}

static void describe_msg(const diff_round_t *r, int i, char *buf, size_t len)
{
    const diff_msg_t *m = i >= 0 ? &r->msg[i] : NULL;
    char d[16];

    if (m == NULL) {
        snprintf(buf, len, "no message");
        return;
    }
    snprintf(buf, len, "message #%lld %d->%s comm %d tag %d: %lld x %s (%lld B, %s)",
             (long long)m->id, m->src, rank_name(m->dst, d, sizeof(d)), m->comm, m->tag,
             (long long)m->count, diff_type_name(m->base, m->lay),
             (long long)(m->n * diff_bsize[m->base]), m->blocking ? "blocking send" : "isend");
}

static void describe_recv(const diff_round_t *r, int j, char *buf, size_t len)
{
    const diff_recv_t *v = &r->recv[j];
    char s[16], t[16];

    snprintf(buf, len, "receive %d on rank %d from %s tag %s comm %d: %lld x %s%s%s", j, v->dst,
             rank_name(v->src, s, sizeof(s)), tag_name(v->tag, t, sizeof(t)), v->comm,
             (long long)v->count, diff_type_name(v->base, v->lay),
             v->late ? ", blocking, after the sends" : "", v->cls >= 0 ? ", ANY_SOURCE class" : "");
}

/* The calls of one operation, the striped side (a) against MPI's (b): what they returned (a
 * waitall's return is its group's), the request freed, MPI_ERROR where MPI defines it. */
static void compare_calls(diff_ctx_t *c, const char *what, const diff_result_t *a,
                          const diff_result_t *b)
{
    if (a->post != b->post)
        diff_mismatch(c, "%s: the post returned %s, MPI %s", what, mln_status_str(a->post),
                      mln_status_str(b->post));
    if (a->rc != b->rc)
        diff_mismatch(c, "%s: completion (%s) returned %s, MPI (%s) %s", what,
                      diff_method_name(a->method), mln_status_str(a->rc),
                      diff_method_name(b->method), mln_status_str(b->rc));
    if (a->left != b->left)
        diff_mismatch(c, "%s: the request is %snull after %s, MPI's %snull", what,
                      a->left ? "not " : "", diff_method_name(a->method), b->left ? "not " : "");
    if (b->err_defined && a->err != b->err)
        diff_mismatch(c, "%s: status MPI_ERROR class %d after %s, MPI %d", what, a->err,
                      diff_method_name(a->method), b->err);
}

/* 1 when the receive was cut to its buffer (its own MPI_ERROR where MPI sets one, else the
 * call's return). */
static int truncated(const diff_result_t *x)
{
    return x->err_defined ? x->err == MPI_ERR_TRUNCATE : x->rc == MLN_ERR_TRUNCATE;
}

/* What a receive got, the striped side (a) against MPI's (b) of the same message: its own
 * outcome, the status, every byte of the buffer. */
static void compare_data(diff_ctx_t *c, const char *what, const diff_result_t *a,
                         const diff_result_t *b)
{
    if (a->ok != b->ok)
        diff_mismatch(c, "%s: the receive %s, MPI's %s", what, a->ok ? "succeeded" : "failed",
                      b->ok ? "succeeded" : "failed");
    if (a->src != b->src || a->tag != b->tag)
        diff_mismatch(c, "%s: status source %d tag %d, MPI %d %d", what, a->src, a->tag, b->src,
                      b->tag);
    /* The count of a truncated receive is the implementation's choice, and they differ: Open
     * MPI gives the message's size, MPICH the buffer's over shared memory and 0 over its
     * network modules.  It is not compared; the buffer is, byte for byte. */
    if (!(truncated(a) && truncated(b)) && (a->count != b->count || a->elems != b->elems))
        diff_mismatch(c, "%s: status count %d elements %lld, MPI %d %lld", what, a->count,
                      (long long)a->elems, b->count, (long long)b->elems);
    if (a->span != b->span || memcmp(a->buf, b->buf, (size_t)a->span) != 0) {
        int64_t first = -1, ndiff = 0;
        for (int64_t i = 0; i < a->span && i < b->span; i++) {
            if (a->buf[i] != b->buf[i]) {
                ndiff++;
                if (first < 0)
                    first = i;
            }
        }
        diff_mismatch(c,
                      "%s: buffer differs in %lld of %lld bytes, first at offset %lld (0x%02x, "
                      "MPI 0x%02x)",
                      what, (long long)ndiff, (long long)a->span, (long long)first,
                      first >= 0 ? a->buf[first] : 0, first >= 0 ? b->buf[first] : 0);
    }
}

/* 1 when the first n elements of receive j's buffer are message i's payload. */
static int holds(const diff_ctx_t *c, const diff_round_t *r, int j, const diff_result_t *res, int i,
                 int64_t n)
{
    const diff_recv_t *v = &r->recv[j];
    const diff_msg_t *m = &r->msg[i];
    uint8_t *tmp;
    const uint8_t *s = diff_stream(c, res->buf, v->base, v->lay, v->count, &tmp);
    int64_t first;
    const int ok =
        pattern_wrong(s, n * diff_bsize[v->base], m->src, diff_pattern_id(m->id), &first) == 0;

    free(tmp);
    return ok;
}

/* Receives whose source is named: the striped side against the twin, the twin against the
 * schedule's model of MPI's matching. */
static void compare_named(diff_ctx_t *c, const diff_round_t *r, int j, const diff_result_t *a,
                          const diff_result_t *b)
{
    const diff_recv_t *v = &r->recv[j];
    char what[512], rd[224], md[224];

    describe_recv(r, j, rd, sizeof(rd));
    describe_msg(r, v->msg, md, sizeof(md));
    snprintf(what, sizeof(what), "%s, %s", rd, md);
    compare_calls(c, what, a, b);
    compare_data(c, what, a, b);
    if (v->msg >= 0 && a->ok && c->mismatches <= c->report &&
        (a->span != b->span || memcmp(a->buf, b->buf, (size_t)a->span) != 0)) {
        const int64_t n = a->elems < r->msg[v->msg].n ? a->elems : r->msg[v->msg].n;
        int first = -1, more = 0;
        for (int i = 0; i < r->nmsg && !holds(c, r, j, a, v->msg, n); i++) /* a swap: whose? */
            if (i != v->msg && r->msg[i].dst == c->rank && r->msg[i].base == v->base &&
                r->msg[i].n >= n && n > 0 && holds(c, r, j, a, i, n))
                more += first >= 0 ? 1 : (first = i, 0);
        if (first >= 0)
            diff_mismatch(c,
                          "%s: the buffer holds the payload of message #%lld (or of one of %d "
                          "more with the same pattern)",
                          what, (long long)r->msg[first].id, more);
    }
    if (v->msg >= 0 && b->ok) {
        const diff_msg_t *m = &r->msg[v->msg];
        if (b->src != m->src || b->tag != m->tag || b->elems != m->n ||
            !holds(c, r, j, b, v->msg, m->n))
            diff_mismatch(c, "%s: test model: MPI's receive does not hold this message", what);
    }
}

/* Which message of its class receive j holds on one side (-1: none that is not claimed). */
static int identify(const diff_ctx_t *c, const diff_round_t *r, int j, const diff_result_t *res,
                    const int *claimed)
{
    const diff_recv_t *v = &r->recv[j];
    const diff_class_t *k = &r->cls[v->cls];
    int best = -1;

    if (!res->ok)
        return -1;
    for (int i = 0; i < r->nmsg; i++) {
        const diff_msg_t *m = &r->msg[i];
        if (claimed[i] || m->dst != v->dst || m->comm != v->comm ||
            (k->tag != MPI_ANY_TAG && m->tag != k->tag) || m->src != res->src ||
            m->tag != res->tag || m->n != res->elems || (best >= 0 && m->pos > r->msg[best].pos))
            continue;
        if (holds(c, r, j, res, i, m->n))
            best = i;
    }
    return best;
}

/* One side's receives of class k: identified (ids[j]), each once, non-overtaking. */
static void identify_class(diff_ctx_t *c, const diff_round_t *r, int k, const int *order,
                           int norder, const diff_result_t *res, const char *side, int *ids,
                           int *claimed)
{
    char rd[224], md[224];

    for (int a = 0; a < norder; a++) {
        const int j = order[a];
        if (r->recv[j].cls != k)
            continue;
        ids[j] = identify(c, r, j, &res[j], claimed);
        describe_recv(r, j, rd, sizeof(rd));
        if (ids[j] < 0) {
            if (res[j].ok) /* errors: compared with the twin below */
                diff_mismatch(c,
                              "%s: %s: status source %d tag %d, %lld elements: no message of "
                              "its class (not yet received) has these and this payload",
                              rd, side, res[j].src, res[j].tag, (long long)res[j].elems);
            continue;
        }
        claimed[ids[j]] = 1;
        for (int b = 0; b < a; b++) { /* an earlier receive of the class, same sender */
            const int e = order[b];
            if (r->recv[e].cls == k && ids[e] >= 0 && r->msg[ids[e]].src == r->msg[ids[j]].src &&
                r->msg[ids[e]].pos > r->msg[ids[j]].pos) {
                describe_msg(r, ids[j], md, sizeof(md));
                diff_mismatch(c,
                              "%s: %s: holds %s, but receive %d, posted before it, holds the "
                              "later message #%lld of the same sender (non-overtaking)",
                              rd, side, md, e, (long long)r->msg[ids[e]].id);
            }
        }
    }
}

static void compare_classes(diff_ctx_t *c, const diff_round_t *r, const int *order, int norder,
                            const diff_side_t *mln, const diff_side_t *mpi)
{
    int *ids_a = malloc(sizeof(int) * (size_t)(r->nrecv + 1));
    int *ids_b = malloc(sizeof(int) * (size_t)(r->nrecv + 1));
    int *claimed = malloc(sizeof(int) * (size_t)(r->nmsg + 1));
    char what[512], rd[224], md[224];

    for (int k = 0; k < r->ncls; k++) {
        if (r->cls[k].dst != c->rank)
            continue;
        memset(claimed, 0, sizeof(int) * (size_t)(r->nmsg + 1));
        identify_class(c, r, k, order, norder, mln->recv, "mln_stripe", ids_a, claimed);
        memset(claimed, 0, sizeof(int) * (size_t)(r->nmsg + 1));
        identify_class(c, r, k, order, norder, mpi->recv, "test model: MPI", ids_b, claimed);
        for (int a = 0; a < norder; a++) {
            const int j = order[a];
            int twin = -1;
            if (r->recv[j].cls != k)
                continue;
            for (int b = 0; b < norder && ids_a[j] >= 0; b++)
                if (r->recv[order[b]].cls == k && ids_b[order[b]] == ids_a[j])
                    twin = order[b];
            describe_recv(r, j, rd, sizeof(rd));
            describe_msg(r, ids_a[j], md, sizeof(md));
            snprintf(what, sizeof(what), "%s, holding %s", rd, md);
            compare_calls(c, what, &mln->recv[j], &mpi->recv[j]); /* the same receive */
            if (twin >= 0) /* MPI's receive of the same message */
                compare_data(c, what, &mln->recv[j], &mpi->recv[twin]);
            else if (ids_a[j] < 0 && !mln->recv[j].ok)
                compare_data(c, what, &mln->recv[j], &mpi->recv[j]);
        }
    }
    free(claimed);
    free(ids_b);
    free(ids_a);
}

void diff_compare_round(diff_ctx_t *c, const diff_round_t *r, const diff_side_t *mln,
                        const diff_side_t *mpi)
{
    const diff_rank_plan_t *rp = &r->rank[c->rank];
    int *order = malloc(sizeof(int) * (size_t)(rp->nops + 1)), norder = 0;
    char what[256];

    for (int i = 0; i < rp->nops; i++) { /* this rank's receives in posting order */
        const diff_op_t *op = &rp->ops[i];
        if (op->kind == OP_IRECV || op->kind == OP_RECV)
            order[norder++] = op->index;
        if (op->kind == OP_ISEND || op->kind == OP_SEND) {
            describe_msg(r, op->index, what, sizeof(what));
            compare_calls(c, what, &mln->send[op->index], &mpi->send[op->index]);
        }
    }
    for (int a = 0; a < norder; a++)
        if (r->recv[order[a]].cls < 0)
            compare_named(c, r, order[a], &mln->recv[order[a]], &mpi->recv[order[a]]);
    compare_classes(c, r, order, norder, mln, mpi);
    free(order);
}
