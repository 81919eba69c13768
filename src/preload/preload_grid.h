/*
 * preload_grid.h - grid mode's state and the helpers its two files share (preload_grid.c: life
 * cycle, sends, the matching engine, the barrier; preload_grid_probe.c: probes and matched
 * probes).  Internal to the interposition layer.
 */
#ifndef MLN_PRELOAD_GRID_H
#define MLN_PRELOAD_GRID_H

#include "preload_int.h"
#include "relay/relay_int.h" /* MLN_RELAY_CTX_WORLD, MLN_RELAY_CTX_LAYER */

#define GRID_TAG_BARRIER 1 /* CTX_LAYER: the barrier's messages */
#define GRID_SAID_MAX 32

/* A message a matched probe (MPI_Mprobe, MPI_Improbe) took for the program. */
typedef struct grid_msg {
    MPI_Message handle; /* what the program holds: MPI's own, or a stand-in */
    mln_relay_msg_t *m; /* another site's message (NULL: a same-site one, MPI holds it) */
    struct grid_msg *next;
} grid_msg_t;

typedef struct mln_pl_grid {
    mln_relay_t *relay;
    int rank, size;                      /* global */
    int site, nsites, first, nlocal;     /* this site, its first global rank, its ranks */
    MPI_Comm local;                      /* a private duplicate of the site's world */
    mln_pl_req_t *posted, **posted_tail; /* receives not yet matched, in posting order */
    mln_pl_req_t *sends;                 /* sends to other sites the relay still moves */
    mln_pl_req_t *mrecvs;                /* receives matched to same-site messages: MPI's Imrecv */
    grid_msg_t *msgs;
    int remote_first;                /* MPI_ANY_SOURCE: which origin to look at first */
    int fatal;                       /* the fatal handler ran */
    const char *said[GRID_SAID_MAX]; /* refusals already said */
    int nsaid;
} mln_pl_grid_t;

static inline int mln_pl_grid_is_local(const mln_pl_grid_t *g, int rank)
{
    return rank >= g->first && rank < g->first + g->nlocal;
}

/* The world's error handler with code (the other sites told first where it is fatal). */
int mln_pl_grid_fail(int code);
/* The oldest message of another site that (source, tag) matches, or NULL. */
mln_relay_msg_t *mln_pl_grid_arrived(mln_pl_grid_t *g, int source, int tag);
/* MPI's probe of a same-site message (source, tag: global); matched: MPI_Improbe. */
int mln_pl_grid_local_probe(mln_pl_grid_t *g, int source, int tag, int matched, int *flag,
                            MPI_Message *msg, MPI_Status *st);
void mln_pl_grid_remote_status(const mln_relay_msg_t *m, MPI_Count got, MPI_Status *st);
/* Receive r matched: to a same-site message (MPI's Imrecv runs), or to another site's m
 * (unpacked, r complete; taken: a matched probe took m off the relay's list already). */
void mln_pl_grid_local_deliver(mln_pl_grid_t *g, mln_pl_req_t *r, MPI_Message *msg);
void mln_pl_grid_remote_deliver(mln_pl_grid_t *g, mln_pl_req_t *r, mln_relay_msg_t *m, int taken);

#endif /* MLN_PRELOAD_GRID_H */
