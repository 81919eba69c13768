/*
 * grid_coll.c - communicators and collectives of an unmodified program (docs/PRELOAD.md,
 * "Grid mode"), a PLAIN MPI program: the same binary runs as one ordinary MPI job (where MPI
 * itself answers) and across sites under `multilane grid run` (where the layer does), and both
 * runs must print the same digest.
 *
 * On MPI_COMM_WORLD, a Comm_dup of it, Comm_split by parity with reversed keys (spans sites),
 * a split by halves (inside one site when the sites are the halves), each collective blocking
 * and nonblocking with integer data whose results are known exactly: Barrier, Bcast (every
 * root; 300 KB, striped over the trunks; a vector type), Reduce to every root, Allreduce with
 * SUM, MAX, MIN, PROD, BAND, BOR, LXOR, MAXLOC on MPI_2INT, MPI_IN_PLACE, a user-defined
 * non-commutative operation (2x2 matrix product); Gather(v), Scatter(v), Allgather(v) (and in
 * place), Alltoall(v, w), Reduce_scatter(_block), Scan, Exscan (and in place); then the same bits
 * on every rank for a floating-point sum; Comm_compare, point-to-point on the split
 * communicator with its ranks in the statuses, Comm_free.
 *
 * Open MPI's ULFM (MPIX_ERR_REVOKED; MPICH 5.0's MPIX_Comm_agree fails an assertion in a plain
 * job): agreement, shrink and the failure queries with no failure, outside the digest.
 *
 * Each check: rank 0 prints "ok NAME" or "FAIL NAME" (every failing rank says what), then
 * "digest HEX" over every result that MPI defines exactly; exit status 1 on any failure.
 */
#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h> /* ULFM's MPIX_ */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, wsize, fails;
static MPI_Datatype mat_type; /* 4 unsigned: a 2x2 matrix */
static uint64_t digest = 1469598103934665603ull;

#define BAD(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "FAIL rank %d: ", wrank);                                                  \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        fails++;                                                                                   \
    } while (0)

static void mix(const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        digest ^= b[i];
        digest *= 1099511628211ull;
    }
}

/* Every rank's failures of this check summed on rank 0, its verdict. */
static void agree(const char *name, int before)
{
    int mine = fails - before, total = 0;

    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0) {
        printf("%s %s\n", total ? "FAIL" : "ok", name);
        fflush(stdout);
    }
}

static int val(int r, int i)
{
    return r * 1000 + i + 1;
}

/* ---- a non-commutative operation: 2x2 integer matrices, product in rank order ---------------- */

static void matmul(void *in, void *inout, int *len, MPI_Datatype *t)
{
    const unsigned *a = in;
    unsigned *b = inout;

    (void)t;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        unsigned c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                         a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof(c));
    }
}

static void mat_of(int r, unsigned m[4])
{
    m[0] = 1u + (unsigned)r;
    m[1] = 2u;
    m[2] = (unsigned)r * 3u;
    m[3] = 1u;
}

/* ---- the checks on one communicator ------------------------------------------------------------
 */

static void check_bcast(MPI_Comm comm, int size, int rank)
{
    enum { BIG = 300 * 1024 / 4 };
    int *buf = malloc(BIG * sizeof(int));
    MPI_Datatype vec;
    MPI_Request req;

    for (int root = 0; root < size; root++) {
        for (int i = 0; i < 100; i++)
            buf[i] = rank == root ? val(root, i) : -1;
        MPI_Bcast(buf, 100, MPI_INT, root, comm);
        for (int i = 0; i < 100; i++)
            if (buf[i] != val(root, i)) {
                BAD("bcast root %d: [%d] = %d", root, i, buf[i]);
                break;
            }
        mix(buf, 100 * sizeof(int));
    }
    for (int i = 0; i < BIG; i++)
        buf[i] = rank == size - 1 ? val(size, i) : 0;
    MPI_Ibcast(buf, BIG, MPI_INT, size - 1, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < BIG; i++)
        if (buf[i] != val(size, i)) {
            BAD("ibcast 300K: [%d] = %d", i, buf[i]);
            break;
        }
    mix(buf, BIG * sizeof(int));
    /* every other int of 40: the holes keep what each rank had */
    MPI_Type_vector(20, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    for (int i = 0; i < 40; i++)
        buf[i] = rank == 0 ? val(0, i) : -rank;
    MPI_Ibcast(buf, 1, vec, 0, comm, &req);
    MPI_Type_free(&vec); /* the collective keeps what it needs */
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < 40; i++)
        if (buf[i] != (i % 2 == 0 || rank == 0 ? val(0, i) : -rank)) {
            BAD("bcast vector: [%d] = %d", i, buf[i]);
            break;
        }
    free(buf);
}

static void check_reduce(MPI_Comm comm, int size, int rank)
{
    int in[8], out[8], want;
    struct {
        int v, r;
    } loc = {(rank * 7) % size, rank}, locout;
    unsigned m[4], prod[4], want_m[4] = {1, 0, 0, 1};
    MPI_Op op;
    MPI_Request req;

    for (int i = 0; i < 8; i++)
        in[i] = val(rank, i);
    for (int root = 0; root < size; root++) {
        memset(out, 0, sizeof(out));
        MPI_Reduce(in, out, 8, MPI_INT, MPI_SUM, root, comm);
        for (int i = 0; rank == root && i < 8; i++) {
            want = 0;
            for (int r = 0; r < size; r++)
                want += val(r, i);
            if (out[i] != want)
                BAD("reduce root %d: [%d] = %d, not %d", root, i, out[i], want);
        }
        if (rank == root)
            mix(out, sizeof(out));
    }
    {
        const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD, MPI_BAND, MPI_BOR, MPI_LXOR};
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            int a = (rank % 3) + 1 + (int)o, w = ops[o] == MPI_PROD || ops[o] == MPI_BAND ? 1 : 0;
            if (ops[o] == MPI_MIN || ops[o] == MPI_BAND)
                w = ops[o] == MPI_MIN ? 1 << 30 : -1;
            if (ops[o] == MPI_MAX)
                w = -(1 << 30);
            for (int r = 0; r < size; r++) {
                int x = (r % 3) + 1 + (int)o;
                w = ops[o] == MPI_SUM    ? w + x
                    : ops[o] == MPI_MAX  ? (x > w ? x : w)
                    : ops[o] == MPI_MIN  ? (x < w ? x : w)
                    : ops[o] == MPI_PROD ? w * x
                    : ops[o] == MPI_BAND ? w & x
                    : ops[o] == MPI_BOR  ? w | x
                                         : (!w != !x);
                if (size == 1) /* one rank: MPI gives its value as it is */
                    w = x;
            }
            MPI_Iallreduce(MPI_IN_PLACE, &a, 1, MPI_INT, ops[o], comm, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            if (a != w)
                BAD("allreduce op %zu: %d, not %d", o, a, w);
            mix(&a, sizeof(a));
        }
    }
    MPI_Allreduce(&loc, &locout, 1, MPI_2INT, MPI_MAXLOC, comm);
    {
        int best = -1, at = -1;
        for (int r = 0; r < size; r++)
            if ((r * 7) % size > best)
                best = (r * 7) % size, at = r;
        if (locout.v != best || locout.r != at)
            BAD("maxloc: (%d, %d), not (%d, %d)", locout.v, locout.r, best, at);
    }
    MPI_Op_create(matmul, 0, &op);
    mat_of(rank, m);
    MPI_Allreduce(m, prod, 1, mat_type, op, comm);
    for (int r = 0; r < size; r++) {
        unsigned mr[4];
        int one = 1;
        MPI_Datatype t = MPI_INT;
        mat_of(r, mr);
        matmul(want_m, mr, &one, &t); /* mr = want_m x mr */
        memcpy(want_m, mr, sizeof(mr));
    }
    if (memcmp(prod, want_m, sizeof(prod)) != 0)
        BAD("non-commutative allreduce: {%u %u %u %u}, not {%u %u %u %u}", prod[0], prod[1],
            prod[2], prod[3], want_m[0], want_m[1], want_m[2], want_m[3]);
    mix(prod, sizeof(prod));
    MPI_Op_free(&op);
}

static void check_gather(MPI_Comm comm, int size, int rank)
{
    int mine[64], *all = malloc((size_t)size * 64 * sizeof(int)), *cnt = malloc(size * sizeof(int)),
                  *dsp = malloc(size * sizeof(int)), total = 0, got[64];
    MPI_Request req;

    for (int r = 0; r < size; r++) {
        cnt[r] = r % 4 + 1;
        dsp[r] = total;
        total += cnt[r];
    }
    for (int i = 0; i < 64; i++)
        mine[i] = val(rank, i);
    for (int root = 0; root < size; root++) {
        memset(all, 0, (size_t)size * 64 * sizeof(int));
        MPI_Igather(mine, 3, MPI_INT, all, 3, MPI_INT, root, comm, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int r = 0; rank == root && r < size; r++)
            for (int i = 0; i < 3; i++)
                if (all[3 * r + i] != val(r, i))
                    BAD("gather root %d: from %d [%d] = %d", root, r, i, all[3 * r + i]);
        memset(all, 0, (size_t)size * 64 * sizeof(int));
        MPI_Gatherv(mine, cnt[rank], MPI_INT, all, cnt, dsp, MPI_INT, root, comm);
        for (int r = 0; rank == root && r < size; r++)
            for (int i = 0; i < cnt[r]; i++)
                if (all[dsp[r] + i] != val(r, i))
                    BAD("gatherv root %d: from %d [%d] = %d", root, r, i, all[dsp[r] + i]);
        if (rank == root)
            mix(all, (size_t)total * sizeof(int));
        /* scatter(v): the root's blocks back */
        for (int r = 0; r < size; r++)
            for (int i = 0; i < 64; i++)
                all[r * 64 + i] = val(r + 100 * root, i);
        memset(got, 0, sizeof(got));
        MPI_Scatter(all, 5, MPI_INT, got, 5, MPI_INT, root, comm);
        for (int i = 0; i < 5; i++)
            if (got[i] != all[rank * 5 + i])
                BAD("scatter root %d: [%d] = %d", root, i, got[i]);
        mix(got, 5 * sizeof(int));
        memset(got, 0, sizeof(got));
        MPI_Iscatterv(all, cnt, dsp, MPI_INT, got, cnt[rank], MPI_INT, root, comm, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int i = 0; i < cnt[rank]; i++)
            if (got[i] != all[dsp[rank] + i])
                BAD("scatterv root %d: [%d] = %d", root, i, got[i]);
        mix(got, (size_t)cnt[rank] * sizeof(int));
    }
    /* allgather(v), and in place */
    memset(all, 0, (size_t)size * 64 * sizeof(int));
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 2; i++)
            if (all[2 * r + i] != val(r, i))
                BAD("allgather: from %d [%d] = %d", r, i, all[2 * r + i]);
    mix(all, (size_t)size * 2 * sizeof(int));
    memset(all, 0, (size_t)size * 64 * sizeof(int));
    for (int i = 0; i < cnt[rank]; i++)
        all[dsp[rank] + i] = val(rank, i);
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, cnt, dsp, MPI_INT, comm, &req);
    {
        int *keep = malloc(2 * (size_t)size * sizeof(int));
        memcpy(keep, cnt, (size_t)size * sizeof(int));
        memcpy(keep + size, dsp, (size_t)size * sizeof(int));
        for (int r = 0; r < size; r++) /* scribbled on, as a temporary array would be */
            cnt[r] = dsp[r] = -1;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        memcpy(cnt, keep, (size_t)size * sizeof(int));
        memcpy(dsp, keep + size, (size_t)size * sizeof(int));
        free(keep);
    }
    for (int r = 0; r < size; r++)
        for (int i = 0; i < cnt[r]; i++)
            if (all[dsp[r] + i] != val(r, i))
                BAD("allgatherv in place: from %d [%d] = %d", r, i, all[dsp[r] + i]);
    mix(all, (size_t)total * sizeof(int));
    free(all);
    free(cnt);
    free(dsp);
}

static void check_alltoall(MPI_Comm comm, int size, int rank)
{
    const int k = 4;
    int *out = malloc((size_t)size * 64 * sizeof(int)),
        *in = malloc((size_t)size * 64 * sizeof(int));
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int)),
        *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    MPI_Datatype *ty = malloc(size * sizeof(MPI_Datatype));
    MPI_Request req;
    int at = 0;

    for (int j = 0; j < size; j++)
        for (int i = 0; i < k; i++)
            out[j * k + i] = val(rank, 10 * j + i);
    memset(in, 0, (size_t)size * 64 * sizeof(int));
    MPI_Alltoall(out, k, MPI_INT, in, k, MPI_INT, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < k; i++)
            if (in[j * k + i] != val(j, 10 * rank + i))
                BAD("alltoall: from %d [%d] = %d", j, i, in[j * k + i]);
    mix(in, (size_t)size * k * sizeof(int));
    /* v: rank r sends (r + j) % 3 + 1 ints to j */
    for (int j = 0; j < size; j++) {
        sc[j] = (rank + j) % 3 + 1;
        sd[j] = at;
        at += sc[j];
        for (int i = 0; i < sc[j]; i++)
            out[sd[j] + i] = val(rank, 10 * j + i);
    }
    at = 0;
    for (int j = 0; j < size; j++) {
        rc[j] = (j + rank) % 3 + 1;
        rd[j] = at;
        at += rc[j] + 1; /* a gap that stays as it was */
    }
    for (int i = 0; i < size * 64; i++)
        in[i] = -7;
    MPI_Ialltoallv(out, sc, sd, MPI_INT, in, rc, rd, MPI_INT, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int j = 0; j < size; j++) {
        for (int i = 0; i < rc[j]; i++)
            if (in[rd[j] + i] != val(j, 10 * rank + i))
                BAD("alltoallv: from %d [%d] = %d", j, i, in[rd[j] + i]);
        if (in[rd[j] + rc[j]] != -7)
            BAD("alltoallv: the gap after %d's block was written", j);
    }
    mix(in, (size_t)at * sizeof(int));
    /* w: byte displacements, one type per peer */
    for (int j = 0; j < size; j++) {
        sc[j] = rc[j] = 2;
        sd[j] = j * 2 * (int)sizeof(int);
        rd[j] = j * 2 * (int)sizeof(int);
        ty[j] = MPI_INT;
        out[2 * j] = val(rank, j);
        out[2 * j + 1] = -val(rank, j);
    }
    MPI_Alltoallw(out, sc, sd, ty, in, rc, rd, ty, comm);
    for (int j = 0; j < size; j++)
        if (in[2 * j] != val(j, rank) || in[2 * j + 1] != -val(j, rank))
            BAD("alltoallw: from %d: %d %d", j, in[2 * j], in[2 * j + 1]);
    mix(in, (size_t)size * 2 * sizeof(int));
    /* in place */
    for (int j = 0; j < size; j++)
        in[j] = val(rank, j);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, 1, MPI_INT, comm);
    for (int j = 0; j < size; j++)
        if (in[j] != val(j, rank))
            BAD("alltoall in place: from %d: %d", j, in[j]);
    free(out);
    free(in);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(ty);
}

static void check_scan(MPI_Comm comm, int size, int rank)
{
    int *in = malloc((size_t)size * 3 * sizeof(int)), out[3], want,
        *rcnt = malloc(size * sizeof(int));
    MPI_Request req;

    for (int i = 0; i < size * 3; i++)
        in[i] = val(rank, i);
    MPI_Reduce_scatter_block(in, out, 3, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < 3; i++) {
        want = 0;
        for (int r = 0; r < size; r++)
            want += val(r, rank * 3 + i);
        if (out[i] != want)
            BAD("reduce_scatter_block: [%d] = %d, not %d", i, out[i], want);
    }
    mix(out, sizeof(out));
    for (int r = 0; r < size; r++)
        rcnt[r] = r % 2 + 1; /* rank r gets r % 2 + 1 of the sums */
    MPI_Ireduce_scatter(in, out, rcnt, MPI_INT, MPI_MAX, comm, &req);
    for (int r = 0; r < size; r++) /* the array is the caller's again once the call returned */
        rcnt[r] = -1;
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int r = 0; r < size; r++)
        rcnt[r] = r % 2 + 1;
    {
        int first = 0;
        for (int r = 0; r < rank; r++)
            first += rcnt[r];
        for (int i = 0; i < rcnt[rank]; i++)
            if (out[i] != val(size - 1, first + i))
                BAD("reduce_scatter max: [%d] = %d", i, out[i]);
    }
    mix(out, (size_t)rcnt[rank] * sizeof(int));
    MPI_Scan(in, out, 3, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < 3; i++) {
        want = 0;
        for (int r = 0; r <= rank; r++)
            want += val(r, i);
        if (out[i] != want)
            BAD("scan: [%d] = %d, not %d", i, out[i], want);
    }
    mix(out, sizeof(out));
    out[0] = -5;
    memcpy(out, in, sizeof(out));
    MPI_Iexscan(MPI_IN_PLACE, out, 3, MPI_INT, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; rank > 0 && i < 3; i++) {
        want = 0;
        for (int r = 0; r < rank; r++)
            want += val(r, i);
        if (out[i] != want)
            BAD("exscan in place: [%d] = %d, not %d", i, out[i], want);
    }
    if (rank > 0)
        mix(out, sizeof(out));
    free(in);
    free(rcnt);
}

/* Every predefined operation on every type it applies to (values small enough that every
 * result is exact: the same bits in any order, so the digest is MPI's), by Allreduce, and by
 * Reduce to the last rank with MPI_IN_PLACE there; MAXLOC and MINLOC on the pair types.
 * Every rank must hold the same bits as rank 0. */
#define N_OPS 10
/* MAXLOC and MINLOC on MPI's pair type of T: value (rank * 7 + k) % 3, index the rank; the
 * answer is the best value and the lowest rank that has it. */
#define CHECK_LOC(T, MPIT, NAME)                                                                   \
    do {                                                                                           \
        struct {                                                                                   \
            T v;                                                                                   \
            int i;                                                                                 \
        } a[5], b[5];                                                                              \
        for (int o = 0; o < 2; o++) {                                                              \
            for (int k = 0; k < 5; k++) {                                                          \
                a[k].v = (T)((rank * 7 + k) % 3);                                                  \
                a[k].i = rank;                                                                     \
            }                                                                                      \
            MPI_Allreduce(a, b, 5, MPIT, o ? MPI_MINLOC : MPI_MAXLOC, comm);                       \
            for (int k = 0; k < 5; k++) {                                                          \
                int best = o ? 3 : -1, at = -1;                                                    \
                for (int r = 0; r < size; r++) {                                                   \
                    int v = (r * 7 + k) % 3;                                                       \
                    if (o ? v < best : v > best) {                                                 \
                        best = v;                                                                  \
                        at = r;                                                                    \
                    }                                                                              \
                }                                                                                  \
                if ((int)b[k].v != best || b[k].i != at)                                           \
                    BAD("%s %s [%d]: (%d, %d), not (%d, %d)", o ? "MINLOC" : "MAXLOC", NAME, k,    \
                        (int)b[k].v, b[k].i, best, at);                                            \
                mix(&b[k].i, sizeof(int));                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)
static void check_every_op(MPI_Comm comm, int size, int rank)
{
    static const char *op_names[N_OPS] = {"SUM", "PROD", "MAX",  "MIN", "LAND",
                                          "LOR", "LXOR", "BAND", "BOR", "BXOR"};
    const MPI_Op ops[N_OPS] = {MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN, MPI_LAND,
                               MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    /* kind: 0 integer (every op), 1 floating (SUM PROD MAX MIN), 2 complex (SUM PROD),
     * 3 C bool (LAND LOR LXOR) */
    const struct {
        MPI_Datatype t;
        int kind;
        const char *name;
    } types[] = {
        {MPI_CHAR, 0, "CHAR"},
        {MPI_SIGNED_CHAR, 0, "SIGNED_CHAR"},
        {MPI_UNSIGNED_CHAR, 0, "UNSIGNED_CHAR"},
        {MPI_SHORT, 0, "SHORT"},
        {MPI_UNSIGNED_SHORT, 0, "UNSIGNED_SHORT"},
        {MPI_INT, 0, "INT"},
        {MPI_UNSIGNED, 0, "UNSIGNED"},
        {MPI_LONG, 0, "LONG"},
        {MPI_UNSIGNED_LONG, 0, "UNSIGNED_LONG"},
        {MPI_LONG_LONG, 0, "LONG_LONG"},
        {MPI_UNSIGNED_LONG_LONG, 0, "UNSIGNED_LONG_LONG"},
        {MPI_INT8_T, 0, "INT8_T"},
        {MPI_INT16_T, 0, "INT16_T"},
        {MPI_INT32_T, 0, "INT32_T"},
        {MPI_INT64_T, 0, "INT64_T"},
        {MPI_UINT8_T, 0, "UINT8_T"},
        {MPI_UINT16_T, 0, "UINT16_T"},
        {MPI_UINT32_T, 0, "UINT32_T"},
        {MPI_UINT64_T, 0, "UINT64_T"},
        {MPI_BYTE, 0, "BYTE"},
        {MPI_FLOAT, 1, "FLOAT"},
        {MPI_DOUBLE, 1, "DOUBLE"},
        {MPI_LONG_DOUBLE, 1, "LONG_DOUBLE"},
        {MPI_C_FLOAT_COMPLEX, 2, "C_FLOAT_COMPLEX"},
        {MPI_C_DOUBLE_COMPLEX, 2, "C_DOUBLE_COMPLEX"},
        {MPI_C_BOOL, 3, "C_BOOL"},
    };
    enum { COUNT = 5 };
    unsigned char in[COUNT * 32], out[COUNT * 32], first[COUNT * 32];

    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        MPI_Aint lb, ext;
        MPI_Type_get_extent(types[ti].t, &lb, &ext);
        for (int o = 0; o < N_OPS; o++) {
            const int kind = types[ti].kind;
            if ((kind == 1 && o >= 4) || (kind == 2 && o >= 2) || (kind == 3 && (o < 4 || o > 6)) ||
                (types[ti].t == MPI_BYTE && o < 7))
                continue;
            memset(in, 0, sizeof(in));
            for (int i = 0; i < COUNT; i++) { /* 1 or 2 (PROD: at most 2^size), or 0/1 */
                int v = (rank + i + o) % 3 == 0 ? 2 : 1;
                if (kind == 3 || o == 4 || o == 5 || o == 6)
                    v = (rank + i) % 2;
                unsigned char *at = in + (size_t)i * (size_t)ext;
                switch (kind) {
                case 1:
                    if (types[ti].t == MPI_FLOAT)
                        *(float *)at = (float)v;
                    else if (types[ti].t == MPI_DOUBLE)
                        *(double *)at = v;
                    else
                        *(long double *)at = v;
                    break;
                case 2:
                    if (types[ti].t == MPI_C_FLOAT_COMPLEX) {
                        ((float *)at)[0] = (float)v;
                        ((float *)at)[1] = o == 1 ? 0.0f : 1.0f;
                    } else {
                        ((double *)at)[0] = v;
                        ((double *)at)[1] = o == 1 ? 0.0 : 1.0;
                    }
                    break;
                default:
                    at[0] = (unsigned char)v; /* little-endian: the low byte */
                }
            }
            memset(out, 0, sizeof(out));
            MPI_Allreduce(in, out, COUNT, types[ti].t, ops[o], comm);
            memcpy(first, out, sizeof(out));
            MPI_Bcast(first, COUNT * (int)ext, MPI_BYTE, 0, comm);
            if (memcmp(first, out, (size_t)(COUNT * ext)) != 0)
                BAD("allreduce %s %s: not the same bits as rank 0's", op_names[o], types[ti].name);
            /* long double: only its 10 bytes of value are defined */
            mix(out, types[ti].t == MPI_LONG_DOUBLE ? 10 : (size_t)(COUNT * ext));
            memcpy(out, in, sizeof(out));
            MPI_Reduce(rank == size - 1 ? MPI_IN_PLACE : in, out, COUNT, types[ti].t, ops[o],
                       size - 1, comm);
            if (rank == size - 1 && memcmp(first, out, (size_t)(COUNT * ext)) != 0)
                BAD("reduce in place %s %s: not Allreduce's bits", op_names[o], types[ti].name);
        }
    }
    CHECK_LOC(float, MPI_FLOAT_INT, "FLOAT_INT");
    CHECK_LOC(double, MPI_DOUBLE_INT, "DOUBLE_INT");
    CHECK_LOC(long, MPI_LONG_INT, "LONG_INT");
    CHECK_LOC(int, MPI_2INT, "2INT");
    CHECK_LOC(short, MPI_SHORT_INT, "SHORT_INT");
    CHECK_LOC(long double, MPI_LONG_DOUBLE_INT, "LONG_DOUBLE_INT");
}

/* A floating-point sum (not exact): every rank gets the same bits. */
static void check_bits(MPI_Comm comm, int rank)
{
    double x[16], y[16], first[16];

    for (int i = 0; i < 16; i++)
        x[i] = 1.0 / (3.0 + rank + i) + 1e-9 * rank;
    MPI_Allreduce(x, y, 16, MPI_DOUBLE, MPI_SUM, comm);
    memcpy(first, y, sizeof(y));
    MPI_Bcast(first, 16, MPI_DOUBLE, 0, comm);
    if (memcmp(first, y, sizeof(y)) != 0)
        BAD("allreduce of doubles: not the same bits as rank 0's");
}

static void check_barriers(MPI_Comm comm)
{
    MPI_Request req;

    MPI_Barrier(comm);
    MPI_Ibarrier(comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
}

/* Two nonblocking collectives in flight at once, and a ring of messages while they are. */
static void check_overlap(MPI_Comm comm, int size, int rank)
{
    int a = rank, b = 0, c[2] = {rank, -rank}, d[2] = {0, 0}, in = -1, out = rank;
    MPI_Request req[5];
    MPI_Status st;

    MPI_Iallreduce(&a, &b, 1, MPI_INT, MPI_SUM, comm, &req[0]);
    MPI_Ibarrier(comm, &req[1]);
    MPI_Irecv(&in, 1, MPI_INT, (rank + size - 1) % size, 5, comm, &req[2]);
    MPI_Isend(&out, 1, MPI_INT, (rank + 1) % size, 5, comm, &req[3]);
    MPI_Iallreduce(c, d, 2, MPI_INT, MPI_MIN, comm, &req[4]);
    MPI_Waitall(4, req + 1, MPI_STATUSES_IGNORE);
    MPI_Wait(&req[0], &st);
    if (b != size * (size - 1) / 2 || d[0] != 0 || d[1] != -(size - 1) ||
        in != (rank + size - 1) % size)
        BAD("overlap: sum %d min %d %d ring %d", b, d[0], d[1], in);
}

static void check_comm(MPI_Comm comm, const char *name)
{
    int size, rank, before = fails;
    char label[64];

    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    check_barriers(comm);
    check_bcast(comm, size, rank);
    check_reduce(comm, size, rank);
    check_gather(comm, size, rank);
    check_alltoall(comm, size, rank);
    check_scan(comm, size, rank);
    check_bits(comm, rank);
    check_every_op(comm, size, rank);
    check_overlap(comm, size, rank);
    snprintf(label, sizeof(label), "collectives on %s", name);
    agree(label, before);
}

static void check_split(void)
{
    MPI_Comm dup, par, half;
    int before = fails, prank, psize, cmp = -1, in = -1, out;
    MPI_Status st;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp);
    if (cmp != MPI_CONGRUENT)
        BAD("compare(world, dup) = %d, not MPI_CONGRUENT", cmp);
    check_comm(dup, "a dup of the world");
    { /* errors go to the communicator's own handler (the world's stays fatal) */
        int x = 0, rc, cls = -1;
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        rc = MPI_Bcast(&x, 1, MPI_INT, wsize + 5, dup);
        MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_ROOT)
            BAD("bcast from root %d on a dup: class %d, not MPI_ERR_ROOT", wsize + 5, cls);
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_ARE_FATAL);
    }
    /* by parity, keys reversed: rank order is the world's reversed */
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &par);
    MPI_Comm_size(par, &psize);
    MPI_Comm_rank(par, &prank);
    if (psize != (wsize + 1 - wrank % 2) / 2 || prank != (psize - 1) - wrank / 2)
        BAD("split: size %d rank %d", psize, prank);
    out = wrank;
    MPI_Sendrecv(&out, 1, MPI_INT, (prank + 1) % psize, 3, &in, 1, MPI_INT,
                 (prank + psize - 1) % psize, 3, par, &st);
    /* par rank q is world rank 2 (psize - 1 - q) + parity */
    if (st.MPI_SOURCE != (prank + psize - 1) % psize ||
        in != 2 * (psize - 1 - (prank + psize - 1) % psize) + wrank % 2)
        BAD("split ring: got %d from %d", in, st.MPI_SOURCE);
    check_comm(par, "a split by parity");
    MPI_Comm_split(MPI_COMM_WORLD, wrank < wsize / 2, wrank, &half);
    check_comm(half, "a split by halves");
    MPI_Comm_compare(dup, par, &cmp);
    if (wsize > 1 && cmp != MPI_UNEQUAL)
        BAD("compare(dup, par) = %d, not MPI_UNEQUAL", cmp);
    MPI_Comm_free(&half);
    MPI_Comm_free(&par);
    MPI_Comm_free(&dup);
    if (dup != MPI_COMM_NULL)
        BAD("comm_free left the handle");
    agree("communicators", before);
}

/* Groups of the world, the communicators made from them (Comm_create: collective over the
 * parent; Comm_create_group: over the group only). */
static void check_groups(void)
{
    MPI_Group wg, eg, og, ug, ig, dg, rg, pg;
    MPI_Comm ec = MPI_COMM_NULL, rc = MPI_COMM_NULL, oc = MPI_COMM_NULL;
    int before = fails, ne = (wsize + 1) / 2, *evens = malloc((size_t)wsize * sizeof(int));
    int *got = malloc((size_t)wsize * sizeof(int)), n = -1, r = -1, cmp = -1, range[1][3];

    for (int i = 0; i < ne; i++)
        evens[i] = 2 * i;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_size(wg, &n);
    MPI_Group_rank(wg, &r);
    if (n != wsize || r != wrank)
        BAD("group of the world: size %d rank %d", n, r);
    MPI_Group_incl(wg, ne, evens, &eg);
    MPI_Group_excl(wg, ne, evens, &og);
    MPI_Group_union(eg, og, &ug);
    MPI_Group_compare(ug, wg, &cmp);
    if (cmp != (wsize <= 2 ? MPI_IDENT : MPI_SIMILAR))
        BAD("compare(evens + odds, world) = %d", cmp);
    MPI_Group_intersection(wg, eg, &ig);
    MPI_Group_compare(ig, eg, &cmp);
    if (cmp != MPI_IDENT)
        BAD("compare(world & evens, evens) = %d", cmp);
    MPI_Group_difference(wg, eg, &dg);
    MPI_Group_compare(dg, og, &cmp);
    if (cmp != MPI_IDENT)
        BAD("compare(world - evens, odds) = %d", cmp);
    for (int i = 0; i < ne; i++)
        got[i] = i;
    MPI_Group_translate_ranks(eg, ne, got, wg, got);
    for (int i = 0; i < ne; i++)
        if (got[i] != 2 * i)
            BAD("translate: even %d is world %d", i, got[i]);
    range[0][0] = wsize - 1;
    range[0][1] = 0;
    range[0][2] = -1;
    MPI_Group_range_incl(wg, 1, range, &rg);
    MPI_Group_rank(rg, &r);
    if (r != wsize - 1 - wrank)
        BAD("range_incl reversed: rank %d", r);
    /* Comm_create over the world: the evens get one, the odds none */
    MPI_Comm_create(MPI_COMM_WORLD, eg, &ec);
    if ((wrank % 2 == 0) != (ec != MPI_COMM_NULL))
        BAD("comm_create: %s communicator", ec == MPI_COMM_NULL ? "no" : "a");
    if (ec != MPI_COMM_NULL) {
        int sum = 0, size = 0, rank = -1;
        MPI_Comm_size(ec, &size);
        MPI_Comm_rank(ec, &rank);
        MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, ec);
        if (size != ne || rank != wrank / 2 || sum != ne * (ne - 1))
            BAD("comm_create: size %d rank %d sum %d", size, rank, sum);
        mix(&sum, sizeof(sum));
        MPI_Comm_group(ec, &pg);
        MPI_Group_compare(pg, eg, &cmp);
        if (cmp != MPI_IDENT)
            BAD("group of the created communicator: compare = %d", cmp);
        MPI_Group_free(&pg);
        MPI_Comm_free(&ec);
    }
    /* Comm_create_group: everyone, in reverse; then the odds alone */
    MPI_Comm_create_group(MPI_COMM_WORLD, rg, 7, &rc);
    {
        int rank = -1, v = wrank == 0 ? 99 : -1;
        MPI_Comm_rank(rc, &rank);
        MPI_Bcast(&v, 1, MPI_INT, wsize - 1, rc); /* from world rank 0 */
        if (rank != wsize - 1 - wrank || v != 99)
            BAD("comm_create_group reversed: rank %d value %d", rank, v);
        MPI_Comm_free(&rc);
    }
    if (wrank % 2 == 1) {
        int sum = 0;
        MPI_Comm_create_group(MPI_COMM_WORLD, og, 8, &oc);
        MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, oc);
        if (sum != (wsize / 2) * (wsize / 2))
            BAD("comm_create_group of the odds: sum %d", sum);
        MPI_Comm_free(&oc);
    }
    MPI_Group_free(&rg);
    MPI_Group_free(&dg);
    MPI_Group_free(&ig);
    MPI_Group_free(&ug);
    MPI_Group_free(&og);
    MPI_Group_free(&eg);
    MPI_Group_free(&wg);
    if (wg != MPI_GROUP_NULL || eg != MPI_GROUP_NULL)
        BAD("group_free left a handle");
    free(evens);
    free(got);
    agree("groups", before);
}

/* MPI_BOTTOM with a struct of absolute addresses (Bcast and point-to-point), and MPI_Wtime
 * that follows causality across ranks. */
static void check_bottom_wtime(void)
{
    int a = wrank == 0 ? 11 : 0, before = fails;
    double b = wrank == 0 ? 2.5 : 0, t0 = 0, t1;
    int lens[2] = {1, 1};
    MPI_Aint at[2];
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, st;

    MPI_Get_address(&a, &at[0]);
    MPI_Get_address(&b, &at[1]);
    MPI_Type_create_struct(2, lens, at, types, &st);
    MPI_Type_commit(&st);
    MPI_Bcast(MPI_BOTTOM, 1, st, 0, MPI_COMM_WORLD);
    if (a != 11 || b != 2.5)
        BAD("bcast of MPI_BOTTOM: %d %g", a, b);
    if (wrank == 0 && wsize > 1) {
        a = 12;
        b = 3.5;
        MPI_Send(MPI_BOTTOM, 1, st, wsize - 1, 4, MPI_COMM_WORLD);
    } else if (wrank == wsize - 1 && wsize > 1) {
        MPI_Recv(MPI_BOTTOM, 1, st, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (a != 12 || b != 3.5)
            BAD("send of MPI_BOTTOM: %d %g", a, b);
    }
    MPI_Type_free(&st);
    if (wrank == 0)
        t0 = MPI_Wtime();
    MPI_Bcast(&t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    t1 = MPI_Wtime();
    /* one clock across sites: later here than rank 0's reading before it sent (grid mode
     * only: Open MPI's own clock counts from each process's start, MPI_WTIME_IS_GLOBAL 0) */
    if (getenv("MLN_GRID_SITES") != NULL && t1 < t0 - 1e-3)
        BAD("MPI_Wtime: %.6f here after rank 0 sent %.6f", t1, t0);
    agree("MPI_BOTTOM and MPI_Wtime", before);
}

#if defined(OPEN_MPI) && defined(MPIX_ERR_REVOKED)
#define HAVE_ULFM 1
/* ULFM with no failed process: agree is the AND of every flag, shrink keeps every
 * rank in its place, nothing failed, acknowledged or revoked. */
static void check_ulfm(void)
{
    int before = fails, all = 0xff, flag = 0xff & ~(1 << (wrank % 8));
    int n = -1, result = -1;
    MPI_Comm comm, shrunk;
    MPI_Group failed;

    for (int r = 0; r < wsize; r++)
        all &= ~(1 << (r % 8)); /* the bits no rank clears stay set */
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPIX_Comm_agree(comm, &flag);
    if (flag != all)
        BAD("MPIX_Comm_agree: %#x, expected %#x", flag, all);
    MPIX_Comm_shrink(comm, &shrunk);
    MPI_Comm_compare(comm, shrunk, &result);
    if (result != MPI_CONGRUENT)
        BAD("MPIX_Comm_shrink: compare %d, expected MPI_CONGRUENT", result);
    MPI_Barrier(shrunk);
    MPI_Comm_free(&shrunk);
    MPIX_Comm_get_failed(comm, &failed);
    MPI_Group_size(failed, &n);
    if (n != 0)
        BAD("MPIX_Comm_get_failed: %d failed", n);
    MPI_Group_free(&failed);
    MPIX_Comm_ack_failed(comm, wsize, &n);
    if (n != 0)
        BAD("MPIX_Comm_ack_failed: %d acknowledged", n);
    MPIX_Comm_is_revoked(comm, &n);
    if (n != 0)
        BAD("MPIX_Comm_is_revoked: %d", n);
    MPI_Comm_free(&comm);
    agree("ULFM without failures", before);
}
#else
#define HAVE_ULFM 0
static void check_ulfm(void)
{
}
#endif

/* The neighbourhood collectives' blocks on topo: every rank sends its rank (allgather) and
 * rank * 100 + k to its k-th destination (alltoall, alltoallv with a gap, alltoallw); each
 * receives what its sources sent, in the order of the sources. */
static void check_neighbors(MPI_Comm topo, const char *what)
{
    int kind = MPI_UNDEFINED, nin = 0, nout = 0, weighted = 0, rank, *in, *out, *sw, *dw;
    int *got, *sendv, *cnt, *dsp, *bdsp;
    MPI_Aint *wd;
    MPI_Datatype *ty;
    MPI_Request req;

    MPI_Comm_rank(topo, &rank);
    MPI_Topo_test(topo, &kind);
    if (kind == MPI_CART) {
        MPI_Cartdim_get(topo, &nin);
        nin = nout = 2 * nin;
    } else if (kind == MPI_GRAPH) {
        MPI_Graph_neighbors_count(topo, rank, &nin);
        nout = nin;
    } else {
        MPI_Dist_graph_neighbors_count(topo, &nin, &nout, &weighted);
    }
    in = calloc((size_t)nin + 1, sizeof(int));
    out = calloc((size_t)nout + 1, sizeof(int));
    sw = calloc((size_t)nin + 1, sizeof(int));
    dw = calloc((size_t)nout + 1, sizeof(int));
    got = calloc(2 * (size_t)nin + 2, sizeof(int));
    sendv = calloc((size_t)nout + 1, sizeof(int));
    cnt = calloc((size_t)(nin > nout ? nin : nout) + 1, sizeof(int));
    dsp = calloc((size_t)(nin > nout ? nin : nout) + 1, sizeof(int));
    bdsp = calloc((size_t)(nin > nout ? nin : nout) + 1, sizeof(int));
    wd = calloc((size_t)(nin > nout ? nin : nout) + 1, sizeof(MPI_Aint));
    ty = calloc((size_t)(nin > nout ? nin : nout) + 1, sizeof(MPI_Datatype));
    if (kind == MPI_CART) {
        int ndims = nin / 2;
        for (int d = 0; d < ndims; d++)
            MPI_Cart_shift(topo, d, 1, &in[2 * d], &in[2 * d + 1]);
        memcpy(out, in, (size_t)nin * sizeof(int));
    } else if (kind == MPI_GRAPH) {
        MPI_Graph_neighbors(topo, rank, nin, in);
        memcpy(out, in, (size_t)nin * sizeof(int));
    } else {
        MPI_Dist_graph_neighbors(topo, nin, in, sw, nout, out, dw);
    }
    for (int i = 0; i < nin + nout; i++) { /* MPI_PROC_NULL's value is each MPI's own */
        int v = i < nin ? in[i] : out[i - nin];
        v = v == MPI_PROC_NULL ? -1 : v;
        mix(&v, sizeof(v));
    }
    for (int i = 0; i < 2 * nin + 2; i++)
        got[i] = -9;
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, topo);
    for (int i = 0; i < nin; i++)
        if (got[i] != (in[i] == MPI_PROC_NULL ? -9 : in[i]))
            BAD("%s: neighbor_allgather [%d] = %d, not %d", what, i, got[i], in[i]);
    mix(got, (size_t)nin * sizeof(int));
    for (int j = 0; j < nout; j++)
        sendv[j] = rank * 100 + j;
    for (int i = 0; i < 2 * nin + 2; i++)
        got[i] = -9;
    MPI_Ineighbor_alltoall(sendv, 1, MPI_INT, got, 1, MPI_INT, topo, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    mix(got, (size_t)nin * sizeof(int));
    for (int i = 0; i < nin; i++) { /* the same again, by v (a gap after each block) and w */
        cnt[i] = 1;
        dsp[i] = 2 * i;
        bdsp[i] = 2 * i;
        wd[i] = (MPI_Aint)(2 * i * (int)sizeof(int));
        ty[i] = MPI_INT;
    }
    {
        int *got2 = calloc(2 * (size_t)nin + 2, sizeof(int)),
            *scnt = calloc((size_t)nout + 1, sizeof(int)),
            *sdsp = calloc((size_t)nout + 1, sizeof(int));
        MPI_Aint *swd = calloc((size_t)nout + 1, sizeof(MPI_Aint));
        MPI_Datatype *sty = calloc((size_t)nout + 1, sizeof(MPI_Datatype));
        for (int j = 0; j < nout; j++) {
            scnt[j] = 1;
            sdsp[j] = j;
            swd[j] = (MPI_Aint)(j * (int)sizeof(int));
            sty[j] = MPI_INT;
        }
        for (int i = 0; i < 2 * nin + 2; i++)
            got2[i] = -9;
        MPI_Neighbor_alltoallv(sendv, scnt, sdsp, MPI_INT, got2, cnt, dsp, MPI_INT, topo);
        for (int i = 0; i < nin; i++)
            if (got2[2 * i] != got[i] || got2[2 * i + 1] != -9)
                BAD("%s: neighbor_alltoallv [%d] = %d, alltoall gave %d", what, i, got2[2 * i],
                    got[i]);
        for (int i = 0; i < 2 * nin + 2; i++)
            got2[i] = -9;
        MPI_Neighbor_alltoallw(sendv, scnt, swd, sty, got2, cnt, wd, ty, topo);
        for (int i = 0; i < nin; i++)
            if (got2[2 * i] != got[i])
                BAD("%s: neighbor_alltoallw [%d] = %d, alltoall gave %d", what, i, got2[2 * i],
                    got[i]);
        free(got2);
        free(scnt);
        free(sdsp);
        free(swd);
        free(sty);
    }
    free(in);
    free(out);
    free(sw);
    free(dw);
    free(got);
    free(sendv);
    free(cnt);
    free(dsp);
    free(bdsp);
    free(wd);
    free(ty);
}

/* Cartesian (periodic where a dimension has more than 2 ranks: where it has 2, the MPIs order
 * the two blocks from one neighbour differently), its sub-grids; a ring graph; distributed
 * graphs, adjacent and from edges that rank 0 names alone. */
static void check_topologies(void)
{
    int dims[2] = {0, 0}, periods[2], coords[2], r = -1, kind = -1, before = fails, size;
    int remain[2] = {0, 1};
    MPI_Comm cart, row, graph, dist, star, dup;

    MPI_Dims_create(wsize, 2, dims);
    periods[0] = dims[0] > 2;
    periods[1] = dims[1] > 2;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Topo_test(cart, &kind);
    MPI_Cart_coords(cart, wrank, 2, coords);
    MPI_Cart_rank(cart, coords, &r);
    if (kind != MPI_CART || r != wrank || coords[0] != wrank / dims[1] ||
        coords[1] != wrank % dims[1])
        BAD("cart: kind %d coords (%d, %d) rank %d", kind, coords[0], coords[1], r);
    check_neighbors(cart, "cart");
    MPI_Comm_dup(cart, &dup);
    check_neighbors(dup, "a dup of the cart");
    MPI_Comm_free(&dup);
    MPI_Cart_sub(cart, remain, &row);
    MPI_Comm_size(row, &size);
    MPI_Comm_rank(row, &r);
    if (size != dims[1] || r != coords[1])
        BAD("cart_sub: size %d rank %d", size, r);
    check_neighbors(row, "a row of the cart");
    MPI_Comm_free(&row);
    MPI_Comm_free(&cart);
    {
        int *index = malloc((size_t)wsize * sizeof(int)),
            *edges = malloc(2 * (size_t)wsize * sizeof(int)), ne = 0;
        for (int i = 0; i < wsize; i++) {
            if (wsize > 2) {
                edges[ne++] = (i + wsize - 1) % wsize;
                edges[ne++] = (i + 1) % wsize;
            } else if (wsize == 2) {
                edges[ne++] = 1 - i;
            }
            index[i] = ne;
        }
        MPI_Graph_create(MPI_COMM_WORLD, wsize, index, edges, 0, &graph);
        check_neighbors(graph, "graph");
        MPI_Comm_free(&graph);
        free(index);
        free(edges);
    }
    {
        int src = (wrank + wsize - 1) % wsize, dst = (wrank + 1) % wsize, w1 = 5, w2 = 6;
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &src, &w1, 1, &dst, &w2, MPI_INFO_NULL, 0,
                                       &dist);
        check_neighbors(dist, "dist graph");
        MPI_Comm_free(&dist);
    }
    {
        int n = wrank == 0 ? 1 : 0, zero = 0, deg = wsize - 1,
            *to = malloc((size_t)wsize * sizeof(int));
        for (int i = 1; i < wsize; i++)
            to[i - 1] = i;
        int *w = malloc((size_t)wsize * sizeof(int));
        for (int i = 0; i < wsize; i++)
            w[i] = i + 1;
        MPI_Dist_graph_create(MPI_COMM_WORLD, n, &zero, &deg, to, w, MPI_INFO_NULL, 0, &star);
        free(w);
        check_neighbors(star, "star (Dist_graph_create)");
        MPI_Comm_free(&star);
        free(to);
    }
    agree("topologies and neighbourhood collectives", before);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Type_contiguous(4, MPI_UNSIGNED, &mat_type);
    MPI_Type_commit(&mat_type);
    check_comm(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    check_split();
    check_groups();
    check_bottom_wtime();
    {
        /* every rank's binary must have it (sites of two MPIs run two builds of this file) */
        int have = HAVE_ULFM, all_have = 0;

        MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (all_have)
            check_ulfm();
    }
    check_topologies();
    {
        uint64_t *all = malloc((size_t)wsize * sizeof(uint64_t));
        MPI_Gather(&digest, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        if (wrank == 0) {
            digest = 1469598103934665603ull;
            mix(all, (size_t)wsize * sizeof(uint64_t));
            printf("digest %016llx\n", (unsigned long long)digest);
        }
        free(all);
    }
    MPI_Type_free(&mat_type);
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("%s grid_coll (%d ranks)\n", fails ? "FAIL" : "PASS", wsize);
    MPI_Finalize();
    return fails ? 1 : 0;
}
