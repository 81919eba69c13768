/*
 * link_int.h - the link layer's wire layout (link.c and link_job.c only; users see link.h).
 * Fields are in the host's byte order, like every frame of the lanes (one job, one kind of
 * machine); a peer of the other order fails the hello (magic), never anything later.
 */
#ifndef MLN_LINK_INT_H
#define MLN_LINK_INT_H

#include "link.h"

#define LINK_HELLO_MAGIC 0x4d4c4e48u     /* "MLNH" */
#define LINK_CHALLENGE_MAGIC 0x4d4c4e43u /* "MLNC" */
#define LINK_RESPONSE_MAGIC 0x4d4c4e52u  /* "MLNR" */
#define LINK_VERSION 1
#define LINK_MAX_LANES 64

/* hello: offsets of its fields */
enum {
    HELLO_MAGIC = 0,   /* u32 */
    HELLO_VERSION = 4, /* u8 */
    HELLO_MODE = 5,    /* u8 */
    HELLO_CIPHER = 6,  /* u8 */
    HELLO_PMAC = 7,    /* u8 */
    HELLO_LANE = 8,    /* u32 */
    HELLO_NLANES = 12, /* u32 */
    HELLO_SRC = 16,    /* i32 */
    HELLO_DST = 20,    /* i32 */
    HELLO_JOB = 24,    /* MLN_LINK_ID_BYTES */
    HELLO_NONCE = 40,  /* MLN_LINK_NONCE_BYTES */
};
/* challenge: magic, 4 zero bytes, the listener's nonce, its MAC */
enum { CHALLENGE_NONCE = 8, CHALLENGE_MAC = 40 };
/* response: magic, 4 zero bytes, the connector's MAC */
enum { RESPONSE_MAC = 8 };

/* Parts of a frame: each has its own nonce {seq, part}. */
enum { PART_HEAD = 0, PART_BODY = 1 };

#endif /* MLN_LINK_INT_H */
