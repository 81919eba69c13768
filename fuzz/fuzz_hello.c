/*
 * fuzz_hello.c - libFuzzer target: the link layer's handshake parsers (src/link/link.c).
 *
 * Input: {wsize u8, me i8, n u8, n bytes of a hello, the rest}.  For each of the 12 jobs
 * (fuzz_link.h) the hello goes to mln_link_hello_parse (an exact-size copy: a read past n is a
 * finding).  What it accepts must be a hello of that job, in its mode, from a rank of wsize,
 * for rank me, with lane < nlanes <= LINK_MAX_LANES.  For an accepted hello:
 *   - the listener makes its challenge; the rest of the input, as the connector's response,
 *     must fail mln_link_response_check;
 *   - a connector with the same fields makes its own hello, which must parse to the same
 *     fields; the rest of the input, as the listener's challenge, must fail
 *     mln_link_challenge_check;
 *   - modes auth and aead: the genuine handshake of that connector with a listener, where a
 *     challenge and a response with one bit flipped (positions from the rest) must fail and the
 *     genuine ones then pass, and both ends then hold the same link key (a frame sealed by one
 *     opens at the other).
 */
#include "fuzz_link.h"

#define HELLO_MAX 255 /* n is one byte: hellos of every length around the right one */

static mln_link_job_t jobs[FUZZ_NJOBS];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (int k = 0; k < FUZZ_NJOBS; k++)
        fuzz_link_job(&jobs[k], k);
    return 0;
}

/* What the parser accepted is what the hello says, and in range. */
static void check_accepted(const mln_link_job_t *j, const uint8_t *hello, size_t n, int wsize,
                           int me, const mln_link_hello_t *h)
{
    uint32_t magic;

    FUZZ_CHECK(n == MLN_LINK_HELLO_BYTES);
    memcpy(&magic, hello + HELLO_MAGIC, sizeof(magic));
    FUZZ_CHECK(magic == LINK_HELLO_MAGIC && hello[HELLO_VERSION] == LINK_VERSION);
    FUZZ_CHECK(memcmp(hello + HELLO_JOB, j->id, MLN_LINK_ID_BYTES) == 0);
    FUZZ_CHECK(hello[HELLO_MODE] == j->mode && hello[HELLO_PMAC] == (j->payload_mac != 0));
    FUZZ_CHECK(j->mode == MLN_LINK_NONE || hello[HELLO_CIPHER] == j->cipher);
    FUZZ_CHECK(h->src >= 0 && h->src < wsize && h->dst == me);
    FUZZ_CHECK(h->nlanes >= 1 && h->nlanes <= LINK_MAX_LANES && h->lane < h->nlanes);
}

/* The genuine handshake of connector c (its hello made) with a new listener; flips from the
 * rest of the input (rest[0..1]: a bit of the challenge, rest[2..3]: one of the response). */
static void check_handshake(const mln_link_job_t *j, mln_link_t *c, const uint8_t *hello,
                            const uint8_t *rest, size_t rest_n)
{
    unsigned char ch[MLN_LINK_CHALLENGE_BYTES], bad[MLN_LINK_CHALLENGE_BYTES];
    unsigned char resp[MLN_LINK_RESPONSE_BYTES], hdr[24] = {1, 2, 3};
    unsigned char head_tag[MLN_LINK_TAG_BYTES], body_tag[MLN_LINK_TAG_BYTES];
    unsigned char payload[32] = {4, 5, 6}, sealed[sizeof(payload)];
    mln_link_t l;

    FUZZ_CHECK(mln_link_challenge_make(&l, j, hello, ch) == MLN_OK);
    if (rest_n >= 2) {
        const unsigned bit = (unsigned)(rest[0] | rest[1] << 8) % (8 * sizeof(ch));
        memcpy(bad, ch, sizeof(ch));
        bad[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        FUZZ_CHECK(mln_link_challenge_check(c, bad, sizeof(bad), resp) == 0);
        FUZZ_CHECK(!c->up);
    }
    FUZZ_CHECK(mln_link_challenge_check(c, ch, sizeof(ch), resp) == 1);
    if (rest_n >= 4) {
        const unsigned bit = (unsigned)(rest[2] | rest[3] << 8) % (8 * sizeof(resp));
        memcpy(bad, resp, sizeof(resp));
        bad[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        FUZZ_CHECK(mln_link_response_check(&l, bad, sizeof(resp)) == 0);
        FUZZ_CHECK(!l.up);
    }
    FUZZ_CHECK(mln_link_response_check(&l, resp, sizeof(resp)) == 1);
    /* the same link key at both ends: a frame sealed in place by one opens at the other */
    memcpy(sealed, payload, sizeof(payload));
    mln_link_seal(c, hdr, sizeof(hdr), head_tag, sealed, sealed, sizeof(sealed), body_tag);
    FUZZ_CHECK(mln_link_open_head(&l, hdr, sizeof(hdr), head_tag) == 1);
    FUZZ_CHECK(mln_link_open_body(&l, hdr, sizeof(hdr), sealed, sizeof(sealed), body_tag) == 1);
    FUZZ_CHECK(memcmp(sealed, payload, sizeof(payload)) == 0);
    mln_link_wipe(&l);
}

static void check_job(const mln_link_job_t *j, const uint8_t *hello, size_t n, int wsize, int me,
                      const uint8_t *rest, size_t rest_n)
{
    unsigned char ch[MLN_LINK_CHALLENGE_BYTES], resp[MLN_LINK_RESPONSE_BYTES];
    unsigned char mine[MLN_LINK_HELLO_BYTES];
    mln_link_hello_t h, again;
    mln_link_t l, c;
    const char *why = "unset";

    if (!mln_link_hello_parse(j, hello, n, wsize, me, &h, &why)) {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    FUZZ_CHECK(why == NULL);
    check_accepted(j, hello, n, wsize, me, &h);

    /* listener: a forged response (the rest) must not pass */
    FUZZ_CHECK(mln_link_challenge_make(&l, j, hello, ch) == MLN_OK);
    FUZZ_CHECK(mln_link_response_check(&l, rest, rest_n) == 0 && !l.up);
    mln_link_wipe(&l);

    /* connector: its own hello parses to the same fields; a forged challenge must not pass */
    FUZZ_CHECK(mln_link_hello_make(&c, j, &h, mine) == MLN_OK);
    FUZZ_CHECK(mln_link_hello_parse(j, mine, sizeof(mine), wsize, me, &again, &why) == 1);
    FUZZ_CHECK(again.lane == h.lane && again.nlanes == h.nlanes && again.src == h.src &&
               again.dst == h.dst);
    FUZZ_CHECK(mln_link_challenge_check(&c, rest, rest_n, resp) == 0 && !c.up);

    if (j->mode != MLN_LINK_NONE)
        check_handshake(j, &c, mine, rest, rest_n);
    mln_link_wipe(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    const int wsize = (int)fuzz_uint(&in, 1);
    const int me = (int)(int8_t)fuzz_uint(&in, 1);
    size_t n = fuzz_len(&in, 1, HELLO_MAX);
    uint8_t *hello, *rest;
    size_t rest_n;

    n = n < in.n ? n : in.n;
    hello = fuzz_take(&in, n);
    rest_n = in.n;
    rest = fuzz_take(&in, rest_n);
    for (int k = 0; k < FUZZ_NJOBS; k++)
        check_job(&jobs[k], hello, n, wsize, me, rest, rest_n);
    free(hello);
    free(rest);
    return 0;
}
