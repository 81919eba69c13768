/*
 * lane_tcp_int.h - what the two halves of the tcp lanes share: lane_tcp.c (frames, scheduling,
 * progress), tcp_conn.c (the listener, connecting without blocking, hellos, failures and
 * the kernel's evidence about a peer) and tcp_early.c (early frames that come before their
 * message's header matched).
 */
#ifndef MLN_LANE_TCP_INT_H
#define MLN_LANE_TCP_INT_H

#include "stripe_int.h"

#include "link/link.h"

#include <poll.h>

#define TCP_FRAME_MAGIC 0x4d4c4e46u /* "MLNF": a chunk follows (sent after the CTS) */
#define TCP_EARLY_MAGIC 0x4d4c4e59u /* "MLNY": a chunk of [0, hdr.early), sent before the CTS */
#define TCP_END_MAGIC 0x4d4c4e45u   /* "MLNE": no more frames of this message on this lane */
#define TCP_MAX_ADDRS 4
#define TCP_CONNECT_TIMEOUT_S 10.0
#define TCP_HELLO_TIMEOUT_S 5.0     /* an accepted connection must finish its handshake by then */
#define TCP_MAX_PENDING 64          /* accepted connections waiting for their hello */
#define TCP_HOUSEKEEPING_S 0.1      /* idle: listener and hello deadlines looked at this often */
#define TCP_EVIDENCE_PERIOD_S 1.0   /* busy: each peer's TCP_INFO looked at, at most this seldom */
#define TCP_UNANSWERED 3            /* transmissions unanswered in a row: the peer's host is gone */
#define TCP_READ_BUDGET (8u << 20)  /* bytes read from one socket per pass */
#define TCP_NOTSENT_MIN (16u << 10) /* a lane's TCP_NOTSENT_LOWAT at least (lane_tcp.c) */

typedef struct tcp_frame {
    uint32_t magic;
    uint32_t len;
    uint64_t msg_id;
    uint64_t offset;
} tcp_frame_t;

/* A frame on the wire: the header, the link's tag over it (MLN_LINK_SECURITY auth, aead), the
 * payload (aead: encrypted) and, for a payload, its tag (aead, or auth with the payload MAC). */
#define TCP_WIRE_HEAD_MAX (sizeof(tcp_frame_t) + MLN_LINK_TAG_BYTES)

/* What every rank publishes at mln_init. */
typedef struct tcp_card {
    uint16_t port;
    uint16_t naddrs;
    uint32_t addrs[TCP_MAX_ADDRS]; /* IPv4, network order */
} tcp_card_t;

typedef struct tcp_chunk {
    mln_req_t *req; /* NULL for an END frame */
    uint64_t off;
    uint64_t sent; /* frame + payload bytes written */
    tcp_frame_t frame;
    int sealed; /* its tags are made (its place in the link's sequence is fixed) */
    int own;    /* its payload goes from the lane's seal buffer (aead, or a fault's copy) */
    unsigned char tag[2][MLN_LINK_TAG_BYTES]; /* over the header, over the payload */
    struct tcp_chunk *next;
} tcp_chunk_t;

typedef struct tcp_out {
    int fd;
    int lane;
    int connected;  /* 0 while its non-blocking connect or its handshake is in progress */
    int hello_sent; /* connected at the TCP level, hello sent: the challenge is awaited */
    unsigned char hb[MLN_LINK_CHALLENGE_BYTES]; /* the challenge as it comes */
    size_t hgot;
    mln_link_t link;
    unsigned char *seal; /* the head chunk's payload as it goes out (aead: encrypted) */
    size_t seal_cap;
    int tamper;        /* MLN_STRIPE_FAULT tamper/forge/split struck: the next frame is spoilt */
    double hold_until; /* split: the lane writes nothing until then */
    tcp_chunk_t *head, *tail;
    int nqueued;
    uint64_t queued_bytes;
    uint64_t written; /* payload bytes (MLN_STRIPE_FAULT; a test of the spread) */
    /* the kernel's evidence (tcp_conn.c): when the peer's host last acknowledged anything, as
     * far as we have seen, and the kernel's retransmission count then */
    double ack_at;
    uint32_t retrans_at_ack;
} tcp_out_t;

typedef enum { PEER_NONE, PEER_CONNECTING, PEER_UP, PEER_FAILED } tcp_peer_state_t;

/* Lanes' TCP_INFO: bytes acknowledged, retransmissions and segments sent, summed; their largest
 * smoothed round trip (s); their mean smoothed round trip over the least any of them ever saw
 * (the path's own: 1 with no queue on the path, above when the lanes keep one standing, the
 * bottleneck always busy; 0 when unknown); how many of them last sent less than their windows
 * allowed (the kernel's delivery-rate sample was application-limited), of how many. */
typedef struct tcp_lanes_info {
    uint64_t acked;
    uint32_t retrans, segs;
    double rtt;
    double queue;
    int app_limited, n;
} tcp_lanes_info_t;

/* MLN_STRIPE_LANES=auto (tcp_auto.c): the lane count of one peer, found by measuring.  A
 * level (a lane count) is warmed up (new lanes leave slow start), then measured over intervals
 * in which a striped send to the peer was always moving: the bytes the peer's host acknowledged
 * (TCP_INFO) per second.  Levels double while that raises the rate by AUTO_GAIN or the lanes'
 * loss is the path's (no larger share of segments lost than the level before); the first that
 * does neither sends it back to the one before, where it settles; a settled peer whose lanes are
 * window-bound probes twice the lanes now and then, one whose rate rose (once; again only after
 * AUTO_REPROBE_S) or whose program now streams messages four times larger searches again from its
 * level, one whose lanes overflow a queue tries half of them. */
typedef enum { AUTO_OFF, AUTO_GROW, AUTO_WARM, AUTO_MEASURE, AUTO_SETTLED } tcp_auto_phase_t;

typedef struct tcp_auto {
    tcp_auto_phase_t phase;
    int level;           /* lanes being measured (or opened, in AUTO_GROW) */
    int prev;            /* the level measured before it (0: none) */
    double prev_rate;    /* its rate, bytes/s */
    double t0;           /* the current interval's start */
    tcp_lanes_info_t i0; /* the lanes up then */
    double busy;         /* seconds of this interval a send to the peer was seen moving */
    double sum;          /* rates of this level's intervals */
    int nsamples;
    uint32_t retrans;                 /* retransmissions over this level's intervals */
    uint32_t segs;                    /* segments sent over them */
    uint32_t prev_retrans, prev_segs; /* the level before's */
    int loss_base;         /* the level before a doubling kept for the path's loss (0: none) */
    double loss_base_rate; /* its rate */
    int room;              /* doublings are kept for the link's room (the path's loss, no queue) */
    int mid;               /* twice the level before is tried: four times it filled the link */
    int path_loss; /* a level lost segments with no queue, or twice the lanes no larger share:
                    * the path's own loss (lone classes search up with it) */
    int down;      /* 1 while fewer lanes than a settled level are tried */
    double down_from_rate; /* that level's settle_rate then */
    int down_tried;        /* fewer lanes were tried since the last search up */
    int settled_n;         /* AUTO_SETTLED: intervals measured since */
    int rose;              /* AUTO_SETTLED: intervals in a row its rate rose by AUTO_GAIN */
    int rose_searched;     /* a rise called a search again (the next waits AUTO_REPROBE_S) */
    int stream_log2;       /* log2 of the largest message sent beside another so far (0: none) */
    int stream_grew;       /* one AUTO_STREAM_GROW_LOG2 larger came while settled */
    double queue;          /* the level's lanes' round trip over the path's least, its last
                            * interval (above AUTO_QUEUE: a standing queue, the link is full) */
    double settled_busy;   /* AUTO_SETTLED: seconds measured since (the next probe's clock) */
    double rate;           /* the settled level's rate (reports) */
    double settle_rate;    /* its rate when it settled: a rise by AUTO_GAIN since calls a probe */
    double looked;         /* the last look (a gap between looks: the program was away) */
    double warm_looked;    /* the last look whether a warming level's lanes left slow start */
    uint64_t win;          /* a lane's window (bytes in flight per round trip), 0: unknown */
    double win_at;         /* when it was looked at */
    uint64_t sending;      /* the last look (pass) that saw a striped send to the peer moving */
} tcp_auto_t;

/* Auto for a message that finds the peer's lanes idle (a ping-pong's, a program's occasional
 * large message; tcp_auto.c "Lone messages"): its own lane count per size class, found from
 * the time such messages take, one sample per message. */
#define BURST_CLASSES 12 /* 512 KiB (2^19), 1 MiB, ..., 1 GiB and more */

#define TCP_BURST_SAMPLES_MAX 8 /* lone messages timed per level at most */

/* A level of a lone class, as measured: its lanes, its time (the fastest of its samples, or their
 * median where one lost segments), their median, and whether one lost segments. */
typedef struct tcp_burst_level {
    int n;      /* lanes (0: none) */
    double t;   /* s */
    double med; /* s */
    int lost;
} tcp_burst_level_t;

typedef struct tcp_burst {
    int level;              /* lanes for the class (0: no message of it yet) */
    int first;              /* its first level (the streaming level then) */
    int down;               /* 1 while fewer lanes than the first are tried */
    tcp_burst_level_t prev; /* the level sampled before (n 0: none) */
    tcp_burst_level_t base; /* while `twice`: the level before the first of two doublings */
    int twice;              /* the second of two doublings is being measured */
    int settled;
    int since;          /* messages at the settled level (one in BURST_REPROBE is timed) */
    int nsamples;       /* of the level being measured */
    double sampled;     /* the sum of their times (s) */
    double best;        /* their fastest time (s) */
    double best_share;  /* its share of time waiting on windows */
    double best_rounds; /* and its round trips */
    double times[TCP_BURST_SAMPLES_MAX]; /* their times (s) */
    int lost;                            /* how many of them lost segments (retransmitted) */
    uint32_t retrans;                    /* their retransmissions, summed */
    double segs;                         /* and their segments (bytes / MSS) */
    int room;     /* a level's samples lost the path's share (at most AUTO_LOSS_RANDOM): the search
                   * goes up in steps of four while more lanes are no slower */
    int floor;    /* with room: the lanes that carry a message in one flight of windows the path's
                   * loss allows (0: none; mln_tcp_loss_floor) */
    int mid;      /* twice the level before a step of four that was slower is being tried */
    int again;    /* the level, slower, is measured once more (its lanes warm now) */
    int few;      /* messages of this search (since the class last settled) that lost a few segments
                   * (TCP_LOSS_FEW), at any level */
    int runs;     /* and those that lost a run of them (TCP_LOSS_RUN) */
    int run;      /* a message of the level being measured lost a run */
    int from_few; /* room was set from `few` alone (no level lost segments in two messages, and
                   * the streaming level had not seen the path's loss) */
} tcp_burst_t;

/* The lone message in flight, timed: from its start to the moment its lanes' send queues are
 * empty (every byte acknowledged). */
typedef struct tcp_sample {
    int on;
    int cls, n;        /* its size class and lanes */
    uint64_t bytes;    /* its size */
    double t0;         /* its start */
    double looked;     /* the last look (a gap: the program was away, the time is not the path's) */
    double polled;     /* the last look at the queues */
    uint64_t busy0;    /* the lanes' busy time then (us, the kernel's), summed */
    uint64_t limit0;   /* of which waiting on a window (receive window or send buffer) */
    uint32_t retrans0; /* the lanes' retransmissions then, summed */
} tcp_sample_t;

typedef struct tcp_peer {
    tcp_peer_state_t state;
    tcp_out_t *out; /* our lanes to this peer (NULL until the first striped message) */
    int nout;       /* lanes opened: [0, nup) are up, [nup, nout) still connecting (auto) */
    int nup;        /* lanes that may carry frames */
    int active;     /* lanes [0, active) take new chunks: MLN_STRIPE_LANES, or auto's level */
    int cap;        /* room in out[]: MLN_STRIPE_LANES, or MLN_STRIPE_LANES_MAX */
    int grow_stop;  /* auto: a lane beyond the first ones failed to open: no more are tried */
    double grow_deadline;
    int notsent_lanes, notsent_nup; /* lanes taking chunks (mln_tcp_lanes_now) and nup when the
                                     * lanes' TCP_NOTSENT_LOWAT was set */
    tcp_auto_t a;
    int burst; /* auto: lanes [0, burst) take the chunks of a lone message (0: active's) */
    tcp_burst_t bc[BURST_CLASSES];
    tcp_sample_t bs;
    uint32_t tries[TCP_MAX_ADDRS + 1]; /* addresses to try, in order */
    int ntries, attempt;
    double deadline; /* of the attempt in progress */
    double checked;  /* last look at its TCP_INFO */
} tcp_peer_t;

/* IN_HELLO and IN_RESPONSE: the handshake; IN_SEALED: a payload read whole into in->stage,
 * whose tag is checked before any byte of it goes on. */
enum { IN_HELLO, IN_RESPONSE, IN_FRAME, IN_PAYLOAD, IN_DISCARD, IN_SEALED };

/* An early frame whose message's header had not matched when it came: kept aside. */
typedef struct tcp_stash {
    int src;
    int matched; /* its header matched while it was being read: handed over when whole */
    uint64_t msg_id, off, len;
    char *data;
    struct tcp_stash *next;
} tcp_stash_t;

typedef struct tcp_in {
    int fd;
    int src;
    int lane;
    int state;
    int used; /* a frame came on it: its end is news about the messages of src */
    double deadline;
    uint32_t addr;          /* the peer's address (network order; loopback for a local one) */
    mln_link_hello_t hello; /* as parsed (src and lane are set once the response is right) */
    mln_link_t link;
    unsigned char hb[MLN_LINK_HELLO_BYTES]; /* hello, response or frame header as it comes */
    size_t hgot;
    tcp_frame_t frame;    /* the frame being read (IN_SEALED: its tag's associated data) */
    unsigned char *stage; /* IN_SEALED: payload and tag */
    size_t stage_cap;
    uint64_t lands; /* IN_SEALED: bytes of the payload that go on to dst */
    /* the frame being read: IN_PAYLOAD puts `left` bytes at dst (in req's buffer, or stash's),
     * then IN_DISCARD drops `skip` (an early chunk beyond what the receive accepts) */
    mln_req_t *req;
    tcp_stash_t *stash;
    int early; /* an early frame: req counts it once it is whole */
    char *dst;
    uint64_t left;
    uint64_t skip;
} tcp_in_t;

struct mln_tcp_state {
    int lfds[TCP_MAX_ADDRS + 1]; /* one listener per address the lanes use (loopback too) */
    int nlfd;
    mln_link_job_t job; /* the key and mode every rank shares (src/link) */
    tcp_card_t *cards;  /* by world rank */
    tcp_peer_t *peers;  /* by world rank: our lanes to them */
    int *in_broken;     /* by world rank: their lanes to us failed (mpi lanes for good) */
    tcp_in_t **ins;
    int nin, cap_in;
    struct pollfd *pfds;
    int cap_pfds;
    double housekept;     /* last idle look at the listener */
    double accept_paused; /* out of descriptors: the listener rests until then */
    int warned;           /* connections without a hello were closed (said once) */
    int warned_stranger;  /* connections from no rank's address were closed (said once) */
    tcp_stash_t *stash;   /* early frames of messages whose header has not matched */
    uint64_t auto_pass;   /* MLN_STRIPE_LANES=auto's looks (tcp_auto.c) */
    double lone_at;       /* auto: when the last timed lone message started */
};

/* tcp_conn.c */
mln_status_t mln_tcp_tune(const mln_stripe_t *s, int fd);
/* A lane's TCP_NOTSENT_LOWAT when `lanes` take a peer's chunks: MLN_STRIPE_NOTSENT split over
 * them, at least TCP_NOTSENT_MIN (all of it when smaller); 0: MLN_STRIPE_NOTSENT=0, no limit. */
int mln_tcp_notsent_share(const mln_stripe_t *s, int lanes);
/* Sets it (a refusal is logged at debug level: the lane stays as it was). */
void mln_tcp_notsent_set(int fd, int value);
void mln_tcp_mute(tcp_out_t *o, int peer);
/* Starts opening the lanes to peer (without blocking); 0 once they failed for good. */
int mln_tcp_ready(mln_stripe_t *s, int peer);
/* Moves the connects in progress on; returns 1 when one did. */
int mln_tcp_connect_progress(mln_stripe_t *s, const struct pollfd *pfds, int n);
/* Our lanes to peer are gone (st: why): closed, and the engine told (mln_stripe_tcp_lost). */
void mln_tcp_out_lost(mln_stripe_t *s, int peer, mln_status_t st);
/* Their lanes from src are gone (st: why). */
void mln_tcp_in_lost(mln_stripe_t *s, int src, mln_status_t st);
void mln_tcp_in_drop(mln_tcp_state_t *t, int i);
void mln_tcp_accept(mln_stripe_t *s);
/* Hello deadlines and the cap on connections that have not said hello. */
void mln_tcp_pending_expire(mln_stripe_t *s, double now);
/* The kernel's word on our lanes with data in flight: a peer whose host has acknowledged
 * nothing for MLN_STRIPE_TIMEOUT while the kernel retransmits is gone (MLN_ERR_TIMEOUT). */
void mln_tcp_evidence(mln_stripe_t *s, double now);
/* An in-lane's hello arrived (in->hb): 1 when it is a lane of this job meant for us from the
 * address of its rank (the challenge went back: IN_RESPONSE; mode none: the lane is admitted,
 * IN_FRAME); 0 when it must be closed. */
int mln_tcp_hello_check(mln_stripe_t *s, tcp_in_t *in);
/* An in-lane's response arrived: 1 when it proves the key (the lane is admitted), else 0. */
int mln_tcp_response_check(mln_stripe_t *s, tcp_in_t *in);
/* Bytes of a frame's header on the wire (header and its tag). */
size_t mln_tcp_wire_head(const mln_tcp_state_t *t);
mln_status_t mln_tcp_open(mln_stripe_t *s);
void mln_tcp_close(mln_stripe_t *s);
void mln_tcp_out_lanes_close(tcp_peer_t *p);

/* Opens lanes [p->nout, want) to peer (without blocking; they join once up): auto's growth.
 * 0 when none could start (the peer keeps the lanes it has, and opens no more). */
int mln_tcp_grow(mln_stripe_t *s, int peer, int want);

/* tcp_auto.c */
/* Lanes a peer starts with: MLN_STRIPE_LANES, or auto's first level. */
int mln_tcp_auto_first(const mln_stripe_t *s);
/* The peer's lanes just came up: auto starts measuring. */
void mln_tcp_auto_start(mln_stripe_t *s, int peer, double now);
/* Auto: the fewest lanes, a power of two up to cap, whose loss-bound windows carry a lone message
 * of `segs` segments in one flight, its samples having lost `lost` of `sent` segments; 0 where
 * nothing was lost or the message took more than BURST_FLIGHTS_MAX round trips (`rounds`). */
int mln_tcp_loss_floor(double segs, uint32_t lost, double sent, double rounds, int cap);
/* Auto: what one lone message's losses say of the path (`retrans` of its `segs` segments, in
 * `rounds` round trips): TCP_LOSS_NONE, TCP_LOSS_FEW (some, at most AUTO_LOSS_RANDOM of them, in
 * at most BURST_FLIGHTS_MAX round trips: as a path's own random loss falls) or TCP_LOSS_RUN (more:
 * a burst that overflowed a queue).  A message of more round trips that lost a few: TCP_LOSS_NONE
 * (cubic filling a queue loses as few over many round trips). */
enum { TCP_LOSS_NONE, TCP_LOSS_FEW, TCP_LOSS_RUN };
int mln_tcp_lone_loss(uint32_t retrans, double segs, double rounds);
/* Auto: 1 when a lone message class's first level of n lanes should try half as many: its lanes
 * waited on their windows `share` of their busy time, each carried `lane_bytes` a round trip of
 * its `window`, its messages took `t` seconds (the level's time) and `runs` of them lost a run of
 * segments (TCP_LOSS_RUN). */
int mln_tcp_lone_fewer(int n, double share, double lane_bytes, double window, double t, int runs);

/* One look per progress pass: auto's intervals, samples and decisions for every peer. */
void mln_tcp_auto_step(mln_stripe_t *s, double now);

/* A pass with no tcp message moving: a lone message still draining is looked at (for at most
 * BURST_LONE_S after it started), nothing else. */
void mln_tcp_auto_idle(mln_stripe_t *s, double now);

/* Lanes [0, n) take new chunks to p: a lone message's (auto), else the active ones. */
static inline int mln_tcp_lanes_now(const tcp_peer_t *p)
{
    return p->burst > 0 ? p->burst : p->active;
}

/* tcp_early.c */
#define TCP_BAD_INDEX UINT64_MAX
/* The chunk index that frame {magic, off, len} has in receive r, or TCP_BAD_INDEX when it does
 * not fit r (its grid, its early part or its accepted part, a chunk that came already). */
uint64_t mln_tcp_frame_index(const mln_req_t *r, uint32_t magic, uint64_t off, uint64_t len);
/* Bytes of a frame at off of len that land in r's buffer (the rest is dropped). */
uint64_t mln_tcp_frame_lands(const mln_req_t *r, uint64_t off, uint64_t len);
/* An early frame f from in->src whose message is unknown here: read into the stash.  1 when
 * in is set to read it, 0 for a frame that cannot be kept (said why: src's lanes must go). */
int mln_tcp_stash_begin(mln_stripe_t *s, tcp_in_t *in, const tcp_frame_t *f);
/* A stash entry is whole: handed to its receive if its header matched.  0 when it did not fit
 * that receive (said why: src's lanes must go). */
int mln_tcp_stash_done(mln_stripe_t *s, int src, tcp_stash_t *e);
/* The map of the chunks that landed (r->got), one bit per frame of r: its accepted chunks and
 * its early ones (those may reach past what it accepts). */
mln_status_t mln_tcp_got_alloc(mln_req_t *r);
/* A header with early bytes matched (lane op recv_early): its receive expects them. */
mln_status_t mln_tcp_recv_early(mln_stripe_t *s, mln_req_t *r);
/* Drops the stash entries of src (all when src < 0). */
void mln_tcp_stash_drop(mln_tcp_state_t *t, int src);

#endif /* MLN_LANE_TCP_INT_H */
