/*
 * preload_bcast.c - MPI_Bcast under the interposition layer (issue 16), a plain MPI program
 * (preload_check.h): the same binary runs alone and with LD_PRELOAD=libmultilane-preload.so.
 *
 *   preload_bcast [PHASE[,PHASE...]]      (default: all)
 *
 *   bcast  sizes 0 .. 4M+1 from every root on MPI_COMM_WORLD, a split with the ranks reversed
 *          and a split in two halves (odd and even ranks), contiguous, strided (a vector type)
 *          and mixed (contiguous at the root, strided elsewhere: the same type signature);
 *          every byte of every rank checked, the root's buffer left as it was
 *   mix    MPI's progress rule: a striped message is outstanding (Isend, Issend, Irecv, or a
 *          blocking Send to a rank that is in the collective) while the other ranks are in
 *          MPI_Bcast (small and large, several roots), MPI_Allreduce or MPI_Barrier: every
 *          case must complete (a hang is reported by the watchdog) with its data right
 *   nbc    blocking and nonblocking collectives on one communicator in different orders on
 *          different ranks, as MPI allows (it matches them apart): rank 0 starts MPI_Ibcast /
 *          MPI_Iallreduce / MPI_Ibarrier before the blocking MPI_Bcast / MPI_Allreduce /
 *          MPI_Barrier, the others after it; every value checked (the layer must not turn
 *          the blocking ones into nonblocking ones on the program's communicator)
 */
#include "preload_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBS 11
static const size_t bc_size[NBS] = {
    0, 1, 63, 64, 65, 4095, 4096, 4097, 100 * PC_KIB, PC_MIB + 3, 4 * PC_MIB + 1};

/* ---- bcast ------------------------------------------------------------------------------- */

static void bcast_on(pc_ctx_t *c, MPI_Comm comm, const char *cname, int rot, int *msg)
{
    int me, n;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    /* every root, every size; below 100K every layout, above one in turn (each size meets all
     * three across roots and communicators): 3 oversubscribed MPICH ranks take 0.5 s for one
     * 1M broadcast on 2 cores */
    for (int root = 0; root < n; root++)
        for (int si = 0; si < NBS; si++)
            for (int dt = 0; dt < 3; dt++) {
                if (bc_size[si] >= 100 * PC_KIB && dt != (root + si + rot) % 3)
                    continue;
                static const char *const dname[3] = {"contig", "vec", "contig root, vec others"};
                const int layout = dt == 0 || (dt == 2 && me == root) ? PC_CONTIG : PC_VEC;
                char what[128];
                pc_buf_t b;

                (*msg)++;
                snprintf(what, sizeof(what), "Bcast on %s, root %d, %zu bytes, %s", cname, root,
                         bc_size[si], dname[dt]);
                pc_step(c, "%s", what);
                pc_buf_init(&b, layout, bc_size[si]);
                if (me == root)
                    pc_buf_fill(&b, root, *msg);
                pc_mpi(c, what, MPI_Bcast(b.mem, b.count, b.type, root, comm));
                pc_buf_check(c, what, &b, bc_size[si], root, *msg);
                pc_buf_free(&b);
            }
}

static void phase_bcast(pc_ctx_t *c)
{
    MPI_Comm rev, half;
    int msg = 0;

    MPI_Comm_split(MPI_COMM_WORLD, 0, c->size - 1 - c->rank, &rev);
    MPI_Comm_split(MPI_COMM_WORLD, c->rank % 2, c->size - 1 - c->rank, &half);
    bcast_on(c, MPI_COMM_WORLD, "MPI_COMM_WORLD", 0, &msg);
    bcast_on(c, rev, "a split (ranks reversed)", 1, &msg);
    bcast_on(c, half, c->rank % 2 ? "a split (odd ranks)" : "a split (even ranks)", 2, &msg);
    MPI_Comm_free(&rev);
    MPI_Comm_free(&half);
}

/* ---- mix: the progress rule ---------------------------------------------------------------- */

enum { C_BCAST_SMALL, C_BCAST_LARGE, C_ALLREDUCE, C_BARRIER, C_N };
static const char *const coll_name[C_N] = {"Bcast of 8 bytes", "Bcast of 1M+3 bytes",
                                           "Allreduce of 64K ints", "Barrier"};
/* A: rank 0 Isend, then the collective, then Wait; rank 1 Recv, then the collective.
 * B: rank 1 Irecv, the collective, Wait; rank 0 a blocking Send, then the collective.
 * C: as A with Issend.
 * D: every rank Isend to the right and Irecv from the left, the collective, Waitall. */
enum { V_A, V_B, V_C, V_D, V_N };
static const char *const var_name[V_N] = {
    "rank 0 Isend / rank 1 Recv before", "rank 1 Irecv / rank 0 Send before",
    "rank 0 Issend / rank 1 Recv before", "ring of Isend + Irecv"};

static void run_coll(pc_ctx_t *c, int coll, int root, int msg, const char *what)
{
    const size_t n = coll == C_BCAST_SMALL ? 8 : PC_MIB + 3;
    char w[200];

    snprintf(w, sizeof(w), "%s: the collective", what);
    if (coll == C_BCAST_SMALL || coll == C_BCAST_LARGE) {
        pc_buf_t b;
        pc_buf_init(&b, PC_CONTIG, n);
        if (c->rank == root)
            pc_buf_fill(&b, root, msg);
        pc_mpi(c, w, MPI_Bcast(b.mem, b.count, b.type, root, MPI_COMM_WORLD));
        pc_buf_check(c, w, &b, n, root, msg);
        pc_buf_free(&b);
    } else if (coll == C_ALLREDUCE) {
        enum { NI = 64 * 1024 };
        int *in = pc_xmalloc(NI * sizeof(int)), *out = pc_xmalloc(NI * sizeof(int));
        const long long ranksum = (long long)c->size * (c->size - 1) / 2;
        for (int i = 0; i < NI; i++)
            in[i] = c->rank + i % 1000;
        pc_mpi(c, w, MPI_Allreduce(in, out, NI, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < NI; i++)
            if (!pc_eq(c, w, ranksum + (long long)c->size * (i % 1000), out[i]))
                break;
        free(in);
        free(out);
    } else {
        pc_mpi(c, w, MPI_Barrier(MPI_COMM_WORLD));
    }
}

static void mix_case(pc_ctx_t *c, int var, int coll, int root, int msg)
{
    const size_t n = PC_MIB + 3;
    const int tag = 500 + var;
    const int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    char what[200];
    pc_buf_t s, r;
    MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[2];
    int from = -1; /* the rank whose message r gets, -1: none */

    snprintf(what, sizeof(what), "%s, then %s (root %d)", var_name[var], coll_name[coll], root);
    pc_step(c, "%s", what);
    pc_buf_init(&s, PC_CONTIG, n);
    pc_buf_fill(&s, c->rank, msg);
    pc_buf_init(&r, msg % 2, n);
    if (var == V_D) {
        MPI_Irecv(r.mem, r.count, r.type, left, tag, MPI_COMM_WORLD, &q[1]);
        MPI_Isend(s.mem, s.count, s.type, right, tag, MPI_COMM_WORLD, &q[0]);
        from = left;
        run_coll(c, coll, root, msg + 1, what);
        pc_mpi(c, what, MPI_Waitall(2, q, st));
    } else if (c->rank == 0) {
        if (var == V_A)
            MPI_Isend(s.mem, s.count, s.type, 1, tag, MPI_COMM_WORLD, &q[0]);
        else if (var == V_C)
            MPI_Issend(s.mem, s.count, s.type, 1, tag, MPI_COMM_WORLD, &q[0]);
        else
            pc_mpi(c, what, MPI_Send(s.mem, s.count, s.type, 1, tag, MPI_COMM_WORLD));
        run_coll(c, coll, root, msg + 1, what);
        pc_mpi(c, what, MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    } else if (c->rank == 1) {
        from = 0;
        if (var == V_B) {
            MPI_Irecv(r.mem, r.count, r.type, 0, tag, MPI_COMM_WORLD, &q[1]);
            run_coll(c, coll, root, msg + 1, what);
            pc_mpi(c, what, MPI_Wait(&q[1], &st[1]));
        } else {
            pc_mpi(c, what, MPI_Recv(r.mem, r.count, r.type, 0, tag, MPI_COMM_WORLD, &st[1]));
            run_coll(c, coll, root, msg + 1, what);
        }
    } else {
        run_coll(c, coll, root, msg + 1, what);
    }
    if (from >= 0) {
        pc_status(c, what, &st[1], from, tag, &r, n);
        pc_buf_check(c, what, &r, n, from, msg);
    }
    pc_buf_free(&s);
    pc_buf_free(&r);
}

static void phase_mix(pc_ctx_t *c)
{
    int msg = 10000;

    if (c->size < 2)
        return;
    for (int var = 0; var < V_N; var++)
        for (int coll = 0; coll < C_N; coll++) {
            const int nroots = coll <= C_BCAST_LARGE ? 3 : 1;
            for (int k = 0; k < nroots; k++) {
                const int root = k == 0 ? 0 : k == 1 ? 1 : c->size - 1;
                char name[64];
                snprintf(name, sizeof(name), "mix %c %s root %d", 'A' + var, coll_name[coll], root);
                pc_phase(c, name); /* the watchdog names the case that hangs */
                mix_case(c, var, coll, root, msg);
                msg += 2;
            }
        }
}

/* ---- nbc: blocking and nonblocking collectives matched apart ---------------------------- */

static void nbc_on(pc_ctx_t *c, MPI_Comm comm, const char *cname)
{
    int me, n, ib[4], b[4], isum = 0, sum = 0, ival, val;
    MPI_Request rq[3];
    char what[96];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < 4; i++) {
        ib[i] = me == 0 ? 1000 + i : -1;    /* MPI_Ibcast from rank 0 */
        b[i] = me == n - 1 ? 2000 + i : -2; /* MPI_Bcast from the last rank */
    }
    ival = 1 << me;  /* MPI_Iallreduce: every bit once */
    val = 1000 + me; /* MPI_Allreduce */
    if (me == 0) {
        MPI_Ibcast(ib, 4, MPI_INT, 0, comm, &rq[0]);
        MPI_Iallreduce(&ival, &isum, 1, MPI_INT, MPI_SUM, comm, &rq[1]);
        MPI_Ibarrier(comm, &rq[2]);
        MPI_Bcast(b, 4, MPI_INT, n - 1, comm);
        MPI_Allreduce(&val, &sum, 1, MPI_INT, MPI_SUM, comm);
        MPI_Barrier(comm);
    } else {
        MPI_Bcast(b, 4, MPI_INT, n - 1, comm);
        MPI_Allreduce(&val, &sum, 1, MPI_INT, MPI_SUM, comm);
        MPI_Barrier(comm);
        MPI_Ibcast(ib, 4, MPI_INT, 0, comm, &rq[0]);
        MPI_Iallreduce(&ival, &isum, 1, MPI_INT, MPI_SUM, comm, &rq[1]);
        MPI_Ibarrier(comm, &rq[2]);
    }
    MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
    snprintf(what, sizeof(what), "nbc on %s", cname);
    for (int i = 0; i < 4; i++) {
        if (ib[i] != 1000 + i)
            pc_fail(c, what, "MPI_Ibcast element %d is %d, expected %d", i, ib[i], 1000 + i);
        if (b[i] != 2000 + i)
            pc_fail(c, what, "MPI_Bcast element %d is %d, expected %d", i, b[i], 2000 + i);
    }
    if (isum != (1 << n) - 1)
        pc_fail(c, what, "MPI_Iallreduce gave %d, expected %d", isum, (1 << n) - 1);
    if (sum != 1000 * n + n * (n - 1) / 2)
        pc_fail(c, what, "MPI_Allreduce gave %d, expected %d", sum, 1000 * n + n * (n - 1) / 2);
}

static void phase_nbc(pc_ctx_t *c)
{
    MPI_Comm dup;

    nbc_on(c, MPI_COMM_WORLD, "MPI_COMM_WORLD");
    /* a new communicator whose first collective is one of these */
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    nbc_on(c, dup, "a duplicate");
    nbc_on(c, dup, "a duplicate, again");
    MPI_Comm_free(&dup);
}

int main(int argc, char **argv)
{
    const char *list = argc > 1 ? argv[1] : NULL;
    pc_ctx_t c;
    int rc;

    MPI_Init(&argc, &argv);
    pc_init(&c, "preload_bcast");
    if (pc_selected(list, "bcast")) {
        pc_phase(&c, "bcast");
        phase_bcast(&c);
    }
    if (pc_selected(list, "mix"))
        phase_mix(&c);
    if (pc_selected(list, "nbc")) {
        pc_phase(&c, "nbc");
        phase_nbc(&c);
    }
    rc = pc_finish(&c);
    MPI_Finalize();
    return rc;
}
