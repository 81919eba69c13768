/*
 * diff_plan.c - the schedule of the differential test: every rank draws the same round from
 * (seed, round index), so that all know every message, every receive and what MPI matches.
 *
 * A mixed round: up to round_ops messages between random ranks (now and then to the sender
 * itself or to MPI_PROC_NULL), sizes mostly small, often at the threshold and the 64-byte
 * header size, sometimes MiB-scale; a datatype per side of the same base type (the layouts
 * differ: vector into doubles, contiguous into indexed, ...).  Each (receiver, comm) takes one
 * mode: receives that name the source (a tag or MPI_ANY_TAG), or MPI_ANY_SOURCE classes.  Each
 * rank posts its receives (shuffled), sends (shuffled; some blocking), receives a few more with a
 * blocking call, then completes everything in shuffled groups by wait, waitall or a test loop;
 * compute gaps (longer than MLN_STRIPE_TIMEOUT) come between sends and before groups.
 *
 * A big round: one contiguous message of big_size bytes (past 2^31).  A burst round: rank A
 * sends X (64 B), `burst` 64-byte fillers, then 16 64-byte messages Y; B receives the fillers
 * in batches, then the Ys, and only then X: X's header is matched after many later ones.
 */
#include "diff.h"

#include <stdlib.h>
#include <string.h>

uint64_t rng_next(diff_rng_t *g)
{
    uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rng_below(diff_rng_t *g, uint64_t n)
{
    return n ? rng_next(g) % n : 0;
}

int rng_chance(diff_rng_t *g, double p)
{
    return (double)(rng_next(g) >> 11) * 0x1p-53 < p;
}

static void shuffle(diff_rng_t *g, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        const int j = (int)rng_below(g, (uint64_t)i + 1), x = a[i];
        a[i] = a[j];
        a[j] = x;
    }
}

/* ---- datatypes ------------------------------------------------------------------------------ */

const int diff_bsize[DIFF_NBASES] = {1, 4, 8};
const int diff_k[DIFF_NLAYS] = {1, 3, 4, 3, 2, 2};
const int diff_contig[DIFF_NLAYS] = {1, 1, 0, 0, 0, 1};

void diff_types_create(diff_types_t *ty)
{
    const MPI_Datatype bases[DIFF_NBASES] = {MPI_BYTE, MPI_INT, MPI_DOUBLE};

    for (int b = 0; b < DIFF_NBASES; b++) {
        const MPI_Datatype e = bases[b];
        const MPI_Aint bs = diff_bsize[b];
        const int two = 2, ilen[2] = {1, 2}, idisp[2] = {0, 3};
        MPI_Aint disp;
        MPI_Datatype tmp, *t = ty->t[b];

        t[LAY_PLAIN] = e;
        MPI_Type_contiguous(3, e, &t[LAY_CONTIG3]);
        MPI_Type_vector(2, 2, 3, e, &t[LAY_VECTOR]);
        MPI_Type_indexed(2, ilen, idisp, e, &tmp);
        MPI_Type_create_resized(tmp, 0, 6 * bs, &t[LAY_INDEXED]);
        MPI_Type_free(&tmp);
        disp = bs;
        MPI_Type_create_hindexed(1, &two, &disp, e, &tmp);
        MPI_Type_create_resized(tmp, bs, 3 * bs, &t[LAY_LB_GAP]);
        MPI_Type_free(&tmp);
        disp = 2 * bs;
        MPI_Type_create_hindexed(1, &two, &disp, e, &tmp);
        MPI_Type_create_resized(tmp, 2 * bs, 2 * bs, &t[LAY_LB_CONTIG]);
        MPI_Type_free(&tmp);
        for (int l = 0; l < DIFF_NLAYS; l++) {
            if (l != LAY_PLAIN)
                MPI_Type_commit(&t[l]);
            MPI_Type_get_extent(t[l], &ty->lb[b][l], &ty->extent[b][l]);
        }
    }
}

void diff_types_free(diff_types_t *ty)
{
    for (int b = 0; b < DIFF_NBASES; b++)
        for (int l = 1; l < DIFF_NLAYS; l++)
            MPI_Type_free(&ty->t[b][l]);
}

const char *diff_type_name(int base, int lay)
{
    static const char *const names[DIFF_NBASES][DIFF_NLAYS] = {
        {"byte", "byte/contig3", "byte/vector", "byte/indexed", "byte/lb-gap", "byte/lb-contig"},
        {"int", "int/contig3", "int/vector", "int/indexed", "int/lb-gap", "int/lb-contig"},
        {"double", "double/contig3", "double/vector", "double/indexed", "double/lb-gap",
         "double/lb-contig"}};
    return names[base][lay];
}

int64_t diff_span(const diff_types_t *ty, int base, int lay, int64_t count)
{
    return (int64_t)ty->lb[base][lay] + count * (int64_t)ty->extent[base][lay] + 32;
}

const char *diff_method_name(int method)
{
    static const char *const names[] = {"wait", "waitall", "test loop", "blocking call"};
    return names[method];
}

const char *diff_round_kind_name(int kind)
{
    static const char *const names[] = {"mixed", "big", "burst"};
    return names[kind];
}

/* ---- sizes and types ------------------------------------------------------------------------- */

/* Bytes of a message: 0, the 64-byte header size and its neighbours, small, around the
 * threshold, up to the threshold, and log-uniform up to max_size. */
static int64_t draw_size(const diff_params_t *p, diff_rng_t *g)
{
    const uint64_t r = rng_below(g, 100);
    int64_t n;

    if (r < 5)
        n = 0;
    else if (r < 15)
        n = 64;
    else if (r < 22)
        n = 63 + 2 * (int64_t)rng_below(g, 2);
    else if (r < 45)
        n = 1 + (int64_t)rng_below(g, 1024);
    else if (r < 65)
        n = rng_below(g, 2) ? p->thr - 1 + (int64_t)rng_below(g, 3)
                            : p->thr - 64 + (int64_t)rng_below(g, 129);
    else if (r < 85)
        n = 1024 + (int64_t)rng_below(g, p->thr > 1024 ? (uint64_t)(p->thr - 1024) : 1);
    else { /* above the threshold, denser towards it: lo + (max - lo) x u^2 */
        const int64_t lo = p->thr + 1, steps = 64, i = (int64_t)rng_below(g, steps + 1);
        n = lo + (int64_t)rng_below(g, 8);
        if (p->max_size > lo)
            n += (int64_t)((double)(p->max_size - lo) * (double)(i * i) / (double)(steps * steps));
    }
    if (n < 0)
        n = 0;
    return n > p->max_size ? p->max_size : n;
}

/* A datatype whose instances tile `bytes` (a few tries, else rounded down); base fixed if >= 0. */
static void draw_type(diff_rng_t *g, int64_t bytes, int base, int *out_base, int *out_lay,
                      int64_t *count)
{
    for (int tries = 0;; tries++) {
        const int b = base >= 0 ? base : (int)rng_below(g, DIFF_NBASES);
        const int l = (int)rng_below(g, DIFF_NLAYS);
        const int64_t unit = (int64_t)diff_bsize[b] * diff_k[l];
        if (bytes % unit == 0 || tries == 7) {
            *out_base = b;
            *out_lay = l;
            *count = bytes / unit;
            return;
        }
    }
}

/* ---- messages and receives ------------------------------------------------------------------ */

static int class_of(diff_round_t *r, diff_rng_t *g, int dst, int comm, int tag)
{
    for (int i = 0; i < r->ncls; i++)
        if (r->cls[i].dst == dst && r->cls[i].comm == comm && r->cls[i].tag == tag)
            return i;
    r->cls[r->ncls] = (diff_class_t){.dst = dst, .comm = comm, .tag = tag};
    r->cls[r->ncls].base = (int)rng_below(g, DIFF_NBASES);
    return r->ncls++;
}

static diff_msg_t *add_msg(diff_round_t *r, diff_state_t *st, int src, int dst, int comm, int tag)
{
    diff_msg_t *m = &r->msg[r->nmsg++];

    *m = (diff_msg_t){.id = st->next_id++, .src = src, .dst = dst, .comm = comm, .tag = tag};
    m->recv = -1;
    return m;
}

static diff_recv_t *add_recv(diff_round_t *r, int dst, int comm, int src, int tag, int intent)
{
    diff_recv_t *v = &r->recv[r->nrecv++];

    *v = (diff_recv_t){.dst = dst, .comm = comm, .src = src, .tag = tag, .intent = intent};
    v->cls = v->msg = -1;
    return v;
}

/* The messages of a mixed or big round, one receive each, and MPI_PROC_NULL receives. */
static void draw_messages(const diff_params_t *p, diff_rng_t *g, diff_state_t *st, diff_round_t *r)
{
    const int P = p->size, nm = r->kind == ROUND_BIG ? 1 : 1 + (int)rng_below(g, p->round_ops);
    int *mode = malloc(sizeof(int) * (size_t)(P * p->ncomms));

    r->msg = calloc((size_t)nm, sizeof(*r->msg));
    r->cls = calloc((size_t)nm, sizeof(*r->cls));
    r->recv = calloc((size_t)(nm + P), sizeof(*r->recv));
    for (int i = 0; i < P * p->ncomms; i++)
        mode[i] = -1; /* 0: sources named; 1: ANY_SOURCE by tag; 2: ANY_SOURCE and ANY_TAG */
    for (int i = 0; i < nm; i++) {
        const int src = (int)rng_below(g, (uint64_t)P);
        int dst = rng_chance(g, p->self_prob) ? src : (src + 1 + (int)rng_below(g, P - 1)) % P;
        diff_msg_t *m;
        diff_recv_t *v;
        int cls = -1, *md;
        int64_t bytes;

        if (r->kind == ROUND_MIXED && rng_chance(g, 0.03))
            dst = MPI_PROC_NULL;
        m = add_msg(r, st, src, dst, (int)rng_below(g, (uint64_t)p->ncomms),
                    p->tags[rng_below(g, DIFF_NTAGS)]);
        if (r->kind == ROUND_BIG) {
            const int lays[3] = {LAY_PLAIN, LAY_CONTIG3, LAY_LB_CONTIG};
            m->base = BASE_DOUBLE;
            m->lay = lays[rng_below(g, 3)];
            m->count = p->big_size / (8 * diff_k[m->lay]);
        } else {
            md = dst == MPI_PROC_NULL ? NULL : &mode[dst * p->ncomms + m->comm];
            if (md != NULL && *md < 0)
                *md = rng_below(g, 10) < 7 ? 0 : 1 + (int)rng_below(g, 2);
            if (md != NULL && *md > 0)
                cls = class_of(r, g, dst, m->comm, *md == 2 ? MPI_ANY_TAG : m->tag);
            bytes = draw_size(p, g);
            if (r->bytes + bytes > p->round_bytes)
                bytes = (int64_t)rng_below(g, 1025);
            draw_type(g, bytes, cls >= 0 ? r->cls[cls].base : -1, &m->base, &m->lay, &m->count);
        }
        m->n = m->count * diff_k[m->lay];
        r->bytes += m->n * diff_bsize[m->base];
        if (dst == MPI_PROC_NULL)
            continue;
        if (cls >= 0) {
            v = add_recv(r, dst, m->comm, MPI_ANY_SOURCE, r->cls[cls].tag, i);
            v->cls = cls;
            if (m->n > r->cls[cls].max_n)
                r->cls[cls].max_n = m->n;
        } else {
            v = add_recv(r, dst, m->comm, src, rng_chance(g, 0.25) ? MPI_ANY_TAG : m->tag, i);
            v->late = r->kind == ROUND_MIXED && rng_chance(g, 0.1);
        }
    }
    for (int rank = 0; rank < P && r->kind == ROUND_MIXED; rank++) {
        if (rng_chance(g, 0.1)) {
            diff_recv_t *v = add_recv(r, rank, (int)rng_below(g, (uint64_t)p->ncomms),
                                      MPI_PROC_NULL, MPI_ANY_TAG, -1);
            v->base = (int)rng_below(g, DIFF_NBASES);
            v->lay = (int)rng_below(g, DIFF_NLAYS);
            v->count = (int64_t)rng_below(g, 8);
            v->late = rng_chance(g, 0.2);
        }
    }
    free(mode);
}

/* Per rank: receives posted first, its sends, late receives (each list shuffled). */
typedef struct rank_order {
    int *pre, *sends, *late;
    int npre, nsends, nlate;
} rank_order_t;

static void order_ranks(const diff_params_t *p, diff_rng_t *g, diff_round_t *r, rank_order_t *o,
                        int *rpos)
{
    for (int k = 0; k < p->size; k++) {
        rank_order_t *ok = &o[k];
        ok->pre = malloc(sizeof(int) * (size_t)(r->nrecv + 1));
        ok->late = malloc(sizeof(int) * (size_t)(r->nrecv + 1));
        ok->sends = malloc(sizeof(int) * (size_t)(r->nmsg + 1));
        ok->npre = ok->nlate = ok->nsends = 0;
        for (int i = 0; i < r->nrecv; i++)
            if (r->recv[i].dst == k) {
                if (r->recv[i].late)
                    ok->late[ok->nlate++] = i;
                else
                    ok->pre[ok->npre++] = i;
            }
        for (int i = 0; i < r->nmsg; i++)
            if (r->msg[i].src == k)
                ok->sends[ok->nsends++] = i;
        shuffle(g, ok->pre, ok->npre);
        shuffle(g, ok->sends, ok->nsends);
        shuffle(g, ok->late, ok->nlate);
        for (int i = 0; i < ok->npre; i++)
            rpos[ok->pre[i]] = i;
        for (int i = 0; i < ok->nlate; i++)
            rpos[ok->late[i]] = ok->npre + i;
        for (int i = 0; i < ok->nsends; i++)
            r->msg[ok->sends[i]].pos = i;
    }
}

/*
 * MPI's matching where the receives name their source: per (receiver, comm, sender) the
 * messages in sending order each take the first receive, in posting order, whose tag fits.
 * That is what MPI does however messages and receives interleave.  Returns 0 when a receive
 * would be left without a message (MPI_ANY_TAG took another's): then the MPI_ANY_TAG receives
 * of that group get their intended message's tag and the caller matches again.
 */
static int match_named(diff_round_t *r, const int *rpos)
{
    int complete = 1;

    for (int i = 0; i < r->nrecv; i++)
        if (r->recv[i].cls < 0)
            r->recv[i].msg = -1;
    for (int i = 0; i < r->nmsg; i++)
        r->msg[i].recv = -1;
    for (int pass = 0; pass < r->nmsg; pass++) { /* messages by send position */
        for (int i = 0; i < r->nmsg; i++) {
            diff_msg_t *m = &r->msg[i];
            int best = -1;
            if (m->pos != pass || m->dst == MPI_PROC_NULL)
                continue;
            for (int j = 0; j < r->nrecv; j++) {
                const diff_recv_t *v = &r->recv[j];
                if (v->cls < 0 && v->msg < 0 && v->dst == m->dst && v->comm == m->comm &&
                    v->src == m->src && (v->tag == MPI_ANY_TAG || v->tag == m->tag) &&
                    (best < 0 || rpos[j] < rpos[best]))
                    best = j;
            }
            if (best >= 0) {
                m->recv = best;
                r->recv[best].msg = i;
            }
        }
    }
    for (int j = 0; j < r->nrecv; j++) {
        diff_recv_t *v = &r->recv[j];
        if (v->cls >= 0 || v->src == MPI_PROC_NULL || v->msg >= 0)
            continue;
        complete = 0;
        for (int k = 0; k < r->nrecv; k++) {
            diff_recv_t *w = &r->recv[k];
            if (w->cls < 0 && w->src == v->src && w->dst == v->dst && w->comm == v->comm &&
                w->tag == MPI_ANY_TAG)
                w->tag = r->msg[w->intent].tag;
        }
    }
    return complete;
}

/* Receive datatypes: the message's base type; the count fits, is larger, or truncates. */
static void draw_recv_types(const diff_params_t *p, diff_rng_t *g, diff_round_t *r)
{
    for (int c = 0; c < r->ncls; c++) {
        diff_class_t *k = &r->cls[c];
        k->lay = (int)rng_below(g, DIFF_NLAYS);
        k->count = (k->max_n + diff_k[k->lay] - 1) / diff_k[k->lay];
        if (rng_chance(g, 0.5))
            k->count += 1 + (int64_t)rng_below(g, 4);
    }
    for (int j = 0; j < r->nrecv; j++) {
        diff_recv_t *v = &r->recv[j];
        const diff_msg_t *m = v->msg >= 0 ? &r->msg[v->msg] : NULL;
        int64_t whole;
        if (v->cls >= 0) {
            v->base = r->cls[v->cls].base;
            v->lay = r->cls[v->cls].lay;
            v->count = r->cls[v->cls].count;
            continue;
        }
        if (m == NULL)
            continue; /* MPI_PROC_NULL: drawn with it */
        v->base = m->base;
        if (r->kind == ROUND_BIG) {
            const int lays[3] = {LAY_PLAIN, LAY_CONTIG3, LAY_LB_CONTIG};
            v->lay = lays[rng_below(g, 3)];
        } else {
            v->lay = (int)rng_below(g, DIFF_NLAYS);
        }
        whole = (m->n + diff_k[v->lay] - 1) / diff_k[v->lay];
        /* truncation: not past trunc_max, nor to self (Open MPI 5.0 gets both wrong, diff.h) */
        if (r->kind != ROUND_BIG && m->n > 0 && m->n * diff_bsize[m->base] <= p->trunc_max &&
            m->src != m->dst && rng_chance(g, p->trunc_prob))
            v->count = (int64_t)rng_below(g, (uint64_t)((m->n - 1) / diff_k[v->lay] + 1));
        else if (rng_chance(g, 0.3))
            v->count = whole + 1 +
                       (int64_t)rng_below(g, r->kind == ROUND_BIG
                                                 ? 1
                                                 : (uint64_t)(whole < 128 ? whole / 2 + 1 : 64));
        else
            v->count = whole;
    }
}

/* ---- the operations of each rank ---------------------------------------------------------- */

static diff_op_t *op_push(diff_rank_plan_t *rp, int kind, int index)
{
    if ((rp->nops & (rp->nops - 1)) == 0)
        rp->ops = realloc(rp->ops, sizeof(*rp->ops) * (size_t)(rp->nops ? 2 * rp->nops : 8));
    rp->ops[rp->nops] = (diff_op_t){.kind = kind, .index = index, .slot = -1};
    if (kind == OP_IRECV || kind == OP_ISEND)
        rp->ops[rp->nops].slot = rp->nslots++;
    return &rp->ops[rp->nops++];
}

/* A compute gap of rank k here, with probability gap_prob while its budget lasts. */
static void maybe_gap(const diff_params_t *p, diff_rng_t *g, diff_state_t *st, int k,
                      diff_rank_plan_t *rp)
{
    if (p->gap_prob > 0 && rng_chance(g, p->gap_prob) && st->gap_left[k] >= p->gap_seconds) {
        st->gap_left[k] -= p->gap_seconds;
        op_push(rp, OP_GAP, -1)->gap = p->gap_seconds;
    }
}

/* Completes slots[0..n) (copied) as one group: an OP_COMPLETE. */
static void group_add(diff_rank_plan_t *rp, int method, const int *slots, int n, int cap)
{
    const int first =
        rp->ngroups ? rp->groups[rp->ngroups - 1].first + rp->groups[rp->ngroups - 1].len : 0;

    if (rp->slots == NULL)
        rp->slots = malloc(sizeof(int) * (size_t)(cap > 0 ? cap : 1));
    if ((rp->ngroups & (rp->ngroups - 1)) == 0)
        rp->groups =
            realloc(rp->groups, sizeof(*rp->groups) * (size_t)(rp->ngroups ? 2 * rp->ngroups : 8));
    memcpy(rp->slots + first, slots, sizeof(int) * (size_t)n);
    rp->groups[rp->ngroups] = (diff_group_t){.method = method, .first = first, .len = n};
    op_push(rp, OP_COMPLETE, rp->ngroups++);
}

static void build_mixed_ops(const diff_params_t *p, diff_rng_t *g, diff_state_t *st,
                            diff_round_t *r, const rank_order_t *o)
{
    for (int k = 0; k < p->size; k++) {
        diff_rank_plan_t *rp = &r->rank[k];
        int *slots;

        for (int i = 0; i < o[k].npre; i++)
            op_push(rp, OP_IRECV, o[k].pre[i]);
        for (int i = 0; i < o[k].nsends; i++) {
            const diff_msg_t *m = &r->msg[o[k].sends[i]];
            op_push(rp, m->blocking ? OP_SEND : OP_ISEND, o[k].sends[i]);
            maybe_gap(p, g, st, k, rp);
        }
        for (int i = 0; i < o[k].nlate; i++)
            op_push(rp, OP_RECV, o[k].late[i]);
        slots = malloc(sizeof(int) * (size_t)(rp->nslots + 1));
        for (int i = 0; i < rp->nslots; i++)
            slots[i] = i;
        shuffle(g, slots, rp->nslots);
        for (int i = 0; i < rp->nslots;) {
            const int left = rp->nslots - i;
            const int n = 1 + (int)rng_below(g, (uint64_t)(left < 8 ? left : 8));
            maybe_gap(p, g, st, k, rp);
            group_add(rp, (int)rng_below(g, 3), slots + i, n, rp->nslots);
            i += n;
        }
        free(slots);
    }
}

/* A burst: A sends X, the fillers, then the Ys (all 64 B); B receives the fillers in batches
 * of 256, then the Ys, then X with a blocking receive. */
static void plan_burst(const diff_params_t *p, diff_rng_t *g, diff_state_t *st, diff_round_t *r)
{
    enum { NY = 16, BATCH = 256 };
    const int P = p->size, a = (int)rng_below(g, (uint64_t)P),
              b = (a + 1 + (int)rng_below(g, P - 1)) % P;
    const int n = p->burst + 1 + NY, comm = (int)rng_below(g, (uint64_t)p->ncomms);
    int tags[DIFF_NTAGS], *batch = malloc(sizeof(int) * (NY + 1 + BATCH));
    diff_rank_plan_t *ra = &r->rank[a], *rb = &r->rank[b];

    memcpy(tags, p->tags, sizeof(tags));
    shuffle(g, tags, DIFF_NTAGS);
    r->msg = calloc((size_t)n, sizeof(*r->msg));
    r->recv = calloc((size_t)n, sizeof(*r->recv));
    for (int i = 0; i < n; i++) { /* 0: X (tag 0), 1 .. burst: fillers (tag 1), then the Ys */
        diff_msg_t *m = add_msg(r, st, a, b, comm, tags[i == 0 ? 0 : i <= p->burst ? 1 : 2]);
        diff_recv_t *v = add_recv(r, b, comm, a, m->tag, i);
        m->base = v->base = BASE_BYTE;
        m->lay = v->lay = LAY_PLAIN;
        m->count = m->n = v->count = 64;
        m->pos = i;
        m->recv = i;
        v->msg = i;
        r->bytes += 64;
    }
    r->recv[0].late = 1;
    op_push(ra, OP_ISEND, 0);
    for (int i = 1; i <= p->burst; i += BATCH) {
        const int len = p->burst + 1 - i < BATCH ? p->burst + 1 - i : BATCH;
        for (int j = 0; j < len; j++) {
            batch[j] = op_push(ra, OP_ISEND, i + j)->slot;
            op_push(rb, OP_IRECV, i + j);
        }
        group_add(ra, HOW_WAITALL, batch, len, n);
        for (int j = 0; j < len; j++)
            batch[j] = rb->nslots - len + j;
        group_add(rb, HOW_WAITALL, batch, len, n);
    }
    batch[0] = 0;
    for (int j = 0; j < NY; j++) {
        batch[j + 1] = op_push(ra, OP_ISEND, p->burst + 1 + j)->slot;
        op_push(rb, OP_IRECV, p->burst + 1 + j);
    }
    group_add(ra, HOW_WAITALL, batch, NY + 1, n);
    for (int j = 0; j < NY; j++)
        batch[j] = rb->nslots - NY + j;
    group_add(rb, HOW_WAITALL, batch, NY, n);
    op_push(rb, OP_RECV, 0);
    free(batch);
}

void diff_plan_round(const diff_params_t *p, diff_state_t *st, int index, diff_round_t *r)
{
    diff_rng_t g = {p->seed ^ (0xA0761D6478BD642Full * (uint64_t)(index + 1))};
    rank_order_t *o;
    int *rpos;

    memset(r, 0, sizeof(*r));
    r->index = index;
    r->rank = calloc((size_t)p->size, sizeof(*r->rank));
    r->kind = rng_chance(&g, p->big_prob)     ? ROUND_BIG
              : rng_chance(&g, p->burst_prob) ? ROUND_BURST
                                              : ROUND_MIXED;
    if (r->kind == ROUND_BURST) {
        plan_burst(p, &g, st, r);
        return;
    }
    draw_messages(p, &g, st, r);
    o = calloc((size_t)p->size, sizeof(*o));
    rpos = calloc((size_t)r->nrecv + 1, sizeof(int));
    order_ranks(p, &g, r, o, rpos);
    while (!match_named(r, rpos))
        ;
    draw_recv_types(p, &g, r);
    for (int i = 0; i < r->nmsg; i++) { /* blocking only where the receive is posted first */
        diff_msg_t *m = &r->msg[i];
        m->blocking = rng_chance(&g, 0.2) && (m->recv < 0 || !r->recv[m->recv].late);
    }
    build_mixed_ops(p, &g, st, r, o);
    for (int k = 0; k < p->size; k++) {
        free(o[k].pre);
        free(o[k].sends);
        free(o[k].late);
    }
    free(o);
    free(rpos);
}

void diff_round_free(diff_round_t *r, int size)
{
    for (int k = 0; k < size; k++) {
        free(r->rank[k].ops);
        free(r->rank[k].slots);
        free(r->rank[k].groups);
    }
    free(r->rank);
    free(r->msg);
    free(r->recv);
    free(r->cls);
    memset(r, 0, sizeof(*r));
}

void diff_round_print(const diff_round_t *r, int size, FILE *out)
{
    static const char *const kinds[] = {"irecv", "isend", "send", "recv", "gap", "complete"};

    fprintf(out, "# round %d (%s): %d messages, %d receives, %d classes\n", r->index,
            diff_round_kind_name(r->kind), r->nmsg, r->nrecv, r->ncls);
    for (int i = 0; i < r->nmsg; i++) {
        const diff_msg_t *m = &r->msg[i];
        fprintf(out, "#   msg %d: id %lld %d->%d comm %d tag %d %lld x %s pos %d%s -> recv %d\n", i,
                (long long)m->id, m->src, m->dst, m->comm, m->tag, (long long)m->count,
                diff_type_name(m->base, m->lay), m->pos, m->blocking ? " blocking" : "", m->recv);
    }
    for (int j = 0; j < r->nrecv; j++) {
        const diff_recv_t *v = &r->recv[j];
        fprintf(out, "#   recv %d: on %d from %d tag %d comm %d %lld x %s class %d%s <- msg %d\n",
                j, v->dst, v->src, v->tag, v->comm, (long long)v->count,
                diff_type_name(v->base, v->lay), v->cls, v->late ? " late" : "", v->msg);
    }
    for (int k = 0; k < size; k++) {
        const diff_rank_plan_t *rp = &r->rank[k];
        fprintf(out, "#   rank %d:", k);
        for (int i = 0; i < rp->nops; i++) {
            const diff_op_t *op = &rp->ops[i];
            fprintf(out, " %s %d", kinds[op->kind], op->index);
            if (op->kind == OP_COMPLETE) {
                const diff_group_t *g = &rp->groups[op->index];
                fprintf(out, "(%s:", diff_method_name(g->method));
                for (int s = 0; s < g->len; s++)
                    fprintf(out, " %d", rp->slots[g->first + s]);
                fprintf(out, ")");
            }
            if (op->slot >= 0)
                fprintf(out, "[%d]", op->slot);
            fprintf(out, i + 1 < rp->nops ? "," : "\n");
        }
        if (rp->nops == 0)
            fprintf(out, "\n");
    }
}
