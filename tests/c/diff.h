/*
 * diff.h - the differential test of striped point-to-point (mpi_stripe_diff.c): one seeded
 * schedule of rounds (diff_plan.c), run once through mln_stripe_* and once through plain MPI on
 * twin communicators (diff_exec.c), and the comparison of what each rank received (diff_compare.c).
 *
 * A round is a set of messages.  Every rank draws the same round from (seed, round index) and
 * runs its own part: it posts receives, sends, receives late, completes in groups (wait, waitall
 * or a test loop), and on the striped side sleeps in compute gaps.  Where MPI's matching is
 * deterministic (every receive names its source) a striped receive must equal its MPI twin byte
 * for byte, status for status; where it is not (MPI_ANY_SOURCE), the message each receive got is
 * identified by its payload and checked: sent to this rank on that class, received once, in
 * order per sender, and equal to MPI's receive of the same message.  The order in which
 * requests complete is not compared (MPI leaves it open); matching order is, and every request
 * must be complete and freed when its wait, waitall or test says so.
 */
#ifndef MLN_DIFF_H
#define MLN_DIFF_H

#include "stripe_check.h"

#include <stdint.h>
#include <stdio.h>

#define DIFF_MAX_COMMS 4
#define DIFF_NTAGS 6

/* ---- random numbers: splitmix64, the same sequence on every rank ------------------------- */

typedef struct diff_rng {
    uint64_t s;
} diff_rng_t;

uint64_t rng_next(diff_rng_t *g);
uint64_t rng_below(diff_rng_t *g, uint64_t n); /* 0 .. n - 1 (0 when n is 0) */
int rng_chance(diff_rng_t *g, double p);

/* The `msg` argument of fill()/pat() for message `id`: pat() sees only msg mod 256, so the id
 * is hashed (ids 1024 or 65536 apart, as the library's inline tags repeat, must differ). */
static inline int diff_pattern_id(int64_t id)
{
    uint64_t z = (uint64_t)id * 0x9E3779B97F4A7C15ull;

    z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
    return (int)((z ^ (z >> 32)) & 0x7fffffff);
}

/* ---- datatypes: a base type in one of several layouts --------------------------------------- */

typedef enum diff_base { BASE_BYTE, BASE_INT, BASE_DOUBLE, DIFF_NBASES } diff_base_t;
typedef enum diff_lay {
    LAY_PLAIN,     /* the base type itself */
    LAY_CONTIG3,   /* MPI_Type_contiguous(3) */
    LAY_VECTOR,    /* 2 blocks of 2, stride 3: holes */
    LAY_INDEXED,   /* blocks {1, 2} at {0, 3}, extent 6: holes */
    LAY_LB_GAP,    /* 2 elements from lower bound 1, extent 3: holes between instances */
    LAY_LB_CONTIG, /* 2 elements from lower bound 2, extent 2: contiguous, not at buf */
    DIFF_NLAYS
} diff_lay_t;

typedef struct diff_types {
    MPI_Datatype t[DIFF_NBASES][DIFF_NLAYS];
    MPI_Aint lb[DIFF_NBASES][DIFF_NLAYS], extent[DIFF_NBASES][DIFF_NLAYS];
} diff_types_t;

extern const int diff_bsize[DIFF_NBASES]; /* bytes of a base element */
extern const int diff_k[DIFF_NLAYS];      /* base elements per instance of a layout */
extern const int diff_contig[DIFF_NLAYS]; /* the elements lie back to back from buf + lb */

void diff_types_create(diff_types_t *ty);
void diff_types_free(diff_types_t *ty);
/* "double/vector" */
const char *diff_type_name(int base, int lay);
/* Bytes of a buffer of `count` instances: lower bound, count extents and 32 bytes of slack. */
int64_t diff_span(const diff_types_t *ty, int base, int lay, int64_t count);

/* ---- the schedule (diff_plan.c) ------------------------------------------------------------- */

typedef struct diff_params {
    uint64_t seed;
    int size, ncomms, round_ops, burst;
    int tags[DIFF_NTAGS];
    int64_t thr, max_size, big_size, round_bytes, trunc_max;
    double big_prob, burst_prob, gap_prob, gap_seconds, trunc_prob, self_prob;
} diff_params_t;

/* What lives from one round to the next: message ids and the gap budget. */
typedef struct diff_state {
    int64_t next_id;
    double *gap_left; /* per rank, seconds */
} diff_state_t;

typedef enum diff_round_kind { ROUND_MIXED, ROUND_BIG, ROUND_BURST } diff_round_kind_t;

typedef struct diff_msg {
    int64_t id; /* the payload is fill(src, diff_pattern_id(id)): it names the message */
    int src, dst, comm, tag, base, lay;
    int64_t count, n; /* sender's count, and base elements n = count x k */
    int blocking;     /* mln_stripe_send / MPI_Send instead of isend */
    int pos;          /* position among src's sends: non-overtaking order */
    int recv;         /* the receive that matches it (-1: a wildcard class, or no receiver) */
} diff_msg_t;

typedef struct diff_recv {
    int dst, comm, src, tag, base, lay; /* src may be MPI_ANY_SOURCE or MPI_PROC_NULL */
    int64_t count;
    int cls;  /* wildcard class (-1: the source is named) */
    int late; /* a blocking receive after the rank's sends */
    int msg;  /* the message MPI matches to it (-1: wildcard class, or MPI_PROC_NULL) */
    int intent;
} diff_recv_t;

/* Receives with MPI_ANY_SOURCE: all receives of a (receiver, comm) (any tag), or of a (receiver,
 * comm, tag); all of one class have the same datatype and count, large enough for every message
 * of the class, so that any matching MPI may choose is complete and none truncates. */
typedef struct diff_class {
    int dst, comm, tag; /* tag MPI_ANY_TAG: the whole (dst, comm) */
    int base, lay;
    int64_t count, max_n;
} diff_class_t;

typedef enum diff_op_kind {
    OP_IRECV,
    OP_ISEND,
    OP_SEND,
    OP_RECV,
    OP_GAP,
    OP_COMPLETE
} diff_op_kind_t;
typedef enum diff_method { HOW_WAIT, HOW_WAITALL, HOW_TEST, HOW_BLOCKING } diff_method_t;

typedef struct diff_op {
    int kind;
    int index;  /* receive (IRECV, RECV), message (ISEND, SEND) or group (COMPLETE) */
    int slot;   /* request slot of IRECV / ISEND */
    double gap; /* OP_GAP: seconds */
} diff_op_t;

typedef struct diff_group {
    int method, first, len; /* slots[first .. first + len) of the rank's plan */
} diff_group_t;

typedef struct diff_rank_plan {
    diff_op_t *ops;
    int nops, nslots, ngroups;
    int *slots; /* slot numbers in completion order */
    diff_group_t *groups;
} diff_rank_plan_t;

typedef struct diff_round {
    int index, kind;
    diff_msg_t *msg;
    diff_recv_t *recv;
    diff_class_t *cls;
    int nmsg, nrecv, ncls;
    diff_rank_plan_t *rank; /* [size] */
    int64_t bytes;          /* payload bytes of all messages */
} diff_round_t;

void diff_plan_round(const diff_params_t *p, diff_state_t *st, int index, diff_round_t *r);
void diff_round_free(diff_round_t *r, int size);
/* The whole round, one line per message, receive and rank (--dump). */
void diff_round_print(const diff_round_t *r, int size, FILE *out);
const char *diff_method_name(int method);
const char *diff_round_kind_name(int kind);

/* ---- running a round through one API (diff_exec.c) ------------------------------------------- */

typedef union diff_req {
    mln_request_t m;
    MPI_Request r;
} diff_req_t;

/* The calls of one side, with MPI's return codes mapped to mln_status_t. */
typedef struct diff_api {
    const char *name;
    mln_status_t (*isend)(const void *buf, int64_t count, MPI_Datatype type, int dest, int tag,
                          MPI_Comm comm, diff_req_t *req);
    mln_status_t (*irecv)(void *buf, int64_t count, MPI_Datatype type, int src, int tag,
                          MPI_Comm comm, diff_req_t *req);
    mln_status_t (*send)(const void *buf, int64_t count, MPI_Datatype type, int dest, int tag,
                         MPI_Comm comm);
    mln_status_t (*recv)(void *buf, int64_t count, MPI_Datatype type, int src, int tag,
                         MPI_Comm comm, MPI_Status *st);
    mln_status_t (*wait)(diff_req_t *req, MPI_Status *st);
    mln_status_t (*test)(diff_req_t *req, int *done, MPI_Status *st);
    /* *err_in_status: 1 when the statuses' MPI_ERROR fields are defined (MPI: an error) */
    mln_status_t (*waitall)(int n, diff_req_t *reqs, MPI_Status *sts, int *err_in_status);
    int (*is_null)(const diff_req_t *req);
} diff_api_t;

extern const diff_api_t diff_api_mln, diff_api_mpi;

/* What one operation of one side gave. */
typedef struct diff_result {
    mln_status_t post, rc; /* the isend/irecv call's status; the completion's */
    int method, left;      /* how it completed; left: the request was not null after it */
    int ok;                /* this request completed without error */
    int src, tag, err, err_defined, count;
    MPI_Count elems;
    uint8_t *buf; /* receives: the whole buffer */
    int64_t span;
} diff_result_t;

typedef struct diff_side {
    const diff_api_t *api;
    MPI_Comm comm[DIFF_MAX_COMMS];
    diff_result_t *recv, *send; /* [nrecv], [nmsg]: this rank's entries */
    int gaps;                   /* sleep in compute gaps (the striped side) */
} diff_side_t;

typedef struct diff_ctx {
    int rank, size;
    MPI_Comm self; /* a duplicate of MPI_COMM_SELF: re-layouts data between datatypes */
    diff_types_t types;
    diff_params_t params;
    /* mismatch reporting */
    int64_t mismatches;
    int report;        /* detailed lines to print at most */
    const char *where; /* "seed=S round R" */
} diff_ctx_t;

/* Send buffers of this rank's messages (data in the sender's layout), NULL elsewhere. */
uint8_t **diff_send_buffers(const diff_ctx_t *c, const diff_round_t *r);
void diff_buffers_free(uint8_t **bufs, int n);
void diff_side_alloc(const diff_ctx_t *c, const diff_round_t *r, diff_side_t *side);
void diff_side_free(const diff_round_t *r, diff_side_t *side);
void diff_exec_round(const diff_ctx_t *c, const diff_round_t *r, uint8_t *const *sendbufs,
                     diff_side_t *side);
/* The n base elements of `count` instances of (base, lay) at buf, back to back, in `out`
 * (for a contiguous layout, out may be a pointer into buf: *tmp is then NULL). */
const uint8_t *diff_stream(const diff_ctx_t *c, const uint8_t *buf, int base, int lay,
                           int64_t count, uint8_t **tmp);

/* ---- comparing the two sides (diff_compare.c) ---------------------------------------------- */

/* Prints one mismatch in detail (the first c->report of them) and counts it. */
void diff_mismatch(diff_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compares the striped side with the MPI twin for this rank's operations of round r. */
void diff_compare_round(diff_ctx_t *c, const diff_round_t *r, const diff_side_t *mln,
                        const diff_side_t *mpi);

#endif /* MLN_DIFF_H */
