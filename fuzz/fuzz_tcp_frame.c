/*
 * fuzz_tcp_frame.c - libFuzzer target: the check that a tcp lane's frame header fits its
 * receive before a byte of its payload lands (src/p2p/tcp_early.c: mln_tcp_frame_index,
 * mln_tcp_frame_lands), on receives as src/p2p/stripe.c sets them up.
 *
 * Input: {flags u8, chunk u32, total u64, cap u32, early chunks u16, then frames}.  The
 * receive: a buffer of exactly cap bytes (<= CAP_MAX), a message of total bytes (<= NCHUNK_MAX
 * chunks) in chunks of 1..MLN_STRIPE_CHUNK_MAX bytes, accept = min(total, cap), early bytes
 * [0, early) (a multiple of chunk, or total: what stripe.c lets through), its CTS out or not,
 * its chunk map from mln_tcp_got_alloc; flags also make it a receive of the mpi lanes, or one
 * without a map, which take no frame.  Each frame {magic, offset, len} (magic one of the four
 * or any; offset and len raw, or near a chunk's): when mln_tcp_frame_index takes it, it is a
 * chunk of the grid not seen before, of an early part or an accepted one, with the right
 * length, and the bytes mln_tcp_frame_lands says land are written into the buffer (ASan: not
 * one past it).  At the end every chunk a correct sender would still send must be taken, once.
 * This links the real libmultilane (build/<mpi>/lib/libmultilane.a) and MPI; it calls no MPI.
 */
#include "lane_tcp_int.h"

#include "fuzz.h"

#define CAP_MAX (1u << 18)
#define NCHUNK_MAX 512u
#define FRAMES_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The chunks a receive expects: magic and length of chunk idx, or 0 when none is due. */
static uint32_t expected(const mln_req_t *r, uint64_t idx, uint64_t *len)
{
    const uint64_t off = idx * r->chunk;

    if (off < r->early) {
        *len = r->total - off < r->chunk ? r->total - off : r->chunk;
        return TCP_EARLY_MAGIC;
    }
    if (r->cts && idx < r->nchunks) {
        *len = r->accept - off < r->chunk ? r->accept - off : r->chunk;
        return TCP_FRAME_MAGIC;
    }
    return 0;
}

/* One frame; 1 when the receive took it. */
static int deliver(mln_req_t *r, uint8_t *seen, uint64_t nframes, int usable, uint32_t magic,
                   uint64_t off, uint64_t len)
{
    const uint64_t idx = mln_tcp_frame_index(r, magic, off, len);
    const uint64_t lands = mln_tcp_frame_lands(r, off, len);

    /* lands: never past the buffer, whatever the frame */
    FUZZ_CHECK(lands <= len && (lands == 0 || (off < r->accept && lands <= r->accept - off)));
    if (idx == TCP_BAD_INDEX)
        return 0;
    FUZZ_CHECK(usable);
    FUZZ_CHECK(idx < nframes && off == idx * r->chunk && len >= 1 && len <= r->chunk);
    FUZZ_CHECK(!(seen[idx / 8] & (1u << (idx % 8))));
    if (magic == TCP_EARLY_MAGIC) {
        FUZZ_CHECK(off < r->early && len <= r->total - off);
    } else {
        FUZZ_CHECK(magic == TCP_FRAME_MAGIC && r->cts && off >= r->early && off < r->accept);
        FUZZ_CHECK(len <= r->accept - off && lands == len);
    }
    seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
    r->got[idx / 8] |= (uint8_t)(1u << (idx % 8)); /* as lane_tcp.c's frame_accept does */
    if (lands > 0)
        memset(r->buf + off, 0x5a, (size_t)lands);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t magics[] = {TCP_FRAME_MAGIC, TCP_EARLY_MAGIC, TCP_END_MAGIC, 0};
    fuzz_in_t in = {data, size};
    const unsigned flags = (unsigned)fuzz_uint(&in, 1);
    mln_req_t r;
    uint64_t early_n, nframes;
    uint8_t *seen;
    int usable;

    memset(&r, 0, sizeof(r));
    r.kind = (flags & 2) ? MLN_LANE_MPI : MLN_LANE_TCP;
    r.cts = flags & 1;
    r.chunk = 1 + fuzz_uint(&in, 4) % MLN_STRIPE_CHUNK_MAX;
    r.total = fuzz_uint(&in, 8) % (r.chunk * NCHUNK_MAX + 1);
    r.cap = fuzz_uint(&in, 4) % (CAP_MAX + 1);
    r.accept = r.total < r.cap ? r.total : r.cap;
    r.nchunks = r.accept ? (r.accept + r.chunk - 1) / r.chunk : 0;
    early_n = fuzz_uint(&in, 2);
    r.early = early_n * r.chunk < r.total ? early_n * r.chunk : r.total;
    r.buf = malloc((size_t)r.cap); /* exactly cap bytes (0: a block ASan lets no one touch) */
    FUZZ_CHECK(r.buf != NULL);
    if (!(flags & 4))
        FUZZ_CHECK(mln_tcp_got_alloc(&r) == MLN_OK);
    usable = r.kind == MLN_LANE_TCP && r.got != NULL;
    early_n = r.early ? (r.early + r.chunk - 1) / r.chunk : 0;
    nframes = early_n > r.nchunks ? early_n : r.nchunks;
    seen = calloc((size_t)(nframes / 8 + 1), 1);
    FUZZ_CHECK(seen != NULL);

    for (int i = 0; i < FRAMES_MAX && in.n > 0; i++) {
        const unsigned sel = (unsigned)fuzz_uint(&in, 1);
        const uint32_t magic = (sel & 3) == 3 ? (uint32_t)fuzz_uint(&in, 4) : magics[sel & 3];
        uint64_t off, len;

        if (sel & 4) {
            off = fuzz_uint(&in, 8);
        } else { /* near a chunk of the grid */
            off = fuzz_uint(&in, 2) * r.chunk;
            if (sel & 8)
                off += (uint64_t)(int64_t)(int8_t)fuzz_uint(&in, 1);
        }
        if (sel & 16) {
            len = fuzz_uint(&in, 4); /* the wire's len is 32 bits */
        } else {                     /* near the right length */
            const uint64_t end = magic == TCP_EARLY_MAGIC ? r.total : r.accept;
            len = off < end && end - off < r.chunk ? end - off : r.chunk;
            if (sel & 32)
                len += (uint64_t)(int64_t)(int8_t)fuzz_uint(&in, 1);
            len &= UINT32_MAX;
        }
        deliver(&r, seen, nframes, usable, magic, off, len);
    }

    /* every chunk still due is taken, once; nothing else is */
    for (uint64_t idx = 0; idx <= nframes; idx++) {
        const uint64_t off = idx * r.chunk;
        uint64_t len = 0;
        const uint32_t magic = expected(&r, idx, &len);

        if (usable && magic != 0 && idx < nframes) {
            const int was = (seen[idx / 8] & (1u << (idx % 8))) != 0;
            FUZZ_CHECK(deliver(&r, seen, nframes, usable, magic, off, len) == !was);
            FUZZ_CHECK(deliver(&r, seen, nframes, usable, magic, off, len) == 0);
        } else {
            const uint64_t le = off < r.total && r.total - off < r.chunk ? r.total - off : r.chunk;
            const uint64_t lf =
                off < r.accept && r.accept - off < r.chunk ? r.accept - off : r.chunk;
            FUZZ_CHECK(deliver(&r, seen, nframes, usable, TCP_EARLY_MAGIC, off, le) == 0);
            FUZZ_CHECK(deliver(&r, seen, nframes, usable, TCP_FRAME_MAGIC, off, lf) == 0);
        }
    }
    free(seen);
    free(r.got);
    free(r.buf);
    return 0;
}
