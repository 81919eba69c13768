/*
 * link.c - the secure link layer's handshake and frames (link.h), on libsodium: HMAC-SHA-256
 * (crypto_auth_hmacsha256) proves the key in the handshake, keyed BLAKE2b
 * (crypto_generichash) derives each link's key, and an AEAD (crypto_aead_aes256gcm or
 * crypto_aead_chacha20poly1305_ietf) seals the frames.  No cryptography of our own: this file
 * only decides what goes into each call.
 *
 * Cost per frame: auth, one AEAD over the 24-byte header (< 1 us); with the payload MAC, a
 * GHASH or Poly1305 pass over the payload; aead, one encryption pass (AES-NI or ChaCha20) and
 * one copy on the receiver (docs/SECURITY.md has the measured rates).
 */
#include "link_int.h"

#include "mln_core.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char *const mode_names[] = {"auth", "aead", "none"};
static const char *const cipher_names[] = {"auto", "aes-256-gcm", "chacha20-poly1305"};

const char *mln_link_mode_name(int mode)
{
    return mode >= 0 && mode <= MLN_LINK_NONE ? mode_names[mode] : "?";
}

const char *mln_link_cipher_name(int cipher)
{
    return cipher >= 0 && cipher <= MLN_LINK_CIPHER_CHACHA ? cipher_names[cipher] : "?";
}

/* n bytes from the kernel's random source (getrandom: never time, pid or an address). */
static mln_status_t random_bytes(unsigned char *out, size_t n)
{
    for (size_t got = 0; got < n;) {
        const ssize_t k = getrandom(out + got, n - got, 0);
        if (k < 0 && errno != EINTR) {
            MLN_ERROR("getrandom failed: %s", strerror(errno));
            return MLN_ERR_SYS;
        }
        got += k > 0 ? (size_t)k : 0;
    }
    return MLN_OK;
}

mln_status_t mln_link_job_init(mln_link_job_t *j, const mln_config_t *cfg)
{
    *j = (mln_link_job_t){.mode = cfg->link_security,
                          .cipher = cfg->link_cipher,
                          .payload_mac = cfg->link_payload_mac};
    unsigned char seed[crypto_kx_SEEDBYTES];
    mln_status_t st;

    if (sodium_init() < 0) {
        MLN_ERROR("libsodium cannot start (sodium_init failed)");
        return MLN_ERR_SYS;
    }
    st = random_bytes(j->key, sizeof(j->key));
    if (st == MLN_OK)
        st = random_bytes(seed, sizeof(seed));
    if (st == MLN_OK && crypto_kx_seed_keypair(j->pk, j->sk, seed) != 0)
        st = MLN_ERR_SYS;
    sodium_memzero(seed, sizeof(seed));
    return st;
}

/* D of a link from rank src (the client) to rank dst (the server), on the side of rank `me`
 * (src or dst); 0 when the other's public key is of no use. */
static int pair_key(const mln_link_job_t *j, int src, int dst, unsigned char out[32])
{
    unsigned char rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES];
    int ok;

    memset(out, 0, 32);
    if (j->pks == NULL)
        return 1;
    if (src < 0 || src >= j->nranks || dst < 0 || dst >= j->nranks || src == dst)
        return 1; /* a hello naming no other rank of the job: refused by its parser anyway */
    if (memcmp(j->pk, j->pks + 32 * (size_t)src, 32) == 0) /* we are src: the client */
        ok = crypto_kx_client_session_keys(rx, tx, j->pk, j->sk, j->pks + 32 * (size_t)dst) == 0;
    else /* we are dst: the server; the client's tx is our rx */
        ok = crypto_kx_server_session_keys(tx, rx, j->pk, j->sk, j->pks + 32 * (size_t)src) == 0;
    if (ok)
        memcpy(out, tx, 32); /* client tx = server rx: swapped above so both call it tx */
    sodium_memzero(rx, sizeof(rx));
    sodium_memzero(tx, sizeof(tx));
    return ok;
}

void mln_link_job_wipe(mln_link_job_t *j)
{
    free(j->pks);
    sodium_memzero(j, sizeof(*j));
}

size_t mln_link_head_tag(const mln_link_job_t *j)
{
    return j->mode == MLN_LINK_NONE ? 0 : MLN_LINK_TAG_BYTES;
}

size_t mln_link_body_tag(const mln_link_job_t *j)
{
    return j->mode == MLN_LINK_AEAD || (j->mode == MLN_LINK_AUTH && j->payload_mac)
               ? MLN_LINK_TAG_BYTES
               : 0;
}

int mln_link_body_sealed(const mln_link_job_t *j)
{
    return mln_link_body_tag(j) > 0;
}

/* ---- handshake ---------------------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, sizeof(v));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* HMAC-SHA-256 under the job key of label | hello | nonce_l: who is proving, to whom, what. */
static void handshake_mac(const mln_link_t *l, const char *label, unsigned char *mac)
{
    crypto_auth_hmacsha256_state st;

    crypto_auth_hmacsha256_init(&st, l->job->key, sizeof(l->job->key));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label) + 1);
    crypto_auth_hmacsha256_update(&st, l->hello, sizeof(l->hello));
    crypto_auth_hmacsha256_update(&st, l->nonce_l, sizeof(l->nonce_l));
    crypto_auth_hmacsha256_update(&st, l->pair, sizeof(l->pair));
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(&st, sizeof(st));
}

/* The key of this link only, from the whole handshake; the cipher keeps it expanded. */
static void link_key(mln_link_t *l)
{
    static const char label[] = "multilane link key";
    unsigned char k[crypto_aead_chacha20poly1305_IETF_KEYBYTES];
    crypto_generichash_state st;

    crypto_generichash_init(&st, l->job->key, sizeof(l->job->key), sizeof(k));
    crypto_generichash_update(&st, (const unsigned char *)label, sizeof(label));
    crypto_generichash_update(&st, l->hello, sizeof(l->hello));
    crypto_generichash_update(&st, l->nonce_l, sizeof(l->nonce_l));
    crypto_generichash_update(&st, l->pair, sizeof(l->pair));
    crypto_generichash_final(&st, k, sizeof(k));
    if (l->job->cipher == MLN_LINK_CIPHER_AES)
        crypto_aead_aes256gcm_beforenm((crypto_aead_aes256gcm_state *)(void *)l->state, k);
    else
        memcpy(l->state, k, sizeof(k));
    sodium_memzero(k, sizeof(k));
    sodium_memzero(&st, sizeof(st));
    l->seq = 0;
    l->up = 1;
}

mln_status_t mln_link_hello_make(mln_link_t *l, const mln_link_job_t *j, const mln_link_hello_t *h,
                                 unsigned char out[MLN_LINK_HELLO_BYTES])
{
    mln_status_t st;

    *l = (mln_link_t){.job = j};
    memset(out, 0, MLN_LINK_HELLO_BYTES);
    put_u32(out + HELLO_MAGIC, LINK_HELLO_MAGIC);
    out[HELLO_VERSION] = LINK_VERSION;
    out[HELLO_MODE] = (unsigned char)j->mode;
    out[HELLO_CIPHER] = (unsigned char)j->cipher;
    out[HELLO_PMAC] = (unsigned char)(j->payload_mac != 0);
    put_u32(out + HELLO_LANE, h->lane);
    put_u32(out + HELLO_NLANES, h->nlanes);
    put_u32(out + HELLO_SRC, (uint32_t)h->src);
    put_u32(out + HELLO_DST, (uint32_t)h->dst);
    memcpy(out + HELLO_JOB, j->id, MLN_LINK_ID_BYTES);
    st = random_bytes(out + HELLO_NONCE, MLN_LINK_NONCE_BYTES);
    memcpy(l->hello, out, MLN_LINK_HELLO_BYTES);
    if (st == MLN_OK && !pair_key(j, h->src, h->dst, l->pair)) {
        MLN_ERROR("link: no pair key with world rank %d (its public key is of no use)", h->dst);
        st = MLN_ERR_DATA;
    }
    return st;
}

int mln_link_hello_parse(const mln_link_job_t *j, const unsigned char *in, size_t n, int wsize,
                         int me, mln_link_hello_t *h, const char **why)
{
    *why = NULL;
    if (n != MLN_LINK_HELLO_BYTES || get_u32(in + HELLO_MAGIC) != LINK_HELLO_MAGIC)
        *why = "not a hello of Multilane's lanes";
    else if (in[HELLO_VERSION] != LINK_VERSION)
        *why = "a hello of another version of Multilane";
    else if (sodium_memcmp(in + HELLO_JOB, j->id, MLN_LINK_ID_BYTES) != 0)
        *why = "a hello of another job";
    else if (in[HELLO_MODE] != j->mode || in[HELLO_PMAC] != (j->payload_mac != 0) ||
             (j->mode != MLN_LINK_NONE && in[HELLO_CIPHER] != j->cipher))
        *why = "a hello in another MLN_LINK_SECURITY mode";
    if (*why != NULL)
        return 0;
    h->lane = get_u32(in + HELLO_LANE);
    h->nlanes = get_u32(in + HELLO_NLANES);
    h->src = (int32_t)get_u32(in + HELLO_SRC);
    h->dst = (int32_t)get_u32(in + HELLO_DST);
    if (h->src < 0 || h->src >= wsize)
        *why = "a hello from no rank of this job";
    else if (h->dst != me)
        *why = "a hello meant for another rank";
    else if (h->nlanes == 0 || h->nlanes > LINK_MAX_LANES || h->lane >= h->nlanes)
        *why = "a hello with a lane number out of range";
    return *why == NULL;
}

mln_status_t mln_link_challenge_make(mln_link_t *l, const mln_link_job_t *j,
                                     const unsigned char hello[MLN_LINK_HELLO_BYTES],
                                     unsigned char out[MLN_LINK_CHALLENGE_BYTES])
{
    mln_status_t st;

    *l = (mln_link_t){.job = j};
    memcpy(l->hello, hello, MLN_LINK_HELLO_BYTES);
    st = random_bytes(l->nonce_l, sizeof(l->nonce_l));
    if (st == MLN_OK &&
        !pair_key(j, (int)get_u32(hello + HELLO_SRC), (int)get_u32(hello + HELLO_DST), l->pair))
        st = MLN_ERR_DATA;
    memset(out, 0, MLN_LINK_CHALLENGE_BYTES);
    put_u32(out, LINK_CHALLENGE_MAGIC);
    memcpy(out + CHALLENGE_NONCE, l->nonce_l, MLN_LINK_NONCE_BYTES);
    handshake_mac(l, "listener", out + CHALLENGE_MAC);
    return st;
}

int mln_link_challenge_check(mln_link_t *l, const unsigned char *in, size_t n,
                             unsigned char out[MLN_LINK_RESPONSE_BYTES])
{
    unsigned char mac[MLN_LINK_MAC_BYTES];

    if (n != MLN_LINK_CHALLENGE_BYTES || get_u32(in) != LINK_CHALLENGE_MAGIC ||
        get_u32(in + 4) != 0) /* reserved: zero (no MAC covers it) */
        return 0;
    memcpy(l->nonce_l, in + CHALLENGE_NONCE, MLN_LINK_NONCE_BYTES);
    handshake_mac(l, "listener", mac);
    if (crypto_verify_32(mac, in + CHALLENGE_MAC) != 0)
        return 0;
    memset(out, 0, MLN_LINK_RESPONSE_BYTES);
    put_u32(out, LINK_RESPONSE_MAGIC);
    handshake_mac(l, "connector", out + RESPONSE_MAC);
    link_key(l);
    return 1;
}

int mln_link_response_check(mln_link_t *l, const unsigned char *in, size_t n)
{
    unsigned char mac[MLN_LINK_MAC_BYTES];

    if (n != MLN_LINK_RESPONSE_BYTES || get_u32(in) != LINK_RESPONSE_MAGIC ||
        get_u32(in + 4) != 0) /* reserved: zero */
        return 0;
    handshake_mac(l, "connector", mac);
    if (crypto_verify_32(mac, in + RESPONSE_MAC) != 0)
        return 0;
    link_key(l);
    return 1;
}

void mln_link_plain(mln_link_t *l, const mln_link_job_t *j)
{
    l->job = j;
    l->up = 1;
}

void mln_link_wipe(mln_link_t *l)
{
    sodium_memzero(l, sizeof(*l));
}

/* ---- frames ------------------------------------------------------------------------------- */

static void nonce_of(uint64_t seq, int part, unsigned char npub[12])
{
    memset(npub, 0, 12);
    memcpy(npub, &seq, sizeof(seq));
    npub[8] = (unsigned char)part;
}

/* AEAD encryption of m (mlen, may be 0) with associated data ad: c (may be m) and a tag. */
static void aead_seal(const mln_link_t *l, uint64_t seq, int part, const void *ad, size_t adlen,
                      const void *m, void *c, size_t mlen, unsigned char *tag)
{
    unsigned char npub[12], none = 0;
    unsigned long long taglen;
    const unsigned char *mm = mlen ? (const unsigned char *)m : &none;
    unsigned char *cc = mlen ? (unsigned char *)c : &none;

    nonce_of(seq, part, npub);
    if (l->job->cipher == MLN_LINK_CIPHER_AES)
        crypto_aead_aes256gcm_encrypt_detached_afternm(
            cc, tag, &taglen, mm, mlen, ad, adlen, NULL, npub,
            (const crypto_aead_aes256gcm_state *)(const void *)l->state);
    else
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(cc, tag, &taglen, mm, mlen, ad, adlen,
                                                           NULL, npub, l->state);
}

/* The reverse: 1 when tag is right (c decrypted into m, which may be c), else 0. */
static int aead_open(const mln_link_t *l, uint64_t seq, int part, const void *ad, size_t adlen,
                     const void *c, void *m, size_t clen, const unsigned char *tag)
{
    unsigned char npub[12], none = 0;
    const unsigned char *cc = clen ? (const unsigned char *)c : &none;
    unsigned char *mm = clen ? (unsigned char *)m : &none;

    nonce_of(seq, part, npub);
    if (l->job->cipher == MLN_LINK_CIPHER_AES)
        return crypto_aead_aes256gcm_decrypt_detached_afternm(
                   mm, NULL, cc, clen, tag, ad, adlen, npub,
                   (const crypto_aead_aes256gcm_state *)(const void *)l->state) == 0;
    return crypto_aead_chacha20poly1305_ietf_decrypt_detached(mm, NULL, cc, clen, tag, ad, adlen,
                                                              npub, l->state) == 0;
}

void mln_link_seal(mln_link_t *l, const void *hdr, size_t hlen, unsigned char *head_tag,
                   const void *in, void *out, size_t len, unsigned char *body_tag)
{
    const mln_link_job_t *j = l->job;

    if (j->mode == MLN_LINK_NONE)
        return;
    aead_seal(l, l->seq, PART_HEAD, hdr, hlen, NULL, NULL, 0, head_tag);
    if (j->mode == MLN_LINK_AEAD)
        aead_seal(l, l->seq, PART_BODY, hdr, hlen, in, out, len, body_tag);
    else if (j->payload_mac)
        aead_seal(l, l->seq, PART_BODY, in, len, NULL, NULL, 0, body_tag);
    l->seq++;
}

int mln_link_open_head(mln_link_t *l, const void *hdr, size_t hlen, const unsigned char *tag)
{
    if (l->job->mode == MLN_LINK_NONE)
        return 1;
    if (!l->up || !aead_open(l, l->seq, PART_HEAD, hdr, hlen, NULL, NULL, 0, tag))
        return 0;
    l->current = l->seq++;
    return 1;
}

int mln_link_open_body(mln_link_t *l, const void *hdr, size_t hlen, void *buf, size_t len,
                       const unsigned char *tag)
{
    const mln_link_job_t *j = l->job;

    if (j->mode == MLN_LINK_AEAD)
        return aead_open(l, l->current, PART_BODY, hdr, hlen, buf, buf, len, tag);
    if (j->mode == MLN_LINK_AUTH && j->payload_mac)
        return aead_open(l, l->current, PART_BODY, buf, len, NULL, NULL, 0, tag);
    return 1;
}
