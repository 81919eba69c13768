/*
 * delayline_core.c - the link model of mln-delayline, with no sockets.
 *
 * Each direction is a pipeline of three stages, driven by one binary heap of release times:
 *
 *   arrival --loss?--> [per-flow shaper] --tail drop?--> [link serialiser] --> +delay --> send
 *                      (optional; flow queue)            (link queue)
 *
 * The shaper and the serialiser are virtual clocks: `free_ns` is when the server is idle again,
 * so the backlog in bytes at time t is (free_ns - t) * rate / 8e9 and a frame of len bytes that
 * arrives at t leaves at max(t, free_ns) + len * 8e9 / rate.  A frame that would push the
 * backlog over the queue size is dropped (tail drop); an empty queue always takes a frame.
 * The per-flow stage needs its own events because flows leave it in a different order than
 * they arrived; the link stage's departures are then delayed by the fixed one-way delay.
 * Cost per frame: O(log n) heap work plus one flow-table probe of at most DL_FLOW_PROBE entries.
 */
#include "delayline_core.h"
#include "multilane_base.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- parsers ------------------------------------------------------------------------------- */

/* A non-negative decimal with an optional fraction; *end points after it. */
static int parse_decimal(const char *text, double *out, const char **end)
{
    char *e = NULL;
    double v;

    if (!isdigit((unsigned char)text[0]) && !(text[0] == '.' && isdigit((unsigned char)text[1])))
        return -1; /* rejects "", "-1", "+1", " 1", "inf", "nan" */
    errno = 0;
    v = strtod(text, &e);
    if (errno == ERANGE || e == text || !isfinite(v) || v < 0)
        return -1;
    for (const char *c = text; c < e; c++) /* no hex floats or exponents */
        if (!isdigit((unsigned char)*c) && *c != '.')
            return -1;
    *out = v;
    *end = e;
    return 0;
}

int dl_parse_time(const char *text, uint64_t *out_ns)
{
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
    const char *end;
    double v;

    if (text == NULL || parse_decimal(text, &v, &end) != 0)
        return -1;
    if (*end == '\0') { /* a bare number is only clear when it is zero */
        if (v != 0.0)
            return -1;
        *out_ns = 0;
        return 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) == 0) {
            double ns = v * units[i].ns;
            if (ns > 3600e9)
                return -1;
            *out_ns = (uint64_t)llround(ns);
            return 0;
        }
    }
    return -1;
}

int dl_parse_rate(const char *text, uint64_t *out_bps)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1.0},     {"bit", 1.0},  {"kbit", 1e3},
                 {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
    const char *end;
    double v;

    if (text == NULL || parse_decimal(text, &v, &end) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit) == 0) {
            double bps = v * units[i].mult;
            if (bps > 1e15 || (bps > 0 && bps < 1.0))
                return -1;
            *out_bps = (uint64_t)llround(bps);
            return 0;
        }
    }
    return -1;
}

int dl_parse_loss(const char *text, double *out_p)
{
    const char *end;
    double v;

    if (text == NULL || parse_decimal(text, &v, &end) != 0)
        return -1;
    if (strcmp(end, "%") == 0)
        v /= 100.0;
    else if (*end != '\0')
        return -1;
    if (v > 1.0)
        return -1;
    *out_p = v;
    return 0;
}

int dl_parse_size(const char *text, uint64_t *out_bytes)
{
    return mln_parse_size(text, out_bytes) == MLN_OK ? 0 : -1;
}

int dl_parse_blackhole(const char *text, uint16_t *out_port, uint64_t *out_bytes)
{
    const char *colon;
    unsigned long port = 0;
    uint64_t bytes;

    if (text == NULL || (colon = strchr(text, ':')) == NULL || colon == text || colon - text > 5)
        return -1;
    for (const char *c = text; c < colon; c++) {
        if (!isdigit((unsigned char)*c))
            return -1;
        port = port * 10 + (unsigned long)(*c - '0');
    }
    if (port == 0 || port > 65535 || dl_parse_size(colon + 1, &bytes) != 0)
        return -1;
    *out_port = (uint16_t)port;
    *out_bytes = bytes;
    return 0;
}

/* ---- PRNG ---------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void dl_rng_seed(dl_rng_t *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t dl_rng_next(dl_rng_t *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double dl_rng_uniform(dl_rng_t *r)
{
    return (double)(dl_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- flow keys ----------------------------------------------------------------------------- */

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

void dl_flow_key_parse(const uint8_t *frame, size_t len, dl_flow_key_t *key)
{
    size_t off = 14;

    memset(key, 0, sizeof(*key));
    if (len < 14)
        return;
    key->ethertype = rd16(frame + 12);
    if (key->ethertype == 0x8100 && len >= 18) { /* one 802.1Q tag */
        key->ethertype = rd16(frame + 16);
        off = 18;
    }
    if (key->ethertype != 0x0800 || len < off + 20 || (frame[off] >> 4) != 4)
        return; /* non-IPv4 frames: one flow per ethertype */
    const uint8_t *ip = frame + off;
    size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
    key->proto = ip[9];
    key->src = rd32(ip + 12);
    key->dst = rd32(ip + 16);
    int fragment = (rd16(ip + 6) & 0x3fff) != 0; /* MF or an offset: ports not in every piece */
    if ((key->proto == 6 || key->proto == 17) && !fragment && ihl >= 20 && len >= off + ihl + 4) {
        key->sport = rd16(ip + ihl);
        key->dport = rd16(ip + ihl + 2);
    }
}

uint32_t dl_tcp_payload(const uint8_t *frame, size_t len)
{
    size_t off = 14, ihl, total, doff;

    if (len < 14)
        return 0;
    if (rd16(frame + 12) == 0x8100 && len >= 18)
        off = 18;
    if (rd16(frame + off - 2) != 0x0800 || len < off + 20)
        return 0;
    const uint8_t *ip = frame + off;
    ihl = (size_t)(ip[0] & 0x0f) * 4;
    total = rd16(ip + 2);
    if ((ip[0] >> 4) != 4 || ip[9] != 6 || (rd16(ip + 6) & 0x3fff) != 0 || ihl < 20)
        return 0; /* not TCP over IPv4, or a fragment */
    if (total > len - off || total < ihl + 20)
        return 0; /* claims more than the frame holds, or no room for a TCP header */
    doff = (size_t)(ip[ihl + 12] >> 4) * 4;
    if (doff < 20 || ihl + doff > total)
        return 0;
    return (uint32_t)(total - ihl - doff);
}

static uint64_t flow_hash(const dl_flow_key_t *k)
{
    uint64_t x =
        ((uint64_t)k->src << 32 | k->dst) ^ ((uint64_t)k->sport << 48 | (uint64_t)k->dport << 32 |
                                             (uint64_t)k->ethertype << 8 | k->proto);
    return splitmix64(&x);
}

/* ---- pool ---------------------------------------------------------------------------------- */

int dl_pool_init(dl_pool_t *p, uint32_t count, uint32_t slot_size)
{
    memset(p, 0, sizeof(*p));
    if (count == 0 || slot_size == 0)
        return -1;
    p->mem = malloc((size_t)count * slot_size); /* pages are touched only when used */
    if (p->mem == NULL)
        goto err;
    p->free_list = malloc((size_t)count * sizeof(uint32_t));
    if (p->free_list == NULL)
        goto err_mem;
    for (uint32_t i = 0; i < count; i++)
        p->free_list[i] = count - 1 - i; /* slot 0 is handed out first */
    p->count = p->nfree = count;
    p->slot_size = slot_size;
    return 0;

err_mem:
    free(p->mem);
    p->mem = NULL;
err:
    return -1;
}

void dl_pool_fini(dl_pool_t *p)
{
    free(p->free_list);
    free(p->mem);
    memset(p, 0, sizeof(*p));
}

int dl_pool_get(dl_pool_t *p, uint32_t *out_slot)
{
    if (p->nfree == 0)
        return -1;
    *out_slot = p->free_list[--p->nfree];
    return 0;
}

void dl_pool_put(dl_pool_t *p, uint32_t slot)
{
    p->free_list[p->nfree++] = slot;
}

uint8_t *dl_pool_buf(const dl_pool_t *p, uint32_t slot)
{
    return p->mem + (size_t)slot * p->slot_size;
}

/* ---- heap ---------------------------------------------------------------------------------- */

int dl_heap_init(dl_heap_t *h, uint32_t cap)
{
    h->n = 0;
    h->cap = cap;
    h->ev = malloc((size_t)(cap ? cap : 1) * sizeof(dl_event_t));
    return h->ev ? 0 : -1;
}

void dl_heap_fini(dl_heap_t *h)
{
    free(h->ev);
    h->ev = NULL;
    h->n = h->cap = 0;
}

static int ev_before(const dl_event_t *a, const dl_event_t *b)
{
    return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->seq < b->seq);
}

int dl_heap_push(dl_heap_t *h, const dl_event_t *e)
{
    uint32_t i;

    if (h->n == h->cap)
        return -1;
    i = h->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!ev_before(e, &h->ev[parent]))
            break;
        h->ev[i] = h->ev[parent];
        i = parent;
    }
    h->ev[i] = *e;
    return 0;
}

int dl_heap_pop(dl_heap_t *h, dl_event_t *out)
{
    dl_event_t last;
    uint32_t i = 0;

    if (h->n == 0)
        return -1;
    *out = h->ev[0];
    last = h->ev[--h->n];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && ev_before(&h->ev[c + 1], &h->ev[c]))
            c++;
        if (!ev_before(&h->ev[c], &last))
            break;
        h->ev[i] = h->ev[c];
        i = c;
    }
    if (h->n > 0)
        h->ev[i] = last;
    return 0;
}

const dl_event_t *dl_heap_top(const dl_heap_t *h)
{
    return h->n ? &h->ev[0] : NULL;
}

/* ---- one direction ------------------------------------------------------------------------- */

uint64_t dl_ser_ns(uint64_t len, uint64_t rate_bps)
{
    if (rate_bps == 0)
        return 0;
    /* len * 8e9 fits easily in 64 bits for any frame size. */
    return (len * 8 * DL_NS_PER_S + rate_bps / 2) / rate_bps;
}

/* Bytes still queued in a server of `rate_bps` that is busy until `free_ns`, seen at `t`. */
static uint64_t backlog_bytes(uint64_t free_ns, uint64_t t, uint64_t rate_bps)
{
    if (free_ns <= t || rate_bps == 0)
        return 0;
    return (uint64_t)((double)(free_ns - t) * (double)rate_bps / 8e9 + 0.5);
}

int dl_dir_init(dl_dir_t *d, const dl_dir_params_t *prm, uint32_t capacity)
{
    memset(d, 0, sizeof(*d));
    d->prm = *prm;
    dl_rng_seed(&d->rng, prm->seed);
    if (dl_heap_init(&d->heap, capacity) != 0)
        goto err;
    if (prm->flow_rate_bps > 0) {
        d->flows = calloc(DL_FLOW_TABLE_SIZE, sizeof(dl_flow_entry_t));
        if (d->flows == NULL)
            goto err_heap;
    }
    return 0;

err_heap:
    dl_heap_fini(&d->heap);
err:
    return -1;
}

void dl_dir_fini(dl_dir_t *d)
{
    dl_heap_fini(&d->heap);
    free(d->flows);
    d->flows = NULL;
}

/*
 * The entry of `key`, searching DL_FLOW_PROBE slots from its hash.  A new flow takes an unused
 * slot or one whose flow is idle (no backlog: forgetting it changes nothing); when every slot
 * in the window is backlogged, the one with the least backlog is evicted and counted.
 */
static dl_flow_entry_t *flow_lookup(dl_dir_t *d, const dl_flow_key_t *key, uint64_t now_ns)
{
    uint32_t h = (uint32_t)flow_hash(key);
    dl_flow_entry_t *victim = NULL;

    for (uint32_t i = 0; i < DL_FLOW_PROBE; i++) {
        dl_flow_entry_t *e = &d->flows[(h + i) & (DL_FLOW_TABLE_SIZE - 1)];
        if (e->used && memcmp(&e->key, key, sizeof(*key)) == 0)
            return e;
        if (!e->used || e->free_ns <= now_ns) {
            if (victim == NULL || victim->used)
                victim = e; /* prefer unused, then the first idle one */
        } else if (victim == NULL ||
                   (victim->used && victim->free_ns > now_ns && e->free_ns < victim->free_ns)) {
            victim = e;
        }
    }
    if (victim->used && victim->free_ns > now_ns)
        d->ctr.flow_evict_busy++;
    victim->used = 1;
    victim->key = *key;
    victim->free_ns = 0;
    return victim;
}

static int push_event(dl_dir_t *d, uint64_t t, uint32_t tag, uint32_t len, uint32_t stage)
{
    dl_event_t e = {.time_ns = t, .seq = d->seq++, .tag = tag, .len = len, .stage = stage};
    return dl_heap_push(&d->heap, &e);
}

/* The link stage at time t: tail drop or schedule the delivery. */
static dl_verdict_t link_admit(dl_dir_t *d, uint64_t t, uint32_t len, uint32_t tag,
                               uint64_t *release_ns)
{
    uint64_t start = t, depart, q = 0;

    if (d->prm.rate_bps > 0) {
        if (d->link_free_ns > t) {
            start = d->link_free_ns;
            q = backlog_bytes(d->link_free_ns, t, d->prm.rate_bps);
        }
        if (q > 0 && q + len > d->prm.queue_bytes) {
            d->ctr.drop_queue++;
            return DL_DROP_QUEUE;
        }
        q += len;
        if (q > d->ctr.max_queue_bytes)
            d->ctr.max_queue_bytes = q;
    }
    depart = start + dl_ser_ns(len, d->prm.rate_bps);
    if (push_event(d, depart + d->prm.delay_ns, tag, len, DL_STAGE_LINK) != 0) {
        d->ctr.drop_nobuf++;
        return DL_DROP_NOBUF;
    }
    if (d->prm.rate_bps > 0)
        d->link_free_ns = depart;
    *release_ns = depart + d->prm.delay_ns;
    return DL_ACCEPT;
}

dl_verdict_t dl_dir_enqueue(dl_dir_t *d, uint64_t now_ns, uint32_t len, const dl_flow_key_t *key,
                            uint32_t tag, uint64_t *release_ns)
{
    d->ctr.rx_frames++;
    d->ctr.rx_bytes += len;
    if (d->prm.loss > 0 && dl_rng_uniform(&d->rng) < d->prm.loss) {
        d->ctr.drop_loss++;
        return DL_DROP_LOSS;
    }
    if (d->flows == NULL)
        return link_admit(d, now_ns, len, tag, release_ns);

    dl_flow_entry_t *f = flow_lookup(d, key, now_ns);
    uint64_t start = f->free_ns > now_ns ? f->free_ns : now_ns;
    uint64_t q = backlog_bytes(f->free_ns, now_ns, d->prm.flow_rate_bps);
    if (q > 0 && q + len > d->prm.flow_queue_bytes) {
        d->ctr.drop_flow++;
        return DL_DROP_FLOW;
    }
    uint64_t depart = start + dl_ser_ns(len, d->prm.flow_rate_bps);
    if (push_event(d, depart, tag, len, DL_STAGE_FLOW) != 0) {
        d->ctr.drop_nobuf++;
        return DL_DROP_NOBUF;
    }
    f->free_ns = depart;
    *release_ns = depart;
    return DL_ACCEPT;
}

uint64_t dl_dir_next_event(const dl_dir_t *d)
{
    const dl_event_t *top = dl_heap_top(&d->heap);
    return top ? top->time_ns : DL_TIME_NEVER;
}

dl_pop_t dl_dir_pop(dl_dir_t *d, uint64_t now_ns, uint32_t *tag, uint32_t *len)
{
    dl_event_t e;
    uint64_t release;

    while (d->heap.n > 0 && d->heap.ev[0].time_ns <= now_ns) {
        dl_heap_pop(&d->heap, &e);
        if (e.stage == DL_STAGE_LINK) {
            *tag = e.tag;
            *len = e.len;
            return DL_POP_SEND;
        }
        /* Left the flow shaper at its own time (not `now`): on to the link. */
        if (link_admit(d, e.time_ns, e.len, e.tag, &release) != DL_ACCEPT) {
            *tag = e.tag;
            *len = e.len;
            return DL_POP_DROPPED;
        }
    }
    return DL_POP_NONE;
}

void dl_dir_sent(dl_dir_t *d, uint32_t len, int ok)
{
    if (ok) {
        d->ctr.tx_frames++;
        d->ctr.tx_bytes += len;
    } else {
        d->ctr.drop_error++;
    }
}
