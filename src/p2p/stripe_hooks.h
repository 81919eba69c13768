/*
 * stripe_hooks.h - what the interposition layer (src/preload) asks of the striping engine
 * beyond the public calls of multilane.h: whether the engine needs progress, a progress pass,
 * where a peer is, receives whose header was taken off MPI by a probe, cancel, and counters.
 * Every call needs mln_init (they answer "nothing" before it).
 */
#ifndef MLN_STRIPE_HOOKS_H
#define MLN_STRIPE_HOOKS_H

#include "multilane.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 while a striped request is active (posted, not yet complete), or chunks of ours are in
 * flight: then a blocking MPI call must not wait inside MPI alone, or a peer that waits for
 * our CTS or our chunks may wait for ever (MPI's progress rule). */
int mln_stripe_busy(void);
/* One non-blocking pass of the engine; 1 when anything moved. */
int mln_stripe_poll(void);
/* 1 when world rank w is on another site than this process (or MLN_STRIPE_LOCAL is set and w
 * is another process): messages to it go through the engine. */
int mln_stripe_remote(int world_rank);
/* The same for rank `rank` of comm (0 without the engine). */
int mln_stripe_comm_remote(MPI_Comm comm, int rank);
/* Messages above this many bytes to a remote peer are striped (MLN_STRIPE_THRESHOLD). */
uint64_t mln_stripe_threshold(void);
/* 1 when the 64 bytes at msg64 are a striped or inline header: *total = the bytes of the
 * user's message it announces. */
int mln_stripe_header_total(const void *msg64, uint64_t *total);
/* mln_stripe_isend; sync = 1: it completes only once the receiver matched it (MPI_Ssend). */
mln_status_t mln_stripe_isend_mode(const void *buf, int64_t count, MPI_Datatype datatype, int dest,
                                   int tag, MPI_Comm comm, int sync, mln_request_t *request);
/* mln_stripe_irecv for a message whose 64-byte wire message (msg64, from `source` with `tag`
 * in comm) was already taken off MPI: the receive goes on from that header. */
mln_status_t mln_stripe_irecv_taken(void *buf, int64_t count, MPI_Datatype datatype, int source,
                                    int tag, MPI_Comm comm, const void *msg64,
                                    mln_request_t *request);
/* Cancels a receive whose message has not been matched: *cancelled = 1 (the request completes
 * with a cancelled status, nothing written) or 0 (too late: it completes as usual).  Sends are
 * never cancelled (*cancelled = 0). */
mln_status_t mln_stripe_cancel(mln_request_t *request, int *cancelled);

/* 1 when the request is complete (mln_stripe_wait then returns at once). */
int mln_stripe_done(mln_request_t request);

typedef struct mln_stripe_counters {
    uint64_t send_msgs, send_bytes; /* striped sends that completed */
    uint64_t recv_msgs, recv_bytes; /* striped receives that completed (bytes accepted) */
} mln_stripe_counters_t;
void mln_stripe_counters(mln_stripe_counters_t *out);

#ifdef __cplusplus
}
#endif

#endif /* MLN_STRIPE_HOOKS_H */
