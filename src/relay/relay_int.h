/*
 * relay_int.h - the relays' wire (docs/RELAY.md): what ranks and gateways put on their links,
 * shared by the rank side (relay_rank.c, in libmultilane and the preload layer) and the gateway
 * (gateway.c, mln-gateway).  No MPI here: the gateway and the fuzz targets link it alone.
 *
 *   rank r of site a --link--> gateway (a, t) --WAN link--> gateway (b, t) --link--> rank q
 *
 * Every link is a connection of the secure link layer (src/link/link.h): the connector sends a
 * hello, the listener a challenge, the connector a response; then frames, each
 *   [header: MLN_RELAY_HDR_BYTES][head tag][payload: len bytes][body tag when len > 0]
 * sealed by the sender of that hop and opened by its receiver (a gateway opens and seals again:
 * every hop is its own link with its own key and sequence numbers).
 *
 * Endpoints (the hello's src and dst): global ranks 0 .. nranks-1, and the gateway of site s,
 * trunk t: mln_relay_gw_id(nranks, s, t) = nranks + s * MLN_RELAY_MAX_TRUNKS + t.  The hello's
 * lane is the trunk, its nlanes the trunks of the run (the same number everywhere).  The
 * per-run secret gives the link layer's job key (mln_relay_job_init); no pair keys (D = 0):
 * every process of the run holds the secret, and the hello's src and dst bind each link to
 * its two ends.
 *
 * Links: rank -> its site's gateway t (the rank connects; frames both ways are sealed by the
 * sender with the link's key: the link layer's keys are per direction, so each connection
 * holds two mln_link_t: one for each direction, the second made by a second handshake in the
 * other direction over the same socket, see mln_relay_link_pair), gateway (s, t) -> gateway
 * (s', t) for s < s' (the lower site connects).
 */
#ifndef MLN_RELAY_INT_H
#define MLN_RELAY_INT_H

#include "link/link.h"

#include <stddef.h>
#include <stdint.h>

#define MLN_RELAY_MAGIC 0x464e4c4du /* "MLNF" */
#define MLN_RELAY_VERSION 1
#define MLN_RELAY_HDR_BYTES 56
#define MLN_RELAY_MAX_TRUNKS 64 /* = the link layer's LINK_MAX_LANES */
#define MLN_RELAY_MAX_SITES 64
#define MLN_RELAY_FRAME_MAX (1u << 20)        /* payload bytes of one frame, at most */
#define MLN_RELAY_TEXT_MAX 512                /* FAIL and ABORT: the reason, text, at most */
#define MLN_RELAY_FRAME_COST 64               /* credit a frame costs beyond its payload */
#define MLN_RELAY_MSG_MAX ((uint64_t)1 << 40) /* bytes of one message, at most */
#define MLN_RELAY_ALL (-1)                    /* dst of ABORT, FAIL, BYE: every rank of the run */
#define MLN_RELAY_HS_BYTES (2 * MLN_LINK_HELLO_BYTES) /* the largest handshake step's bytes */

typedef enum mln_relay_type {
    MLN_RELAY_DATA = 1,    /* src -> dst: bytes [offset, offset + len) of message seq */
    MLN_RELAY_ACK = 2,     /* dst -> src (the reverse pair), on trunk t: offset = credit units
                              received from src through trunk t so far (cumulative per trunk,
                              never smaller than that trunk's last one) */
    MLN_RELAY_MATCHED = 3, /* dst -> src: message seq (sent with MLN_RELAY_F_SYNC) matched a
                              receive (MPI_Ssend completes on it) */
    MLN_RELAY_ABORT = 4,   /* a rank called MPI_Abort: src = that rank, dst = ALL, tag = the
                              error code, payload = a line of text; every rank exits with it */
    MLN_RELAY_FAIL = 5,    /* a gateway to its ranks (dst = ALL): the run cannot go on (a peer
                              gateway, a site or a rank was lost), payload = one line naming
                              what and why; src = the gateway's endpoint id */
    MLN_RELAY_BYE = 6,     /* rank -> each of its gateways at MPI_Finalize: it leaves; its
                              connection closing after this is no failure (dst = ALL); also
                              gateway -> peer gateway once all its ranks left (src = its id) */
    MLN_RELAY_TYPES
} mln_relay_type_t;

#define MLN_RELAY_F_SYNC 0x01 /* DATA: the sender wants MATCHED when the receive matches */
#define MLN_RELAY_F_LAST 0x02 /* DATA: the last frame of its message on this trunk */

/* A frame's header, decoded (on the wire: little-endian, at the offsets of relay_wire.c). */
typedef struct mln_relay_hdr {
    uint8_t type;     /* mln_relay_type_t */
    uint8_t flags;    /* MLN_RELAY_F_* (DATA only; 0 elsewhere) */
    uint16_t trunk;   /* the trunk the frame travels on (< trunks of the run) */
    int32_t dst;      /* global rank, or MLN_RELAY_ALL */
    int32_t src;      /* global rank (FAIL: a gateway's endpoint id) */
    uint32_t context; /* communicator context (MLN_RELAY_CTX_*; later: one per communicator) */
    int32_t tag;      /* DATA: the MPI tag (>= 0); ABORT: the error code */
    uint64_t seq;     /* DATA, MATCHED: the message's number within its pair (src, dst),
                         0, 1, 2, ...: the receiver delivers a pair's messages in this order */
    uint64_t total;   /* DATA: bytes of the whole message (<= MLN_RELAY_MSG_MAX) */
    uint64_t offset;  /* DATA: where this frame's payload goes; ACK: units received (trunk) */
    uint32_t len;     /* payload bytes that follow (<= MLN_RELAY_FRAME_MAX; DATA: offset + len
                         <= total; ABORT, FAIL: <= MLN_RELAY_TEXT_MAX; ACK, MATCHED, BYE: 0) */
} mln_relay_hdr_t;
/* What the parser allows per type (every other field must be 0; docs/RELAY.md):
 *   DATA     dst, src ranks; flags SYNC|LAST; tag >= 0; context, seq any; offset + len <= total
 *            <= MLN_RELAY_MSG_MAX; 0 <= len <= MLN_RELAY_FRAME_MAX
 *   ACK      dst, src ranks; context any; offset any (credit units); len 0
 *   MATCHED  dst, src ranks; context, seq any; len 0
 *   ABORT    dst ALL, src a rank; tag any (the code); len <= MLN_RELAY_TEXT_MAX
 *   FAIL     dst ALL, src a gateway's endpoint id (gateway links only); len <= TEXT_MAX
 *   BYE      dst ALL, src a rank (rank links) or a gateway's endpoint id (gateway links)
 * ACK's and MATCHED's seq: MATCHED names the message (its seq); ACK's is 0. */

/* Contexts of the grid's messages. */
#define MLN_RELAY_CTX_WORLD 0u /* the program's point-to-point on MPI_COMM_WORLD */
#define MLN_RELAY_CTX_LAYER 1u /* the layer's own (barrier, finalize) */

/* What one end of a link may send: the parser checks each frame against it. */
typedef struct mln_relay_scope {
    int nranks;    /* global ranks of the run */
    int trunks;    /* trunks of the run */
    int from_rank; /* >= 0: the link's far end is this rank: src must be it (DATA, ACK, MATCHED,
                      ABORT, BYE); -1: a gateway (any src; FAIL allowed) */
    int to_rank;   /* >= 0: the link delivers to this rank: dst must be it or ALL; -1: any */
    /* Narrower ranges where a link is known better (all 0, as a zeroed scope has them: no
     * narrowing), e.g. a gateway's WAN link from site s: src ranks of s, dst ranks of its own */
    int src_first, src_count; /* count > 0: a rank src must be in [first, first + count) */
    int dst_first, dst_count; /* count > 0: a rank dst must be in [first, first + count) */
    int peer_gw;              /* > 0: FAIL and BYE from a gateway must have src = this id */
} mln_relay_scope_t;

/* Encodes h into out (MLN_RELAY_HDR_BYTES). */
void mln_relay_hdr_encode(const mln_relay_hdr_t *h, unsigned char out[MLN_RELAY_HDR_BYTES]);
/* Decodes and checks a header: 1 with *h filled when every field is allowed by scope (magic,
 * version, type, flags, trunk, dst, src, tag, offset + len <= total, len bounds, the reserved
 * bytes zero), else 0 with *why saying which field is wrong.  Trusts nothing. */
int mln_relay_hdr_parse(const unsigned char *in, size_t n, const mln_relay_scope_t *scope,
                        mln_relay_hdr_t *h, const char **why);

/* The endpoint id of gateway (site, trunk) in a run of nranks ranks. */
static inline int mln_relay_gw_id(int nranks, int site, int trunk)
{
    return nranks + site * MLN_RELAY_MAX_TRUNKS + trunk;
}
/* Endpoint ids of a run: the link layer's "wsize". */
static inline int mln_relay_endpoints(int nranks, int nsites)
{
    return nranks + nsites * MLN_RELAY_MAX_TRUNKS;
}

/* The link layer's job of a run: key = BLAKE2b(secret; "multilane relay"), id from the key,
 * mode, cipher (auto: ChaCha20-Poly1305, since sites may differ in CPU) and payload MAC from
 * the MLN_LINK_* variables (mln_config_t), no pair keys.  secret: 32 bytes. */
mln_status_t mln_relay_job_init(mln_link_job_t *j, const unsigned char secret[32], int mode,
                                int cipher, int payload_mac, int nranks, int nsites);
/* The secret from MLN_GRID_SECRET (64 hex digits) into out; MLN_ERR_CONFIG with one line when
 * it is missing or malformed.  The variable is unset afterwards in this process (its children
 * do not inherit it). */
mln_status_t mln_relay_secret_from_env(unsigned char out[32]);

/* The sites of a run from MLN_GRID_SITES ("a:2,b:2": names and ranks per site, in global rank
 * order: site a holds ranks 0-1, b 2-3). */
typedef struct mln_relay_sites {
    int nsites;
    int nranks;
    char name[MLN_RELAY_MAX_SITES][16];
    int first[MLN_RELAY_MAX_SITES]; /* global rank of the site's first rank */
    int size[MLN_RELAY_MAX_SITES];
} mln_relay_sites_t;
/* MLN_ERR_CONFIG with *why when malformed (names [a-z][a-z0-9]{0,7}, counts >= 1, unique). */
mln_status_t mln_relay_sites_parse(const char *text, mln_relay_sites_t *out, const char **why);
int mln_relay_site_of(const mln_relay_sites_t *s, int rank);            /* -1 when out of range */
int mln_relay_site_index(const mln_relay_sites_t *s, const char *name); /* -1: none */

/* ---- one connection (relay_io.c): both ends, non-blocking ------------------------------ */

/* The link layer's links are one-way (the connector seals, the listener opens).  A relay
 * connection carries frames both ways, so it makes two over one socket: the connector's
 * handshake first (its frames: link tx on its side, rx on the listener's), then the same
 * handshake the other way round (the listener sends a hello back), after which both are up. */

/* A frame waiting to go out on a connection.  Ownership: relay_io.c frees f->own and its own
 * sealed copy when the frame is written or fails, then calls done(cookie, ok) last, after
 * which it touches f no more; f itself is the caller's (free it in done when it is on the
 * heap). */
typedef struct mln_relay_oframe mln_relay_oframe_t;
struct mln_relay_oframe {
    mln_relay_hdr_t h;
    const unsigned char *payload; /* h.len bytes: the sender's (kept valid until done), or own */
    unsigned char *own;           /* freed with the frame (may be == payload) */
    void (*done)(void *cookie, int ok); /* called once: when the whole frame is written (ok 1)
                                           or when the connection dies first (ok 0); may be NULL */
    void *cookie;
    mln_relay_oframe_t *next;
    /* relay_io.c's: the wire bytes of this frame once sealed */
    unsigned char wire[MLN_RELAY_HDR_BYTES];
    unsigned char tag[2][MLN_LINK_TAG_BYTES];
    unsigned char *sealed; /* aead: the encrypted payload */
    uint64_t sent;
    int is_sealed;
};

typedef enum mln_relay_conn_state {
    MLN_RELAY_CONN_HANDSHAKE = 0,
    MLN_RELAY_CONN_UP,
    MLN_RELAY_CONN_DEAD
} mln_relay_conn_state_t;

typedef struct mln_relay_conn {
    int fd;
    int state; /* mln_relay_conn_state_t */
    const mln_link_job_t *job;
    int me, peer; /* endpoint ids (peer: learnt from the hello on a listener) */
    int trunk, trunks;
    int is_connector;
    int endpoints;           /* mln_relay_endpoints() of the run: hello_parse's wsize */
    mln_relay_scope_t scope; /* what the far end may send (set by the owner once up) */
    mln_link_t tx, rx;
    /* handshake (relay_io.c) */
    int hs_step;
    unsigned char hs_buf[MLN_RELAY_HS_BYTES]; /* what the step waits for: hs_want bytes */
    size_t hs_got, hs_sent, hs_len, hs_want;
    unsigned char hs_out[MLN_RELAY_HS_BYTES]; /* what the step sends: hs_len bytes */
    double hs_deadline;                       /* mln_relay_now() clock */
    int hs_connected; /* connector: its first bytes went out (the socket connected) */
    /* reading */
    unsigned char rhead[MLN_RELAY_HDR_BYTES + MLN_LINK_TAG_BYTES];
    size_t rhead_got;
    mln_relay_hdr_t rcur;
    int rhave_head;
    unsigned char *rbuf; /* payload of the frame being read (cap MLN_RELAY_FRAME_MAX) */
    size_t rbuf_cap, rbuf_got;
    unsigned char rtag[MLN_LINK_TAG_BYTES];
    size_t rtag_got;
    unsigned char *ibuf; /* bytes read ahead of the frame being taken apart */
    size_t ibuf_pos, ibuf_len;
    /* writing */
    mln_relay_oframe_t *head, *tail;
    uint64_t queued_bytes; /* payload bytes queued, not yet written */
    int nqueued;
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
    char why[200]; /* why it died: one line */
} mln_relay_conn_t;

/* Starts a connection on a connected (or still connecting: the hello waits for it)
 * non-blocking socket fd as the connector (me -> peer on `trunk` of `trunks`): the hello goes
 * out at the first step.  The handshake must end within timeout_s. */
void mln_relay_conn_connect(mln_relay_conn_t *c, int fd, const mln_link_job_t *job, int endpoints,
                            int me, int peer, int trunk, int trunks, double timeout_s);
/* Starts an accepted non-blocking socket as the listener for endpoint `me`: the peer, trunk
 * and trunks come from its hello (c->peer, c->trunk, c->trunks once up). */
void mln_relay_conn_accept(mln_relay_conn_t *c, int fd, const mln_link_job_t *job, int endpoints,
                           int me, double timeout_s);
/* One non-blocking step of the handshake: 1 when both links are up, 0 not yet (wait for
 * POLLIN/POLLOUT: mln_relay_conn_events, at most until c->hs_deadline), -1 failed or past its
 * deadline (c->why; the socket stays open until mln_relay_conn_close).  The connector checks
 * the listener's hello names `peer`, `trunk` and `trunks`; the listener takes them from the
 * connector's hello (the owner checks they are welcome once it is up). */
int mln_relay_conn_handshake(mln_relay_conn_t *c);
/* The poll events the connection waits for now. */
short mln_relay_conn_events(const mln_relay_conn_t *c);
/* Reads one frame when one is whole: 1 with *h and *payload (h->len bytes in c->rbuf, valid
 * until the next call; opened and checked against c->scope), 0 when none is whole yet (the
 * socket has no more bytes now: call it until 0 after every POLLIN), -1 when the connection
 * died (closed: c->why "closed by the peer"; reset; a frame that fails its tag or its parse;
 * c->why).  The owner may take c->rbuf (set it NULL and rbuf_cap 0) to keep the payload. */
int mln_relay_conn_read(mln_relay_conn_t *c, mln_relay_hdr_t *h, const unsigned char **payload);
/* Queues f (sealed when it starts out; f->h.trunk set by the caller). */
void mln_relay_conn_queue(mln_relay_conn_t *c, mln_relay_oframe_t *f);
/* Writes what the socket takes: 1 when bytes moved, 0 when none could (or none queued), -1
 * when the connection died (every queued frame's done(cookie, 0) is called, c->why). */
int mln_relay_conn_write(mln_relay_conn_t *c);
/* Closes the socket, fails what is queued (done(cookie, 0)), frees the buffers, wipes the
 * links; why (NULL: keep c->why) is kept in c->why.  Safe on a dead or closed connection. */
void mln_relay_conn_close(mln_relay_conn_t *c, const char *why);
/* A monotonic clock in seconds (the handshake's deadlines). */
double mln_relay_now(void);

#endif /* MLN_RELAY_INT_H */
