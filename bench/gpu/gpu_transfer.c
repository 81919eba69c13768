/*
 * gpu_transfer.c - mln-gpu-transfer: a GPU buffer between two ranks along four paths
 * (ALGORITHMS.md M2, docs/GPU.md).  Plain C over the CUDA runtime API: no kernel is needed,
 * every device operation is a copy.
 *
 * Exactly 2 ranks, each on GPU (local rank % GPUs on its node).  One iteration is a round trip
 * of one message of `bytes`: rank 0 sends then receives, rank 1 receives then sends, and every
 * device path ends the iteration with cudaDeviceSynchronize, so the clock never stops while a
 * copy is still running.  Bandwidth = bytes / one-way time = 2 * bytes / t.
 *
 *   host        the harness's pageable host buffers straight to MPI_Send / MPI_Recv (the
 *               reference: what the network and the MPI give without a GPU)
 *   cuda-aware  device pointers straight to MPI_Send / MPI_Recv (only on a CUDA-aware MPI:
 *               MPIX_Query_cuda_support, or MPICH's MPIX_GPU_query_support)
 *   staged      sender: cudaMemcpy D2H into a pinned buffer, MPI_Send; receiver: MPI_Recv into
 *               a pinned buffer, cudaMemcpy H2D.  Cost: 2 copies + the message, in series
 *   pipelined   the message in chunks of --chunk bytes through --slots pinned slots:
 *
 *     sender    D2H c0 | D2H c1   | D2H c2   | ...          (stream, cudaMemcpyAsync)
 *                      | Isend c0 | Isend c1 | Isend c2     (MPI)
 *     receiver         | Irecv c0 | Irecv c1 | Irecv c2     (MPI)
 *                                 | H2D c0   | H2D c1 | H2D c2
 *
 *               Cost ~ one chunk's copies + max(copies, message): the copy of chunk i + 1
 *               runs while chunk i is on the wire.  A slot is reused only after its send
 *               completed (sender) or its H2D copy did (receiver); while a rank waits for a
 *               copy it polls its MPI requests, since MPI moves a message only inside MPI calls.
 *
 * Data: the harness fills and checks host slots (op->send, op->recv).  For the device paths,
 * before each repetition's timed loop the send slot is copied to the device send buffer and
 * the device receive buffer is cleared; after the loop the device receive buffer is copied
 * into the receive slot, which the harness then checks: what it checks is what crossed.
 *
 * Without a GPU on some rank, every rank exits 77 (rank 0: "skipped: no GPU (<reason>)").
 * On an MPI that is not CUDA-aware the cuda-aware test is refused (exit 2) when --tests
 * names it, and skipped with a note when it comes from the default list.
 */
#include "harness.h"
#include "mln_core.h"

#include <cuda_runtime_api.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_Query_cuda_support, when Open MPI has its cuda extension */
#endif

#define TAG_DATA 1

typedef enum gt_path { PATH_HOST, PATH_CUDA_AWARE, PATH_STAGED, PATH_PIPELINED } gt_path_t;

static const char *gt_path_name(gt_path_t path)
{
    static const char *const names[] = {"host", "cuda-aware", "staged", "pipelined"};

    return names[path];
}

typedef struct gt_state {
    uint64_t chunk;        /* --chunk: bytes per chunk of the pipelined path */
    int64_t slots;         /* --slots: pinned slots of the pipelined path */
    int peer;              /* the other rank */
    int first;             /* rank 0: sends first in each round trip */
    int cuda_aware;        /* 1 yes, 0 no, -1 the MPI cannot say (agreed: the lowest over ranks) */
    char aware_why[384];   /* "this MPI (...) is not CUDA-aware (...)" when cuda_aware != 1 */
    char *d_send, *d_recv; /* device buffers of the largest size */
    char *h_stage;         /* pinned: the staged path's buffer (send and receive take turns) */
    char *h_slots;         /* pinned: slots * slot_bytes, the pipelined path's slots */
    uint64_t slot_bytes;   /* min(--chunk, largest size) */
    cudaStream_t stream;   /* the pipelined path's copies */
    cudaEvent_t *events;   /* [slots]: the last copy into or out of each slot */
    int *pending;          /* [slots]: that copy was recorded and not yet seen complete */
    MPI_Request *reqs;     /* [slots]: the message in flight from or into each slot */
    int nevents;           /* events created (teardown) */
} gt_state_t;

/* A failed CUDA call: its text and error string become the message (setup: exit 2; in an
 * iteration: the abort line, exit 3), `st` becomes MLN_ERR_SYS. */
#define GT_CUDA_CHECK(b, call, st, label)                                                          \
    do {                                                                                           \
        cudaError_t gt_rc_ = (call);                                                               \
        if (gt_rc_ != cudaSuccess) {                                                               \
            mln_bench_fail((b), "%s failed: %s (%s)", #call, cudaGetErrorString(gt_rc_),           \
                           cudaGetErrorName(gt_rc_));                                              \
            (st) = MLN_ERR_SYS;                                                                    \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

static void gt_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const gt_state_t *s = mln_bench_state(b);

    (void)bytes;
    *out = (mln_bench_plan_t){.send_slots = 1, .recv_slots = 1, .recv_from = s->peer};
}

/* ---- pipelined staging ------------------------------------------------------------------ */

/* Chunks of an n-byte message: ceil(n / chunk), and one empty chunk for n = 0 (the message
 * still goes, so that the round trip keeps its order). */
static uint64_t gt_nchunks(const gt_state_t *s, uint64_t n)
{
    return n == 0 ? 1 : (n + s->chunk - 1) / s->chunk;
}

static int gt_chunk_len(const gt_state_t *s, uint64_t n, uint64_t i)
{
    uint64_t off = i * s->chunk;

    return (int)(n - off < s->chunk ? n - off : s->chunk);
}

static char *gt_slot(const gt_state_t *s, int64_t slot)
{
    return s->h_slots + (size_t)slot * s->slot_bytes;
}

/*
 * Waits for the copy last recorded in `slot`, calling MPI_Testall on the pipeline's requests
 * meanwhile: MPI moves a message only inside MPI calls (a large message over shared memory or
 * TCP makes no progress while the rank sits in cudaEventSynchronize), and the point of the
 * pipeline is that the copies and the messages move at the same time.
 */
static mln_status_t gt_wait_copy(mln_bench_t *b, gt_state_t *s, int64_t slot)
{
    cudaError_t rc;
    int done = 0;
    mln_status_t st = MLN_OK;

    while (s->pending[slot]) {
        rc = cudaEventQuery(s->events[slot]);
        if (rc == cudaSuccess) {
            s->pending[slot] = 0;
        } else if (rc != cudaErrorNotReady) { /* the copy failed: its error */
            mln_bench_fail(b, "cudaEventQuery (the copy of slot %lld) failed: %s (%s)",
                           (long long)slot, cudaGetErrorString(rc), cudaGetErrorName(rc));
            st = MLN_ERR_SYS;
            goto out;
        } else {
            MLN_MPI_CHECK(MPI_Testall((int)s->slots, s->reqs, &done, MPI_STATUSES_IGNORE), st, out);
        }
    }
out:
    return st;
}

/* Queues the copy of chunk i between the device buffer `dev` and its slot, direction `kind`,
 * and records the slot's event after it. */
static mln_status_t gt_copy_chunk(mln_bench_t *b, gt_state_t *s, char *dev, uint64_t n, uint64_t i,
                                  enum cudaMemcpyKind kind)
{
    int64_t slot = (int64_t)(i % (uint64_t)s->slots);
    char *host = gt_slot(s, slot), *d = dev + i * s->chunk;
    size_t len = (size_t)gt_chunk_len(s, n, i);
    mln_status_t st = MLN_OK;

    if (kind == cudaMemcpyDeviceToHost)
        GT_CUDA_CHECK(b, cudaMemcpyAsync(host, d, len, kind, s->stream), st, out);
    else
        GT_CUDA_CHECK(b, cudaMemcpyAsync(d, host, len, kind, s->stream), st, out);
    GT_CUDA_CHECK(b, cudaEventRecord(s->events[slot], s->stream), st, out);
    s->pending[slot] = 1;
out:
    return st;
}

/*
 * Sender, S = --slots >= 2.  Chunk i lives in slot i % S.  Before step 0 the D2H copies of
 * chunks 0 .. S-2 are queued.  Step i: wait for the copy of chunk i (polling MPI), MPI_Isend
 * it; then chunk j = i + S - 1 goes into the slot of chunk i - 1: wait for that send, queue
 * the copy of chunk j, which the GPU runs while chunk i is sent.
 */
static mln_status_t gt_pipe_send(mln_bench_t *b, gt_state_t *s, uint64_t n)
{
    MPI_Comm comm = mln_bench_comm(b);
    uint64_t nch = gt_nchunks(s, n), S = (uint64_t)s->slots;
    mln_status_t st = MLN_OK;

    for (uint64_t j = 0; j + 1 < S && j < nch; j++)
        MLN_CHECK(gt_copy_chunk(b, s, s->d_send, n, j, cudaMemcpyDeviceToHost), st, out);
    for (uint64_t i = 0; i < nch; i++) {
        int64_t slot = (int64_t)(i % S);
        uint64_t j = i + S - 1;
        MLN_CHECK(gt_wait_copy(b, s, slot), st, out);
        MLN_MPI_CHECK(MPI_Isend(gt_slot(s, slot), gt_chunk_len(s, n, i), MPI_BYTE, s->peer,
                                TAG_DATA, comm, &s->reqs[slot]),
                      st, out);
        if (j < nch) {
            MLN_MPI_CHECK(MPI_Wait(&s->reqs[j % S], MPI_STATUS_IGNORE), st, out);
            MLN_CHECK(gt_copy_chunk(b, s, s->d_send, n, j, cudaMemcpyDeviceToHost), st, out);
        }
    }
    MLN_MPI_CHECK(MPI_Waitall((int)S, s->reqs, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}

/*
 * Receiver, the mirror image.  Before step 0 the receives of chunks 0 .. S-2 are posted.
 * Step i: wait for chunk i, queue its H2D copy; then chunk j = i + S - 1 goes into the slot
 * of chunk i - 1: wait for that slot's copy (polling MPI, so the posted receives move), post
 * the receive of chunk j.  So the H2D copy of chunk i runs while chunk i + 1 arrives.  The
 * message has arrived when its last byte is in device memory: the stream is synchronised.
 */
static mln_status_t gt_pipe_recv(mln_bench_t *b, gt_state_t *s, uint64_t n)
{
    MPI_Comm comm = mln_bench_comm(b);
    uint64_t nch = gt_nchunks(s, n), S = (uint64_t)s->slots;
    mln_status_t st = MLN_OK;

    for (uint64_t j = 0; j + 1 < S && j < nch; j++)
        MLN_MPI_CHECK(MPI_Irecv(gt_slot(s, (int64_t)j), gt_chunk_len(s, n, j), MPI_BYTE, s->peer,
                                TAG_DATA, comm, &s->reqs[j]),
                      st, out);
    for (uint64_t i = 0; i < nch; i++) {
        int64_t slot = (int64_t)(i % S), next;
        uint64_t j = i + S - 1;
        MLN_MPI_CHECK(MPI_Wait(&s->reqs[slot], MPI_STATUS_IGNORE), st, out);
        MLN_CHECK(gt_copy_chunk(b, s, s->d_recv, n, i, cudaMemcpyHostToDevice), st, out);
        if (j < nch) {
            next = (int64_t)(j % S);
            MLN_CHECK(gt_wait_copy(b, s, next), st, out);
            MLN_MPI_CHECK(MPI_Irecv(gt_slot(s, next), gt_chunk_len(s, n, j), MPI_BYTE, s->peer,
                                    TAG_DATA, comm, &s->reqs[next]),
                          st, out);
        }
    }
    GT_CUDA_CHECK(b, cudaStreamSynchronize(s->stream), st, out);
    for (int64_t k = 0; k < s->slots; k++)
        s->pending[k] = 0;
out:
    return st;
}

/* ---- one iteration ---------------------------------------------------------------------- */

static mln_status_t gt_send(mln_bench_t *b, gt_state_t *s, const mln_bench_op_t *op, gt_path_t path)
{
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes; /* sizes are at most MLN_BENCH_MAX_BYTES = INT_MAX */
    mln_status_t st = MLN_OK;

    switch (path) {
    case PATH_HOST:
        MLN_MPI_CHECK(MPI_Send(op->send, n, MPI_BYTE, s->peer, TAG_DATA, comm), st, out);
        break;
    case PATH_CUDA_AWARE:
        MLN_MPI_CHECK(MPI_Send(s->d_send, n, MPI_BYTE, s->peer, TAG_DATA, comm), st, out);
        break;
    case PATH_STAGED:
        GT_CUDA_CHECK(b, cudaMemcpy(s->h_stage, s->d_send, (size_t)n, cudaMemcpyDeviceToHost), st,
                      out);
        MLN_MPI_CHECK(MPI_Send(s->h_stage, n, MPI_BYTE, s->peer, TAG_DATA, comm), st, out);
        break;
    case PATH_PIPELINED:
        MLN_CHECK(gt_pipe_send(b, s, op->bytes), st, out);
        break;
    }
out:
    return st;
}

static mln_status_t gt_recv(mln_bench_t *b, gt_state_t *s, const mln_bench_op_t *op, gt_path_t path)
{
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes;
    mln_status_t st = MLN_OK;

    switch (path) {
    case PATH_HOST:
        MLN_MPI_CHECK(MPI_Recv(op->recv, n, MPI_BYTE, s->peer, TAG_DATA, comm, MPI_STATUS_IGNORE),
                      st, out);
        break;
    case PATH_CUDA_AWARE:
        MLN_MPI_CHECK(MPI_Recv(s->d_recv, n, MPI_BYTE, s->peer, TAG_DATA, comm, MPI_STATUS_IGNORE),
                      st, out);
        break;
    case PATH_STAGED:
        MLN_MPI_CHECK(MPI_Recv(s->h_stage, n, MPI_BYTE, s->peer, TAG_DATA, comm, MPI_STATUS_IGNORE),
                      st, out);
        GT_CUDA_CHECK(b, cudaMemcpy(s->d_recv, s->h_stage, (size_t)n, cudaMemcpyHostToDevice), st,
                      out);
        break;
    case PATH_PIPELINED:
        MLN_CHECK(gt_pipe_recv(b, s, op->bytes), st, out);
        break;
    }
out:
    return st;
}

/* One round trip; a device path ends with the device idle (the clock may stop next). */
static mln_status_t gt_iter(mln_bench_t *b, const mln_bench_op_t *op, gt_path_t path)
{
    gt_state_t *s = mln_bench_state(b);
    mln_status_t st = MLN_OK;

    if (s->first) {
        MLN_CHECK(gt_send(b, s, op, path), st, out);
        MLN_CHECK(gt_recv(b, s, op, path), st, out);
    } else {
        MLN_CHECK(gt_recv(b, s, op, path), st, out);
        MLN_CHECK(gt_send(b, s, op, path), st, out);
    }
    if (path != PATH_HOST)
        GT_CUDA_CHECK(b, cudaDeviceSynchronize(), st, out);
out:
    if (st != MLN_OK) /* context for an MPI error (a CUDA error has its message already) */
        mln_bench_fail(b, "test %s: round trip of %llu bytes", gt_path_name(path),
                       (unsigned long long)op->bytes);
    return st;
}

/* Device paths, before the timed loop: the pattern to the device, the device receive buffer
 * cleared (so that only what the timed iterations deliver can pass), the device idle. */
static mln_status_t gt_before_timed(mln_bench_t *b, const mln_bench_op_t *op)
{
    gt_state_t *s = mln_bench_state(b);
    mln_status_t st = MLN_OK;

    GT_CUDA_CHECK(b, cudaMemcpy(s->d_send, op->send, op->bytes, cudaMemcpyHostToDevice), st, out);
    GT_CUDA_CHECK(b, cudaMemset(s->d_recv, 0, op->bytes), st, out);
    GT_CUDA_CHECK(b, cudaDeviceSynchronize(), st, out);
out:
    return st;
}

/* Device paths, after the timed loop: what the last iteration delivered, for the check. */
static mln_status_t gt_after_timed(mln_bench_t *b, const mln_bench_op_t *op)
{
    gt_state_t *s = mln_bench_state(b);
    mln_status_t st = MLN_OK;

    GT_CUDA_CHECK(b, cudaMemcpy(op->recv, s->d_recv, op->bytes, cudaMemcpyDeviceToHost), st, out);
out:
    return st;
}

static mln_status_t host_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    return gt_iter(b, op, PATH_HOST);
}

static mln_status_t cuda_aware_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    return gt_iter(b, op, PATH_CUDA_AWARE);
}

static mln_status_t staged_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    return gt_iter(b, op, PATH_STAGED);
}

static mln_status_t pipelined_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    return gt_iter(b, op, PATH_PIPELINED);
}

static int cuda_aware_runs_at(const mln_bench_t *b, uint64_t bytes)
{
    const gt_state_t *s = mln_bench_state(b);

    (void)bytes;
    return s->cuda_aware == 1;
}

/* bytes / one-way time, the one-way time being half the round trip. */
static double gt_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    (void)b;
    return seconds > 0 ? 2.0 * (double)bytes / seconds / 1e6 : 0.0;
}

/* ---- setup ------------------------------------------------------------------------------ */

/* The MPI library as people name it: the first line of MPI_Get_library_version up to its
 * first comma, blanks collapsed ("Open MPI v5.0.11", "MPICH Version: 5.0.2"). */
static void gt_library_name(char *out, size_t len)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    size_t used = 0;
    int n = 0;

    if (MPI_Get_library_version(lib, &n) != MPI_SUCCESS)
        lib[0] = '\0';
    for (const char *p = lib; *p && *p != '\n' && *p != ',' && used + 1 < len; p++) {
        int blank = *p == ' ' || *p == '\t';
        if (blank && (used == 0 || out[used - 1] == ' '))
            continue;
        out[used++] = blank ? ' ' : *p;
    }
    while (used > 0 && out[used - 1] == ' ')
        used--;
    out[used] = '\0';
    if (used == 0)
        snprintf(out, len, "unknown");
}

/* Whether the MPI moves device buffers itself: 1, 0, or -1 when it has no query function;
 * *how says what was asked and what it answered. */
static int gt_query_cuda_aware(char *how, size_t len)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    /* Open MPI: the compile-time macro says how mpi.h was built, the call what the library
     * linked at run time does. */
    int yes = MPIX_Query_cuda_support();
    snprintf(how, len, "MPIX_Query_cuda_support() = %d", yes);
    return yes ? 1 : 0;
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) != MPI_SUCCESS) {
        snprintf(how, len, "MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) failed");
        return -1;
    }
    snprintf(how, len, "MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) = %d", yes);
    return yes ? 1 : 0;
#else
    snprintf(how, len, "no query: neither MPIX_Query_cuda_support nor MPIX_GPU_query_support");
    return -1;
#endif
}

/* cuda_aware (agreed over the ranks: a device pointer must be safe on both), its params, and
 * the reason text for a refusal or a skip. */
static mln_status_t gt_cuda_aware(mln_bench_t *b, gt_state_t *s)
{
    char how[128], lib[128];
    int mine;
    mln_status_t st = MLN_OK;

    mine = gt_query_cuda_aware(how, sizeof(how));
    MLN_MPI_CHECK(MPI_Allreduce(&mine, &s->cuda_aware, 1, MPI_INT, MPI_MIN, mln_bench_comm(b)), st,
                  out);
    gt_library_name(lib, sizeof(lib));
    if (s->cuda_aware == 0)
        snprintf(s->aware_why, sizeof(s->aware_why), "this MPI (%s) is not CUDA-aware (%s)", lib,
                 how);
    else if (s->cuda_aware < 0)
        snprintf(s->aware_why, sizeof(s->aware_why),
                 "cannot tell whether this MPI (%s) is CUDA-aware (%s)", lib, how);
    MLN_CHECK(mln_bench_param_str(b, "cuda_aware",
                                  s->cuda_aware > 0    ? "yes"
                                  : s->cuda_aware == 0 ? "no"
                                                       : "unknown"),
              st, out);
    MLN_CHECK(mln_bench_param_str(b, "cuda_aware_query", how), st, out);
out:
    return st;
}

/* The GPU count on this rank, agreed: when some rank has none, every rank skips the run with
 * the reason of the lowest such rank. */
static mln_status_t gt_gpu_agree(mln_bench_t *b, int *count)
{
    MPI_Comm comm = mln_bench_comm(b);
    char why[256] = "";
    int n = 0, mine, lowest = INT_MAX, rank = mln_bench_rank(b);
    cudaError_t rc = cudaGetDeviceCount(&n);
    mln_status_t st = MLN_OK;

    if (rc != cudaSuccess)
        snprintf(why, sizeof(why), "cudaGetDeviceCount: %s", cudaGetErrorString(rc));
    else if (n <= 0)
        snprintf(why, sizeof(why), "cudaGetDeviceCount: no device");
    mine = why[0] ? rank : INT_MAX;
    MLN_MPI_CHECK(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm), st, out);
    if (lowest == INT_MAX) {
        *count = n;
        goto out;
    }
    MLN_MPI_CHECK(MPI_Bcast(why, (int)sizeof(why), MPI_CHAR, lowest, comm), st, out);
    if (lowest == 0)
        st = mln_bench_skip(b, "no GPU (%s)", why);
    else
        st = mln_bench_skip(b, "no GPU on rank %d (%s)", lowest, why);
out:
    return st;
}

/* Picks local rank % count, and records every rank's device and the CUDA versions. */
static mln_status_t gt_device(mln_bench_t *b, int count)
{
    MPI_Comm comm = mln_bench_comm(b), node = MPI_COMM_NULL;
    struct cudaDeviceProp prop;
    char mine[128] = "unknown", all[2][128], text[512] = "", ver[64];
    int local = 0, dev, rv = 0, dv = 0, rank = mln_bench_rank(b);
    mln_status_t st = MLN_OK, cst = MLN_OK;

    MLN_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), st,
                  out);
    MLN_MPI_CHECK(MPI_Comm_rank(node, &local), st, out);
    dev = local % count;
    /* a CUDA error here is this rank's; it still joins the gather below, then fails */
    GT_CUDA_CHECK(b, cudaSetDevice(dev), cst, gather);
    GT_CUDA_CHECK(b, cudaGetDeviceProperties(&prop, dev), cst, gather);
    snprintf(mine, sizeof(mine), "GPU %d %.80s (sm_%d%d)", dev, prop.name, prop.major, prop.minor);
gather:
    MLN_MPI_CHECK(
        MPI_Gather(mine, (int)sizeof(mine), MPI_CHAR, all, (int)sizeof(mine), MPI_CHAR, 0, comm),
        st, out);
    MLN_CHECK(cst, st, out);
    if (rank == 0) {
        all[0][sizeof(mine) - 1] = all[1][sizeof(mine) - 1] = '\0';
        snprintf(text, sizeof(text), "rank 0: %s; rank 1: %s", all[0], all[1]);
    }
    MLN_CHECK(mln_bench_param_str(b, "devices", text), st, out);
    GT_CUDA_CHECK(b, cudaRuntimeGetVersion(&rv), st, out);
    GT_CUDA_CHECK(b, cudaDriverGetVersion(&dv), st, out);
    snprintf(ver, sizeof(ver), "%d.%d", rv / 1000, rv % 1000 / 10);
    MLN_CHECK(mln_bench_param_str(b, "cuda_runtime", ver), st, out);
    snprintf(ver, sizeof(ver), "%d.%d", dv / 1000, dv % 1000 / 10);
    MLN_CHECK(mln_bench_param_str(b, "cuda_driver", ver), st, out);
out:
    if (node != MPI_COMM_NULL)
        MPI_Comm_free(&node);
    return st;
}

/* The buffers of the selected device paths (local: a failure is agreed by the harness). */
static mln_status_t gt_alloc(mln_bench_t *b, gt_state_t *s)
{
    uint64_t max = mln_bench_max_bytes(b), len = max ? max : 1;
    int staged = mln_bench_selected(b, "staged") > 0;
    int pipelined = mln_bench_selected(b, "pipelined") > 0;
    int device = staged || pipelined || (mln_bench_selected(b, "cuda-aware") && s->cuda_aware == 1);
    mln_status_t st = MLN_OK;

    if (device) {
        GT_CUDA_CHECK(b, cudaMalloc((void **)&s->d_send, len), st, out);
        GT_CUDA_CHECK(b, cudaMalloc((void **)&s->d_recv, len), st, out);
        GT_CUDA_CHECK(b, cudaMemset(s->d_send, 0, len), st, out);
        GT_CUDA_CHECK(b, cudaMemset(s->d_recv, 0, len), st, out);
    }
    if (staged)
        GT_CUDA_CHECK(b, cudaMallocHost((void **)&s->h_stage, len), st, out);
    if (!pipelined)
        goto out;
    s->slot_bytes = s->chunk < len ? s->chunk : len;
    s->events = calloc((size_t)s->slots, sizeof(*s->events));
    s->pending = calloc((size_t)s->slots, sizeof(*s->pending));
    s->reqs = malloc((size_t)s->slots * sizeof(*s->reqs));
    if (s->events == NULL || s->pending == NULL || s->reqs == NULL)
        return mln_bench_fail(b, "out of memory for %lld pipeline slots", (long long)s->slots);
    for (int64_t k = 0; k < s->slots; k++)
        s->reqs[k] = MPI_REQUEST_NULL;
    GT_CUDA_CHECK(b, cudaMallocHost((void **)&s->h_slots, (size_t)s->slots * s->slot_bytes), st,
                  out);
    GT_CUDA_CHECK(b, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), st, out);
    for (; s->nevents < s->slots; s->nevents++)
        GT_CUDA_CHECK(b, cudaEventCreateWithFlags(&s->events[s->nevents], cudaEventDisableTiming),
                      st, out);
out:
    return st;
}

/*
 * In this order, so that every rank takes the same branch before each collective: the rank
 * count; CUDA-awareness (agreed) and the refusal of a cuda-aware test named in --tests, a
 * usage error on any machine; the GPUs (agreed: all skip, exit 77, when one has none); the
 * device and its params; the note for a cuda-aware test skipped from the default list; the
 * buffers.
 */
static mln_status_t gt_setup(mln_bench_t *b)
{
    gt_state_t *s = mln_bench_state(b);
    int n = mln_bench_nranks(b), rank = mln_bench_rank(b), count = 0;
    int chosen = mln_bench_selected(b, "cuda-aware");
    mln_status_t st = MLN_OK;

    if (n != 2)
        return mln_bench_fail(
            b, "needs exactly 2 MPI ranks, got %d (mpiexec -n 2 mln-gpu-transfer)", n);
    s->peer = 1 - rank;
    s->first = rank == 0;
    MLN_CHECK(gt_cuda_aware(b, s), st, out);
    if (s->cuda_aware != 1 && chosen == 2)
        return mln_bench_fail(b, "cuda-aware: %s; choose tests host, staged, pipelined",
                              s->aware_why);
    MLN_CHECK(gt_gpu_agree(b, &count), st, out);
    MLN_CHECK(gt_device(b, count), st, out);
    MLN_CHECK(mln_bench_param_str(b, "host_memory", "pageable (test host: the harness's buffers)"),
              st, out);
    MLN_CHECK(mln_bench_param_str(b, "staging_memory", "pinned (cudaMallocHost)"), st, out);
    if (s->cuda_aware != 1 && chosen == 1 && rank == 0)
        fprintf(stderr, "mln-gpu-transfer: cuda-aware: %s: test cuda-aware skipped\n",
                s->aware_why);
    MLN_CHECK(gt_alloc(b, s), st, out);
out:
    return st;
}

static void gt_teardown(mln_bench_t *b)
{
    gt_state_t *s = mln_bench_state(b);

    /* errors are ignored: the run is over, and the process exits next */
    for (int k = 0; k < s->nevents; k++)
        cudaEventDestroy(s->events[k]);
    if (s->stream != NULL)
        cudaStreamDestroy(s->stream);
    if (s->h_slots != NULL)
        cudaFreeHost(s->h_slots);
    if (s->h_stage != NULL)
        cudaFreeHost(s->h_stage);
    if (s->d_send != NULL)
        cudaFree(s->d_send);
    if (s->d_recv != NULL)
        cudaFree(s->d_recv);
    free(s->events);
    free(s->pending);
    free(s->reqs);
}

/* ---- the benchmark ---------------------------------------------------------------------- */

/* Every metric: bytes / one-way time, the one-way time being half a round trip. */
#define GT_METRIC(metric_name, how)                                                                \
    {                                                                                              \
        .name = metric_name, .unit = "MB/s", .statistic = "median",                                \
        .description = "bytes / one-way time (half a round trip) " how " (MB = 10^6 bytes)",       \
        .higher_is_better = 1                                                                      \
    }

static const mln_bench_test_t gt_tests[] = {
    {.name = "host",
     .metric = GT_METRIC("host_MBps", "of pageable host buffers through MPI_Send/MPI_Recv: the "
                                      "reference, no GPU involved"),
     .plan = gt_plan,
     .iter = host_iter,
     .value = gt_value},
    {.name = "cuda-aware",
     .metric = GT_METRIC("cuda_aware_MBps", "of device buffers passed straight to "
                                            "MPI_Send/MPI_Recv of a CUDA-aware MPI"),
     .plan = gt_plan,
     .iter = cuda_aware_iter,
     .value = gt_value,
     .runs_at = cuda_aware_runs_at,
     .before_timed = gt_before_timed,
     .after_timed = gt_after_timed},
    {.name = "staged",
     .metric = GT_METRIC("staged_MBps", "of device buffers staged through pinned host memory: "
                                        "cudaMemcpy, MPI_Send, MPI_Recv, cudaMemcpy in series"),
     .plan = gt_plan,
     .iter = staged_iter,
     .value = gt_value,
     .before_timed = gt_before_timed,
     .after_timed = gt_after_timed},
    {.name = "pipelined",
     .metric = GT_METRIC("pipelined_MBps", "of device buffers staged in --chunk pieces through "
                                           "--slots pinned slots, copies overlapping messages"),
     .plan = gt_plan,
     .iter = pipelined_iter,
     .value = gt_value,
     .before_timed = gt_before_timed,
     .after_timed = gt_after_timed},
};

static const mln_bench_option_t gt_options[] = {
    {.name = "chunk",
     .type = MLN_BENCH_OPT_SIZE,
     .default_value = "1M",
     .help = "pipelined: bytes per chunk (ALGORITHMS.md M2: 256K to 4M)",
     .offset = offsetof(gt_state_t, chunk),
     .min = 1,
     .max = INT64_C(1) << 30},
    {.name = "slots",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "2",
     .help = "pipelined: pinned host slots a chunk goes through, so up to slots - 1 copies run "
             "ahead of the messages",
     .offset = offsetof(gt_state_t, slots),
     .min = 2,
     .max = 16},
};

static const mln_bench_desc_t gt_desc = {
    .name = "gpu-transfer",
    .description = "a GPU buffer between 2 ranks: host memory (reference), device pointers to a "
                   "CUDA-aware MPI, naive staging through pinned host memory, pipelined staging "
                   "in chunks; round trips, bandwidth = bytes / one-way time; exit 77 (skipped) "
                   "where a rank has no GPU",
    .tests = gt_tests,
    .ntests = sizeof(gt_tests) / sizeof(gt_tests[0]),
    .options = gt_options,
    .noptions = sizeof(gt_options) / sizeof(gt_options[0]),
    .min_ranks = 2,
    .default_sizes = "1:64M",
    .state_size = sizeof(gt_state_t),
    .setup = gt_setup,
    .teardown = gt_teardown,
};

int main(int argc, char **argv)
{
    return mln_bench_main(&gt_desc, argc, argv);
}
