/*
 * gateway_int.h - mln-gateway's parts (docs/RELAY.md "The gateway"): the options
 * (gateway_main.c parses them), the loop (gateway.c), the log sink (gateway_log.c).
 */
#ifndef MLN_GATEWAY_INT_H
#define MLN_GATEWAY_INT_H

#include "relay_int.h"

#include <netinet/in.h>

/* Exit statuses of mln-gateway. */
enum {
    GW_EXIT_OK = 0,     /* every rank said BYE (or SIGTERM / SIGINT) */
    GW_EXIT_FAILED = 1, /* the run failed: FAIL or ABORT went to the ranks */
    GW_EXIT_USAGE = 2   /* a wrong option, secret or setting: one line said which */
};

typedef struct gw_opts {
    mln_relay_sites_t sites;
    int site; /* this gateway's site index */
    int trunk, trunks;
    struct sockaddr_in listen_at, wan_at;         /* port 0: any free one */
    struct sockaddr_in peer[MLN_RELAY_MAX_SITES]; /* --peer SITE=ADDR:PORT */
    int has_peer[MLN_RELAY_MAX_SITES];
    double timeout;  /* --timeout: connecting, handshakes, TCP_USER_TIMEOUT on the WAN */
    uint64_t window; /* MLN_RELAY_WINDOW: credit units per pair */
    int mode, cipher, payload_mac; /* MLN_LINK_* */
} gw_opts_t;

/* Runs the gateway until the run ends; the exit status (GW_EXIT_*). */
int mln_gw_run(const gw_opts_t *o, const unsigned char secret[32]);

/* "ADDR:PORT" (IPv4 dotted quad) into sa; 0 when malformed. */
int mln_gw_parse_addr(const char *text, struct sockaddr_in *sa);

/* The log sink (gateway_log.c): lines "mln-gateway[SITE/TRUNK] LEVEL: message" on stderr. */
void mln_gw_log_setup(const char *site, int trunk, int level);

#endif /* MLN_GATEWAY_INT_H */
