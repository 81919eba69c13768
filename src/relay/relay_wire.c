/*
 * relay_wire.c - the relays' frame header (relay_int.h, docs/RELAY.md "The wire"): encoding,
 * the one parser that trusts nothing, the run's link-layer job from the per-run secret, and
 * the sites of a run.  No MPI: the gateway, the tests and the fuzz targets link it alone.
 *
 * Header, 56 bytes, little-endian at fixed offsets whatever the host (sites may differ):
 *
 *    0 magic u32   4 version u8   5 type u8   6 flags u8   7 reserved u8 (0)
 *    8 trunk u16  10 reserved u16 (0)  12 dst i32  16 src i32  20 context u32
 *   24 tag i32    28 len u32    32 seq u64    40 total u64    48 offset u64
 *
 * The parser checks every field against the type and the link's scope before anything reads
 * a payload: a frame that passes says exactly how many bytes follow and where they may go.
 * Cost: a few dozen compares per frame.
 */
#include "relay_int.h"

#include "mln_core.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 4,
    OFF_TYPE = 5,
    OFF_FLAGS = 6,
    OFF_RES1 = 7,
    OFF_TRUNK = 8,
    OFF_RES2 = 10,
    OFF_DST = 12,
    OFF_SRC = 16,
    OFF_CONTEXT = 20,
    OFF_TAG = 24,
    OFF_LEN = 28,
    OFF_SEQ = 32,
    OFF_TOTAL = 40,
    OFF_OFFSET = 48
};

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void mln_relay_hdr_encode(const mln_relay_hdr_t *h, unsigned char out[MLN_RELAY_HDR_BYTES])
{
    memset(out, 0, MLN_RELAY_HDR_BYTES);
    put_le(out + OFF_MAGIC, MLN_RELAY_MAGIC, 4);
    out[OFF_VERSION] = MLN_RELAY_VERSION;
    out[OFF_TYPE] = h->type;
    out[OFF_FLAGS] = h->flags;
    put_le(out + OFF_TRUNK, h->trunk, 2);
    put_le(out + OFF_DST, (uint32_t)h->dst, 4);
    put_le(out + OFF_SRC, (uint32_t)h->src, 4);
    put_le(out + OFF_CONTEXT, h->context, 4);
    put_le(out + OFF_TAG, (uint32_t)h->tag, 4);
    put_le(out + OFF_LEN, h->len, 4);
    put_le(out + OFF_SEQ, h->seq, 8);
    put_le(out + OFF_TOTAL, h->total, 8);
    put_le(out + OFF_OFFSET, h->offset, 8);
}

/* 1 when id is the endpoint of a gateway of a run of nranks ranks and `trunks` trunks. */
static int is_gateway(int64_t id, int nranks, int trunks)
{
    return id >= nranks && id < (int64_t)nranks + MLN_RELAY_MAX_SITES * MLN_RELAY_MAX_TRUNKS &&
           (id - nranks) % MLN_RELAY_MAX_TRUNKS < trunks;
}

/* 1 when rank (a global rank) is allowed by [first, first + count) (count 0: any rank). */
static int in_range(int64_t rank, int nranks, int first, int count)
{
    if (rank < 0 || rank >= nranks)
        return 0;
    return count <= 0 || (rank >= first && rank - first < count);
}

/* The type-specific checks of a header whose common fields are sound; NULL or why not. */
static const char *check_type(const mln_relay_hdr_t *h, const mln_relay_scope_t *sc)
{
    const int data = h->type == MLN_RELAY_DATA, to_rank = h->type <= MLN_RELAY_MATCHED;
    const int from_gw =
        h->type == MLN_RELAY_FAIL || (h->type == MLN_RELAY_BYE && sc->from_rank < 0);

    if (!data && h->flags != 0)
        return "flags on a frame that is not DATA";
    if (data && (h->flags & ~(MLN_RELAY_F_SYNC | MLN_RELAY_F_LAST)) != 0)
        return "unknown flags";
    /* dst: a rank for DATA, ACK, MATCHED; ALL for the others */
    if (to_rank && !in_range(h->dst, sc->nranks, sc->dst_first, sc->dst_count))
        return "dst is no rank this link may deliver to";
    if (!to_rank && h->dst != MLN_RELAY_ALL)
        return "dst is not ALL";
    if (to_rank && sc->to_rank >= 0 && h->dst != sc->to_rank)
        return "dst is not the rank of this link";
    /* src: the link's rank; a rank of the range; or a gateway for FAIL and gateways' BYE */
    if (h->type == MLN_RELAY_FAIL && sc->from_rank >= 0)
        return "FAIL from a rank";
    if (from_gw) {
        if (!is_gateway(h->src, sc->nranks, sc->trunks))
            return "src is no gateway of this run";
        if (sc->peer_gw > 0 && h->src != sc->peer_gw)
            return "src is not the gateway of this link";
    } else if (sc->from_rank >= 0 ? h->src != sc->from_rank
                                  : !in_range(h->src, sc->nranks, sc->src_first, sc->src_count)) {
        return "src does not belong to this link";
    }
    /* the numbers each type carries; every other one is 0 */
    if (data ? h->tag < 0 : h->type != MLN_RELAY_ABORT && h->tag != 0)
        return data ? "negative tag" : "tag on a frame that carries none";
    if (h->type > MLN_RELAY_MATCHED && h->context != 0)
        return "context on a frame that carries none";
    if (h->type != MLN_RELAY_DATA && h->type != MLN_RELAY_MATCHED && h->seq != 0)
        return "seq on a frame that carries none";
    if (!data && h->total != 0)
        return "total on a frame that is not DATA";
    if (!data && h->type != MLN_RELAY_ACK && h->offset != 0)
        return "offset on a frame that carries none";
    if (data && h->total > MLN_RELAY_MSG_MAX)
        return "total beyond MLN_RELAY_MSG_MAX";
    if (data && (h->offset > h->total || h->len > h->total - h->offset))
        return "offset + len beyond total";
    if (data && h->len > MLN_RELAY_FRAME_MAX)
        return "len beyond MLN_RELAY_FRAME_MAX";
    if ((h->type == MLN_RELAY_ABORT || h->type == MLN_RELAY_FAIL) && h->len > MLN_RELAY_TEXT_MAX)
        return "text beyond MLN_RELAY_TEXT_MAX";
    if ((h->type == MLN_RELAY_ACK || h->type == MLN_RELAY_MATCHED || h->type == MLN_RELAY_BYE) &&
        h->len != 0)
        return "payload on a frame that carries none";
    return NULL;
}

int mln_relay_hdr_parse(const unsigned char *in, size_t n, const mln_relay_scope_t *scope,
                        mln_relay_hdr_t *h, const char **why)
{
    mln_relay_hdr_t d;
    const char *bad = NULL;

    if (n != MLN_RELAY_HDR_BYTES || get_le(in + OFF_MAGIC, 4) != MLN_RELAY_MAGIC)
        bad = "not a relay frame (magic)";
    else if (in[OFF_VERSION] != MLN_RELAY_VERSION)
        bad = "a frame of another version";
    else if (in[OFF_RES1] != 0 || get_le(in + OFF_RES2, 2) != 0)
        bad = "reserved bytes not zero";
    else if (in[OFF_TYPE] < MLN_RELAY_DATA || in[OFF_TYPE] >= MLN_RELAY_TYPES)
        bad = "unknown type";
    if (bad == NULL) {
        d = (mln_relay_hdr_t){.type = in[OFF_TYPE],
                              .flags = in[OFF_FLAGS],
                              .trunk = (uint16_t)get_le(in + OFF_TRUNK, 2),
                              .dst = (int32_t)(uint32_t)get_le(in + OFF_DST, 4),
                              .src = (int32_t)(uint32_t)get_le(in + OFF_SRC, 4),
                              .context = (uint32_t)get_le(in + OFF_CONTEXT, 4),
                              .tag = (int32_t)(uint32_t)get_le(in + OFF_TAG, 4),
                              .len = (uint32_t)get_le(in + OFF_LEN, 4),
                              .seq = get_le(in + OFF_SEQ, 8),
                              .total = get_le(in + OFF_TOTAL, 8),
                              .offset = get_le(in + OFF_OFFSET, 8)};
        if (scope == NULL || scope->nranks <= 0 || scope->trunks <= 0)
            bad = "no scope for this link";
        else if (d.trunk >= scope->trunks)
            bad = "trunk out of range";
        else
            bad = check_type(&d, scope);
    }
    if (why != NULL)
        *why = bad;
    if (bad != NULL)
        return 0;
    *h = d;
    return 1;
}

/* ---- the run's job ------------------------------------------------------------------------- */

mln_status_t mln_relay_job_init(mln_link_job_t *j, const unsigned char secret[32], int mode,
                                int cipher, int payload_mac, int nranks, int nsites)
{
    static const char key_label[] = "multilane relay";
    static const char id_label[] = "multilane job id"; /* as link_job.c's job_id */

    if (sodium_init() < 0) {
        MLN_ERROR("libsodium cannot start (sodium_init failed)");
        return MLN_ERR_SYS;
    }
    if (mode < MLN_LINK_AUTH || mode > MLN_LINK_NONE || nranks <= 0 || nsites <= 0 ||
        nsites > MLN_RELAY_MAX_SITES) {
        MLN_ERROR("relay: a job of mode %d for %d ranks in %d sites cannot be", mode, nranks,
                  nsites);
        return MLN_ERR_ARG;
    }
    if (cipher == MLN_LINK_CIPHER_AES && !crypto_aead_aes256gcm_is_available()) {
        MLN_ERROR("MLN_LINK_CIPHER=aes: this CPU has no AES-GCM in hardware (AES-NI and PCLMUL); "
                  "use chacha or auto");
        return MLN_ERR_CONFIG;
    }
    *j = (mln_link_job_t){.mode = mode,
                          /* auto: ChaCha20-Poly1305, which every site's CPU runs */
                          .cipher = cipher == MLN_LINK_CIPHER_AES ? MLN_LINK_CIPHER_AES
                                                                  : MLN_LINK_CIPHER_CHACHA,
                          .payload_mac = payload_mac != 0,
                          .pks = NULL, /* no pair keys: D = 0 */
                          .nranks = mln_relay_endpoints(nranks, nsites)};
    crypto_generichash(j->key, sizeof(j->key), (const unsigned char *)key_label, sizeof(key_label),
                       secret, 32);
    crypto_generichash(j->id, sizeof(j->id), (const unsigned char *)id_label, sizeof(id_label),
                       j->key, sizeof(j->key));
    return MLN_OK;
}

mln_status_t mln_relay_secret_from_env(unsigned char out[32])
{
    const char *text = getenv("MLN_GRID_SECRET");
    unsigned char key[32];
    size_t got = 0;
    const char *end = NULL;
    mln_status_t st = MLN_OK;

    if (sodium_init() < 0) {
        MLN_ERROR("libsodium cannot start (sodium_init failed)");
        return MLN_ERR_SYS;
    }
    if (text == NULL || text[0] == '\0') {
        MLN_ERROR("MLN_GRID_SECRET is not set: the run's secret (64 hex digits, given by "
                  "`multilane grid run`) is needed");
        return MLN_ERR_CONFIG;
    }
    if (strlen(text) != 64 || sodium_hex2bin(key, sizeof(key), text, 64, NULL, &got, &end) != 0 ||
        got != 32 || end != text + 64) {
        MLN_ERROR("MLN_GRID_SECRET is malformed: 64 hex digits expected (%zu characters given)",
                  strlen(text));
        st = MLN_ERR_CONFIG;
    } else {
        memcpy(out, key, sizeof(key));
    }
    sodium_memzero(key, sizeof(key));
    unsetenv("MLN_GRID_SECRET"); /* children do not inherit it */
    return st;
}

/* ---- sites ------------------------------------------------------------------------------- */

#define SITE_RANKS_MAX (1 << 20) /* ranks of one site, at most */

/* One "name:count" of text (n bytes) into s's next site; NULL or why not. */
static const char *site_parse(const char *text, size_t n, mln_relay_sites_t *s)
{
    const char *colon = memchr(text, ':', n);
    size_t namelen;
    int64_t count = 0;
    char num[16];

    if (s->nsites == MLN_RELAY_MAX_SITES)
        return "too many sites (at most 64)";
    if (colon == NULL)
        return "a site without ':COUNT'";
    namelen = (size_t)(colon - text);
    if (namelen < 1 || namelen > 8 || text[0] < 'a' || text[0] > 'z')
        return "a site name must be 1 to 8 of [a-z0-9], starting with a letter";
    for (size_t i = 1; i < namelen; i++)
        if (!((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= '0' && text[i] <= '9')))
            return "a site name must be 1 to 8 of [a-z0-9], starting with a letter";
    if (n - namelen - 1 < 1 || n - namelen - 1 >= sizeof(num))
        return "a site's rank count is missing or too long";
    memcpy(num, colon + 1, n - namelen - 1);
    num[n - namelen - 1] = '\0';
    for (const char *p = num; *p; p++) { /* at most 15 digits: no overflow */
        if (*p < '0' || *p > '9')
            return "a site's rank count must be a positive number";
        count = count * 10 + (*p - '0');
    }
    if (count < 1 || count > SITE_RANKS_MAX)
        return "a site's rank count must be 1 to 1048576";
    for (int i = 0; i < s->nsites; i++)
        if (strlen(s->name[i]) == namelen && memcmp(s->name[i], text, namelen) == 0)
            return "a site is named twice";
    if (s->nranks > SITE_RANKS_MAX * 8 - count)
        return "too many ranks";
    memcpy(s->name[s->nsites], text, namelen);
    s->name[s->nsites][namelen] = '\0';
    s->first[s->nsites] = s->nranks;
    s->size[s->nsites] = (int)count;
    s->nranks += (int)count;
    s->nsites++;
    return NULL;
}

mln_status_t mln_relay_sites_parse(const char *text, mln_relay_sites_t *out, const char **why)
{
    mln_relay_sites_t s;
    const char *bad = NULL, *p = text;

    memset(&s, 0, sizeof(s));
    if (text == NULL || text[0] == '\0')
        bad = "no sites";
    while (bad == NULL && p != NULL) {
        const char *comma = strchr(p, ',');
        const size_t n = comma ? (size_t)(comma - p) : strlen(p);
        bad = site_parse(p, n, &s);
        p = comma ? comma + 1 : NULL;
    }
    if (why != NULL)
        *why = bad;
    if (bad != NULL)
        return MLN_ERR_CONFIG;
    *out = s;
    return MLN_OK;
}

int mln_relay_site_of(const mln_relay_sites_t *s, int rank)
{
    if (rank < 0 || rank >= s->nranks)
        return -1;
    for (int i = 0; i < s->nsites; i++)
        if (rank - s->first[i] < s->size[i])
            return i;
    return -1;
}

int mln_relay_site_index(const mln_relay_sites_t *s, const char *name)
{
    for (int i = 0; name != NULL && i < s->nsites; i++)
        if (strcmp(s->name[i], name) == 0)
            return i;
    return -1;
}
