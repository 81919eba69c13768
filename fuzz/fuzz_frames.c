/*
 * fuzz_frames.c - libFuzzer target: the link layer's frames (src/link/link.c).
 *
 * Eight links (fuzz_link.h), each up after an in-process handshake: modes none, auth, auth
 * with the payload MAC and aead, each with AES-256-GCM and ChaCha20-Poly1305.  Input: {link
 * u8, then operations}; each operation is one byte (kind = its low 2 bits, flags the rest)
 * and its lengths, bounded (header <= HDR_MAX, payload <= PAYLOAD_MAX), come from the input:
 *   0 forged   a frame from the input: header, head tag, payload, body tag, each an exact-size
 *              heap copy, given to mln_link_open_head and mln_link_open_body: with tags (auth,
 *              aead) neither may accept it; without (none) both pass it as it is
 *   1 sealed   header and payload from the input sealed by the connector (in place or not) and
 *              opened by the listener: must pass, and aead must give the payload back; with one
 *              bit flipped (header, head tag, payload or body tag) what covers that bit must
 *              fail, and the genuine frame must still pass after it
 *   2 replay   the last frame that passed, again: a tag must refuse it
 *   3 reorder  two frames sealed, the second delivered first: a tag must refuse it; then both
 *              in order pass
 * Every violation is abort(): libFuzzer keeps the input.  Each input starts from the links as
 * the handshake left them (sequence 0).
 */
#include "fuzz_link.h"

#define NLINKS 8
#define HDR_MAX 64       /* the lanes' headers are 24 bytes */
#define PAYLOAD_MAX 4096 /* the lanes' payloads are chunks, up to MiBs: the cost is linear */
#define OPS_MAX 64

enum { FLIP_NONE, FLIP_HDR, FLIP_HEAD_TAG, FLIP_PAYLOAD, FLIP_BODY_TAG, FLIP_KINDS };

static mln_link_job_t jobs[NLINKS];
static mln_link_t conns[NLINKS], liss[NLINKS];

/* A frame as it travels: every part an exact-size heap block. */
typedef struct frame {
    size_t hlen, plen, htlen, btlen;
    uint8_t *hdr, *head_tag, *payload, *body_tag;
} frame_t;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* modes none, auth, auth + payload MAC, aead; then the same with the other cipher */
    static const int job_of[NLINKS] = {2, 0, 6, 1, 5, 3, 9, 4};

    (void)argc;
    (void)argv;
    for (int k = 0; k < NLINKS; k++) {
        fuzz_link_job(&jobs[k], job_of[k]);
        fuzz_link_pair(&jobs[k], &conns[k], &liss[k]);
    }
    return 0;
}

/* A heap block of exactly n bytes (0: one that ASan lets nothing touch). */
static uint8_t *block(size_t n)
{
    uint8_t *p = malloc(n);

    FUZZ_CHECK(p != NULL);
    return p;
}

static void frame_free(frame_t *f)
{
    free(f->hdr);
    free(f->head_tag);
    free(f->payload);
    free(f->body_tag);
    memset(f, 0, sizeof(*f));
}

static void frame_copy(frame_t *to, const frame_t *from)
{
    *to = *from;
    to->hdr = block(from->hlen);
    to->head_tag = block(from->htlen);
    to->payload = block(from->plen);
    to->body_tag = block(from->btlen);
    if (from->hlen)
        memcpy(to->hdr, from->hdr, from->hlen);
    if (from->htlen)
        memcpy(to->head_tag, from->head_tag, from->htlen);
    if (from->plen)
        memcpy(to->payload, from->payload, from->plen);
    if (from->btlen)
        memcpy(to->body_tag, from->body_tag, from->btlen);
}

/* Header and payload from the input, sealed by c (in place when `inplace`, else into a second
 * buffer); *plain keeps the payload as it was. */
static void frame_seal(mln_link_t *c, fuzz_in_t *in, int inplace, frame_t *f, uint8_t **plain)
{
    const mln_link_job_t *j = c->job;
    uint8_t *out;

    memset(f, 0, sizeof(*f));
    f->hlen = fuzz_len(in, 1, HDR_MAX);
    f->plen = fuzz_len(in, 2, PAYLOAD_MAX);
    f->htlen = mln_link_head_tag(j);
    f->btlen = mln_link_body_tag(j);
    f->hdr = fuzz_take(in, f->hlen);
    f->payload = fuzz_take(in, f->plen);
    f->head_tag = block(f->htlen);
    f->body_tag = block(f->btlen);
    *plain = block(f->plen);
    if (f->plen)
        memcpy(*plain, f->payload, f->plen);
    out = inplace ? f->payload : block(f->plen);
    mln_link_seal(c, f->hdr, f->hlen, f->htlen ? f->head_tag : NULL, f->payload, out, f->plen,
                  f->btlen ? f->body_tag : NULL);
    if (!inplace) {
        if (j->mode == MLN_LINK_AEAD) { /* the wire carries out; in must be untouched */
            FUZZ_CHECK(f->plen == 0 || memcmp(f->payload, *plain, f->plen) == 0);
            free(f->payload);
            f->payload = out;
        } else {
            free(out);
        }
    }
}

/* The listener opens f: 1 when head and body both pass.  The body is opened only after its
 * head passed, as a lane does. */
static int frame_open(mln_link_t *l, frame_t *f)
{
    if (!mln_link_open_head(l, f->hdr, f->hlen, f->head_tag))
        return 0;
    return mln_link_open_body(l, f->hdr, f->hlen, f->payload, f->plen, f->body_tag);
}

/* A genuine frame passes at l and gives back the payload it was sealed with. */
static void frame_pass(mln_link_t *l, frame_t *f, const uint8_t *plain)
{
    FUZZ_CHECK(frame_open(l, f) == 1);
    FUZZ_CHECK(f->plen == 0 || memcmp(f->payload, plain, f->plen) == 0);
}

static void op_forged(mln_link_t *l, fuzz_in_t *in)
{
    const mln_link_job_t *j = l->job;
    frame_t f = {0};
    int head, body;

    f.hlen = fuzz_len(in, 1, HDR_MAX);
    f.plen = fuzz_len(in, 2, PAYLOAD_MAX);
    f.htlen = mln_link_head_tag(j);
    f.btlen = mln_link_body_tag(j);
    f.hdr = fuzz_take(in, f.hlen);
    f.head_tag = fuzz_take(in, f.htlen);
    f.payload = fuzz_take(in, f.plen);
    f.body_tag = fuzz_take(in, f.btlen);
    head = mln_link_open_head(l, f.hdr, f.hlen, f.head_tag);
    FUZZ_CHECK(head == (j->mode == MLN_LINK_NONE));
    /* a body whose head failed is never opened by a lane; its tag must fail even so */
    body = mln_link_open_body(l, f.hdr, f.hlen, f.payload, f.plen, f.body_tag);
    FUZZ_CHECK(body == !mln_link_body_sealed(j));
    frame_free(&f);
}

static void op_sealed(mln_link_t *c, mln_link_t *l, fuzz_in_t *in, unsigned flags, frame_t *last)
{
    const mln_link_job_t *j = c->job;
    const int where = (int)((flags >> 1) % FLIP_KINDS);
    const unsigned bit = (unsigned)fuzz_uint(in, 2);
    frame_t f, bad;
    uint8_t *plain;

    frame_seal(c, in, flags & 1, &f, &plain);
    /* per part: its length, and whether a tag covers it (the header: auth and aead; the
     * payload: aead, and auth with the payload MAC) */
    const size_t len[FLIP_KINDS] = {0, f.hlen, f.htlen, f.plen, f.btlen};
    const int covered[FLIP_KINDS] = {0, f.htlen > 0, 1, mln_link_body_sealed(j), 1};
    if (len[where] == 0) {
        frame_pass(l, &f, plain);
    } else {
        frame_copy(&bad, &f);
        uint8_t *part[FLIP_KINDS] = {NULL, bad.hdr, bad.head_tag, bad.payload, bad.body_tag};
        part[where][(bit / 8) % len[where]] ^= (uint8_t)(1u << (bit % 8));
        if (!covered[where]) { /* none, or auth's payload without the MAC: passes as it is */
            FUZZ_CHECK(frame_open(l, &bad) == 1);
        } else if (where == FLIP_HDR || where == FLIP_HEAD_TAG) {
            FUZZ_CHECK(mln_link_open_head(l, bad.hdr, bad.hlen, bad.head_tag) == 0);
            frame_pass(l, &f, plain); /* the failure changed nothing */
        } else {
            FUZZ_CHECK(mln_link_open_head(l, f.hdr, f.hlen, f.head_tag) == 1);
            FUZZ_CHECK(
                mln_link_open_body(l, bad.hdr, bad.hlen, bad.payload, bad.plen, bad.body_tag) == 0);
            FUZZ_CHECK(mln_link_open_body(l, f.hdr, f.hlen, f.payload, f.plen, f.body_tag) == 1);
            FUZZ_CHECK(f.plen == 0 || memcmp(f.payload, plain, f.plen) == 0);
        }
        frame_free(&bad);
    }
    free(plain);
    /* kept for a replay, which needs only its head (an aead payload is plain text now) */
    frame_free(last);
    *last = f;
}

static void op_replay(mln_link_t *l, const frame_t *last)
{
    frame_t f;

    if (last->hdr == NULL)
        return;
    frame_copy(&f, last);
    FUZZ_CHECK(mln_link_open_head(l, f.hdr, f.hlen, f.head_tag) == (l->job->mode == MLN_LINK_NONE));
    frame_free(&f);
}

static void op_reorder(mln_link_t *c, mln_link_t *l, fuzz_in_t *in, unsigned flags)
{
    frame_t a, b;
    uint8_t *pa, *pb;

    frame_seal(c, in, flags & 1, &a, &pa);
    frame_seal(c, in, flags & 2, &b, &pb);
    FUZZ_CHECK(mln_link_open_head(l, b.hdr, b.hlen, b.head_tag) == (l->job->mode == MLN_LINK_NONE));
    if (l->job->mode != MLN_LINK_NONE) {
        frame_pass(l, &a, pa);
        frame_pass(l, &b, pb);
    }
    frame_free(&a);
    frame_free(&b);
    free(pa);
    free(pb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    const int k = (int)(fuzz_uint(&in, 1) % NLINKS);
    mln_link_t c = conns[k], l = liss[k];
    frame_t last = {0};

    for (int op = 0; op < OPS_MAX && in.n > 0; op++) {
        const unsigned byte = (unsigned)fuzz_uint(&in, 1);
        switch (byte & 3) {
        case 0:
            op_forged(&l, &in);
            break;
        case 1:
            op_sealed(&c, &l, &in, byte >> 2, &last);
            break;
        case 2:
            op_replay(&l, &last);
            break;
        default:
            op_reorder(&c, &l, &in, byte >> 2);
            break;
        }
    }
    frame_free(&last);
    mln_link_wipe(&c);
    mln_link_wipe(&l);
    return 0;
}
