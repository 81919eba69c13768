/*
 * relay_rank_int.h - the rank side's state (relay.h), shared by relay_open.c (joining: the
 * run's settings, the connections to the gateways), relay_rank.c (sending, progress, closing)
 * and relay_recv.c (frames in: reassembly, per-pair order, ACK, MATCHED).  One thread at a
 * time: the caller serializes every call on one mln_relay_t.
 */
#ifndef MLN_RELAY_RANK_INT_H
#define MLN_RELAY_RANK_INT_H

#include "relay/relay.h"
#include "relay_int.h"

#include <stdint.h>

/* A send (relay.h's handle). */
struct mln_relay_send {
    int dst;
    uint32_t context;
    int tag;
    int sync;
    const unsigned char *buf;
    uint64_t n;
    uint64_t seq;
    uint64_t chunk;                   /* payload bytes per frame */
    int striped;                      /* over every trunk (else all on the pair's trunk) */
    uint64_t next_off;                /* bytes handed to the connections */
    int handed_all;                   /* every frame is queued (n = 0: its one empty frame too) */
    uint64_t frames_out, frames_done; /* queued; written or failed (frame_done) */
    int matched;                      /* sync: MATCHED came */
    int orphan;      /* tested after a fatal event with frames still queued: freed at close */
    mln_status_t st; /* MLN_OK, or what failed */
    mln_relay_send_t *next;                /* the pair's queue of sends with frames to hand out */
    mln_relay_send_t *sync_next;           /* the pair's sends waiting for MATCHED */
    mln_relay_send_t *all_next, *all_prev; /* every live send */
};

/* A frame of ours on its way out: the cookie of its done callback, freed there. */
typedef struct relay_frame {
    mln_relay_oframe_t f;
    mln_relay_send_t *send; /* NULL: a control frame */
} relay_frame_t;

/* Sending to one rank. */
typedef struct relay_tx {
    uint64_t next_seq;
    uint64_t sent, acked;          /* credit units: handed out, acknowledged (every trunk) */
    uint64_t *t_sent, *t_acked;    /* the same per trunk (trunks entries each) */
    mln_relay_send_t *head, *tail; /* sends with frames to hand out, in seq order */
    mln_relay_send_t *sync_wait;   /* sync sends waiting for MATCHED */
    struct relay_tx *next_active;  /* the list of pairs with sends queued */
    int active;
} relay_tx_t;

/* A message being reassembled. */
typedef struct relay_part {
    mln_relay_msg_t *m; /* its bytes, allocated at the first frame */
    uint64_t got;       /* payload bytes in */
    uint64_t (*iv)[2];  /* the byte ranges in: sorted, disjoint, not touching */
    int niv, ivcap;
    int complete;
} relay_part_t;

/* Receiving from one rank. */
typedef struct relay_rx {
    uint64_t next_seq;   /* the next message to deliver */
    relay_part_t **ring; /* messages [next_seq, next_seq + cap) by seq % cap; cap: 2^k */
    uint64_t cap;
    uint64_t *t_units, *t_acked; /* per trunk: credit units received; as of its last ACK */
} relay_rx_t;

/* The arrived messages of one context. */
typedef struct relay_ctx {
    uint32_t context;
    mln_relay_msg_t *head, *tail;
} relay_ctx_t;

struct mln_relay {
    mln_relay_sites_t sites;
    int site, me, trunks;
    uint64_t window, chunk, stripe_min;
    double timeout;
    mln_link_job_t job;
    mln_relay_conn_t conns[MLN_RELAY_MAX_TRUNKS];
    int gone[MLN_RELAY_MAX_TRUNKS];      /* closed (while closing: no failure) */
    int read_more[MLN_RELAY_MAX_TRUNKS]; /* frames may wait in the connection's buffer */
    char gw_addr[MLN_RELAY_MAX_TRUNKS][96];
    relay_tx_t *tx; /* by global rank */
    relay_rx_t *rx;
    uint64_t *credit; /* the per-trunk counters of tx and rx: 4 x nranks x trunks */
    uint64_t out[MLN_RELAY_MAX_TRUNKS];  /* per trunk: units handed out and not acknowledged,
                                            every pair */
    double rate[MLN_RELAY_MAX_TRUNKS];   /* per trunk: units acknowledged per second while it
                                            was busy (moving average; 0: not known yet) */
    double ack_at[MLN_RELAY_MAX_TRUNKS]; /* per trunk: its last ACK, or when it became busy */
    relay_tx_t *active;
    int turn; /* striped frames: ties go to the trunk after the last one used */
    mln_relay_send_t *sends;
    relay_ctx_t *ctxs;
    int nctx, ctxcap;
    int closing, dead;
    mln_relay_fatal_fn fatal_fn;
    void *fatal_arg;
    mln_relay_stats_t stats;
    double bulk_at; /* when a message of stripe_min bytes or more last started out or moved in */
};

/* The trunk of the frames of pair (src, dst) that are not striped: the same both ways, so that
 * a request and its answer (and the ACKs) wake the same two gateways, whose next wake-up is
 * then sooner (a ping-pong over 8 trunks paid ~40 us more than over 1 when each direction had
 * its own). */
static inline int mln_relay_pair_trunk(const mln_relay_t *r, int src, int dst)
{
    const uint64_t lo = (uint64_t)(src < dst ? src : dst), hi = (uint64_t)(src < dst ? dst : src);

    return (int)((lo * 31u + hi) % (uint64_t)r->trunks);
}

/* relay_rank.c */
/* A fatal event: r is dead from now on; the handler is called (else the line printed, exit). */
void mln_relay_fail(mln_relay_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int mln_relay_queue(mln_relay_t *r, int t, const mln_relay_hdr_t *h, const unsigned char *payload,
                    unsigned char *own, mln_relay_send_t *s);
/* A frame of no payload to dst on trunk t (-1: the pair's trunk); fatal when out of memory. */
void mln_relay_queue_ctl(mln_relay_t *r, int t, int type, int dst, uint64_t seq, uint64_t offset);

/* relay_recv.c */
/* A frame read from trunk t (checked against the connection's scope). */
void mln_relay_on_frame(mln_relay_t *r, int t, const mln_relay_hdr_t *h,
                        const unsigned char *payload);
/* Frees what receiving holds (messages in progress, arrived and not taken). */
void mln_relay_recv_free(mln_relay_t *r);

#endif /* MLN_RELAY_RANK_INT_H */
