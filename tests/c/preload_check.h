/*
 * preload_check.h - what the interposition layer's own tests share (preload_p2p, preload_thread,
 * preload_bcast; issue 16).  They are plain MPI programs: no Multilane header, no mln_ call,
 * linked with MPI only, so that one binary runs alone (the proof that the test is right about
 * MPI) and under LD_PRELOAD=libmultilane-preload.so, and checks MPI's semantics itself.
 *
 * Every payload byte is pc_pat(sender, message, offset); every byte a receive must leave alone
 * (past the message, the gaps of a strided buffer) holds PC_GUARD and is checked too.  A failed
 * check prints one line "PROG: rank R: PHASE: WHAT: expected E, got G" on stderr; at the end
 * rank 0 prints "PASS" when no rank failed, else "FAIL: N failed checks", and the exit status
 * is non-zero.  A phase that does not end within PC_WATCHDOG_S seconds prints
 * "PROG: rank R: PHASE: FAIL: hang" and the last step the rank named (pc_step), and ends the
 * job.
 */
#ifndef MLN_PRELOAD_CHECK_H
#define MLN_PRELOAD_CHECK_H

#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

#define PC_KIB ((size_t)1024)
#define PC_MIB (1024 * PC_KIB)
#define PC_GUARD 0xEE
#define PC_SCRIBBLE 0x5A /* written over a send buffer as soon as MPI lets us reuse it */
#define PC_WATCHDOG_S 90

/* The sizes of every point-to-point test: both sides of the 64-byte header and of a 4K
 * threshold, and large ones (striped under MLN_STRIPE_THRESHOLD=4K). */
#define PC_NSIZES 9
extern const size_t pc_sizes[PC_NSIZES];

/* Known deviations of older MPIs from the standard (told by MPI_Get_library_version; Debian 12's
 * MPIs, make test-deb): the check that meets one is skipped or worked around, with a note from
 * rank 0. */
enum {
    PC_QUIRK_BSEND_INIT_ONCE = 1,  /* Open MPI 4.1: a Bsend_init request started a second time
                                    * sends wrong data: each is made anew before a Start */
    PC_QUIRK_PROCNULL_STATUS = 2,  /* MPICH 4: Waitall leaves the status of an Irecv from
                                    * MPI_PROC_NULL unset */
    PC_QUIRK_UNDEFINED_STATUS = 4, /* MPICH 4: Waitany / Testany with no active request
                                    * (index MPI_UNDEFINED) leave the status unset, not empty */
};

typedef struct pc_ctx {
    const char *prog;
    int rank, size; /* in MPI_COMM_WORLD */
    int thread;     /* -1, or the thread of preload_thread */
    int nfail;
    int quirks, noted; /* PC_QUIRK_* of this MPI; those already noted */
    char phase[64];
} pc_ctx_t;

/* Buffer layouts: PC_CONTIG is MPI_BYTE x n.  PC_VEC is blocks of PC_VBLOCK data bytes every
 * PC_VSTRIDE bytes: for n a multiple of PC_VBLOCK, n / PC_VBLOCK elements of one block (a
 * resized contiguous type); else one element of n bytes (a vector of the whole blocks and a
 * struct for the rest), so that a shorter message ends inside it (MPI_Get_count: undefined). */
enum { PC_CONTIG = 0, PC_VEC = 1 };
#define PC_VBLOCK 16
#define PC_VSTRIDE 24

typedef struct pc_buf {
    int layout;
    size_t nbytes; /* data bytes it holds */
    uint8_t *mem;
    size_t span;       /* bytes of mem */
    MPI_Datatype type; /* what MPI is given: count x type */
    int count;
    size_t esize; /* data bytes per element of type */
    int owned;    /* type is ours to free */
} pc_buf_t;

void pc_init(pc_ctx_t *c, const char *prog);
/* One line on stderr, counted as a failed check. */
void pc_fail(pc_ctx_t *c, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 1 when want == got; else a failed check "WHAT: expected WANT, got GOT". */
int pc_eq(pc_ctx_t *c, const char *what, long long want, long long got);
/* 1 when rc is MPI_SUCCESS; else a failed check naming the call and MPI's error string. */
int pc_mpi(pc_ctx_t *c, const char *what, int rc);
/* Starts a phase on every rank of MPI_COMM_WORLD: a barrier, the name, the watchdog. */
void pc_phase(pc_ctx_t *c, const char *name);
/* Names what the main thread does now, for the watchdog's message should it hang there. */
void pc_step(const pc_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the program's checks: rank 0 prints PASS or FAIL; returns the exit status. */
int pc_finish(pc_ctx_t *c);
/* 1 when this MPI has quirk q (rank 0 notes it once: what the check would have wanted). */
int pc_quirk(pc_ctx_t *c, int q);
/* 1 when name is in the comma-separated list (NULL or "all": every name). */
int pc_selected(const char *list, const char *name);

static inline uint8_t pc_pat(int sender, int msg, size_t off)
{
    return (uint8_t)(off * 7u + (off >> 8) * 3u + (off >> 16) * 5u + (size_t)msg * 29u +
                     (size_t)sender * 113u + 1u);
}
void *pc_xmalloc(size_t n);

void pc_buf_init(pc_buf_t *b, int layout, size_t nbytes);
void pc_buf_free(pc_buf_t *b);
/* Every data byte of b set to the pattern (the gaps keep PC_GUARD). */
void pc_buf_fill(pc_buf_t *b, int sender, int msg);
/* Every data byte (not the gaps) set to v. */
void pc_buf_set(pc_buf_t *b, uint8_t v);
/* Data bytes [0, got) hold the pattern; the rest of the data and every gap hold PC_GUARD. */
int pc_buf_check(pc_ctx_t *c, const char *what, const pc_buf_t *b, size_t got, int sender, int msg);
/* What MPI_Get_count gives for `bytes` received into b: MPI_UNDEFINED inside an element. */
int pc_buf_count(const pc_buf_t *b, size_t bytes);
/* The status of a receive of `bytes` into b from src with tag: source, tag, MPI_Get_count,
 * MPI_Get_elements, MPI_Test_cancelled (false). */
int pc_status(pc_ctx_t *c, const char *what, const MPI_Status *st, int src, int tag,
              const pc_buf_t *b, size_t bytes);
/* An empty status (MPI 3.7.3): source `src` (MPI_ANY_SOURCE, or MPI_PROC_NULL for a receive
 * from it), MPI_ANY_TAG, count 0, not cancelled. */
int pc_status_empty(pc_ctx_t *c, const char *what, const MPI_Status *st, int src);

/* MPI_Barrier that sleeps while it waits (Ibarrier + Test + a 200 us nap): a rank with nothing
 * to do leaves the cores to the ranks at work (MPICH's ranks poll without yielding). */
void pc_barrier(MPI_Comm comm);
/* Runs fn for every ordered pair (s, d), s != d, of comm in one global order (so blocking
 * calls cannot form a cycle): rank s calls fn(.., 1, d), rank d fn(.., 0, s); a barrier on
 * comm after each pair, so that wildcard receives see only their pair's messages. */
void pc_pairs(pc_ctx_t *c, MPI_Comm comm, void *arg,
              void (*fn)(pc_ctx_t *c, MPI_Comm comm, void *arg, int sender, int peer));

/* The phases of preload_p2p (preload_p2p.c, preload_req.c, preload_probe.c). */
void p2p_modes(pc_ctx_t *c);
void p2p_exchange(pc_ctx_t *c);
void p2p_procnull(pc_ctx_t *c);
void p2p_comms(pc_ctx_t *c);
void p2p_self(pc_ctx_t *c);
void p2p_truncate(pc_ctx_t *c);
void req_persistent(pc_ctx_t *c);
void req_waits(pc_ctx_t *c);
void req_status(pc_ctx_t *c);
void req_cancel(pc_ctx_t *c);
void probe_sizes(pc_ctx_t *c);
void probe_order(pc_ctx_t *c);
void probe_anysrc(pc_ctx_t *c);

#endif /* MLN_PRELOAD_CHECK_H */
