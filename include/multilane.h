/*
 * multilane.h - the one public header of libmultilane.
 *
 * Multilane is a library on top of an unmodified MPI (Open MPI, MPICH, ...) that makes
 * communication fast where the network is the bottleneck.  This header holds the library life
 * cycle and the communication calls; multilane_base.h (included) holds the status codes, the
 * version query, the tunables table and the parsers, which need no MPI.
 *
 * Conventions: every fallible call returns mln_status_t; output arguments come last and are
 * written only on success; counts are 64-bit.
 */
#ifndef MULTILANE_H
#define MULTILANE_H

#include "multilane_base.h"

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- life cycle ------------------------------------------------------------------------- */

/*
 * Reads the tunables from the environment once (invalid values are rejected with a message
 * naming the variable and MLN_ERR_CONFIG), then prepares the library.  MPI must already be
 * initialised.  Calling it twice without mln_finalize returns MLN_ERR_STATE.
 */
mln_status_t mln_init(void);
mln_status_t mln_finalize(void);
int mln_initialized(void);

/*
 * The communicator of the application's ranks: MPI_COMM_WORLD less the helper ranks that
 * MLN_STRIPE_BACKEND=helper takes (the last MLN_STRIPE_HELPERS ranks of every node).  Helper
 * ranks never return from mln_init: they forward striped data until the application's ranks
 * call mln_finalize, then call MPI_Finalize and exit(0).  Without helpers it is a duplicate of
 * MPI_COMM_WORLD.  MPI_COMM_NULL before mln_init.
 */
MPI_Comm mln_comm_world(void);

/* ---- striped point-to-point (src/p2p, docs/STRIPE.md) ---------------------------------------- */

/*
 * MPI-like send and receive that split a large message to a remote peer over several lanes
 * (ALGORITHMS.md S1-S7).  Arguments are those of MPI_Send/MPI_Recv with a 64-bit count.
 * Matching is MPI's: a header travels on (comm, tag), so MPI_ANY_SOURCE, MPI_ANY_TAG and the
 * non-overtaking rule hold as in MPI; only the payload goes over the lanes.  Messages up to
 * MLN_STRIPE_THRESHOLD bytes, or to a peer on the same site, are plain MPI messages.
 *
 * Both sides of a message must use these calls (a striped message is not an MPI message).
 * Datatypes: contiguous types are sent in place; other types are packed into a library buffer
 * (one copy, count x size up to 2^31 - 1 bytes; larger non-contiguous messages get
 * MLN_ERR_UNSUPPORTED).  Intercommunicators and peers outside MPI_COMM_WORLD get
 * MLN_ERR_UNSUPPORTED.  A receive writes only what arrived, as MPI_Recv does.
 *
 * Requests progress inside mln_stripe_wait/test/waitall (and any other mln_stripe call).
 * A lane that fails (the peer closed or reset it, or its host left it unanswered for
 * MLN_STRIPE_TIMEOUT seconds; a peer that only computes is no failure) completes the requests
 * with bytes on it with MLN_ERR_PEER or MLN_ERR_TIMEOUT; the others, and later messages to that
 * peer, use the mpi lane.  After any error status nothing uses the request's buffer any more,
 * and other messages with the same peer are not disturbed (docs/STRIPE.md "Failures").  A
 * receive whose buffer is too small gets MLN_ERR_TRUNCATE (its buffer holds the first bytes).
 * The MPI_Status of a receive carries the source, the tag and the count.
 */
typedef enum mln_stripe_backend {
    MLN_STRIPE_TCP = 0, /* the library's own TCP sockets, MLN_STRIPE_LANES per peer */
    MLN_STRIPE_HELPER,  /* helper ranks (seed 000): 2k+1 process pairs per message */
    MLN_STRIPE_MPI      /* chunks over plain MPI: the baseline and the fallback */
} mln_stripe_backend_t;

typedef struct mln_stripe_request *mln_request_t;
#define MLN_REQUEST_NULL ((mln_request_t)0)

mln_status_t mln_stripe_send(const void *buf, int64_t count, MPI_Datatype datatype, int dest,
                             int tag, MPI_Comm comm);
mln_status_t mln_stripe_recv(void *buf, int64_t count, MPI_Datatype datatype, int source, int tag,
                             MPI_Comm comm, MPI_Status *status);
mln_status_t mln_stripe_isend(const void *buf, int64_t count, MPI_Datatype datatype, int dest,
                              int tag, MPI_Comm comm, mln_request_t *request);
mln_status_t mln_stripe_irecv(void *buf, int64_t count, MPI_Datatype datatype, int source, int tag,
                              MPI_Comm comm, mln_request_t *request);
/* Completes *request and sets it to MLN_REQUEST_NULL; returns the request's own status.
 * status may be MPI_STATUS_IGNORE; a null request returns MLN_OK at once. */
mln_status_t mln_stripe_wait(mln_request_t *request, MPI_Status *status);
/* *done = 1 when complete (then as mln_stripe_wait), else 0 and the request stays. */
mln_status_t mln_stripe_test(mln_request_t *request, int *done, MPI_Status *status);
/* Waits for all; returns MLN_OK or the first failed request's status (all are completed and
 * freed either way).  statuses may be MPI_STATUSES_IGNORE. */
mln_status_t mln_stripe_waitall(int count, mln_request_t requests[], MPI_Status *statuses);

/* The backend's name ("tcp", "helper", "mpi") and lanes per peer, as configured (0: tcp lanes
 * with MLN_STRIPE_LANES=auto, which finds each peer's count). */
const char *mln_stripe_backend_name(void);
int mln_stripe_lanes(void);
/* The lanes striped messages to world rank peer_world now go over: auto's choice for that peer
 * (tcp), else as configured; 0 before any striped message to it. */
int mln_stripe_lanes_used(int peer_world);

/* ---- multi-endpoint hierarchical broadcast (seed 001) ------------------------------------ */

/*
 * mln_bcast: MPI_Bcast's arguments and semantics (collective over comm, the same count and
 * type signature on every rank, root anywhere), with a 64-bit count.  Algorithms:
 *
 *   sme   multi-endpoint: the message is cut into L chunks on element boundaries; chunk j is
 *         broadcast between nodes by the j-th process of every node, all L at once; inside a
 *         node the chunks meet in a shared-memory window that every process copies from.
 *   hier  the same with one leader per node (the classic two-level broadcast).
 *   mpi   MPI_Bcast.
 *
 * MLN_BCAST_ALGO picks one (auto = sme); MLN_BCAST_LEADERS is L, capped at the smallest number
 * of processes on a node.  sme falls back to hier with L = 1, and both fall back to MPI_Bcast
 * below MLN_BCAST_THRESHOLD bytes or on one node (each fallback is logged at debug level).
 * Nodes are MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups, or blocks of MLN_NODE_SIZE
 * consecutive ranks of each (a test hook to emulate nodes on one host).  The set-up is cached on
 * the communicator and freed with it.  Non-contiguous types are packed (at most 2^31 - 1 bytes
 * packed; beyond, MLN_ERR_UNSUPPORTED).  Intercommunicators get MLN_ERR_UNSUPPORTED.
 */
typedef enum mln_bcast_algo {
    MLN_BCAST_AUTO = 0,
    MLN_BCAST_SME = 1,
    MLN_BCAST_HIER = 2,
    MLN_BCAST_MPI = 3
} mln_bcast_algo_t;

mln_status_t mln_bcast(void *buf, int64_t count, MPI_Datatype datatype, int root, MPI_Comm comm);

/* What the last mln_bcast on this process ran (after fallbacks), and with how many leaders
 * per node (1 for hier, 0 for mpi): for tests and benchmarks. */
mln_bcast_algo_t mln_bcast_last_algo(int *leaders);
/* "auto", "sme", "hier", "mpi" (NULL for a value out of range). */
const char *mln_bcast_algo_name(mln_bcast_algo_t algo);

/* ---- halo exchange (src/halo, docs/HALO.md) ------------------------------------------- */

/*
 * A neighbour (halo) exchange planned once and run once per iteration (ALGORITHMS.md H1-H5).
 * Every mode moves the same data; they differ in how MPI moves it and how the receiver learns
 * that it arrived.  The RMA modes put into a window from MPI_Win_allocate; the double-buffered
 * ones alternate two halves by iteration parity, so one synchronisation per iteration suffices.
 */
typedef enum mln_halo_mode {
    MLN_HALO_AUTO = 0,        /* time the usable modes at creation, keep the fastest */
    MLN_HALO_P2P = 1,         /* MPI_Irecv + MPI_Isend + MPI_Waitall */
    MLN_HALO_NEIGHBOR = 2,    /* MPI_Neighbor_alltoallw on a distributed-graph communicator */
    MLN_HALO_RMA_FENCE = 3,   /* double-buffered puts, one fence per iteration */
    MLN_HALO_RMA_PSCW = 4,    /* double-buffered puts, post/start/complete/wait by parity */
    MLN_HALO_RMA_PASSIVE = 5, /* double-buffered puts, lock_all once, sequence numbers */
    MLN_HALO_RMA_SINGLE = 6   /* single-buffered puts, two fences (the control) */
} mln_halo_mode_t;
#define MLN_HALO_NMODES 7

typedef struct mln_halo_plan mln_halo_plan_t;

/*
 * Collective over comm (an intracommunicator).  Entry k: send_counts[k] elements of `type` go
 * to rank nbrs[k] and recv_counts[k] come from it, every iteration (0 allowed; a rank may be
 * listed more than once; MPI_PROC_NULL: the entry moves nothing and its buffers are not
 * touched).  Entry k pairs with entry peer_index[k] of nbrs[k]'s list; NULL: the j-th time a
 * rank appears in my list pairs with the j-th time I appear in its list.  A pairing that is
 * not mutual, or counts that do not match, give MLN_ERR_ARG on every rank.  `type` must be
 * contiguous for the RMA modes (else they are not used by auto, and refused when asked for).
 * mode AUTO is replaced by MLN_HALO_MODE when that is set; a mode in MLN_HALO_DISABLE (or in
 * the built-in list for this MPI, docs/HALO.md) is refused with MLN_ERR_UNSUPPORTED.  A failure
 * on one rank (memory, an MPI call that rank alone makes) is returned on every rank.
 */
mln_status_t mln_halo_create(MPI_Comm comm, int nnbrs, const int *nbrs, const int *peer_index,
                             const int64_t *send_counts, const int64_t *recv_counts,
                             MPI_Datatype type, mln_halo_mode_t mode, mln_halo_plan_t **plan);
/*
 * The same from a Cartesian communicator: for each axis d and each hop h = 1..radius, the
 * rank h steps down (entry 2 * (d * radius + h - 1)) and h steps up (the next entry), `count`
 * elements each way.  Non-periodic edges give MPI_PROC_NULL entries.
 */
mln_status_t mln_halo_create_cart(MPI_Comm cart, int radius, int64_t count, MPI_Datatype type,
                                  mln_halo_mode_t mode, mln_halo_plan_t **plan);
/* One iteration: sendbufs[k] goes to entry k's partner; recvbufs[k] holds what it sent.
 * Collective over the neighbours.  sendbufs[k] may be reused when the call returns.  A receive
 * buffer must not share memory with any send buffer or another receive buffer (send buffers
 * may share): MLN_ERR_ARG in every mode, before anything moves.  With a contiguous type any
 * overlap is found; with another type only equal addresses (strided buffers may interleave).
 * After any other error (the exchange had started) the ranks may be at different iterations:
 * the plan then refuses every later exchange with MLN_ERR_STATE and must be freed. */
mln_status_t mln_halo_exchange(mln_halo_plan_t *plan, const void *const *sendbufs,
                               void *const *recvbufs);
/* The mode the plan runs (after auto: its choice); NULL plan: MLN_HALO_AUTO. */
mln_halo_mode_t mln_halo_mode(const mln_halo_plan_t *plan);
/* Entries of the plan, and the rank of entry k (MPI_PROC_NULL for an empty edge); -1 if out
 * of range. */
int mln_halo_size(const mln_halo_plan_t *plan);
int mln_halo_neighbor(const mln_halo_plan_t *plan, int k);
/* "auto", "p2p", "neighbor", "rma-fence", "rma-pscw", "rma-passive", "rma-single"; NULL if
 * out of range.  mln_halo_mode_parse is its inverse (MLN_ERR_ARG for an unknown name). */
const char *mln_halo_mode_name(mln_halo_mode_t mode);
mln_status_t mln_halo_mode_parse(const char *name, mln_halo_mode_t *mode);

/* Whether `mode` is disabled here (MLN_HALO_DISABLE, or its built-in list for this MPI): *disabled
 * 1 or 0, and *why (if not NULL) the reason or NULL.  Needs mln_init; MLN_ERR_CONFIG for a bad
 * MLN_HALO_DISABLE.  AUTO is never disabled. */
mln_status_t mln_halo_disabled(mln_halo_mode_t mode, int *disabled, const char **why);

/* What auto found for one mode (the same on every rank). */
typedef enum mln_halo_state {
    MLN_HALO_UNTRIED = 0, /* not tried: the plan was made with a fixed mode */
    MLN_HALO_TIMED,       /* correct in every trial iteration; seconds = median per iteration */
    MLN_HALO_WRONG,       /* delivered wrong data in the trial: never used by this plan */
    MLN_HALO_DISABLED,    /* disabled on this MPI (MLN_HALO_DISABLE or the built-in list) */
    MLN_HALO_UNUSABLE     /* not for these arguments (e.g. RMA with a non-contiguous type) */
} mln_halo_state_t;
/* auto's result for `mode`: state and seconds per iteration (max over ranks; 0 if untimed). */
mln_status_t mln_halo_timing(const mln_halo_plan_t *plan, mln_halo_mode_t mode,
                             mln_halo_state_t *state, double *seconds);
/* One line for people: "rma-passive (auto: p2p 10.2 us, neighbor 11.0 us, ..., rma-pscw
 * disabled)"; snprintf's return convention. */
int mln_halo_describe(const mln_halo_plan_t *plan, char *buf, size_t len);
/* Frees the plan (collective over the plan's communicator: windows are freed) and sets
 * *plan to NULL; NULL or *plan NULL: nothing. */
void mln_halo_free(mln_halo_plan_t **plan);

#ifdef __cplusplus
}
#endif

#endif /* MULTILANE_H */
