/*
 * relay_open.c - a rank joins the relays (relay.h mln_relay_open): the run from MLN_GRID_SITES,
 * MLN_GRID_SITE, MLN_GRID_GATEWAYS and MLN_GRID_SECRET, the settings from the tunables
 * (MLN_RELAY_*, MLN_LINK_*), then one connection per trunk to the site's gateways, each
 * dialled without blocking and proven with the relay handshake (relay_io.c), all within
 * MLN_RELAY_TIMEOUT.  A gateway that refuses (not listening yet) is dialled again every
 * 100 ms; one whose handshake fails (another secret, another run) is an error at once.  No MPI.
 */
#define _GNU_SOURCE /* SOCK_NONBLOCK, SOCK_CLOEXEC */
#include "relay_rank_int.h"

#include "mln_core.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- opening ------------------------------------------------------------------------------ */

int mln_relay_wanted(void)
{
    const char *v = getenv("MLN_GRID_SITES");

    return v != NULL && v[0] != '\0';
}

/* The settings from the tunables (MLN_RELAY_*, MLN_LINK_*). */
static mln_status_t opts_from_env(mln_relay_opts_t *o)
{
    mln_config_t cfg;
    char err[256] = "";

    if (mln_config_load(NULL, NULL, &cfg, err, sizeof(err)) != MLN_OK) {
        MLN_ERROR("multilane grid: %s", err);
        return MLN_ERR_CONFIG;
    }
    *o = (mln_relay_opts_t){.window = cfg.relay_window,
                            .chunk = cfg.relay_chunk,
                            .stripe_min = cfg.relay_stripe_min,
                            .timeout = (double)cfg.relay_timeout,
                            .link_mode = cfg.link_security,
                            .link_cipher = cfg.link_cipher,
                            .link_payload_mac = cfg.link_payload_mac};
    return MLN_OK;
}

/* Gateway t's address from "host:port" (n bytes; host may be [v6]) into *sa. */
static mln_status_t gateway_addr(const char *text, size_t n, struct sockaddr_storage *sa,
                                 socklen_t *salen)
{
    char host[80], port[8];
    const char *colon = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    size_t hlen;
    int rc;

    for (size_t i = 0; i < n; i++)
        if (text[i] == ':')
            colon = text + i;
    if (colon == NULL || colon == text || (size_t)(text + n - colon - 1) >= sizeof(port) ||
        colon + 1 == text + n)
        return MLN_ERR_CONFIG;
    hlen = (size_t)(colon - text);
    if (text[0] == '[' && hlen >= 2 && colon[-1] == ']') {
        text++;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= sizeof(host))
        return MLN_ERR_CONFIG;
    memcpy(host, text, hlen);
    host[hlen] = '\0';
    memcpy(port, colon + 1, (size_t)(n - (size_t)(colon + 1 - text)));
    port[n - (size_t)(colon + 1 - text)] = '\0';
    hints.ai_flags = AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0 || ai == NULL || ai->ai_addrlen > sizeof(*sa)) {
        MLN_ERROR("multilane grid: MLN_GRID_GATEWAYS: cannot resolve '%s': %s", host,
                  rc ? gai_strerror(rc) : "no address");
        if (ai)
            freeaddrinfo(ai);
        return MLN_ERR_CONFIG;
    }
    memcpy(sa, ai->ai_addr, ai->ai_addrlen);
    *salen = ai->ai_addrlen;
    freeaddrinfo(ai);
    return MLN_OK;
}

/* The run from MLN_GRID_* into r (sites, site, me, trunks, addresses). */
static mln_status_t parse_grid(mln_relay_t *r, int local_rank, struct sockaddr_storage *sa,
                               socklen_t *salen)
{
    const char *sites = getenv("MLN_GRID_SITES"), *site = getenv("MLN_GRID_SITE");
    const char *gws = getenv("MLN_GRID_GATEWAYS"), *why = NULL, *p;

    if (mln_relay_sites_parse(sites, &r->sites, &why) != MLN_OK) {
        MLN_ERROR("multilane grid: MLN_GRID_SITES='%.80s': %s", sites ? sites : "", why);
        return MLN_ERR_CONFIG;
    }
    r->site = mln_relay_site_index(&r->sites, site);
    if (r->site < 0) {
        MLN_ERROR("multilane grid: MLN_GRID_SITE='%.20s' is no site of MLN_GRID_SITES='%.80s'",
                  site ? site : "", sites);
        return MLN_ERR_CONFIG;
    }
    if (local_rank < 0 || local_rank >= r->sites.size[r->site]) {
        MLN_ERROR("multilane grid: rank %d of site %s: the site has %d ranks (MLN_GRID_SITES)",
                  local_rank, r->sites.name[r->site], r->sites.size[r->site]);
        return MLN_ERR_CONFIG;
    }
    r->me = r->sites.first[r->site] + local_rank;
    r->trunks = 0;
    for (p = gws; p != NULL && p[0] != '\0';) {
        const char *comma = strchr(p, ',');
        const size_t n = comma ? (size_t)(comma - p) : strlen(p);

        if (r->trunks == MLN_RELAY_MAX_TRUNKS) {
            MLN_ERROR("multilane grid: MLN_GRID_GATEWAYS: more than %d gateways",
                      MLN_RELAY_MAX_TRUNKS);
            return MLN_ERR_CONFIG;
        }
        if (gateway_addr(p, n, &sa[r->trunks], &salen[r->trunks]) != MLN_OK) {
            MLN_ERROR("multilane grid: MLN_GRID_GATEWAYS: '%.*s' is no HOST:PORT",
                      (int)(n > 80 ? 80 : n), p);
            return MLN_ERR_CONFIG;
        }
        snprintf(r->gw_addr[r->trunks], sizeof(r->gw_addr[0]), "%.*s", (int)(n > 80 ? 80 : n), p);
        r->trunks++;
        p = comma ? comma + 1 : NULL;
    }
    if (r->trunks == 0) {
        MLN_ERROR("multilane grid: MLN_GRID_GATEWAYS is not set: the site's gateways (HOST:PORT,"
                  "...) are needed");
        return MLN_ERR_CONFIG;
    }
    return MLN_OK;
}

/* Starts trunk t's connection: a non-blocking connect, then the relay handshake (which waits
 * for the connect).  0: no socket (errno). */
static int dial(mln_relay_t *r, int t, const struct sockaddr_storage *sa, socklen_t salen,
                double left)
{
    const int one = 1;
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return 0;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)sa, salen) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return 0;
    }
    memset(&r->conns[t], 0, sizeof(r->conns[t]));
    mln_relay_conn_connect(&r->conns[t], fd, &r->job,
                           mln_relay_endpoints(r->sites.nranks, r->sites.nsites), r->me,
                           mln_relay_gw_id(r->sites.nranks, r->site, t), t, r->trunks, left);
    return 1;
}

/* Connects every trunk within r->timeout: a gateway that refuses (not up yet) is dialled
 * again every 100 ms; one whose handshake fails is an error at once. */
static mln_status_t connect_all(mln_relay_t *r, const struct sockaddr_storage *sa,
                                const socklen_t *salen)
{
    enum { IDLE, SHAKING, UP } state[MLN_RELAY_MAX_TRUNKS];
    double retry[MLN_RELAY_MAX_TRUNKS];
    char why[MLN_RELAY_MAX_TRUNKS][200];
    const double deadline = mln_relay_now() + r->timeout;

    for (int t = 0; t < r->trunks; t++) {
        state[t] = IDLE;
        retry[t] = 0;
        snprintf(why[t], sizeof(why[t]), "no answer");
        r->gone[t] = 1; /* until up: mln_relay_close leaves it alone */
    }
    for (;;) {
        struct pollfd pfd[MLN_RELAY_MAX_TRUNKS];
        double now = mln_relay_now();
        int up = 0, np = 0, wait_ms;

        for (int t = 0; t < r->trunks; t++) {
            mln_relay_conn_t *c = &r->conns[t];
            int rc;

            if (state[t] == IDLE && now >= retry[t]) {
                if (!dial(r, t, &sa[t], salen[t], deadline - now)) {
                    snprintf(why[t], sizeof(why[t]), "%s", strerror(errno));
                    retry[t] = now + 0.1;
                    continue;
                }
                state[t] = SHAKING;
            }
            if (state[t] != SHAKING)
                continue;
            rc = mln_relay_conn_handshake(c);
            if (rc == 1) {
                state[t] = UP;
                r->gone[t] = 0;
                c->scope = (mln_relay_scope_t){.nranks = r->sites.nranks,
                                               .trunks = r->trunks,
                                               .from_rank = -1,
                                               .to_rank = r->me};
            } else if (rc < 0) {
                snprintf(why[t], sizeof(why[t]), "%s", c->why[0] ? c->why : "handshake failed");
                if (c->hs_connected) { /* it answered, and not as a gateway of this run */
                    MLN_ERROR("multilane grid: rank %d of site %s: gateway %d at %s: %s", r->me,
                              r->sites.name[r->site], t, r->gw_addr[t], why[t]);
                    for (int k = 0; k < r->trunks; k++)
                        if (state[k] == SHAKING)
                            mln_relay_conn_close(&r->conns[k], NULL);
                    return MLN_ERR_PEER;
                }
                mln_relay_conn_close(c, NULL); /* refused: not listening yet */
                state[t] = IDLE;
                retry[t] = now + 0.1;
            }
        }
        for (int t = 0; t < r->trunks; t++) {
            up += state[t] == UP;
            if (state[t] == SHAKING) {
                pfd[np].fd = r->conns[t].fd;
                pfd[np].events = mln_relay_conn_events(&r->conns[t]);
                np++;
            }
        }
        if (up == r->trunks)
            return MLN_OK;
        now = mln_relay_now();
        if (now >= deadline) {
            for (int t = 0; t < r->trunks; t++) {
                if (state[t] == UP)
                    continue;
                MLN_ERROR("multilane grid: rank %d of site %s cannot reach gateway %d at %s "
                          "within %g s (MLN_RELAY_TIMEOUT): %s",
                          r->me, r->sites.name[r->site], t, r->gw_addr[t], r->timeout, why[t]);
                break;
            }
            for (int t = 0; t < r->trunks; t++)
                if (state[t] == SHAKING)
                    mln_relay_conn_close(&r->conns[t], NULL);
            return MLN_ERR_TIMEOUT;
        }
        wait_ms = (int)((deadline - now) * 1000.0) + 1;
        poll(pfd, (nfds_t)np, wait_ms < 50 ? wait_ms : 50);
    }
}

mln_status_t mln_relay_open(int local_rank, const mln_relay_opts_t *opts, mln_relay_t **out)
{
    struct sockaddr_storage sa[MLN_RELAY_MAX_TRUNKS];
    socklen_t salen[MLN_RELAY_MAX_TRUNKS];
    unsigned char secret[32];
    mln_relay_opts_t o;
    mln_relay_t *r;
    mln_status_t st;

    if (out == NULL)
        return MLN_ERR_ARG;
    if (opts == NULL && (st = opts_from_env(&o)) != MLN_OK)
        return st;
    if (opts != NULL)
        o = *opts;
    if (o.chunk == 0 || o.chunk > MLN_RELAY_FRAME_MAX ||
        o.window < o.chunk + MLN_RELAY_FRAME_COST || !(o.timeout > 0)) {
        MLN_ERROR("multilane grid: MLN_RELAY_CHUNK must be 1 to %u bytes and MLN_RELAY_WINDOW at "
                  "least MLN_RELAY_CHUNK + %d (chunk %llu, window %llu), MLN_RELAY_TIMEOUT > 0",
                  MLN_RELAY_FRAME_MAX, MLN_RELAY_FRAME_COST, (unsigned long long)o.chunk,
                  (unsigned long long)o.window);
        return MLN_ERR_CONFIG;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return MLN_ERR_NOMEM;
    r->window = o.window;
    r->chunk = o.chunk;
    r->stripe_min = o.stripe_min;
    r->timeout = o.timeout;
    MLN_CHECK(parse_grid(r, local_rank, sa, salen), st, err_free);
    MLN_CHECK(mln_relay_secret_from_env(secret), st, err_free);
    st = mln_relay_job_init(&r->job, secret, o.link_mode, o.link_cipher, o.link_payload_mac,
                            r->sites.nranks, r->sites.nsites);
    sodium_memzero(secret, sizeof(secret));
    if (st != MLN_OK)
        goto err_free;
    r->tx = calloc((size_t)r->sites.nranks, sizeof(*r->tx));
    r->rx = calloc((size_t)r->sites.nranks, sizeof(*r->rx));
    r->credit = calloc(4 * (size_t)r->sites.nranks * (size_t)r->trunks, sizeof(*r->credit));
    if (r->tx == NULL || r->rx == NULL || r->credit == NULL) {
        st = MLN_ERR_NOMEM;
        goto err_job;
    }
    for (int i = 0; i < r->sites.nranks; i++) {
        uint64_t *c = r->credit + 4 * (size_t)i * (size_t)r->trunks;

        r->tx[i].t_sent = c;
        r->tx[i].t_acked = c + r->trunks;
        r->rx[i].t_units = c + 2 * r->trunks;
        r->rx[i].t_acked = c + 3 * r->trunks;
    }
    MLN_CHECK(connect_all(r, sa, salen), st, err_conns);
    *out = r;
    return MLN_OK;

err_conns:
    for (int t = 0; t < r->trunks; t++)
        if (!r->gone[t])
            mln_relay_conn_close(&r->conns[t], "open failed");
err_job:
    mln_link_job_wipe(&r->job);
    free(r->tx);
    free(r->rx);
    free(r->credit);
err_free:
    free(r);
    return st;
}
