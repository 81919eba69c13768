/*
 * stripe_int.h - internals of striped point-to-point (src/p2p): the engine, the requests, the
 * wire formats and the lane ops tables.  docs/STRIPE.md explains the protocol and the failure
 * semantics that the code below keeps.
 */
#ifndef MLN_STRIPE_INT_H
#define MLN_STRIPE_INT_H

#include "mln_core.h"

#include <pthread.h>
#include <stdint.h>

/* ---- wire formats ---------------------------------------------------------------------- */

#define MLN_STRIPE_MAGIC 0x4d4c4e53u /* "MLNS" */
#define MLN_STRIPE_VERSION 3
#define MLN_STRIPE_HDR_SIZE 64 /* a message of exactly this size on (comm, tag) is a header */
#define MLN_STRIPE_CHUNK_MAX ((uint64_t)1 << 30) /* a chunk is one MPI message: an int count */
#define MLN_COUNT_UNKNOWN UINT64_MAX

enum {
    MLN_HDR_INLINE = 1 /* the user's message is HDR_SIZE bytes: it follows on the control comm */
};

/* How the payload of one message travels (proposed by the sender in the header, settled by
 * the receiver's CTS). */
typedef enum mln_lane_kind {
    MLN_LANE_TCP = 0,
    MLN_LANE_HELPER = 1,
    MLN_LANE_MPI = 2,
    MLN_LANE_KINDS
} mln_lane_kind_t;

/* The header on the user's (comm, tag): 64 bytes, little-endian host order (homogeneous). */
typedef struct mln_stripe_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    int32_t src_world; /* the sender's rank in MPI_COMM_WORLD */
    uint32_t kind;     /* mln_lane_kind_t */
    uint64_t msg_id;   /* unique per sender */
    uint64_t total;    /* payload bytes */
    uint64_t chunk;    /* chunk size (chunk i is [i*chunk, ...)) */
    uint64_t early;    /* tcp: bytes [0, early) already on the lanes, sent before the CTS: a
                          multiple of chunk, or total (docs/STRIPE.md "Early chunks") */
    unsigned char pad[12];
    uint32_t crc; /* CRC-32 of the 60 bytes before it */
} mln_stripe_hdr_t;

/*
 * Control messages, both ways, on the control comm with one tag (MLN_TAG_CTL), so that MPI's
 * non-overtaking rule orders them per pair of ranks (a CTS always arrives before an abort of
 * the same message).  msg_id is always the sender's id of the message.
 */
typedef enum mln_ctl_type {
    MLN_CTL_CTS = 1,    /* receiver -> sender: post the payload (kind, accept, tag_base) */
    MLN_CTL_NAK = 2,    /* receiver -> sender: the receive failed before its CTS (status) */
    MLN_CTL_RABORT = 3, /* receiver -> sender: the receive failed after its CTS (status) */
    MLN_CTL_SABORT = 4, /* sender -> receiver: the send failed after the CTS (status, count) */
    MLN_CTL_SACK = 5,   /* sender -> receiver: answer to RABORT (count) */
    MLN_CTL_SWITCH = 6  /* sender -> receiver: tcp lanes are gone, set up mpi lanes instead */
} mln_ctl_type_t;

typedef struct mln_stripe_ctl {
    uint32_t type;    /* mln_ctl_type_t */
    uint32_t kind;    /* CTS: the lanes the receiver set up */
    uint64_t msg_id;  /* the sender's id of the message */
    uint64_t value;   /* CTS: bytes accepted; SABORT, SACK: what is still in flight (below) */
    int32_t tag_base; /* CTS: chunk i travels with tag tag_base + i (mpi, helper) */
    int32_t status;   /* NAK, RABORT, SABORT: why (mln_status_t) */
} mln_stripe_ctl_t;
/* SABORT/SACK value: mpi and helper lanes: chunks the sender posted (chunks [0, value) will
 * arrive, none after); tcp lanes: END frames the receiver gets (one per lane that may still
 * carry frames of it); MLN_COUNT_UNKNOWN: the sender no longer knows the message, so it sent
 * everything. */

/* Inline payload: a 64-byte user message, with its message id so that the receiver can check
 * that it took the right one (MLN_TAG_INLINE + msg_id % inline_tags is not unique). */
typedef struct mln_stripe_inline {
    uint64_t msg_id;
    unsigned char data[MLN_STRIPE_HDR_SIZE];
} mln_stripe_inline_t;

/* Control-comm tags; [data_tag_lo, data_tag_hi] is allocated by receivers to chunks. */
enum {
    MLN_TAG_CTL = 1,
    MLN_TAG_FWD_HDR = 2,  /* to a helper: mln_fwd_hdr_t */
    MLN_TAG_FWD_DATA = 3, /* to a helper: the chunk it forwards */
    MLN_TAG_INLINE = 16   /* [16, 16 + inline_tags): header-sized messages, by msg id */
};

/* ---- requests ---------------------------------------------------------------------------- */

typedef enum mln_req_state {
    MLN_REQ_RAW,    /* a plain MPI message (mreq) */
    MLN_REQ_HDR,    /* receive: waiting for a message on (comm, tag) */
    MLN_REQ_INLINE, /* header-sized payload on the control comm */
    MLN_REQ_CTS,    /* send: header out, waiting for the receiver's CTS */
    MLN_REQ_TAGS,   /* receive: header matched, waiting for a free range of chunk tags */
    MLN_REQ_DATA,   /* payload moving over the lanes */
    MLN_REQ_ABORT,  /* failed (result set): waiting until nothing uses the user's buffer */
    MLN_REQ_DONE
} mln_req_state_t;

typedef struct mln_stripe mln_stripe_t;

struct mln_stripe_request {
    mln_stripe_t *owner; /* the engine it belongs to (NULL: that engine was finalized) */
    int is_send;
    mln_req_state_t state;
    mln_status_t result;

    /* the user's view */
    void *ubuf;
    int64_t count;
    MPI_Datatype dtype;
    MPI_Comm comm;
    int peer; /* rank in comm (dest, or source as given) */
    int tag;

    /* the bytes that travel: the user's buffer (contiguous) or a pack buffer */
    char *buf;
    uint64_t cap; /* send: bytes to send; receive: room in buf */
    char *pack;   /* non-contiguous: packed copy (owned) */
    int packed;
    unsigned char small[MLN_STRIPE_HDR_SIZE]; /* headers; inline payloads for tiny buffers */
    int use_small;

    MPI_Request mreq;  /* raw message, header, or a receive's inline payload */
    MPI_Request mreq2; /* send of an inline message: its payload */
    mln_stripe_hdr_t hdr;
    mln_stripe_inline_t inl; /* send: the inline payload as it travels */

    /* a striped message */
    int peer_world;
    mln_lane_kind_t kind;
    uint64_t msg_id;
    uint64_t total;
    uint64_t accept;
    uint64_t chunk;
    uint64_t next_off;   /* send: first byte not yet given to a lane */
    uint64_t bytes_done; /* payload bytes written (send) or landed (receive) */
    int tag_base;
    int tags_held; /* receive: [tag_base, tag_base + nchunks) is ours until retired */
    uint64_t nchunks;
    MPI_Request *chunk_reqs; /* mpi/helper receive: one per chunk */
    uint64_t chunks_left;    /* mpi/helper receive: chunk requests not yet complete */
    uint8_t *got;            /* tcp receive: one bit per chunk that landed */
    uint64_t early;          /* tcp: bytes [0, early) go before the CTS (hdr.early) */
    uint64_t early_left;     /* tcp receive: early frames not yet seen (each one comes) */
    int cts;                 /* receive: its CTS went out; send: its CTS came */
    int tcp_reset;           /* send: its lanes failed before any frame: switch at the CTS */

    /* MLN_REQ_ABORT: what is still in flight (see mln_stripe_ctl_t's value) */
    int abort_told;      /* the peer knows (NAK, RABORT or SABORT sent, or it told us) */
    uint64_t peer_count; /* receive: SABORT/SACK value; MLN_COUNT_UNKNOWN until it came */
    int peer_count_known;
    uint64_t ends; /* tcp receive: END frames seen */

    int sync;      /* send: completes only once matched (MPI_Ssend): inline headers go by
                      MPI_Issend (a striped send completes after its receiver took it all) */
    int cancelled; /* receive: cancelled before its message was matched (mln_stripe_cancel) */

    /* the receive's status */
    int st_source;
    int st_tag;
    uint64_t st_bytes;

    struct mln_stripe_request *prev, *next; /* the engine's active list */
};
typedef struct mln_stripe_request mln_req_t;

/* ---- lanes ------------------------------------------------------------------------------- */

/*
 * A lane backend.  The engine calls open once at mln_init (collectively), then for a striped
 * message: ready (may the payload to this peer use these lanes?  starts opening them),
 * recv_post (a receive became DATA), send_fill (hand chunks of DATA sends to lanes with room),
 * progress (move bytes; block up to timeout_us when nothing else is pending), send_abort (a
 * send failed: take no more chunks of it, and say what its receiver must still expect: the
 * value of SABORT/SACK), quiet (1 once no lane operation uses the user's buffer of a request
 * in MLN_REQ_ABORT), req_free (drop every reference to a request) and close at mln_finalize.
 * Lanes that can carry chunks before the CTS (tcp) also have send_early (a send in MLN_REQ_CTS
 * puts [0, bytes) on the lanes now; returns the bytes it took, 0 or all of them) and recv_early
 * (a header announcing early bytes matched: expect them, and take those that came before).
 */
typedef struct mln_lane_ops {
    const char *name;
    mln_lane_kind_t kind;
    mln_status_t (*open)(mln_stripe_t *s);
    int (*ready)(mln_stripe_t *s, int peer_world);
    mln_status_t (*recv_post)(mln_stripe_t *s, mln_req_t *r);
    void (*send_fill)(mln_stripe_t *s, mln_req_t *r);
    int (*progress)(mln_stripe_t *s, int timeout_us); /* returns 1 when anything moved */
    uint64_t (*send_abort)(mln_stripe_t *s, mln_req_t *r);
    int (*quiet)(mln_stripe_t *s, mln_req_t *r);
    void (*req_free)(mln_stripe_t *s, mln_req_t *r);
    void (*close)(mln_stripe_t *s);
    uint64_t (*send_early)(mln_stripe_t *s, mln_req_t *r, uint64_t bytes);
    mln_status_t (*recv_early)(mln_stripe_t *s, mln_req_t *r);
} mln_lane_ops_t;

extern const mln_lane_ops_t mln_lane_tcp_ops;
extern const mln_lane_ops_t mln_lane_mpi_ops;
extern const mln_lane_ops_t mln_lane_helper_ops;

typedef struct mln_tcp_state mln_tcp_state_t;         /* lane_tcp.c */
typedef struct mln_helper_state mln_helper_state_t;   /* lane_helper.c */
typedef struct mln_mpilane_state mln_mpilane_state_t; /* lane_mpi.c */

/* To a helper: forward the next MLN_TAG_FWD_DATA message from me to dest with tag. */
typedef struct mln_fwd_hdr {
    int32_t dest;
    int32_t tag;
    uint64_t len;
} mln_fwd_hdr_t;

/* lane_mpi.c, shared with lane_helper.c: chunks over MPI on the control comm. */
mln_status_t mln_mpilane_open(mln_stripe_t *s);
void mln_mpilane_close(mln_stripe_t *s);
mln_status_t mln_mpilane_recv_post(mln_stripe_t *s, mln_req_t *r);
/* Sends the next chunk of r on `route`: straight to the peer (via < 0) or through helper via. */
mln_status_t mln_mpilane_post(mln_stripe_t *s, mln_req_t *r, int route, int via);
int mln_mpilane_route_load(const mln_stripe_t *s, int peer, int route);
int mln_mpilane_progress(mln_stripe_t *s);
/* 1 while chunk sends are in flight (progress must keep calling MPI_Test). */
int mln_mpilane_busy(const mln_stripe_t *s);
uint64_t mln_mpilane_send_abort(mln_stripe_t *s, mln_req_t *r);
int mln_mpilane_quiet(mln_stripe_t *s, mln_req_t *r);
void mln_mpilane_req_free(mln_stripe_t *s, mln_req_t *r);

/* ---- fault injection (fault.c, MLN_STRIPE_FAULT: test hooks) ----------------------------- */

typedef enum mln_fault_kind {
    MLN_FAULT_NONE = 0,
    MLN_FAULT_RESET,  /* reset:LANE:BYTES - tcp lane LANE resets after BYTES payload bytes */
    MLN_FAULT_NAK,    /* nak:N - the N-th striped receive fails before its CTS */
    MLN_FAULT_RABORT, /* rabort:N:BYTES - the N-th striped receive fails after BYTES landed */
    MLN_FAULT_SABORT, /* sabort:N:BYTES - the N-th striped send fails after BYTES went out */
    MLN_FAULT_MUTE,   /* mute:LANE:BYTES - tcp lane LANE hears nothing more after BYTES */
    MLN_FAULT_TAMPER, /* tamper:LANE:BYTES - a payload bit of lane LANE's next frame flips */
    MLN_FAULT_FORGE,  /* forge:LANE:BYTES - a header bit of lane LANE's next frame flips */
    MLN_FAULT_SPLIT   /* split:LANE:BYTES - lane LANE's next payload tag waits 0.2 s */
} mln_fault_kind_t;

typedef struct mln_fault {
    mln_fault_kind_t kind;
    uint64_t n;     /* lane (reset, mute) or message ordinal (1 = the first) */
    uint64_t bytes; /* bytes before it strikes */
    uint64_t seen;  /* striped receives (nak, rabort) or sends (sabort) so far */
    int armed;
    const mln_req_t *target; /* rabort, sabort: the request it strikes */
} mln_fault_t;

mln_status_t mln_fault_parse(const char *spec, int64_t lanes, mln_fault_t *out);
/* A striped receive (header matched) or send (CTS arrived) begins: 1 when nak strikes it. */
int mln_fault_begin(mln_fault_t *f, const mln_req_t *r);
/* BYTES went out on tcp lane `lane`: the lane fault (reset, mute, tamper, forge) that strikes
 * it now (once), else MLN_FAULT_NONE. */
mln_fault_kind_t mln_fault_lane_strikes(mln_fault_t *f, int lane, uint64_t written);
/* Bytes of r moved: 1 when rabort/sabort strikes now. */
int mln_fault_strikes(mln_fault_t *f, const mln_req_t *r);

/* ---- the engine -------------------------------------------------------------------------- */

/* A control message on its way out (its memory must live until MPI is done with it). */
typedef struct mln_ctl_out {
    mln_stripe_ctl_t msg;
    MPI_Request req;
    struct mln_ctl_out *next;
} mln_ctl_out_t;

/* An inline payload that arrived before its header was matched. */
typedef struct mln_inline_stash {
    int src;
    mln_stripe_inline_t payload;
    struct mln_inline_stash *next;
} mln_inline_stash_t;

struct mln_stripe {
    mln_context_t *ctx;
    const mln_config_t *cfg;
    int backend; /* mln_stripe_backend_t */
    int wrank, wsize;
    MPI_Comm ctrl; /* dup of MPI_COMM_WORLD: control messages, inline payloads, chunks */
    MPI_Comm app;  /* mln_comm_world(): MPI_COMM_WORLD less the helpers */
    int tag_ub;    /* MPI_TAG_UB: the largest tag of the user's messages */
    int inline_tags;
    int data_tag_lo, data_tag_hi, data_tag_next; /* chunk tags on ctrl */

    /* where everybody is (sitemap.c) */
    int *host_of; /* world rank -> host id (same processor name) */
    int *site_of; /* world rank -> site id */
    int nhosts;

    uint64_t next_msg_id;
    mln_req_t *active; /* requests not yet DONE, in posting order */
    mln_req_t *active_tail;
    int nactive;
    mln_req_t *zombies; /* freed requests whose own memory MPI still uses (header, payload) */
    mln_ctl_out_t *ctl_out;
    mln_inline_stash_t *stash;

    MPI_Request ctl_req; /* always posted (not on helpers): a control message from anybody */
    mln_stripe_ctl_t ctl_in;

    const mln_lane_ops_t *lanes[MLN_LANE_KINDS];
    mln_tcp_state_t *tcp;
    mln_helper_state_t *helper;
    mln_mpilane_state_t *mpilane;
    int *tcp_failed; /* world rank -> 1 when our tcp lanes to it failed (use mpi then) */
    mln_fault_t fault;
    uint64_t striped[2][2]; /* [is_send][0: messages, 1: bytes] that completed striped */

    /* MLN_STRIPE_PROGRESS=thread: a thread progresses too; the lock guards the engine. */
    int thread_on;
    int thread_stop;
    pthread_t thread;
    pthread_mutex_t lock;
};

/* The engine lock (no-ops unless the progress thread runs). */
void mln_stripe_lock(mln_stripe_t *s);
void mln_stripe_unlock(mln_stripe_t *s);

/* The engine of the running library (NULL before mln_init). */
mln_stripe_t *mln_stripe_engine(void);

/* Set up at mln_init (collective over MPI_COMM_WORLD); helper ranks do not return. */
mln_status_t mln_stripe_init(mln_context_t *ctx, mln_stripe_t **out);
void mln_stripe_fini(mln_stripe_t *s);

/* sitemap.c: fills host_of, site_of, nhosts (collective). */
mln_status_t mln_sitemap_build(mln_stripe_t *s);

/* stripe_buf.c: the bytes of a request (in place or packed) and their way back. */
mln_status_t mln_stripe_req_buffer(mln_req_t *r, const void *buf, int is_send);
/* Unpacks what a packed receive got (st_bytes) into the user's buffer, as MPI_Recv would. */
mln_status_t mln_stripe_req_unpack(const mln_req_t *r);

/* stripe.c: requests, protocol, progress (for stripe_api.c). */
mln_status_t mln_stripe_req_new(mln_stripe_t *s, const void *buf, int64_t count, MPI_Datatype dt,
                                int peer, int tag, MPI_Comm comm, int is_send, mln_req_t **out);
void mln_stripe_req_free(mln_stripe_t *s, mln_req_t *r);
void mln_stripe_active_add(mln_stripe_t *s, mln_req_t *r);
void mln_stripe_active_del(mln_stripe_t *s, mln_req_t *r);
mln_status_t mln_stripe_send_start(mln_stripe_t *s, mln_req_t *r);
mln_status_t mln_stripe_recv_start(mln_stripe_t *s, mln_req_t *r);
/* A receive whose 64-byte wire message from (source, tag) was already taken off MPI (msg64):
 * it goes on as if its MPI_Irecv had matched that message (stripe_hooks.h). */
void mln_stripe_recv_start_taken(mln_stripe_t *s, mln_req_t *r, int source, int tag,
                                 const void *msg64);
/* A receive in MLN_REQ_HDR: cancels its MPI_Irecv; 1 when cancelled (the request is DONE),
 * 0 when its message had matched (it goes on as before). */
int mln_stripe_recv_cancel(mln_stripe_t *s, mln_req_t *r);
/* 1 when messages to world rank w are striped above the threshold (another site, or
 * MLN_STRIPE_LOCAL): the sender and the receiver of a message agree on it. */
int mln_stripe_peer_remote(const mln_stripe_t *s, int world_rank);
/* The same for rank `rank` of comm (a process outside MPI_COMM_WORLD: 0; no group: 1). */
int mln_stripe_rank_remote(const mln_stripe_t *s, MPI_Comm comm, int rank);
/* 1 when the 64 bytes at p are a valid header (its user message's size in *total). */
int mln_stripe_hdr_valid(const void *p, uint64_t *total);
/* One pass over everything; sleeps up to wait_us when only tcp lanes have work.  1 = moved. */
int mln_stripe_progress(mln_stripe_t *s, int wait_us);
void mln_stripe_progress_until(mln_stripe_t *s, mln_req_t **reqs, int n);
void mln_stripe_req_finish(mln_stripe_t *s, mln_req_t *r, mln_status_t st);
/* Zombies: MPI operations on a freed request's own memory; drained each pass, waited at
 * finalize. */
int mln_stripe_zombies_progress(mln_stripe_t *s);

/* stripe_ctl.c: control messages, chunk tags, failures. */
mln_status_t mln_stripe_ctl_send(mln_stripe_t *s, int to, mln_ctl_type_t type, uint64_t msg_id,
                                 mln_lane_kind_t kind, uint64_t value, int tag_base,
                                 mln_status_t why);
int mln_stripe_ctl_progress(mln_stripe_t *s);
void mln_stripe_ctl_fini(mln_stripe_t *s);
/* A matched header of a striped message (state TAGS) gets its lanes, then sends its CTS. */
void mln_stripe_recv_setup(mln_stripe_t *s, mln_req_t *r);
/* Receives waiting for chunk tags: retried in posting order.  1 = one moved on. */
int mln_stripe_tags_progress(mln_stripe_t *s);
void mln_stripe_tags_release(mln_stripe_t *s, mln_req_t *r);
/* Our tcp lanes to peer_world are gone (st: why): sends that put no byte on them move to the
 * mpi lanes (SWITCH, at once or at their CTS); the others fail with st. */
void mln_stripe_tcp_lost(mln_stripe_t *s, int peer_world, mln_status_t st);
/* Requests in MLN_REQ_ABORT become DONE once quiet.  1 = one did. */
int mln_stripe_abort_progress(mln_stripe_t *s);

/* stripe_inline.c: header-sized messages. */
mln_status_t mln_stripe_inline_send(mln_stripe_t *s, mln_req_t *r, int dest_world);
void mln_stripe_inline_expect(mln_stripe_t *s, mln_req_t *r);
int mln_stripe_inline_progress(mln_stripe_t *s);
void mln_stripe_inline_fini(mln_stripe_t *s);

/* For the lanes. */
mln_req_t *mln_stripe_find_recv(mln_stripe_t *s, int src_world, uint64_t msg_id);
mln_req_t *mln_stripe_find_send(mln_stripe_t *s, int dest_world, uint64_t msg_id);
/* A striped message fails (st): the request stops moving new data, tells its peer, and is
 * DONE once nothing uses its user buffer any more (MLN_REQ_ABORT). */
void mln_stripe_req_fail(mln_stripe_t *s, mln_req_t *r, mln_status_t st);
void mln_stripe_req_progress(mln_stripe_t *s, mln_req_t *r, uint64_t bytes);
double mln_stripe_now(void);
/* Chunk [off, off + len) of a message, for lanes that split by chunk index. */
uint64_t mln_stripe_chunk_len(const mln_req_t *r, uint64_t index);

/* lane_helper.c: the helper ranks' forwarding loop (returns at shutdown). */
mln_status_t mln_helper_serve(mln_stripe_t *s);
int mln_helper_is_helper(const mln_stripe_t *s);

/* MLN_STRIPE_LANES, or for auto the mpi lanes' count (auto sizes only the tcp lanes). */
#define MLN_STRIPE_LANES_AUTO_MPI 8
static inline int mln_stripe_lanes_fixed(const mln_stripe_t *s)
{
    return s->cfg->stripe_lanes > 0 ? (int)s->cfg->stripe_lanes : MLN_STRIPE_LANES_AUTO_MPI;
}

/* The most tcp lanes to one peer: MLN_STRIPE_LANES, or MLN_STRIPE_LANES_MAX for auto. */
static inline int mln_stripe_lanes_cap(const mln_stripe_t *s)
{
    return (int)(s->cfg->stripe_lanes > 0 ? s->cfg->stripe_lanes : s->cfg->stripe_lanes_max);
}

/* lane_tcp.c, for tests (tests/c): the listening port, and lanes opened by hand. */
int mln_tcp_listen_port(const mln_stripe_t *s);
int mln_tcp_test_connect(mln_stripe_t *s, int peer_world, int lane, int nlanes, int dst_world);
/* The hello this rank would send on lane `lane` to peer_world (MLN_LINK_HELLO_BYTES, 72). */
int mln_tcp_test_hello(mln_stripe_t *s, int peer_world, int lane, unsigned char *out);
/* A lane to peer_world opened in the name of world rank `claimed` (tcp_conn.c says more). */
int mln_tcp_test_impostor(mln_stripe_t *s, int peer_world, int claimed);
/* 1 once our tcp lanes to peer are open and none failed; 0 while they are not. */
int mln_tcp_lanes_up(const mln_stripe_t *s, int peer_world);
/* The tcp lanes that take new chunks to peer (MLN_STRIPE_LANES, or auto's choice so far); 0
 * while they are not up (tcp_auto.c). */
int mln_tcp_lanes_active(const mln_stripe_t *s, int peer_world);
/* A striped message of `bytes` to peer_world starts on the tcp lanes: auto picks its lanes (a
 * lone message's own count, tcp_auto.c).  Nothing with a fixed MLN_STRIPE_LANES. */
void mln_tcp_auto_message(mln_stripe_t *s, int peer_world, uint64_t bytes);
/* 1 while auto waits to see a lone message's last byte acknowledged (then the engine polls
 * instead of sleeping in MPI_Wait, which would hide when that happened). */
int mln_tcp_auto_watching(const mln_stripe_t *s);
/* For tests: the tcp lanes to peer that are up (auto keeps the ones it opened). */
int mln_tcp_lanes_open(const mln_stripe_t *s, int peer_world);
/* For tests: payload bytes written so far on our tcp lane `lane` to peer (0 if not up). */
uint64_t mln_tcp_lane_written(const mln_stripe_t *s, int peer_world, int lane);
/* For tests: the kernel's TCP_NOTSENT_LOWAT on our tcp lane `lane` to peer (-1 if not up). */
int mln_tcp_lane_notsent(const mln_stripe_t *s, int peer_world, int lane);

#endif /* MLN_STRIPE_INT_H */
