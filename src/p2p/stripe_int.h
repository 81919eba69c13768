/*
 * stripe_int.h - internals of striped point-to-point (src/p2p): the engine, the requests, the
 * wire formats and the lane ops tables.  docs/STRIPE.md explains the protocol.
 */
#ifndef MLN_STRIPE_INT_H
#define MLN_STRIPE_INT_H

#include "mln_core.h"

#include <pthread.h>
#include <stdint.h>

/* ---- wire formats ---------------------------------------------------------------------- */

#define MLN_STRIPE_MAGIC 0x4d4c4e53u /* "MLNS" */
#define MLN_STRIPE_VERSION 1
#define MLN_STRIPE_HDR_SIZE 64 /* a message of exactly this size on (comm, tag) is a header */

enum {
    MLN_HDR_INLINE = 1 /* the user's message is HDR_SIZE bytes: it follows on the control comm */
};

/* How the payload of one message travels (chosen by the sender, told in the header). */
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
    uint64_t chunk;    /* chunk size (helper and mpi lanes: chunk i is [i*chunk, ...)) */
    unsigned char pad[20];
    uint32_t crc; /* CRC-32 of the 60 bytes before it */
} mln_stripe_hdr_t;

/* Receiver -> sender on the control comm: "post the payload" (rendezvous). */
typedef struct mln_stripe_cts {
    uint64_t msg_id;
    uint64_t accept;  /* bytes the receiver takes: min(total, its buffer) */
    int32_t tag_base; /* helper and mpi lanes: chunk i travels with tag tag_base + i */
    int32_t pad;
} mln_stripe_cts_t;

/* Control-comm tags; the rest of [0, tag_ub] is allocated by receivers to chunks. */
enum {
    MLN_TAG_CTS = 1,
    MLN_TAG_FWD_HDR = 2,  /* to a helper: mln_fwd_hdr_t */
    MLN_TAG_FWD_DATA = 3, /* to a helper: the chunk it forwards */
    MLN_TAG_INLINE = 16   /* [16, 16 + inline_tags): header-sized messages, by msg id */
};

/* ---- requests ---------------------------------------------------------------------------- */

typedef enum mln_req_state {
    MLN_REQ_RAW,    /* a plain MPI message (mreq) */
    MLN_REQ_HDR,    /* receive: waiting for a message on (comm, tag) */
    MLN_REQ_INLINE, /* header-sized payload on the control comm (mreq) */
    MLN_REQ_CTS,    /* send: header out, waiting for the receiver's CTS */
    MLN_REQ_DATA,   /* payload moving over the lanes */
    MLN_REQ_DONE
} mln_req_state_t;

typedef struct mln_stripe mln_stripe_t;

struct mln_stripe_request {
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

    MPI_Request mreq;   /* raw message, header or inline payload */
    MPI_Request ctsreq; /* receive: the CTS on its way back */
    mln_stripe_hdr_t hdr;
    mln_stripe_cts_t cts;

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
    uint64_t nchunks;
    MPI_Request *chunk_reqs; /* mpi/helper receive: one per chunk */
    uint64_t chunks_left;    /* mpi/helper: chunk requests not yet complete */
    double last_progress;

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
 * message: ready (may the payload to this peer use these lanes? opens them lazily), recv_post
 * (a receive became DATA), send_fill (hand chunks of DATA sends to lanes with room), progress
 * (move bytes; block up to timeout_us when nothing else is pending), and close at mln_finalize.
 */
typedef struct mln_lane_ops {
    const char *name;
    mln_lane_kind_t kind;
    mln_status_t (*open)(mln_stripe_t *s);
    int (*ready)(mln_stripe_t *s, int peer_world);
    mln_status_t (*recv_post)(mln_stripe_t *s, mln_req_t *r);
    void (*send_fill)(mln_stripe_t *s, mln_req_t *r);
    int (*progress)(mln_stripe_t *s, int timeout_us); /* returns 1 when anything moved */
    void (*req_free)(mln_stripe_t *s, mln_req_t *r);
    void (*close)(mln_stripe_t *s);
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
void mln_mpilane_req_free(mln_stripe_t *s, mln_req_t *r);

/* ---- the engine -------------------------------------------------------------------------- */

struct mln_stripe {
    mln_context_t *ctx;
    const mln_config_t *cfg;
    int backend; /* mln_stripe_backend_t */
    int wrank, wsize;
    MPI_Comm ctrl; /* dup of MPI_COMM_WORLD: CTS, inline payloads, chunks, helpers */
    MPI_Comm app;  /* mln_comm_world(): MPI_COMM_WORLD less the helpers */
    int tag_ub;
    int inline_tags;
    int data_tag_lo, data_tag_next;

    /* where everybody is (sitemap.c) */
    int *host_of; /* world rank -> host id (same processor name) */
    int *site_of; /* world rank -> site id */
    int nhosts;

    uint64_t next_msg_id;
    mln_req_t *active; /* requests not yet DONE, in posting order */
    mln_req_t *active_tail;
    int nactive;
    mln_req_t *zombies; /* failed requests with MPI operations pending on their memory */

    MPI_Request cts_req; /* always posted: CTS from anybody */
    mln_stripe_cts_t cts_in;

    const mln_lane_ops_t *lanes[MLN_LANE_KINDS];
    mln_tcp_state_t *tcp;
    mln_helper_state_t *helper;
    mln_mpilane_state_t *mpilane;
    int *tcp_failed; /* world rank -> 1 when its tcp lanes failed (use mpi then) */
    /* world rank -> when bytes of any striped message to or from it last moved: a message
     * queued behind others to the same peer is waiting, not stuck (MLN_STRIPE_TIMEOUT) */
    double *peer_moved;

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

/* stripe.c: requests, protocol, progress (for stripe_api.c). */
mln_status_t mln_stripe_req_new(mln_stripe_t *s, const void *buf, int64_t count, MPI_Datatype dt,
                                int peer, int tag, MPI_Comm comm, int is_send, mln_req_t **out);
void mln_stripe_req_free(mln_stripe_t *s, mln_req_t *r);
void mln_stripe_active_del(mln_stripe_t *s, mln_req_t *r);
mln_status_t mln_stripe_send_start(mln_stripe_t *s, mln_req_t *r);
mln_status_t mln_stripe_recv_start(mln_stripe_t *s, mln_req_t *r);
/* One pass over everything; sleeps up to wait_us when only tcp lanes have work.  1 = moved. */
int mln_stripe_progress(mln_stripe_t *s, int wait_us);
void mln_stripe_progress_until(mln_stripe_t *s, mln_req_t **reqs, int n);

/* For the lanes. */
mln_req_t *mln_stripe_find_recv(mln_stripe_t *s, int src_world, uint64_t msg_id);
void mln_stripe_req_fail(mln_stripe_t *s, mln_req_t *r, mln_status_t st);
void mln_stripe_req_progress(mln_stripe_t *s, mln_req_t *r, uint64_t bytes);
double mln_stripe_now(void);
/* Chunk [off, off + len) of a message, for lanes that split by chunk index. */
uint64_t mln_stripe_chunk_len(const mln_req_t *r, uint64_t index);

/* lane_helper.c: the helper ranks' forwarding loop (returns at shutdown). */
mln_status_t mln_helper_serve(mln_stripe_t *s);
int mln_helper_is_helper(const mln_stripe_t *s);

#endif /* MLN_STRIPE_INT_H */
