/*
 * preload_int.h - internals of libmultilane-preload.so, the interposition layer (docs/PRELOAD.md).
 *
 * An unmodified MPI program runs with LD_PRELOAD=libmultilane-preload.so.  The layer defines
 * the MPI functions listed in wrappers.txt (each as MPI_X and PMPI_X; wrappers_gen.c, generated
 * from the MPI Forum's API data), starts Multilane in MPI_Init, and sends point-to-point
 * messages to remote peers through the striping engine and MPI_Bcast through mln_bcast.
 * Everything else goes straight to the MPI library, through the table mln_pmpi (the real
 * PMPI_X, found with dlsym(RTLD_NEXT)); the layer never calls a PMPI_X by name.
 *
 *   program --MPI_Isend--> wrapper --plain (local peer, small)--> mln_pmpi.Isend --> MPI
 *                                  --remote and large---------> mln_stripe_isend (lanes)
 *                                     and the program gets a generalized request (a real one)
 *
 * Requests the layer completes are MPI generalized requests (MPI_Grequest_start), so that
 * MPI's own calls (Request_c2f, Test_cancelled, the Fortran bindings) accept them; a
 * persistent request is a real persistent request of MPI (to MPI_PROC_NULL) that the layer
 * starts its own way.  Messages a probe took off MPI wait in a per-communicator stash, in
 * arrival order, for the receive that matches them.
 */
#ifndef MLN_PRELOAD_INT_H
#define MLN_PRELOAD_INT_H

#include "multilane.h"
#include "relay/relay.h"
#include "stripe_hooks.h"
#include "wrappers_gen.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

/* ---- the layer's own requests ---------------------------------------------------------- */

typedef enum mln_pl_op {
    MLN_PL_SEND = 0,
    MLN_PL_SSEND,
    MLN_PL_BSEND,
    MLN_PL_RSEND,
    MLN_PL_RECV,
    MLN_PL_PAIR /* MPI_Isendrecv: a receive and a send of the layer's (pair[]) */
} mln_pl_op_t;

typedef struct mln_pl_req mln_pl_req_t;
struct mln_pl_req {
    MPI_Request handle; /* what the program holds: greq, or a persistent request of MPI */
    MPI_Request greq;   /* the generalized request of the running (or last) operation */
    mln_request_t eng;  /* the engine's request while the operation runs */
    int persistent;     /* made by *_init: handle outlives each operation */
    int active;         /* persistent: started, not yet completed by a wait or test */
    int done;           /* the operation is complete: status and error are final */
    int freed;          /* MPI_Request_free came first: free once done */
    int detached;       /* no handle at all (a buffered send the program left behind) */
    mln_pl_op_t op;
    /* the operation's arguments (persistent requests start it again and again) */
    void *buf;
    MPI_Count count;
    MPI_Datatype dtype;
    int peer, tag;
    MPI_Comm comm;
    void *copy;             /* buffered send: the layer's packed copy of the data */
    MPI_Status status;      /* final status: the generalized request's query answers with it */
    int error;              /* MPI error code of the operation (MPI_SUCCESS, MPI_ERR_TRUNCATE...) */
    mln_pl_req_t *next_run; /* on the list of operations the engine runs */
    MPI_Request pair[2];    /* MLN_PL_PAIR: its receive and its send, not yet completed */
    /* grid mode (preload_grid.c): an operation on the grid world */
    int grid;
    struct mln_pl_gcomm *gc; /* the grid communicator (preload_grid.h) */
    mln_relay_send_t *rsend; /* a send to another site, while the relay moves it */
    MPI_Request mreq;        /* a receive matched to a same-site message: MPI's Imrecv */
    mln_pl_req_t *next_grid; /* on one of the grid's lists (posted, sends, mrecvs) */
};

/* ---- what the layer knows about a communicator (an attribute, freed with it) ------------ */

typedef struct mln_pl_stash mln_pl_stash_t;
struct mln_pl_stash {
    int source, tag;
    int header;     /* a striped or inline header (data = its 64 bytes) */
    uint64_t total; /* bytes of the user's message */
    uint64_t len;   /* bytes at data */
    unsigned char *data;
    mln_pl_stash_t *next;
};

typedef struct mln_pl_comm {
    int size;
    int plain;             /* intercommunicator, or nobody remote: everything goes to MPI */
    int spans;             /* some pair of ranks is on different sites (the same on every rank) */
    unsigned char *remote; /* rank -> 1 when its messages go through the engine */
    mln_pl_stash_t *stash; /* messages a probe took off MPI, oldest first */
    /* The layer's own communicator over the same group, made at the first blocking collective
     * on a spanning communicator: that collective and the next ones run there as their
     * nonblocking twins, so they never meet the program's own nonblocking collectives (MPI
     * matches those apart from blocking ones).  MPI_COMM_NULL until then. */
    MPI_Comm coll;
} mln_pl_comm_t;

/* ---- the layer ------------------------------------------------------------------------- */

typedef struct mln_pl {
    int on;               /* Multilane started in MPI_Init and not yet finalized */
    int threaded;         /* MPI_THREAD_MULTIPLE: every layer call holds `lock` */
    pthread_mutex_t lock; /* recursive: generalized request callbacks run inside MPI calls */
    int keyval;           /* communicator attribute: mln_pl_comm_t */
    MPI_Comm last_comm;   /* one-entry cache of the attribute */
    mln_pl_comm_t *last_info;
    MPI_Comm self;         /* dup of MPI_COMM_SELF: messages that back probed messages */
    int coll_progress;     /* blocking collectives on spanning comms run as nonblocking ones */
    int stats;             /* MLN_PRELOAD_STATS: one line per rank at MPI_Finalize */
    mln_pl_req_t *running; /* operations the engine runs (for the program or detached) */
    mln_pl_req_t *pairs;   /* MPI_Isendrecv operations not yet complete (preload_pair.c) */
    /* requests the program holds: open addressing on the handle's bits */
    struct mln_pl_slot {
        MPI_Request handle; /* kept here: MPI may free r (greq_free) before it leaves the map */
        mln_pl_req_t *r;    /* NULL: an empty slot */
    } * map;
    size_t map_cap, map_used;
    /* messages returned by probes (Mprobe, Improbe) for stashed messages */
    struct mln_pl_msg *msgs;
    uint64_t bcast_calls, bcast_bytes;
    struct mln_pl_grid *grid; /* grid mode (preload_grid.c); NULL elsewhere */
} mln_pl_t;

extern mln_pl_t mln_pl;

/* The layer's lock (MPI_THREAD_MULTIPLE only).  It is recursive (generalized-request
 * callbacks and nested wrappers take it again); mln_pl_idle lets go of every level this
 * thread holds, so that a wait in one thread never keeps the others out. */
void mln_pl_lock(void);
void mln_pl_unlock(void);
#define MLN_PL_LOCK()                                                                              \
    do {                                                                                           \
        if (mln_pl.threaded)                                                                       \
            mln_pl_lock();                                                                         \
    } while (0)
#define MLN_PL_UNLOCK()                                                                            \
    do {                                                                                           \
        if (mln_pl.threaded)                                                                       \
            mln_pl_unlock();                                                                       \
    } while (0)

/* MPI's own call of a point-to-point function with a large-count twin: the int form when the
 * count fits (every MPI), else the _c form (MPI-4 libraries; others never pass such a count). */
#if MLN_PL_BIGCOUNT
#define MLN_PL_REAL(fn, count, ...)                                                                \
    ((count) <= INT_MAX ? mln_pmpi.fn(__VA_ARGS__) : mln_pmpi.fn##_c(__VA_ARGS__))
#else
#define MLN_PL_REAL(fn, count, ...) mln_pmpi.fn(__VA_ARGS__)
#endif

/* The call is on a communicator that spans sites (grid mode: MPI_COMM_WORLD, and those made
 * from it that keep ranks of several sites): preload_grid.c runs it. */
#define MLN_PL_GRID(comm) (mln_pl_grid_on && mln_pl_grid_spans(comm))
/* The engine or the relay may have work: a wait must move them (grid mode: always). */
#define MLN_PL_BUSY() (mln_pl.grid != NULL || mln_stripe_busy() || mln_pl.running != NULL)

/* preload.c */
mln_pl_comm_t *mln_pl_comm(MPI_Comm comm); /* NULL: MPI refused (then: plain) */
/* 1 when a message of count x dtype to `dest` must go through the engine. */
int mln_pl_send_engine(MPI_Comm comm, int dest, MPI_Count count, MPI_Datatype dtype);
/* 1 when a receive or probe from `source` may meet a header (must use the engine). */
int mln_pl_recv_engine(MPI_Comm comm, int source);
int mln_pl_revoked(MPI_Comm comm);                /* 1: revoked (ULFM), where MPI can say */
int mln_pl_error(MPI_Comm comm, mln_status_t st); /* MPI's code; the errhandler is called */
MPI_Count mln_pl_bytes(MPI_Count count, MPI_Datatype dtype);
/* Gives the core away while a wait goes on (oversubscribed hosts, the delay line). */
void mln_pl_idle(int *spins);
/* Sleeps `seconds` (< 1) whole: before an MPI_Abort, so that the launcher forwards the lines
 * just written (hydra kills the job's ranks, forwarders included, within a millisecond). */
void mln_pl_linger(double seconds);
/* A rank that cannot start says why, then lingers this long before its MPI_Abort (a CI run of
 * hydra lost both ranks' lines of a refused grid handshake, and MPICH's own abort line). */
#define MLN_PL_LINGER_START_S 0.25

/* preload_req.c */
mln_pl_req_t *mln_pl_req_find(MPI_Request handle);
mln_pl_req_t *mln_pl_req_new(mln_pl_op_t op);
/* Makes the generalized request of r's operation; done: complete it at once. */
int mln_pl_req_greq(mln_pl_req_t *r);
void mln_pl_req_map_add(mln_pl_req_t *r);
void mln_pl_req_map_del(mln_pl_req_t *r);
/* The engine's part of r is complete (st, status): record it and complete r's grequest. */
void mln_pl_req_done(mln_pl_req_t *r, mln_status_t st, const MPI_Status *status);
/* One pass: the engine, then every operation it finished. */
void mln_pl_progress(void);
/* Finishes everything the layer runs (MPI_Finalize, Buffer_detach). */
void mln_pl_drain(int detached_only);

/* preload_pair.c: moves the MPI_Isendrecv operations on (from mln_pl_progress). */
void mln_pl_pairs_progress(void);
/* Completes one request of the layer's or MPI's without moving anything: 1 when complete. */
int mln_pl_test_quiet(MPI_Request *request, MPI_Status *status);

/* preload_p2p.c: starts r's operation (send or receive) in the engine; status for errors. */
int mln_pl_start(mln_pl_req_t *r);
/* A request of the layer for an operation on comm, started (persistent: only made); a
 * blocking one: started, then waited for.  On the grid world, preload_grid.c runs it. */
int mln_pl_req_make(mln_pl_op_t op, const void *buf, MPI_Count count, MPI_Datatype dtype, int peer,
                    int tag, MPI_Comm comm, int persistent, MPI_Request *request);
int mln_pl_blocking(mln_pl_op_t op, void *buf, MPI_Count count, MPI_Datatype dtype, int peer,
                    int tag, MPI_Comm comm, MPI_Status *status);

/* preload_probe.c */
/* A receive from (source, tag) that the stash can answer: its entry, unlinked; else NULL. */
mln_pl_stash_t *mln_pl_stash_take(mln_pl_comm_t *info, int source, int tag);
void mln_pl_stash_free(mln_pl_stash_t *e);
/* Starts a receive of a stashed message (header: in the engine, r->eng set, and the caller
 * puts r on the running list; plain: copied, r done at once). */
int mln_pl_recv_stashed(mln_pl_req_t *r, mln_pl_stash_t *e);
void mln_pl_msgs_fini(void);

/* preload_grid.c: grid mode (`multilane grid run`): MPI_COMM_WORLD is the grid's world of
 * every site's ranks, same-site traffic on a private duplicate of the site's own world, the
 * rest through the relay (src/relay/relay.h). */
void mln_pl_grid_start(void);  /* in MPI_Init: joins the grid (or ends the site's job) */
void mln_pl_grid_finish(void); /* in MPI_Finalize: a grid barrier, sends left out */
void mln_pl_grid_stop(void);   /* then: leaves the relay */
void mln_pl_grid_progress(void);
void mln_pl_grid_idle(int *spins); /* one idle step of a wait (the lock let go) */
/* " relayed_send_msgs=.. relayed_send_bytes=.. relayed_recv_msgs=.. relayed_recv_bytes=.." */
void mln_pl_grid_stats(char *out, size_t len, int *rank, int *size);
/* comm's error handler, after telling the other sites where it is fatal. */
void mln_pl_grid_error(MPI_Comm comm, int code);
/* Point-to-point on a grid communicator; mode: 0 blocking, 1 nonblocking, 2 persistent. */
int mln_pl_grid_send(mln_pl_op_t op, const void *buf, MPI_Count count, MPI_Datatype dtype, int dest,
                     int tag, MPI_Comm comm, int mode, MPI_Request *request);
int mln_pl_grid_recv(void *buf, MPI_Count count, MPI_Datatype dtype, int source, int tag,
                     MPI_Comm comm, int mode, MPI_Request *request, MPI_Status *status);
mln_status_t mln_pl_grid_begin(mln_pl_req_t *r); /* starts r's operation (mln_pl_start) */
void mln_pl_grid_cancel(mln_pl_req_t *r);
int mln_pl_grid_probe(int source, int tag, MPI_Comm comm, int blocking, int *flag,
                      MPI_Status *status);
int mln_pl_grid_mprobe(int source, int tag, MPI_Comm comm, int blocking, int *flag,
                       MPI_Message *message, MPI_Status *status);
/* A receive of a message a grid probe matched: 1 when message is one (then rc), else 0. */
int mln_pl_grid_mrecv(void *buf, MPI_Count count, MPI_Datatype dtype, MPI_Message *message,
                      MPI_Request *request, MPI_Status *status, int *rc);

#endif /* MLN_PRELOAD_INT_H */
