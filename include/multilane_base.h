/*
 * multilane_base.h - the part of the public API that needs no MPI: status codes, version,
 * log levels, the tunables table and the parsers.  multilane.h includes it; MPI-free tools
 * (mln-delayline) include only this.
 */
#ifndef MULTILANE_BASE_H
#define MULTILANE_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLN_VERSION_MAJOR 0
#define MLN_VERSION_MINOR 1
#define MLN_VERSION_PATCH 0
#define MLN_VERSION_STRING "0.1.0"

/* ---- status codes ------------------------------------------------------------------ */

typedef enum mln_status {
    MLN_OK = 0,
    MLN_ERR_ARG,         /* an argument is invalid (NULL, negative, out of range) */
    MLN_ERR_NOMEM,       /* an allocation failed */
    MLN_ERR_CONFIG,      /* a tunable (environment variable) has an invalid value */
    MLN_ERR_NOT_INIT,    /* mln_init has not been called (or mln_finalize already was) */
    MLN_ERR_STATE,       /* the call is not allowed in the current state (e.g. double init) */
    MLN_ERR_MPI,         /* an MPI call failed */
    MLN_ERR_SYS,         /* a system call failed (errno is logged) */
    MLN_ERR_UNSUPPORTED, /* valid request that this build or this MPI cannot serve */
    MLN_ERR_TRUNCATE,    /* a message is larger than the receive buffer */
    MLN_ERR_PEER,        /* a peer or a lane failed (closed, reset, died) */
    MLN_ERR_TIMEOUT,     /* an operation did not complete within its bound */
    MLN_ERR_DATA,        /* received data failed validation */
    MLN_ERR_INTERNAL,    /* a bug in Multilane: please report it */
    MLN_STATUS_COUNT     /* number of codes; not a status */
} mln_status_t;

/* A short, static, human-readable description ("invalid argument"); never NULL. */
const char *mln_status_str(mln_status_t status);

/* ---- version ---------------------------------------------------------------------------- */

/* The version of the library actually linked (may differ from MLN_VERSION_* at compile time). */
const char *mln_version_string(void);
void mln_version(int *major, int *minor, int *patch);

/* ---- logging ---------------------------------------------------------------------------- */

typedef enum mln_log_level {
    MLN_LOG_NONE = 0,
    MLN_LOG_ERROR,
    MLN_LOG_WARN,
    MLN_LOG_INFO,
    MLN_LOG_DEBUG,
    MLN_LOG_TRACE
} mln_log_level_t;

/* ---- tunables --------------------------------------------------------------------------- */

typedef enum mln_tunable_type {
    MLN_TUNABLE_INT,   /* signed 64-bit integer, optional [min, max] */
    MLN_TUNABLE_SIZE,  /* byte count: 4096, 256K, 1M, 2G (K = 1024), optional [min, max] */
    MLN_TUNABLE_BOOL,  /* 1/0, yes/no, true/false, on/off */
    MLN_TUNABLE_ENUM,  /* one of a fixed list of names */
    MLN_TUNABLE_STRING /* free text */
} mln_tunable_type_t;

/* One row of a tunables table: the environment variable, its type, default and help. */
typedef struct mln_tunable {
    const char *env; /* environment variable, e.g. "MLN_LOG" */
    mln_tunable_type_t type;
    const char *default_value; /* as text, parsed with the same rules as the environment */
    const char *help;
    size_t offset;              /* where the parsed value goes in the context struct */
    size_t size;                /* that field's size: a STRING value must fit with its NUL */
    int64_t min, max;           /* INT and SIZE bounds, inclusive (none when min >= max) */
    const char *const *choices; /* ENUM names, NULL-terminated; value = index */
    const char *auto_word;      /* INT: this word (e.g. "auto") is also accepted, as 0 */
} mln_tunable_t;

/*
 * The .offset and .size of a row that fills `member` of `type`, so that the two cannot
 * disagree: {.env = "MLN_LOG_FILE", ..., MLN_TUNABLE_FIELD(mln_config_t, log_file)}.
 * STRING rows must give a size; other rows may leave it 0, and if they give one it must be
 * the type's own (int64_t INT, uint64_t SIZE, int BOOL and ENUM).
 */
#define MLN_TUNABLE_FIELD(type, member)                                                            \
    .offset = offsetof(type, member), .size = sizeof(((type *)0)->member)

/* The library's own tunables table (read-only); *count receives the number of rows. */
const mln_tunable_t *mln_tunables(size_t *count);

/* Parsed values of the library's tunables (one field per table row). */
typedef struct mln_config {
    int log_level;              /* MLN_LOG: a mln_log_level_t */
    char log_file[256];         /* MLN_LOG_FILE: "" = stderr; "%r" is replaced by the MPI rank */
    int stripe_backend;         /* MLN_STRIPE_BACKEND: a mln_stripe_backend_t */
    int64_t stripe_lanes;       /* MLN_STRIPE_LANES: lanes (tcp sockets, mpi streams) per peer;
                                   0 = auto (tcp: per peer, from what the lanes measure) */
    int64_t stripe_lanes_max;   /* MLN_STRIPE_LANES_MAX: auto's ceiling */
    int64_t stripe_helpers;     /* MLN_STRIPE_HELPERS: helper ranks per node (helper backend) */
    uint64_t stripe_threshold;  /* MLN_STRIPE_THRESHOLD: larger messages to remote peers stripe */
    uint64_t stripe_chunk;      /* MLN_STRIPE_CHUNK: largest chunk given to one lane */
    uint64_t stripe_early;      /* MLN_STRIPE_EARLY: bytes per peer sent before the CTS (tcp) */
    uint64_t stripe_sockbuf;    /* MLN_STRIPE_SOCKBUF: SO_SNDBUF/SO_RCVBUF, 0 = host default */
    uint64_t stripe_notsent;    /* MLN_STRIPE_NOTSENT: TCP_NOTSENT_LOWAT of tcp lanes, 0 = none */
    char stripe_congestion[32]; /* MLN_STRIPE_CONGESTION: TCP_CONGESTION, "" = host default */
    char site_map[1024];        /* MLN_SITE_MAP: "pattern=site,..."; "" = each host a site */
    int stripe_local;           /* MLN_STRIPE_LOCAL: stripe between peers of one site too */
    int64_t stripe_timeout;     /* MLN_STRIPE_TIMEOUT: seconds a peer's host may not answer */
    char stripe_addr[64];       /* MLN_STRIPE_IFACE: interface whose address lanes use */
    int64_t stripe_port;        /* MLN_STRIPE_PORT: listen port + index on host, 0 = any */
    char stripe_fault[64];      /* MLN_STRIPE_FAULT: test hook, e.g. "reset:LANE:BYTES" */
    int64_t stripe_tags;        /* MLN_STRIPE_TAGS: test hook, chunk tags in use (0 = all) */
    int stripe_progress;        /* MLN_STRIPE_PROGRESS: 0 = in calls, 1 = also a thread */
    int link_security;          /* MLN_LINK_SECURITY: a mln_link_mode_t (src/link/link.h) */
    int link_payload_mac;       /* MLN_LINK_PAYLOAD_MAC: auth also checks each payload */
    int link_cipher;            /* MLN_LINK_CIPHER: a mln_link_cipher_t */
    int bcast_algo;             /* MLN_BCAST_ALGO: a mln_bcast_algo_t */
    int64_t bcast_leaders;      /* MLN_BCAST_LEADERS: leaders per node (sme) */
    uint64_t bcast_threshold;   /* MLN_BCAST_THRESHOLD: smaller broadcasts use MPI_Bcast */
    int halo_mode;              /* MLN_HALO_MODE: a mln_halo_mode_t (replaces auto) */
    char halo_disable[256];     /* MLN_HALO_DISABLE: halo modes never used */
    int64_t halo_auto_iters;    /* MLN_HALO_AUTO_ITERS: timed iterations per mode in auto */
    char halo_fault[64];        /* MLN_HALO_FAULT: test hook, "setup:RANK[:MODE]" and so on */
    int64_t node_size;          /* MLN_NODE_SIZE: 0 = nodes from MPI; N = N ranks per node */
    uint64_t relay_window;      /* MLN_RELAY_WINDOW: grid: credit bytes in flight per pair */
    uint64_t relay_chunk;       /* MLN_RELAY_CHUNK: grid: largest frame of a striped message */
    uint64_t relay_stripe_min;  /* MLN_RELAY_STRIPE_MIN: grid: striped over every trunk from */
    int64_t relay_timeout;      /* MLN_RELAY_TIMEOUT: grid: seconds to reach the gateways */
} mln_config_t;

/* Source of values: returns the text for `name`, or NULL when unset (getenv-like). */
typedef const char *(*mln_getenv_fn)(const char *name, void *arg);

/*
 * Fills `out` (a struct laid out for `table`) from defaults and `get` (NULL = getenv).
 * On an invalid value returns MLN_ERR_CONFIG and writes one line naming the variable, the
 * value and what is expected into `err` (if non-NULL).  `out` is written only on success.
 * A row whose field does not fit `out`, or whose size is wrong for its type, is a bug in the
 * table: MLN_ERR_INTERNAL, with the row named in `err`.
 */
mln_status_t mln_tunables_parse(const mln_tunable_t *table, size_t count, mln_getenv_fn get,
                                void *arg, void *out, size_t out_size, char *err, size_t errlen);

/* Parses the library's own table into `cfg` (see mln_tunables_parse). */
mln_status_t mln_config_load(mln_getenv_fn get, void *arg, mln_config_t *cfg, char *err,
                             size_t errlen);

/* Prints `table` (name, type, default, current value, help) as text or as JSON. */
mln_status_t mln_tunables_print(const mln_tunable_t *table, size_t count, mln_getenv_fn get,
                                void *arg, int json, FILE *fp);

/* ---- small text helpers (shared with the benchmarks, the CLI and mln-delayline) ---------- */

/* "4096", "256K", "1M", "2G", "64MiB", "1KB" (all binary); rejects junk, overflow, negatives. */
mln_status_t mln_parse_size(const char *text, uint64_t *out);
/* Decimal or 0x integer with optional sign; rejects junk and overflow. */
mln_status_t mln_parse_int(const char *text, int64_t *out);
/* Writes `s` (NULL = "") as a JSON string: quoted, escaped, invalid UTF-8 replaced by U+FFFD. */
void mln_json_write_string(FILE *fp, const char *s);

#ifdef __cplusplus
}
#endif

#endif /* MULTILANE_BASE_H */
