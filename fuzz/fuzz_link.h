/*
 * fuzz_link.h - jobs and links for the link layer's fuzz targets (fuzz_hello.c, fuzz_frames.c):
 * a job of each mode with a fixed key, and a connector and a listener that ran the handshake
 * in this process (hello, challenge, response), as two ranks' lanes would over a socket.
 */
#ifndef MLN_FUZZ_LINK_H
#define MLN_FUZZ_LINK_H

#include "fuzz.h"
#include "link_int.h"

#include <sodium.h>

/* Every job the targets try: 3 modes x 2 ciphers x the payload MAC off and on. */
#define FUZZ_NJOBS 12

/* Job number k (0 <= k < FUZZ_NJOBS): mode k % 3, cipher (k / 3) % 2, payload MAC k / 6.  A
 * fixed key, and its public id derived as mln_link_job_share does (BLAKE2b of the key).  AES
 * where this CPU has no AES-GCM becomes ChaCha (mln_link_job_share's choice too). */
static inline void fuzz_link_job(mln_link_job_t *j, int k)
{
    static const char label[] = "multilane job id";

    FUZZ_CHECK(sodium_init() >= 0);
    memset(j, 0, sizeof(*j));
    j->mode = k % 3;
    j->cipher = (k / 3) % 2 ? MLN_LINK_CIPHER_CHACHA : MLN_LINK_CIPHER_AES;
    if (!crypto_aead_aes256gcm_is_available())
        j->cipher = MLN_LINK_CIPHER_CHACHA;
    j->payload_mac = k / 6;
    for (size_t i = 0; i < sizeof(j->key); i++)
        j->key[i] = (unsigned char)(0xa5 ^ (i * 7));
    crypto_generichash(j->id, sizeof(j->id), (const unsigned char *)label, sizeof(label), j->key,
                       sizeof(j->key));
}

/* Lane 0 of 1 from rank 0 to rank 1 of 2, up at both ends: the full handshake (modes auth and
 * aead), or mln_link_plain (none).  Any step that fails is a finding. */
static inline void fuzz_link_pair(const mln_link_job_t *j, mln_link_t *conn, mln_link_t *lis)
{
    const mln_link_hello_t h = {.lane = 0, .nlanes = 1, .src = 0, .dst = 1};
    unsigned char hello[MLN_LINK_HELLO_BYTES], ch[MLN_LINK_CHALLENGE_BYTES];
    unsigned char resp[MLN_LINK_RESPONSE_BYTES];
    mln_link_hello_t got;
    const char *why = NULL;

    if (j->mode == MLN_LINK_NONE) {
        memset(conn, 0, sizeof(*conn));
        memset(lis, 0, sizeof(*lis));
        mln_link_plain(conn, j);
        mln_link_plain(lis, j);
        return;
    }
    FUZZ_CHECK(mln_link_hello_make(conn, j, &h, hello) == MLN_OK);
    FUZZ_CHECK(mln_link_hello_parse(j, hello, sizeof(hello), 2, 1, &got, &why) == 1);
    FUZZ_CHECK(mln_link_challenge_make(lis, j, hello, ch) == MLN_OK);
    FUZZ_CHECK(mln_link_challenge_check(conn, ch, sizeof(ch), resp) == 1);
    FUZZ_CHECK(mln_link_response_check(lis, resp, sizeof(resp)) == 1);
}

#endif /* MLN_FUZZ_LINK_H */
