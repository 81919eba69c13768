/*
 * delayline_blackhole.c - --blackhole PORT:BYTES: a link that silently stops carrying one TCP
 * connection, as a firewall or a broken middlebox that drops a flow's state would.  Neither
 * end sees a reset or an ICMP error; only timers can tell (the fault tests of the striping
 * engine: tests/python/test_stripe_faults.py).
 *
 * Each rule counts the TCP payload of every flow (5-tuple) going to its port, whichever
 * direction of the link it crosses; the first flow whose count passes the rule's BYTES is
 * struck: the frame that passed the count is forwarded, and from the next one on every frame
 * of that flow and of its reverse (the acknowledgements) is dropped, for as long as the delay
 * line runs.  Each rule strikes once; other flows, to the same port too, are never touched.
 *
 * Cost per frame, with rules configured: the flow key and payload parsed, a comparison with
 * each struck flow, and a linear search of the count table (DL_BLACKHOLE_FLOWS entries at
 * most; a flow that finds it full is not counted and cannot be struck: `untracked`).
 */
#include "delayline_core.h"

#include <stdio.h>
#include <string.h>

void dl_blackhole_init(dl_blackhole_t *b, const dl_blackhole_spec_t *spec, int n)
{
    memset(b, 0, sizeof(*b));
    for (int i = 0; i < n && i < DL_MAX_BLACKHOLES; i++)
        b->rule[b->nrules++].spec = spec[i];
}

static dl_flow_key_t reverse(const dl_flow_key_t *k)
{
    dl_flow_key_t r = *k;
    r.src = k->dst;
    r.dst = k->src;
    r.sport = k->dport;
    r.dport = k->sport;
    return r;
}

static int same(const dl_flow_key_t *a, const dl_flow_key_t *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

/* The count of flow k, added when new; NULL when the table is full. */
static dl_blackhole_count_t *count_of(dl_blackhole_t *b, const dl_flow_key_t *k)
{
    for (uint32_t i = 0; i < b->ncount; i++)
        if (same(&b->count[i].key, k))
            return &b->count[i];
    if (b->ncount == DL_BLACKHOLE_FLOWS)
        return NULL;
    b->count[b->ncount] = (dl_blackhole_count_t){.key = *k, .bytes = 0};
    return &b->count[b->ncount++];
}

dl_bh_verdict_t dl_blackhole_frame(dl_blackhole_t *b, const uint8_t *frame, size_t len, int *rule)
{
    dl_flow_key_t k, r;
    dl_blackhole_count_t *c = NULL;
    uint32_t payload;
    int watched = 0;

    if (b->nrules == 0)
        return DL_BH_PASS;
    dl_flow_key_parse(frame, len, &k);
    if (k.proto != 6 || k.ethertype != 0x0800)
        return DL_BH_PASS;
    r = reverse(&k);
    for (int i = 0; i < b->nrules; i++) {
        const dl_blackhole_rule_t *h = &b->rule[i];
        if (h->struck && (same(&h->flow, &k) || same(&h->flow, &r)))
            return DL_BH_DROP;
        watched |= !h->struck && k.dport == h->spec.port;
    }
    payload = dl_tcp_payload(frame, len);
    if (!watched || payload == 0)
        return DL_BH_PASS;
    c = count_of(b, &k);
    if (c == NULL) {
        b->untracked++;
        return DL_BH_PASS;
    }
    c->bytes += payload;
    for (int i = 0; i < b->nrules; i++) {
        dl_blackhole_rule_t *h = &b->rule[i];
        if (h->struck || k.dport != h->spec.port || c->bytes <= h->spec.after_bytes)
            continue;
        h->struck = 1;
        h->flow = k;
        h->flow_bytes = c->bytes;
        *rule = i;
        return DL_BH_STRUCK;
    }
    return DL_BH_PASS;
}

void dl_flow_key_format(const dl_flow_key_t *k, char *out, size_t outlen)
{
    snprintf(out, outlen, "%u.%u.%u.%u:%u>%u.%u.%u.%u:%u", k->src >> 24, (k->src >> 16) & 255,
             (k->src >> 8) & 255, k->src & 255, k->sport, k->dst >> 24, (k->dst >> 16) & 255,
             (k->dst >> 8) & 255, k->dst & 255, k->dport);
}
