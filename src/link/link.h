/*
 * link.h - the secure link layer: what a byte stream between two ranks of one job (a tcp lane
 * today, a gateway link of the relays later) needs to let no stranger in (docs/SECURITY.md).
 *
 *   job     a 32-byte key from getrandom at the root, shared over MPI at set-up (MPI is the
 *           trusted channel inside a job), the mode every rank agreed on, and every rank's
 *           X25519 public key (crypto_kx; each keeps its secret key): the key of a link
 *           needs the secret key of one of its two ranks besides the job key, so that whoever
 *           reads the job key off MPI's wire (MPI's own TCP is not encrypted) can neither read
 *           nor forge a lane
 *   link    one connection: a mutual challenge-response bound to the job, both ranks, the
 *           lane and the direction, which leaves both ends a key of this connection only
 *   frame   a header and a payload, sealed by the sender and opened by the receiver in
 *           order: each frame's tag covers its sequence number, so a frame replayed, dropped,
 *           reordered or moved to another link fails
 *
 * Handshake (connector C opens lane `lane` of `nlanes` from rank src to listener L, rank dst):
 *   C -> L  hello     {magic, version, mode, cipher, payload mac, lane, nlanes, src, dst,
 *                      job id, nonce_c}
 *   L -> C  challenge {magic, nonce_l, HMAC-SHA-256(K, "listener" | hello | nonce_l | D)}
 *   C -> L  response  {magic, HMAC-SHA-256(K, "connector" | hello | nonce_l | D)}
 * where D is the crypto_kx session key of the pair (src the client, dst the server: what src's
 * and dst's secret keys give with the other's public key), and both derive the link key
 * BLAKE2b(K; "link" | hello | nonce_l | D).  Mode `none` sends the
 * hello alone (today's behaviour: the job id names the job, nothing is proven).
 *
 * Frames (modes auth and aead), nonce = {sequence number, part}:
 *   head   AEAD tag over the header (as associated data, part 0): a MAC of header and seq
 *   body   aead: the payload encrypted, AD = header (part 1); auth with MLN_LINK_PAYLOAD=mac:
 *          an AEAD tag over the payload as associated data (part 1); auth: nothing
 * The AEAD is AES-256-GCM when every rank's CPU has it, ChaCha20-Poly1305 (IETF) otherwise.
 *
 * No part of this file calls MPI but mln_link_job_share (link_job.c), so that the parsers run
 * in fuzz targets alone.
 */
#ifndef MLN_LINK_H
#define MLN_LINK_H

#include "multilane_base.h"

#include <stddef.h>
#include <stdint.h>

#define MLN_LINK_KEY_BYTES 32
#define MLN_LINK_ID_BYTES 16
#define MLN_LINK_NONCE_BYTES 32
#define MLN_LINK_MAC_BYTES 32 /* handshake MACs (HMAC-SHA-256) */
#define MLN_LINK_TAG_BYTES 16 /* frame tags (GCM, Poly1305) */
#define MLN_LINK_HELLO_BYTES 72
#define MLN_LINK_CHALLENGE_BYTES 72
#define MLN_LINK_RESPONSE_BYTES 40

/* Order = the choices of MLN_LINK_SECURITY. */
typedef enum mln_link_mode {
    MLN_LINK_AUTH = 0,
    MLN_LINK_AEAD = 1,
    MLN_LINK_NONE = 2
} mln_link_mode_t;
/* Order = the choices of MLN_LINK_CIPHER. */
typedef enum mln_link_cipher {
    MLN_LINK_CIPHER_AUTO = 0,
    MLN_LINK_CIPHER_AES = 1,
    MLN_LINK_CIPHER_CHACHA = 2
} mln_link_cipher_t;

/* What every rank of one job shares. */
typedef struct mln_link_job {
    int mode;        /* a mln_link_mode_t */
    int cipher;      /* MLN_LINK_CIPHER_AES or _CHACHA (never AUTO once shared) */
    int payload_mac; /* auth: the payload's integrity is checked too */
    unsigned char key[MLN_LINK_KEY_BYTES];
    unsigned char id[MLN_LINK_ID_BYTES]; /* public: names the job in hellos (derived from key) */
    unsigned char pk[MLN_LINK_KEY_BYTES], sk[MLN_LINK_KEY_BYTES]; /* this rank's X25519 pair */
    unsigned char *pks; /* every rank's public key (nranks x 32; NULL: no pair keys, as in the
                         * fuzz targets, D is then all zero) */
    int nranks;
} mln_link_job_t;

/* The fields of a hello, decoded. */
typedef struct mln_link_hello {
    uint32_t lane, nlanes;
    int32_t src, dst;
} mln_link_hello_t;

/* One connection, one direction of frames (the connector sends them).  Opaque: its size is
 * fixed so that lanes embed it. */
typedef struct mln_link {
    const mln_link_job_t *job;
    unsigned char hello[MLN_LINK_HELLO_BYTES]; /* as sent / as received */
    unsigned char pair[MLN_LINK_KEY_BYTES];    /* D: the two ranks' crypto_kx session key */
    unsigned char nonce_l[MLN_LINK_NONCE_BYTES];
    uint64_t seq;     /* the next frame's sequence number */
    uint64_t current; /* the sequence number of the frame whose head was opened last */
    int up;           /* the handshake proved both ends and the key below is set */
    _Alignas(16) unsigned char state[512]; /* the cipher's expanded key (link.c) */
} mln_link_t;

/* ---- the job ------------------------------------------------------------------------------ */

/* The mode from cfg and a fresh key (getrandom; never time or pid).  No MPI. */
mln_status_t mln_link_job_init(mln_link_job_t *j, const mln_config_t *cfg);
/* Collective over comm: every rank gets the root's key and the common cipher (AES-256-GCM only
 * when every rank has it); a rank whose MLN_LINK_SECURITY differs stops all (one line). */
mln_status_t mln_link_job_share(mln_link_job_t *j, const mln_config_t *cfg, void *mpi_comm);
/* Forgets the job's key. */
void mln_link_job_wipe(mln_link_job_t *j);
const char *mln_link_mode_name(int mode);
const char *mln_link_cipher_name(int cipher);
/* The AEAD the running job's tcp lanes seal their frames with, as the ranks agreed
 * ("aes-256-gcm" or "chacha20-poly1305": MLN_LINK_CIPHER=auto resolved), "none" in mode none;
 * NULL while no tcp lanes are open (before mln_init, another backend).  For reports
 * (mln-stripe's params); defined in src/p2p/tcp_conn.c, which owns the lanes' job. */
const char *mln_link_cipher_in_use(void);
/* Bytes a frame carries beyond its header and payload: after the header, after the payload. */
size_t mln_link_head_tag(const mln_link_job_t *j);
size_t mln_link_body_tag(const mln_link_job_t *j);
/* 1 when the payload goes through a buffer of the receiver's before it reaches the user's
 * (its integrity is checked first: aead, or auth with the payload MAC). */
int mln_link_body_sealed(const mln_link_job_t *j);

/* ---- handshake ---------------------------------------------------------------------------- */

/* Connector: the hello of a new link (fresh nonce) into out. */
mln_status_t mln_link_hello_make(mln_link_t *l, const mln_link_job_t *j, const mln_link_hello_t *h,
                                 unsigned char out[MLN_LINK_HELLO_BYTES]);
/* Listener: parses n bytes of a hello; 1 with *h filled when it is a hello of this job, in
 * this job's mode, meant for rank `me` of `wsize`; else 0 and *why says what was wrong.
 * Trusts no field. */
int mln_link_hello_parse(const mln_link_job_t *j, const unsigned char *in, size_t n, int wsize,
                         int me, mln_link_hello_t *h, const char **why);
/* Listener: after a good hello, the challenge to send back (fresh nonce) into out. */
mln_status_t mln_link_challenge_make(mln_link_t *l, const mln_link_job_t *j,
                                     const unsigned char hello[MLN_LINK_HELLO_BYTES],
                                     unsigned char out[MLN_LINK_CHALLENGE_BYTES]);
/* Connector: checks the listener's challenge (it knows the key, for this hello); 1 with the
 * response in out and the link up, else 0. */
int mln_link_challenge_check(mln_link_t *l, const unsigned char *in, size_t n,
                             unsigned char out[MLN_LINK_RESPONSE_BYTES]);
/* Listener: checks the connector's response; 1 with the link up, else 0.  (A hello whose
 * pair key cannot be made, a public key of no use, fails challenge_make: MLN_ERR_DATA.) */
int mln_link_response_check(mln_link_t *l, const unsigned char *in, size_t n);
/* Mode none: no handshake, the link is up (frames pass as they are). */
void mln_link_plain(mln_link_t *l, const mln_link_job_t *j);

/* ---- frames ------------------------------------------------------------------------------- */

/* Sender, in the order the frames go on the wire: head_tag over the header, and the payload:
 * aead: encrypted from `in` into `out` (len bytes; may be the same), tag into body_tag; auth
 * with the payload MAC: body_tag over `in` (out unused).  Either tag pointer may be NULL when
 * its size is 0. */
void mln_link_seal(mln_link_t *l, const void *hdr, size_t hlen, unsigned char *head_tag,
                   const void *in, void *out, size_t len, unsigned char *body_tag);
/* Receiver: 1 when the header's tag is right for the next frame (which it becomes), else 0. */
int mln_link_open_head(mln_link_t *l, const void *hdr, size_t hlen, const unsigned char *tag);
/* Receiver: the payload of the frame whose head opened last, in place (aead: decrypted); 1
 * when its tag is right, else 0 (its bytes must not be used). */
int mln_link_open_body(mln_link_t *l, const void *hdr, size_t hlen, void *buf, size_t len,
                       const unsigned char *tag);
/* Forgets the link's secrets. */
void mln_link_wipe(mln_link_t *l);

#endif /* MLN_LINK_H */
