/*
 * relay.h - a rank's side of the relays (docs/RELAY.md): under `multilane grid run` each
 * site is its own MPI job, and messages to ranks of other sites go as frames through the
 * site's gateways (trunks).  This is the byte mover: connect to the gateways, send messages
 * (small ones of a pair on one trunk, large ones striped over every trunk), receive them
 * whole and in per-pair order, flow control, MATCHED for synchronous sends, ABORT and FAIL.
 * Matching (MPI's rules, the program's datatypes) is the caller's: src/preload/preload_grid.c.
 * No MPI here (relay_rank.c calls none): one copy serves libmultilane and the preload layer.
 *
 * Set by `multilane grid run` in every rank's environment (docs/RELAY.md):
 *   MLN_GRID_SITES     "a:2,b:2": sites and their ranks, in global rank order
 *   MLN_GRID_SITE      this job's site ("b")
 *   MLN_GRID_GATEWAYS  "10.1.0.2:7300,10.1.0.3:7300": this site's gateways, trunk 0, 1, ...
 *                      (inside addresses); their count is the run's number of trunks
 *   MLN_GRID_SECRET    64 hex digits: the per-run secret (passed by name, never on a command
 *                      line; unset by the library once read)
 * and the tunables MLN_RELAY_WINDOW (per-pair credit, bytes), MLN_RELAY_CHUNK (largest frame
 * payload of a striped message), MLN_RELAY_STRIPE_MIN (messages from this size on are striped
 * over every trunk), MLN_RELAY_TIMEOUT (seconds: connecting, and handing the last frames out
 * at close).  Every rank of a run must use the same window (the receiver acknowledges every
 * WINDOW / 4 of its own), as `multilane grid run` gives every rank the same environment.
 *
 * Threads: one at a time per mln_relay_t (the caller serializes every call on it).
 */
#ifndef MLN_RELAY_H
#define MLN_RELAY_H

#include "multilane_base.h"

#include <stdint.h>

typedef struct mln_relay mln_relay_t;

/* The settings of a rank (from the environment and the tunables; mln_relay_open fills them
 * from MLN_GRID_* when NULL is passed). */
typedef struct mln_relay_opts {
    uint64_t window;     /* MLN_RELAY_WINDOW: credit units in flight per pair (default 8 MiB) */
    uint64_t chunk;      /* MLN_RELAY_CHUNK: largest payload per frame (default 1 MiB) */
    uint64_t stripe_min; /* MLN_RELAY_STRIPE_MIN: striped from this size on (default 256 KiB) */
    double timeout;      /* MLN_RELAY_TIMEOUT (default 30 s) */
    int link_mode, link_cipher, link_payload_mac; /* MLN_LINK_* */
} mln_relay_opts_t;

/* 1 when this process runs under `multilane grid run` (MLN_GRID_SITES is set). */
int mln_relay_wanted(void);

/* Connects this rank (site-local rank `local_rank`) to every gateway of its site, handshake
 * included, within the timeout (a gateway that refuses, not listening yet, is dialled again
 * every 100 ms).  On failure one line is logged naming the gateway's address and why:
 * MLN_ERR_CONFIG (MLN_GRID_* or a tunable missing or malformed), MLN_ERR_TIMEOUT (a gateway not
 * reached within MLN_RELAY_TIMEOUT), MLN_ERR_PEER (a gateway answered but its handshake failed:
 * another secret, another run), MLN_ERR_NOMEM.  opts NULL: from the tunables (MLN_RELAY_*,
 * MLN_LINK_*).  MLN_GRID_SECRET is unset once read. */
mln_status_t mln_relay_open(int local_rank, const mln_relay_opts_t *opts, mln_relay_t **out);
/* Leaves: sends BYE on every trunk once everything queued is out (bounded by the timeout),
 * closes, frees.  Messages still arriving are dropped. */
void mln_relay_close(mln_relay_t *r);

/* The run as the relay sees it. */
int mln_relay_rank(const mln_relay_t *r); /* this rank's global rank */
int mln_relay_size(const mln_relay_t *r); /* ranks of the run */
int mln_relay_site(const mln_relay_t *r); /* this rank's site index */
int mln_relay_nsites(const mln_relay_t *r);
int mln_relay_site_of_rank(const mln_relay_t *r, int rank); /* -1: out of range */
int mln_relay_site_first(const mln_relay_t *r, int site);   /* its first global rank */
int mln_relay_site_size(const mln_relay_t *r, int site);
const char *mln_relay_site_name(const mln_relay_t *r, int site);
int mln_relay_trunks(const mln_relay_t *r);

/* ---- sending ---------------------------------------------------------------------------- */

typedef struct mln_relay_send mln_relay_send_t;

/* Sends n bytes at buf to global rank dst (another site's) with (context, tag); sync: the send
 * completes only once the receiver matched it (MATCHED).  buf must stay valid and unchanged
 * until the send is done.  The message number of the pair is taken now: messages of one pair
 * are received in the order of these calls.  MLN_ERR_ARG: dst no rank of another site, tag
 * < 0, buf NULL with n > 0, n > MLN_RELAY_MSG_MAX; MLN_ERR_STATE: closing; MLN_ERR_PEER: after
 * a fatal event; MLN_ERR_NOMEM. */
mln_status_t mln_relay_isend(mln_relay_t *r, int dst, uint32_t context, int tag, const void *buf,
                             uint64_t n, int sync, mln_relay_send_t **out);
/* 1 when done (its frames are all written to the gateways, and sync: MATCHED came), and then
 * *st its outcome (MLN_OK, or the failure); the handle is freed then. 0 while not.  Moves
 * nothing (mln_relay_progress does).  After a fatal event whose handler returned, every send
 * is done with MLN_ERR_PEER.  Handles not tested by mln_relay_close are freed there. */
int mln_relay_send_test(mln_relay_t *r, mln_relay_send_t *s, mln_status_t *st);

/* ---- receiving -------------------------------------------------------------------------- */

/* A message that arrived whole: its bytes are the library's until mln_relay_msg_free. */
typedef struct mln_relay_msg mln_relay_msg_t;
struct mln_relay_msg {
    int src; /* global rank */
    uint32_t context;
    int tag;
    uint64_t seq;
    uint64_t len;
    unsigned char *data;   /* len bytes (NULL when len is 0) */
    int sync;              /* the sender waits for MATCHED (mln_relay_take sends it) */
    mln_relay_msg_t *next; /* the arrived list of its context, in arrival order */
};

/* The oldest arrived message of `context` (then ->next, ...), in an order that keeps each
 * pair's messages in their send order; NULL: none.  Moves nothing: call mln_relay_progress. */
mln_relay_msg_t *mln_relay_arrived(mln_relay_t *r, uint32_t context);
/* Takes m off the arrived list (a receive matched it): MATCHED goes back when m->sync. */
void mln_relay_take(mln_relay_t *r, mln_relay_msg_t *m);
void mln_relay_msg_free(mln_relay_msg_t *m);

/* ---- progress --------------------------------------------------------------------------- */

/* Moves bytes on every connection: waits at most wait_us for one to be ready (0: a poll that
 * does not wait).  Returns 1 when anything moved, 0 when nothing did.  A fatal event (an ABORT
 * from any rank, a FAIL from a gateway, a gateway's connection lost, a frame that contradicts
 * its message) calls the fatal handler, which must not return (the layer prints its line and
 * ends the site's job); without a handler, the line is printed on stderr and the process
 * exits with the code.  (A handler that returns, as tests' do, leaves the relay dead: calls
 * return at once, sends fail, mln_relay_close only frees.)  A gateway that stays silent is
 * TCP's to notice: the rank sends no keepalives. */
int mln_relay_progress(mln_relay_t *r, int wait_us);
/* The fatal handler: code = the exit status (ABORT: the error code; else 1), line = one line
 * saying what happened, e.g. "multilane grid: gateway 2 of site a lost (connection reset by
 * peer): the run cannot go on", "multilane grid: rank 3 of site b called MPI_Abort(7): TEXT"
 * (3: the global rank), or a gateway's FAIL text as it came. */
typedef void (*mln_relay_fatal_fn)(int code, const char *line, void *arg);
void mln_relay_on_fatal(mln_relay_t *r, mln_relay_fatal_fn fn, void *arg);

/* Sends ABORT (code, one line of text) on every trunk, waits at most a second for it to be
 * out; the caller ends its job (MPI_Abort) after. */
void mln_relay_abort(mln_relay_t *r, int code, const char *line);

/* 1 while large messages move: one of MLN_RELAY_STRIPE_MIN bytes or more started out or had
 * bytes in within the last MLN_RELAY_BULK_S.  A waiting caller may then sleep in
 * mln_relay_progress (the cores go to the gateways and the delay line, which the bandwidth
 * needs), where for small messages it had better spin (a sleeping process is slow to wake). */
#define MLN_RELAY_BULK_S 0.005
int mln_relay_bulk(const mln_relay_t *r);

/* Counters for MLN_PRELOAD_STATS and the benchmarks. */
typedef struct mln_relay_stats {
    uint64_t msgs_out, bytes_out, msgs_in, bytes_in;
    uint64_t frames_out[64], frames_in[64]; /* per trunk */
} mln_relay_stats_t;
void mln_relay_get_stats(const mln_relay_t *r, mln_relay_stats_t *out);

#endif /* MLN_RELAY_H */
