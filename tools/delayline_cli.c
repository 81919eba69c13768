/*
 * delayline_cli.c - the command line of mln-delayline: one table row per option.
 *
 * The unsuffixed form of a link option sets both directions; -ab / -ba set one ("ab" = frames
 * received on --a and sent on --b).  A later option overrides an earlier one.
 */
#include "delayline_core.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum opt_kind {
    OPT_IFACE,
    OPT_TIME,
    OPT_RATE,
    OPT_LOSS,
    OPT_SIZE,
    OPT_SEED,
    OPT_PATH,
    OPT_INTERVAL,
    OPT_BLACKHOLE,
} opt_kind_t;

enum { D_AB = 1, D_BA = 2, D_BOTH = 3 };

typedef struct opt {
    const char *name;
    opt_kind_t kind;
    int dirs;   /* which directions a link option sets; for OPT_IFACE the side (0 = a) */
    size_t off; /* field in dl_dir_params_t */
} opt_t;

#define P(field) offsetof(dl_dir_params_t, field)
static const opt_t dl_opts[] = {
    {"a", OPT_IFACE, 0, 0},
    {"b", OPT_IFACE, 1, 0},
    {"delay", OPT_TIME, D_BOTH, P(delay_ns)},
    {"delay-ab", OPT_TIME, D_AB, P(delay_ns)},
    {"delay-ba", OPT_TIME, D_BA, P(delay_ns)},
    {"rate", OPT_RATE, D_BOTH, P(rate_bps)},
    {"rate-ab", OPT_RATE, D_AB, P(rate_bps)},
    {"rate-ba", OPT_RATE, D_BA, P(rate_bps)},
    {"loss", OPT_LOSS, D_BOTH, 0},
    {"loss-ab", OPT_LOSS, D_AB, 0},
    {"loss-ba", OPT_LOSS, D_BA, 0},
    {"queue", OPT_SIZE, D_BOTH, P(queue_bytes)},
    {"queue-ab", OPT_SIZE, D_AB, P(queue_bytes)},
    {"queue-ba", OPT_SIZE, D_BA, P(queue_bytes)},
    {"flow-rate", OPT_RATE, D_BOTH, P(flow_rate_bps)},
    {"flow-rate-ab", OPT_RATE, D_AB, P(flow_rate_bps)},
    {"flow-rate-ba", OPT_RATE, D_BA, P(flow_rate_bps)},
    {"flow-queue", OPT_SIZE, D_BOTH, P(flow_queue_bytes)},
    {"flow-queue-ab", OPT_SIZE, D_AB, P(flow_queue_bytes)},
    {"flow-queue-ba", OPT_SIZE, D_BA, P(flow_queue_bytes)},
    {"seed", OPT_SEED, 0, 0},
    {"stats", OPT_PATH, 0, 0},
    {"stats-interval", OPT_INTERVAL, 0, 0},
    {"blackhole", OPT_BLACKHOLE, 0, 0},
};
#undef P

static const char *const dl_expect[] = {
    [OPT_IFACE] = "expected an interface name",
    [OPT_TIME] = "expected e.g. 5ms, 250us, 0",
    [OPT_RATE] = "expected e.g. 1gbit, 100mbit, 500kbit, 1000000 (bit/s), 0 = unlimited",
    [OPT_LOSS] = "expected a fraction like 0.001 or a percentage like 0.1%",
    [OPT_SIZE] = "expected e.g. 1M, 256K, 65536",
    [OPT_SEED] = "expected a non-negative integer",
    [OPT_PATH] = "expected a file name",
    [OPT_INTERVAL] = "expected seconds, e.g. 1, 0.5, 250ms",
    [OPT_BLACKHOLE] = "expected PORT:BYTES, e.g. 21000:4M",
};

static const char *const dl_what[] = {
    [OPT_IFACE] = "interface", [OPT_TIME] = "time",         [OPT_RATE] = "rate",
    [OPT_LOSS] = "loss",       [OPT_SIZE] = "size",         [OPT_SEED] = "seed",
    [OPT_PATH] = "file name",  [OPT_INTERVAL] = "interval", [OPT_BLACKHOLE] = "blackhole",
};

const char *dl_cli_usage(void)
{
    return "usage: mln-delayline --a IFACE --b IFACE [options]\n"
           "Forwards Ethernet frames between two interfaces, emulating a WAN link.\n"
           "Direction ab = received on --a, sent on --b; ba = the reverse.  Each link option\n"
           "sets both directions, or one with the -ab / -ba suffix (e.g. --delay-ab 5ms).\n"
           "  --delay T          one-way delay (5ms, 250us, 1s, 0)            default 0\n"
           "  --rate R           link rate (1gbit, 100mbit, 500kbit, bit/s)   default 0 = "
           "unlimited\n"
           "  --loss P           random loss (0.001 or 0.1%)                  default 0\n"
           "  --queue BYTES      link tail-drop queue (1M, 256K)    default one BDP at "
           "max(RTT,10ms)\n"
           "  --flow-rate R      per-flow (5-tuple) shaper rate               default 0 = off\n"
           "  --flow-queue BYTES per-flow tail-drop queue                     default 256K\n"
           "  --seed N           loss PRNG seed (ab uses N, ba a stream derived from N) default 1\n"
           "  --stats FILE       write counters as JSON (atomically) on SIGUSR1, interval, exit\n"
           "  --stats-interval S also write --stats every S seconds (1, 0.5, 250ms)\n"
           "  --blackhole PORT:BYTES  the first TCP flow to PORT whose payload passes BYTES\n"
           "                     is cut off: every later frame of it, both ways, dropped\n"
           "                     (drop_blackhole); up to 8, each strikes once\n"
           "  --help             this text\n"
           "Prints 'ready' on stdout once both sockets are up.  SIGUSR1 prints the counters;\n"
           "SIGINT/SIGTERM print them and exit 0.\n";
}

static int parse_seed(const char *text, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;

    if (!isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_interval(const char *text, uint64_t *out_ns)
{
    char *end = NULL;
    double v;

    if (dl_parse_time(text, out_ns) == 0)
        return *out_ns > 0 ? 0 : -1;
    if (!isdigit((unsigned char)text[0]))
        return -1;
    v = strtod(text, &end);
    if (*end != '\0' || !(v > 0) || v > 86400.0)
        return -1;
    *out_ns = (uint64_t)(v * 1e9);
    return *out_ns > 0 ? 0 : -1;
}

/* Applies one option; -1 on an invalid value. */
static int apply(const opt_t *o, const char *val, dl_config_t *cfg, int *queue_set)
{
    uint64_t u = 0;
    double p = 0;

    switch (o->kind) {
    case OPT_IFACE:
        if (val[0] == '\0' || strlen(val) >= 16) /* IFNAMSIZ */
            return -1;
        cfg->ifname[o->dirs] = val;
        return 0;
    case OPT_PATH:
        if (val[0] == '\0')
            return -1;
        cfg->stats_path = val;
        return 0;
    case OPT_SEED:
        if (parse_seed(val, &u) != 0)
            return -1;
        cfg->dir[DL_AB].seed = u;
        cfg->dir[DL_BA].seed = u ^ UINT64_C(0x6a09e667f3bcc909); /* an independent stream */
        return 0;
    case OPT_INTERVAL:
        return parse_interval(val, &cfg->stats_interval_ns);
    case OPT_BLACKHOLE: { /* the caller said "at most" once all are taken */
        dl_blackhole_spec_t b;
        if (cfg->nblackholes == DL_MAX_BLACKHOLES || dl_parse_blackhole(val, &b.port, &u) != 0)
            return -1;
        b.after_bytes = u;
        cfg->blackhole[cfg->nblackholes++] = b;
        return 0;
    }
    case OPT_LOSS:
        if (dl_parse_loss(val, &p) != 0)
            return -1;
        break;
    case OPT_TIME:
        if (dl_parse_time(val, &u) != 0)
            return -1;
        break;
    case OPT_RATE:
        if (dl_parse_rate(val, &u) != 0)
            return -1;
        break;
    case OPT_SIZE:
        if (dl_parse_size(val, &u) != 0)
            return -1;
        break;
    }
    for (int d = 0; d < DL_NDIRS; d++) {
        if (!(o->dirs & (1 << d)))
            continue;
        if (o->kind == OPT_LOSS) {
            cfg->dir[d].loss = p;
            continue;
        }
        memcpy((char *)&cfg->dir[d] + o->off, &u, sizeof(u));
        if (o->off == offsetof(dl_dir_params_t, queue_bytes))
            queue_set[d] = 1;
    }
    return 0;
}

/* One BDP of the direction's rate at the path's RTT (at least 10 ms), at least 64 KiB. */
static uint64_t default_queue(const dl_config_t *cfg, int d)
{
    uint64_t rtt = cfg->dir[DL_AB].delay_ns + cfg->dir[DL_BA].delay_ns;
    double bdp;

    if (rtt < 10 * (DL_NS_PER_S / 1000))
        rtt = 10 * (DL_NS_PER_S / 1000);
    bdp = (double)cfg->dir[d].rate_bps * ((double)rtt / 1e9) / 8.0;
    return bdp > DL_MIN_DEFAULT_QUEUE ? (uint64_t)bdp : DL_MIN_DEFAULT_QUEUE;
}

int dl_cli_parse(int argc, char **argv, dl_config_t *cfg, char *err, size_t errlen)
{
    dl_config_t c;
    int queue_set[DL_NDIRS] = {0, 0};

    memset(&c, 0, sizeof(c));
    for (int d = 0; d < DL_NDIRS; d++)
        c.dir[d].flow_queue_bytes = DL_DEFAULT_FLOW_QUEUE;
    c.dir[DL_AB].seed = 1;
    c.dir[DL_BA].seed = 1 ^ UINT64_C(0x6a09e667f3bcc909);

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = NULL, *eq;
        size_t nlen;
        const opt_t *o = NULL;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return 1;
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (see --help)", arg);
            return -1;
        }
        arg += 2;
        eq = strchr(arg, '=');
        nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        for (size_t k = 0; k < sizeof(dl_opts) / sizeof(dl_opts[0]); k++)
            if (strlen(dl_opts[k].name) == nlen && strncmp(dl_opts[k].name, arg, nlen) == 0)
                o = &dl_opts[k];
        if (o == NULL) {
            snprintf(err, errlen, "unknown option '%s' (see --help)", argv[i]);
            return -1;
        }
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            snprintf(err, errlen, "--%s: missing value (%s)", o->name, dl_expect[o->kind]);
            return -1;
        }
        if (o->kind == OPT_BLACKHOLE && c.nblackholes == DL_MAX_BLACKHOLES) {
            snprintf(err, errlen, "--%s: at most %d", o->name, DL_MAX_BLACKHOLES);
            return -1;
        }
        if (apply(o, val, &c, queue_set) != 0) {
            snprintf(err, errlen, "--%s: invalid %s '%s' (%s)", o->name, dl_what[o->kind], val,
                     dl_expect[o->kind]);
            return -1;
        }
    }
    if (c.ifname[0] == NULL || c.ifname[1] == NULL) {
        snprintf(err, errlen, "--a IFACE and --b IFACE are required (see --help)");
        return -1;
    }
    if (strcmp(c.ifname[0], c.ifname[1]) == 0) {
        snprintf(err, errlen, "--a and --b name the same interface '%s'", c.ifname[0]);
        return -1;
    }
    for (int d = 0; d < DL_NDIRS; d++)
        if (!queue_set[d])
            c.dir[d].queue_bytes = default_queue(&c, d);
    *cfg = c;
    return 0;
}
