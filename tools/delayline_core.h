/*
 * delayline_core.h - the socket-free part of mln-delayline: argument parsing, 5-tuple flow keys,
 * a frame buffer pool, the per-direction link model (loss, per-flow shaper, link rate with a
 * tail-drop queue, propagation delay) driven by a release-time binary heap, and the blackhole
 * (one TCP flow cut off in both directions once it carried a number of bytes).
 *
 * Times are CLOCK_MONOTONIC nanoseconds, rates bit/s (0 = unlimited), sizes bytes.  See
 * docs/DELAYLINE.md for the model.
 */
#ifndef MLN_DELAYLINE_CORE_H
#define MLN_DELAYLINE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DL_NS_PER_S UINT64_C(1000000000)
#define DL_TIME_NEVER UINT64_MAX

/* ---- value parsers: 0 on success (out written), -1 on invalid text ------------------------ */

/* "5ms", "250us", "1s", "1.5ms", "100ns", "0" -> ns (at most 1 hour). */
int dl_parse_time(const char *text, uint64_t *out_ns);
/* "1gbit", "100mbit", "500kbit", "1000000" (bit/s), "2.5gbit", "0" (unlimited) -> bit/s. */
int dl_parse_rate(const char *text, uint64_t *out_bps);
/* "0.001" (fraction) or "0.1%" (percentage) -> probability in [0, 1]. */
int dl_parse_loss(const char *text, double *out_p);
/* "4096", "256K", "1M", "1MiB", "2G": mln_parse_size, as an int (0 ok, -1 bad) like dl_parse_*. */
int dl_parse_size(const char *text, uint64_t *out_bytes);

/* "21000:4M" (PORT:BYTES, BYTES in the grammar of dl_parse_size, 0 allowed; port 1..65535). */
int dl_parse_blackhole(const char *text, uint16_t *out_port, uint64_t *out_bytes);

/* ---- configuration (filled by dl_cli_parse) ----------------------------------------------- */

enum { DL_AB = 0, DL_BA = 1, DL_NDIRS = 2 };

#define DL_MAX_BLACKHOLES 8 /* --blackhole options */

/* --blackhole PORT:BYTES: the first TCP flow to PORT whose payload passes BYTES is cut off. */
typedef struct dl_blackhole_spec {
    uint16_t port;
    uint64_t after_bytes;
} dl_blackhole_spec_t;

typedef struct dl_dir_params {
    uint64_t delay_ns;         /* one-way propagation delay */
    uint64_t rate_bps;         /* link rate; 0 = unlimited */
    uint64_t queue_bytes;      /* link tail-drop queue; 0 = default (one BDP, see DELAYLINE.md) */
    uint64_t flow_rate_bps;    /* per-flow shaper rate; 0 = off */
    uint64_t flow_queue_bytes; /* per-flow tail-drop queue of the shaper */
    double loss;               /* random loss probability */
    uint64_t seed;             /* PRNG seed of this direction's loss stream */
} dl_dir_params_t;

typedef struct dl_config {
    const char *ifname[DL_NDIRS]; /* --a, --b */
    dl_dir_params_t dir[DL_NDIRS];
    const char *stats_path;     /* --stats FILE or NULL */
    uint64_t stats_interval_ns; /* --stats-interval; 0 = only on SIGUSR1 and exit */
    dl_blackhole_spec_t blackhole[DL_MAX_BLACKHOLES]; /* --blackhole, in the order given */
    int nblackholes;
} dl_config_t;

/* Default queues when not given: one BDP of the rate at max(RTT, 10 ms), at least 64 KiB. */
#define DL_DEFAULT_FLOW_QUEUE (256u * 1024u)
#define DL_MIN_DEFAULT_QUEUE (64u * 1024u)

/*
 * Parses the command line.  Returns 0 (cfg filled), 1 (--help: usage to be printed), or -1 with
 * one line in `err` such as "--delay: invalid time 'x' (expected e.g. 5ms, 250us, 0)".
 */
int dl_cli_parse(int argc, char **argv, dl_config_t *cfg, char *err, size_t errlen);
/* The --help text. */
const char *dl_cli_usage(void);

/* ---- PRNG: xoshiro256** seeded by splitmix64 (one stream per direction) ------------------- */

typedef struct dl_rng {
    uint64_t s[4];
} dl_rng_t;

void dl_rng_seed(dl_rng_t *r, uint64_t seed);
uint64_t dl_rng_next(dl_rng_t *r);
/* Uniform double in [0, 1). */
double dl_rng_uniform(dl_rng_t *r);

/* ---- flow keys ----------------------------------------------------------------------------- */

typedef struct dl_flow_key {
    uint32_t src, dst;     /* IPv4 addresses (network order as read); 0 for non-IPv4 */
    uint16_t sport, dport; /* TCP/UDP ports; 0 for other protocols and IP fragments */
    uint16_t ethertype;    /* after one optional 802.1Q tag */
    uint8_t proto;         /* IP protocol; 0 for non-IPv4 */
    uint8_t pad;           /* always 0 (keys are compared with memcmp) */
} dl_flow_key_t;

/* Fills `key` from an Ethernet frame; never fails (short or odd frames give a degenerate key). */
void dl_flow_key_parse(const uint8_t *frame, size_t len, dl_flow_key_t *key);
/* The TCP payload bytes of an IPv4 frame (IP total length less the IP and TCP headers, both
 * checked against `len`); 0 for anything else, fragments and malformed headers included. */
uint32_t dl_tcp_payload(const uint8_t *frame, size_t len);

/* ---- buffer pool: fixed-size slots, LIFO free list ----------------------------------------- */

typedef struct dl_pool {
    uint8_t *mem;
    uint32_t *free_list;
    uint32_t slot_size, count, nfree;
} dl_pool_t;

int dl_pool_init(dl_pool_t *p, uint32_t count, uint32_t slot_size);
void dl_pool_fini(dl_pool_t *p);
/* Takes a slot; -1 when the pool is empty. */
int dl_pool_get(dl_pool_t *p, uint32_t *out_slot);
void dl_pool_put(dl_pool_t *p, uint32_t slot);
uint8_t *dl_pool_buf(const dl_pool_t *p, uint32_t slot);

/* ---- release-time heap --------------------------------------------------------------------- */

typedef struct dl_event {
    uint64_t time_ns;
    uint64_t seq; /* ties leave in arrival order */
    uint32_t tag; /* the caller's slot */
    uint32_t len;
    uint32_t stage; /* DL_STAGE_* */
} dl_event_t;

enum { DL_STAGE_FLOW = 0, DL_STAGE_LINK = 1 };

typedef struct dl_heap {
    dl_event_t *ev;
    uint32_t n, cap;
} dl_heap_t;

int dl_heap_init(dl_heap_t *h, uint32_t cap);
void dl_heap_fini(dl_heap_t *h);
int dl_heap_push(dl_heap_t *h, const dl_event_t *e); /* -1 when full */
int dl_heap_pop(dl_heap_t *h, dl_event_t *out);      /* -1 when empty */
const dl_event_t *dl_heap_top(const dl_heap_t *h);   /* NULL when empty */

/* ---- one direction of the link ------------------------------------------------------------- */

typedef struct dl_counters {
    uint64_t rx_frames, rx_bytes, tx_frames, tx_bytes;
    uint64_t drop_loss, drop_queue, drop_flow, drop_error, drop_nobuf;
    uint64_t max_queue_bytes; /* largest link-queue backlog seen, bytes */
    uint64_t flow_evict_busy; /* flow entries evicted while still backlogged (table full) */
    uint64_t drop_kernel;     /* dropped by the kernel before we read them (socket full) */
    uint64_t drop_blackhole;  /* frames of a flow cut off by --blackhole */
} dl_counters_t;

typedef struct dl_flow_entry {
    dl_flow_key_t key;
    uint64_t free_ns; /* when the flow's shaper is idle again; <= now means no backlog */
    uint8_t used;
} dl_flow_entry_t;

#define DL_FLOW_TABLE_SIZE 4096u /* power of two */
#define DL_FLOW_PROBE 16u        /* entries searched per lookup */

typedef struct dl_dir {
    dl_dir_params_t prm;
    dl_counters_t ctr;
    dl_rng_t rng;
    dl_heap_t heap;
    uint64_t seq;
    uint64_t link_free_ns;  /* when the link's serialiser is idle again */
    dl_flow_entry_t *flows; /* NULL when there is no per-flow cap */
} dl_dir_t;

typedef enum dl_verdict {
    DL_ACCEPT = 0,
    DL_DROP_LOSS,
    DL_DROP_QUEUE,
    DL_DROP_FLOW,
    DL_DROP_NOBUF,
} dl_verdict_t;

/* `capacity` bounds the frames in flight (heap size); use the pool's slot count. */
int dl_dir_init(dl_dir_t *d, const dl_dir_params_t *prm, uint32_t capacity);
void dl_dir_fini(dl_dir_t *d);

/*
 * A frame of `len` bytes with flow `key` (ignored without a per-flow cap) arrived at `now_ns`.
 * Counts rx; on DL_ACCEPT the frame (identified by `tag`) is held and *release_ns is the time
 * of its next event (its delivery time when there is no per-flow cap).  On a drop the caller
 * keeps `tag` and the drop is counted.
 */
dl_verdict_t dl_dir_enqueue(dl_dir_t *d, uint64_t now_ns, uint32_t len, const dl_flow_key_t *key,
                            uint32_t tag, uint64_t *release_ns);

/* Earliest pending event, or DL_TIME_NEVER. */
uint64_t dl_dir_next_event(const dl_dir_t *d);

typedef enum dl_pop {
    DL_POP_NONE = 0, /* nothing due at now_ns */
    DL_POP_SEND,     /* transmit `tag` (`len` bytes) now, then call dl_dir_sent */
    DL_POP_DROPPED,  /* `tag` was dropped by the link queue after the flow shaper: free it */
} dl_pop_t;

/* Runs events due at `now_ns` until one concerns the caller. */
dl_pop_t dl_dir_pop(dl_dir_t *d, uint64_t now_ns, uint32_t *tag, uint32_t *len);

/* Transmission outcome of a DL_POP_SEND frame (ok != 0: sent; else counted as drop_error). */
void dl_dir_sent(dl_dir_t *d, uint32_t len, int ok);

/* Serialisation time of `len` bytes at `rate_bps` (0 when unlimited). */
uint64_t dl_ser_ns(uint64_t len, uint64_t rate_bps);

/* ---- blackhole (delayline_blackhole.c) ---------------------------------------------------- */

#define DL_BLACKHOLE_FLOWS 256 /* flows to a blackhole port whose payload is counted at once */

typedef struct dl_blackhole_rule {
    dl_blackhole_spec_t spec;
    int struck;          /* the flow is cut off */
    dl_flow_key_t flow;  /* once struck: the flow as it goes to spec.port (both ways dropped) */
    uint64_t flow_bytes; /* its payload when it was struck */
} dl_blackhole_rule_t;

typedef struct dl_blackhole_count {
    dl_flow_key_t key;
    uint64_t bytes; /* TCP payload seen so far */
} dl_blackhole_count_t;

/* The blackholes of one delay line: rules and the payload counts of the flows they watch.
 * Both directions share it (a flow is dropped both ways, its acknowledgements too). */
typedef struct dl_blackhole {
    dl_blackhole_rule_t rule[DL_MAX_BLACKHOLES];
    int nrules;
    dl_blackhole_count_t count[DL_BLACKHOLE_FLOWS];
    uint32_t ncount;
    uint64_t untracked; /* frames of flows not counted: the count table was full */
} dl_blackhole_t;

typedef enum dl_bh_verdict {
    DL_BH_PASS = 0, /* forward it */
    DL_BH_DROP,     /* a frame of a cut-off flow (either way): drop it */
    DL_BH_STRUCK,   /* forward it; its flow just passed its byte count: later frames drop */
} dl_bh_verdict_t;

void dl_blackhole_init(dl_blackhole_t *b, const dl_blackhole_spec_t *spec, int n);
/*
 * One frame, in either direction.  A TCP frame to the port of a rule not yet struck adds its
 * payload to its flow's count; the first flow whose count passes the rule's bytes is struck
 * (*rule: its index) and from the next frame on every frame of it, and of its reverse, drops.
 * Each rule strikes once.
 */
dl_bh_verdict_t dl_blackhole_frame(dl_blackhole_t *b, const uint8_t *frame, size_t len, int *rule);
/* "10.77.1.1:40312>10.77.2.1:21000": the flow of a key, for logs and the statistics. */
void dl_flow_key_format(const dl_flow_key_t *k, char *out, size_t outlen);

/* ---- statistics (delayline_stats.c) -------------------------------------------------------- */

/* "ab", "ba": the names of the directions in the statistics. */
extern const char *const dl_dir_name[DL_NDIRS];

/* Writes the counters and parameters of both directions as one JSON object and a newline:
 * {"tool":"mln-delayline","a":IFNAME,"b":IFNAME,"uptime_s":S,"ab":{...},"ba":{...},
 *  "blackhole":[{"port":P,"after_bytes":N,"struck":false|true[,"flow":"...","flow_bytes":M]}]}
 * (bh may be NULL: no blackhole). */
void dl_stats_json(FILE *fp, const char *const ifname[DL_NDIRS], double uptime_s,
                   const dl_dir_t dir[DL_NDIRS], const dl_blackhole_t *bh);

#endif /* MLN_DELAYLINE_CORE_H */
