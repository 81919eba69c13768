/*
 * fuzz_relay_frame.c - libFuzzer target: the relays' frame parser and a relay connection
 * reading whatever arrives after its handshake (src/relay/relay_wire.c, relay_io.c).
 *
 * Input: {job u8, scope u8, header 56 bytes, then ops}.  The job: mode (none, auth, aead),
 * payload MAC, cipher.  The scope: a gateway's view of a rank's link, of a WAN link (site
 * ranges), or a rank's view of its gateway.  The 56 bytes go to mln_relay_hdr_parse alone:
 * what it accepts must re-encode to the same bytes and respect the scope.  Then a connector
 * and a listener make their two-way handshake over a socketpair in this process, and each op
 * puts bytes on the wire towards the listener: raw bytes (n <= 4096), a header of the input
 * sealed with the connector's key (so that it passes its tag in modes auth and aead and the
 * parser sees any field) with n payload bytes and their tag, a well-formed frame through
 * mln_relay_conn_queue, or one byte.  After each op the listener reads every whole frame:
 * each must be allowed by its scope, and its payload is touched to the last byte (ASan: not
 * one more); once the connection is dead it stays dead.  This links the wire and the link
 * layer alone (fuzz/log_sink.c for their log lines).
 */
#include "relay_int.h"

#include "fuzz.h"

#include <errno.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#define NRANKS 6 /* sites a:2, b:3, c:1 */
#define NSITES 3
#define TRUNKS 3
#define OPS_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mln_relay_scope_t scope_of(unsigned k)
{
    mln_relay_scope_t sc = {.nranks = NRANKS, .trunks = TRUNKS, .from_rank = -1, .to_rank = -1};

    switch (k % 4) {
    case 0: /* gateway (a, 1) <- rank 1 */
        sc.from_rank = 1;
        break;
    case 1: /* gateway (a, 1) <- gateway (b, 1): WAN */
        sc.src_first = 2;
        sc.src_count = 3;
        sc.dst_first = 0;
        sc.dst_count = 2;
        sc.peer_gw = mln_relay_gw_id(NRANKS, 1, 1);
        break;
    case 2: /* rank 1 <- gateway (a, 1) */
        sc.to_rank = 1;
        break;
    default: /* any */
        break;
    }
    return sc;
}

/* Every accepted header obeys the rules of relay_int.h and its scope. */
static void check_hdr(const mln_relay_hdr_t *h, const mln_relay_scope_t *sc)
{
    unsigned char w[MLN_RELAY_HDR_BYTES];
    mln_relay_hdr_t again;
    const char *why = NULL;

    FUZZ_CHECK(h->type >= MLN_RELAY_DATA && h->type < MLN_RELAY_TYPES);
    FUZZ_CHECK(h->trunk < sc->trunks && h->len <= MLN_RELAY_FRAME_MAX);
    if (h->type == MLN_RELAY_DATA)
        FUZZ_CHECK(h->total <= MLN_RELAY_MSG_MAX && h->offset <= h->total &&
                   h->len <= h->total - h->offset && h->tag >= 0);
    else
        FUZZ_CHECK(h->flags == 0 && h->total == 0);
    if (h->type <= MLN_RELAY_MATCHED)
        FUZZ_CHECK(h->dst >= 0 && h->dst < sc->nranks &&
                   (sc->to_rank < 0 || h->dst == sc->to_rank));
    else
        FUZZ_CHECK(h->dst == MLN_RELAY_ALL);
    if (h->type == MLN_RELAY_ABORT || h->type == MLN_RELAY_FAIL)
        FUZZ_CHECK(h->len <= MLN_RELAY_TEXT_MAX);
    if (h->type == MLN_RELAY_ACK || h->type == MLN_RELAY_MATCHED || h->type == MLN_RELAY_BYE)
        FUZZ_CHECK(h->len == 0);
    if (sc->from_rank >= 0)
        FUZZ_CHECK(h->src == sc->from_rank && h->type != MLN_RELAY_FAIL);
    else if (h->type == MLN_RELAY_FAIL || h->type == MLN_RELAY_BYE)
        FUZZ_CHECK(h->src >= sc->nranks && (sc->peer_gw <= 0 || h->src == sc->peer_gw));
    else
        FUZZ_CHECK(h->src >= 0 && h->src < sc->nranks &&
                   (sc->src_count <= 0 ||
                    (h->src >= sc->src_first && h->src < sc->src_first + sc->src_count)));
    mln_relay_hdr_encode(h, w);
    FUZZ_CHECK(mln_relay_hdr_parse(w, sizeof(w), sc, &again, &why) == 1);
}

/* Reads every whole frame at l; 0 once it is dead. */
static int drain(mln_relay_conn_t *l)
{
    mln_relay_hdr_t h;
    const unsigned char *pl = NULL;
    int r;

    while ((r = mln_relay_conn_read(l, &h, &pl)) == 1) {
        unsigned sum = 0;
        check_hdr(&h, &l->scope);
        for (uint32_t i = 0; i < h.len; i++)
            sum += pl[i];
        (void)sum;
    }
    if (r < 0) {
        FUZZ_CHECK(l->state == MLN_RELAY_CONN_DEAD && l->why[0] != '\0');
        FUZZ_CHECK(mln_relay_conn_read(l, &h, &pl) == -1);
    }
    return r == 0;
}

/* Writes n bytes to fd, reading at l whenever the socket is full; 0 once l is dead. */
static int put(int fd, mln_relay_conn_t *l, const void *p, size_t n)
{
    const unsigned char *b = p;

    while (n > 0) {
        const ssize_t k = send(fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k > 0) {
            b += k;
            n -= (size_t)k;
            continue;
        }
        FUZZ_CHECK(k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
        if (!drain(l))
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    const unsigned jk = (unsigned)fuzz_uint(&in, 1);
    const mln_relay_scope_t sc = scope_of((unsigned)fuzz_uint(&in, 1));
    const int endpoints = mln_relay_endpoints(NRANKS, NSITES);
    const int gw = mln_relay_gw_id(NRANKS, 0, 1);
    unsigned char secret[32], *hdr;
    mln_link_job_t job;
    mln_relay_conn_t c, l;
    mln_relay_hdr_t h;
    const char *why = NULL;
    int sv[2], alive = 1;

    /* the parser alone */
    hdr = fuzz_take(&in, MLN_RELAY_HDR_BYTES);
    if (mln_relay_hdr_parse(hdr, MLN_RELAY_HDR_BYTES, &sc, &h, &why)) {
        unsigned char w[MLN_RELAY_HDR_BYTES];
        check_hdr(&h, &sc);
        mln_relay_hdr_encode(&h, w);
        FUZZ_CHECK(memcmp(w, hdr, sizeof(w)) == 0); /* one encoding per header */
    } else {
        FUZZ_CHECK(why != NULL);
    }
    free(hdr);

    /* a connection up in this process, then the ops */
    memset(secret, 0x5c, sizeof(secret));
    FUZZ_CHECK(mln_relay_job_init(&job, secret, (int)(jk % 3),
                                  (jk / 6) % 2 && crypto_aead_aes256gcm_is_available()
                                      ? MLN_LINK_CIPHER_AES
                                      : MLN_LINK_CIPHER_CHACHA,
                                  (int)((jk / 3) % 2), NRANKS, NSITES) == MLN_OK);
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    mln_relay_conn_connect(&c, sv[0], &job, endpoints, 1, gw, 1, TRUNKS, 10.0);
    mln_relay_conn_accept(&l, sv[1], &job, endpoints, gw, 10.0);
    for (int i = 0, a = 0, b = 0; a != 1 || b != 1; i++) {
        FUZZ_CHECK(i < 100);
        a = mln_relay_conn_handshake(&c);
        b = mln_relay_conn_handshake(&l);
        FUZZ_CHECK(a >= 0 && b >= 0);
    }
    FUZZ_CHECK(l.peer == 1 && l.trunk == 1 && l.trunks == TRUNKS);
    l.scope = sc;

    for (int op = 0; op < OPS_MAX && in.n > 0 && alive; op++) {
        const unsigned sel = (unsigned)fuzz_uint(&in, 1);
        switch (sel % 4) {
        case 0: { /* raw bytes */
            const size_t n = fuzz_len(&in, 2, 4096);
            uint8_t *raw = fuzz_take(&in, n);
            alive = put(sv[0], &l, raw, n);
            free(raw);
            break;
        }
        case 1: { /* a header of the input, sealed: every field reaches the parser */
            unsigned char tag[MLN_LINK_TAG_BYTES], btag[MLN_LINK_TAG_BYTES];
            const size_t n = fuzz_len(&in, 2, 2048);
            uint8_t *w = fuzz_take(&in, MLN_RELAY_HDR_BYTES), *pl = fuzz_take(&in, n);
            mln_link_seal(&c.tx, w, MLN_RELAY_HDR_BYTES, tag, pl, pl, n, btag);
            alive = put(sv[0], &l, w, MLN_RELAY_HDR_BYTES) &&
                    put(sv[0], &l, tag, mln_link_head_tag(&job)) && put(sv[0], &l, pl, n) &&
                    (n == 0 || put(sv[0], &l, btag, mln_link_body_tag(&job)));
            free(w);
            free(pl);
            break;
        }
        case 2: { /* a well-formed frame through the connection's queue */
            mln_relay_oframe_t f;
            memset(&f, 0, sizeof(f));
            f.h.type = (uint8_t)(1 + fuzz_uint(&in, 1) % (MLN_RELAY_TYPES - 1));
            f.h.trunk = (uint16_t)(fuzz_uint(&in, 1) % TRUNKS);
            f.h.dst = (int32_t)(fuzz_uint(&in, 1) % (NRANKS + 1)) - 1;
            f.h.src = (int32_t)(fuzz_uint(&in, 1) % (NRANKS + 2 * MLN_RELAY_MAX_TRUNKS));
            f.h.len = (uint32_t)fuzz_len(&in, 2, 2048);
            f.h.total = f.h.len + fuzz_uint(&in, 1);
            f.own = fuzz_take(&in, f.h.len);
            f.payload = f.own;
            mln_relay_conn_queue(&c, &f);
            while (c.head != NULL && alive) {
                FUZZ_CHECK(mln_relay_conn_write(&c) >= 0);
                alive = drain(&l);
            }
            if (c.head != NULL) { /* the reader died first: the frame fails with the conn */
                mln_relay_conn_close(&c, "fuzz");
                FUZZ_CHECK(c.head == NULL);
            }
            break;
        }
        default: { /* one byte */
            const uint8_t byte = (uint8_t)fuzz_uint(&in, 1);
            alive = put(sv[0], &l, &byte, 1);
            break;
        }
        }
        if (alive)
            alive = drain(&l);
    }
    mln_relay_conn_close(&c, NULL);
    mln_relay_conn_close(&l, NULL);
    mln_link_job_wipe(&job);
    return 0;
}
