/*
 * config.c - the library's own tunables table.  One row per tunable; later components add
 * their rows here (and the matching field to mln_config_t in multilane.h).
 */
#include "mln_core.h"

#include <stddef.h>

static const char *const log_levels[] = {"none", "error", "warn", "info", "debug", "trace", NULL};
/* Order = mln_bcast_algo_t. */
static const char *const bcast_algos[] = {"auto", "sme", "hier", "mpi", NULL};
/* Order = mln_stripe_backend_t. */
static const char *const stripe_backends[] = {"tcp", "helper", "mpi", NULL};
static const char *const stripe_progress[] = {"call", "thread", NULL};
/* Order = mln_link_mode_t and mln_link_cipher_t (src/link/link.h). */
static const char *const link_modes[] = {"auth", "aead", "none", NULL};
static const char *const link_ciphers[] = {"auto", "aes", "chacha", NULL};
/* Order = mln_halo_mode_t. */
static const char *const halo_modes[] = {"auto",     "p2p",         "neighbor",   "rma-fence",
                                         "rma-pscw", "rma-passive", "rma-single", NULL};

static const mln_tunable_t mln_config_table[] = {
    {.env = "MLN_LOG",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "warn",
     .help = "log level",
     MLN_TUNABLE_FIELD(mln_config_t, log_level),
     .choices = log_levels},
    {.env = "MLN_LOG_FILE",
     .type = MLN_TUNABLE_STRING,
     .default_value = "",
     .help = "log file instead of stderr; %r becomes the MPI rank",
     MLN_TUNABLE_FIELD(mln_config_t, log_file)},
    {.env = "MLN_STRIPE_BACKEND",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "tcp",
     .help = "lanes of striped messages: own TCP sockets, helper ranks, or plain MPI",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_backend),
     .choices = stripe_backends},
    {.env = "MLN_STRIPE_LANES",
     .type = MLN_TUNABLE_INT,
     .default_value = "auto",
     .help = "lanes per peer: TCP connections (tcp) or chunks in flight (mpi); auto: tcp lanes "
             "follow each path (opened while they raise the rate, fewer when they cause loss), "
             "mpi and helper use 8",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_lanes),
     .min = 1,
     .max = 64,
     .auto_word = "auto"},
    {.env = "MLN_STRIPE_LANES_MAX",
     .type = MLN_TUNABLE_INT,
     .default_value = "64",
     .help = "MLN_STRIPE_LANES=auto: at most this many tcp lanes per peer",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_lanes_max),
     .min = 1,
     .max = 64},
    {.env = "MLN_STRIPE_HELPERS",
     .type = MLN_TUNABLE_INT,
     .default_value = "1",
     .help = "helper ranks per node taken from the job (helper backend): 2k+1 lanes",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_helpers),
     .min = 1,
     .max = 16},
    {.env = "MLN_STRIPE_THRESHOLD",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "256K",
     .help = "messages above this size to a remote peer are striped",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_threshold),
     .min = 128,
     .max = 1073741824},
    {.env = "MLN_STRIPE_CHUNK",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "1M",
     .help = "largest piece handed to one lane (smaller for small messages, >= 64K)",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_chunk),
     .min = 65536,
     .max = 268435456},
    {.env = "MLN_STRIPE_EARLY",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "4M",
     .help = "bytes of striped messages a sender puts on its tcp lanes before the receiver's "
             "CTS, per peer (the first RTT is not lost); 0 waits for the CTS",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_early),
     .min = 0,
     .max = 1073741824},
    {.env = "MLN_STRIPE_SOCKBUF",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "0",
     .help = "SO_SNDBUF/SO_RCVBUF of tcp lanes; 0 leaves them to the host, like stock MPI",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_sockbuf),
     .min = 0,
     .max = 1073741824},
    {.env = "MLN_STRIPE_NOTSENT",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "256K",
     .help = "unsent bytes the kernel may hold for one peer, split over the tcp lanes that take "
             "its chunks (TCP_NOTSENT_LOWAT, at least 16K a lane), so that chunks go to the lanes "
             "that drain; 0 = no limit",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_notsent),
     .min = 0,
     .max = 1073741824},
    {.env = "MLN_STRIPE_CONGESTION",
     .type = MLN_TUNABLE_STRING,
     .default_value = "",
     .help = "TCP congestion control of tcp lanes (e.g. cubic, bbr); empty = host default",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_congestion)},
    {.env = "MLN_SITE_MAP",
     .type = MLN_TUNABLE_STRING,
     .default_value = "",
     .help = "host-to-site map 'a*=siteA,b1=siteB'; empty: every host is its own site",
     MLN_TUNABLE_FIELD(mln_config_t, site_map)},
    {.env = "MLN_STRIPE_LOCAL",
     .type = MLN_TUNABLE_BOOL,
     .default_value = "0",
     .help = "stripe between peers of the same site too (tests, loopback experiments)",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_local)},
    {.env = "MLN_STRIPE_TIMEOUT",
     .type = MLN_TUNABLE_INT,
     .default_value = "60",
     .help = "seconds a peer's host may leave our tcp lanes unanswered (keepalive, "
             "retransmissions) before its striped messages fail; a busy peer is no failure",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_timeout),
     .min = 1,
     .max = 86400},
    {.env = "MLN_STRIPE_PORT",
     .type = MLN_TUNABLE_INT,
     .default_value = "0",
     .help = "tcp lanes listen on this port plus the rank's index on its host (for firewall "
             "rules); 0 = a free port",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_port),
     .min = 0,
     .max = 65535},
    {.env = "MLN_STRIPE_IFACE",
     .type = MLN_TUNABLE_STRING,
     .default_value = "",
     .help = "network interface whose IPv4 address tcp lanes listen on; empty = all",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_addr)},
    {.env = "MLN_STRIPE_PROGRESS",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "call",
     .help = "who moves striped data: calls (test, wait) or also a thread (needs "
             "MPI_THREAD_MULTIPLE)",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_progress),
     .choices = stripe_progress},
    {.env = "MLN_LINK_SECURITY",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "auth",
     .help = "tcp lanes: auth (mutual handshake, every frame header MACed), aead (every frame "
             "encrypted and authenticated) or none (no protection: for measurements only)",
     MLN_TUNABLE_FIELD(mln_config_t, link_security),
     .choices = link_modes},
    {.env = "MLN_LINK_PAYLOAD_MAC",
     .type = MLN_TUNABLE_BOOL,
     .default_value = "0",
     .help = "auth: each frame's payload is MACed too (checked before it reaches the user's "
             "buffer)",
     MLN_TUNABLE_FIELD(mln_config_t, link_payload_mac)},
    {.env = "MLN_LINK_CIPHER",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "auto",
     .help = "AEAD of the lanes' frames: auto (AES-256-GCM when every rank's CPU has it, else "
             "ChaCha20-Poly1305), aes or chacha",
     MLN_TUNABLE_FIELD(mln_config_t, link_cipher),
     .choices = link_ciphers},
    {.env = "MLN_STRIPE_FAULT",
     .type = MLN_TUNABLE_STRING,
     .default_value = "",
     .help = "fault injection for tests: reset:LANE:BYTES (a tcp lane resets), nak:N, "
             "rabort:N:BYTES (the N-th striped receive fails), sabort:N:BYTES (the N-th send)",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_fault)},
    {.env = "MLN_STRIPE_TAGS",
     .type = MLN_TUNABLE_INT,
     .default_value = "0",
     .help = "0: chunk tags up to MPI_TAG_UB; N: only N (and N/8 inline tags), so that a short "
             "test reuses them (test hook)",
     MLN_TUNABLE_FIELD(mln_config_t, stripe_tags),
     .min = 0,
     .max = 1073741824},
    {.env = "MLN_BCAST_ALGO",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "auto",
     .help = "mln_bcast algorithm: auto (= sme), sme (L leaders per node), hier (one leader), "
             "mpi (MPI_Bcast)",
     MLN_TUNABLE_FIELD(mln_config_t, bcast_algo),
     .choices = bcast_algos},
    {.env = "MLN_BCAST_LEADERS",
     .type = MLN_TUNABLE_INT,
     .default_value = "4",
     .help = "leaders per node for sme (capped at the smallest number of ranks on a node)",
     MLN_TUNABLE_FIELD(mln_config_t, bcast_leaders),
     .min = 1,
     .max = 1024},
    {.env = "MLN_BCAST_THRESHOLD",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "16K",
     .help = "broadcasts of fewer bytes use MPI_Bcast",
     MLN_TUNABLE_FIELD(mln_config_t, bcast_threshold)},
    {.env = "MLN_HALO_MODE",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "auto",
     .help = "mode of halo plans created with auto: auto (time the usable modes, keep the "
             "fastest) or one mode",
     MLN_TUNABLE_FIELD(mln_config_t, halo_mode),
     .choices = halo_modes},
    {.env = "MLN_HALO_DISABLE",
     .type = MLN_TUNABLE_STRING,
     .default_value = "builtin",
     .help = "halo modes never used: comma list of mode names, 'builtin' (the modes known to "
             "fail on this MPI, docs/HALO.md) or 'none'",
     MLN_TUNABLE_FIELD(mln_config_t, halo_disable)},
    {.env = "MLN_HALO_AUTO_ITERS",
     .type = MLN_TUNABLE_INT,
     .default_value = "30",
     .help = "timed iterations per sample when auto measures a halo mode (5 samples per mode, "
             "the modes in turn)",
     MLN_TUNABLE_FIELD(mln_config_t, halo_auto_iters),
     .min = 1,
     .max = 100000},
    {.env = "MLN_HALO_FAULT",
     .type = MLN_TUNABLE_STRING,
     .default_value = "",
     .help = "fault injection for tests: 'setup:RANK[:MODE]' fails a halo mode's set-up on RANK "
             "before its first collective call (every mode without MODE); 'exchange:RANK:I' "
             "fails exchange I of a plan on RANK after its data moved",
     MLN_TUNABLE_FIELD(mln_config_t, halo_fault)},
    {.env = "MLN_NODE_SIZE",
     .type = MLN_TUNABLE_INT,
     .default_value = "0",
     .help = "0: nodes are MPI's shared-memory groups; N: blocks of N consecutive ranks "
             "(test hook: emulated nodes on one host)",
     MLN_TUNABLE_FIELD(mln_config_t, node_size),
     .min = 0,
     .max = 1048576},
    {.env = "MLN_RELAY_WINDOW",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "8M",
     .help = "grid (relays): credit per pair of ranks, bytes in flight through the gateways "
             "before the receiver acknowledges (each frame costs 64 more); at least "
             "MLN_RELAY_CHUNK + 64",
     MLN_TUNABLE_FIELD(mln_config_t, relay_window),
     .min = 131072,
     .max = 1073741824},
    {.env = "MLN_RELAY_CHUNK",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "1M",
     .help = "grid (relays): largest frame payload; a striped message's chunks are smaller for "
             "smaller messages (>= 64K)",
     MLN_TUNABLE_FIELD(mln_config_t, relay_chunk),
     .min = 65536,
     .max = 1048576},
    {.env = "MLN_RELAY_STRIPE_MIN",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "256K",
     .help = "grid (relays): messages of this size or more are striped over every trunk; "
             "smaller ones keep their pair's trunk",
     MLN_TUNABLE_FIELD(mln_config_t, relay_stripe_min),
     .min = 0,
     .max = 1099511627776},
    {.env = "MLN_RELAY_TIMEOUT",
     .type = MLN_TUNABLE_INT,
     .default_value = "30",
     .help = "grid (relays): seconds a rank may take to reach its gateways, and to hand its "
             "last frames to them at the end",
     MLN_TUNABLE_FIELD(mln_config_t, relay_timeout),
     .min = 1,
     .max = 86400},
};

const mln_tunable_t *mln_tunables(size_t *count)
{
    if (count)
        *count = sizeof(mln_config_table) / sizeof(mln_config_table[0]);
    return mln_config_table;
}

mln_status_t mln_config_load(mln_getenv_fn get, void *arg, mln_config_t *cfg, char *err,
                             size_t errlen)
{
    size_t n;
    const mln_tunable_t *table = mln_tunables(&n);

    if (cfg == NULL)
        return MLN_ERR_ARG;
    return mln_tunables_parse(table, n, get, arg, cfg, sizeof(*cfg), err, errlen);
}
