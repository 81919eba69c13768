/*
 * gateway_main.c - mln-gateway's command line (docs/RELAY.md "The gateway"):
 *
 *   mln-gateway --site NAME --trunk T --trunks K --sites a:2,b:2 --listen ADDR:PORT
 *               --wan ADDR:PORT --peer SITE=ADDR:PORT [--peer ...] [--timeout S] [--log LEVEL]
 *
 * The run's secret comes from MLN_GRID_SECRET (64 hex digits; never on the command line), the
 * link's protection from MLN_LINK_SECURITY, MLN_LINK_CIPHER and MLN_LINK_PAYLOAD_MAC as in the
 * library, the bound on queued frames from MLN_RELAY_WINDOW.  A wrong option or setting: one
 * line, exit 2.  Once both listeners are bound it prints "ready site=NAME trunk=T
 * listen=ADDR:PORT wan=ADDR:PORT" on stdout (the launcher reads the ports there).
 */
#include "gateway_int.h"

#include "mln_core.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char usage[] =
    "usage: mln-gateway --site NAME --trunk T --trunks K --sites a:2,b:2 --listen ADDR:PORT\n"
    "                   --wan ADDR:PORT --peer SITE=ADDR:PORT [--peer ...] [--timeout S]\n"
    "                   [--log none|error|warn|info|debug]\n"
    "(the run's secret: MLN_GRID_SECRET, 64 hex digits)\n";

int mln_gw_parse_addr(const char *text, struct sockaddr_in *sa)
{
    const char *colon = strrchr(text, ':');
    char host[INET_ADDRSTRLEN];
    int64_t port = -1;

    if (colon == NULL || (size_t)(colon - text) >= sizeof(host) || colon[1] == '\0')
        return 0;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 || mln_parse_int(colon + 1, &port) != MLN_OK ||
        port < 0 || port > 65535)
        return 0;
    sa->sin_port = htons((uint16_t)port);
    return 1;
}

/* One line on stderr (the log may not be set up yet), exit status 2. */
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "mln-gateway: %s (mln-gateway --help)\n", line);
    return GW_EXIT_USAGE;
}

static int log_level(const char *text)
{
    static const char *const names[] = {"none", "error", "warn", "info", "debug", "trace"};

    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcasecmp(text, names[i]) == 0)
            return i;
    return -1;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {{"site", required_argument, NULL, 's'},
                                          {"trunk", required_argument, NULL, 't'},
                                          {"trunks", required_argument, NULL, 'k'},
                                          {"sites", required_argument, NULL, 'S'},
                                          {"listen", required_argument, NULL, 'l'},
                                          {"wan", required_argument, NULL, 'w'},
                                          {"peer", required_argument, NULL, 'p'},
                                          {"timeout", required_argument, NULL, 'T'},
                                          {"log", required_argument, NULL, 'L'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    static gw_opts_t o; /* large: not on the stack */
    const char *site = NULL, *sites = NULL, *why = NULL, *peers[MLN_RELAY_MAX_SITES];
    int npeers = 0, have_listen = 0, have_wan = 0, have_timeout = 0, level = -1, opt, rc;
    int64_t v;
    mln_config_t cfg;
    char err[256];
    unsigned char secret[32];

    o.trunk = o.trunks = -1;
    o.timeout = 30;
    while ((opt = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (opt) {
        case 's':
            site = optarg;
            break;
        case 'S':
            sites = optarg;
            break;
        case 't':
        case 'k':
            if (mln_parse_int(optarg, &v) != MLN_OK || v < 0 || v > MLN_RELAY_MAX_TRUNKS)
                return bad("--trunk and --trunks: 0 to 64, not '%s'", optarg);
            *(opt == 't' ? &o.trunk : &o.trunks) = (int)v;
            break;
        case 'l':
        case 'w':
            if (!mln_gw_parse_addr(optarg, opt == 'l' ? &o.listen_at : &o.wan_at))
                return bad("--listen and --wan take IPV4:PORT, not '%s'", optarg);
            *(opt == 'l' ? &have_listen : &have_wan) = 1;
            break;
        case 'p':
            if (npeers == MLN_RELAY_MAX_SITES)
                return bad("too many --peer (%s)", optarg);
            peers[npeers++] = optarg;
            break;
        case 'T': {
            char *end = NULL;
            o.timeout = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(o.timeout >= 0.1 && o.timeout <= 86400))
                return bad("--timeout: seconds, 0.1 to 86400, not '%s'", optarg);
            have_timeout = 1;
            break;
        }
        case 'L':
            if ((level = log_level(optarg)) < 0)
                return bad("--log: none, error, warn, info or debug, not '%s'", optarg);
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return GW_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return bad("unexpected argument '%s'", argv[optind]);
    if (site == NULL || sites == NULL || o.trunk < 0 || o.trunks < 1 || !have_listen || !have_wan)
        return bad("%s", "--site, --sites, --trunk, --trunks, --listen and --wan are needed");
    if (o.trunk >= o.trunks)
        return bad("--trunk must be below --trunks (%s)", "trunks count from 0");
    if (mln_relay_sites_parse(sites, &o.sites, &why) != MLN_OK)
        return bad("--sites: %s", why);
    if ((o.site = mln_relay_site_index(&o.sites, site)) < 0)
        return bad("--site '%s' is not in --sites", site);
    mln_gw_log_setup(site, o.trunk, level);
    for (int i = 0; i < npeers; i++) {
        const char *eq = strchr(peers[i], '=');
        char name[16];
        int s;
        if (eq == NULL || (size_t)(eq - peers[i]) >= sizeof(name))
            return bad("--peer takes SITE=IPV4:PORT, not '%s'", peers[i]);
        memcpy(name, peers[i], (size_t)(eq - peers[i]));
        name[eq - peers[i]] = '\0';
        s = mln_relay_site_index(&o.sites, name);
        if (s < 0 || s == o.site)
            return bad("--peer names '%s': no other site of --sites", peers[i]);
        if (!mln_gw_parse_addr(eq + 1, &o.peer[s]))
            return bad("--peer takes SITE=IPV4:PORT, not '%s'", peers[i]);
        o.has_peer[s] = 1;
    }
    for (int s = o.site + 1; s < o.sites.nsites; s++)
        if (!o.has_peer[s])
            return bad("no --peer for site '%s' (this gateway connects to higher sites)",
                       o.sites.name[s]);
    if (mln_config_load(NULL, NULL, &cfg, err, sizeof(err)) != MLN_OK) {
        fprintf(stderr, "mln-gateway: %s\n", err);
        return GW_EXIT_USAGE;
    }
    o.mode = cfg.link_security;
    o.cipher = cfg.link_cipher;
    o.payload_mac = cfg.link_payload_mac;
    o.window = cfg.relay_window; /* MLN_RELAY_WINDOW, as the ranks read it */
    if (!have_timeout)           /* MLN_RELAY_TIMEOUT (default 30), as the ranks read it */
        o.timeout = (double)cfg.relay_timeout;
    if (mln_relay_secret_from_env(secret) != MLN_OK)
        return GW_EXIT_USAGE; /* its line is out */
    rc = mln_gw_run(&o, secret);
    memset(secret, 0, sizeof(secret));
    return rc;
}
