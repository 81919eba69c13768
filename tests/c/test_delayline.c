/* test_delayline.c - the link model of mln-delayline with no network: parsers, flow keys,
 * heap order, delay, serialisation, tail drop, seeded loss, the per-flow cap and the
 * blackhole. */
#include "delayline_core.h"
#include "mln_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS (DL_NS_PER_S / 1000)
#define US (DL_NS_PER_S / 1000000)

static void test_parsers(void)
{
    uint64_t u = 0;
    double p = -1;

    MLN_TEST_ASSERT(dl_parse_time("5ms", &u) == 0 && u == 5 * MS);
    MLN_TEST_ASSERT(dl_parse_time("250us", &u) == 0 && u == 250 * US);
    MLN_TEST_ASSERT(dl_parse_time("1s", &u) == 0 && u == DL_NS_PER_S);
    MLN_TEST_ASSERT(dl_parse_time("1.5ms", &u) == 0 && u == 1500 * US);
    MLN_TEST_ASSERT(dl_parse_time("100ns", &u) == 0 && u == 100);
    MLN_TEST_ASSERT(dl_parse_time("0", &u) == 0 && u == 0);
    const char *bad_time[] = {"", "x", "5", "-5ms", "5 ms", "5mss", "ms", "1e3ms", "2h", "7200s"};
    for (size_t i = 0; i < sizeof(bad_time) / sizeof(bad_time[0]); i++)
        MLN_TEST_ASSERT(dl_parse_time(bad_time[i], &u) != 0);

    MLN_TEST_ASSERT(dl_parse_rate("1gbit", &u) == 0 && u == 1000000000u);
    MLN_TEST_ASSERT(dl_parse_rate("100mbit", &u) == 0 && u == 100000000u);
    MLN_TEST_ASSERT(dl_parse_rate("500kbit", &u) == 0 && u == 500000u);
    MLN_TEST_ASSERT(dl_parse_rate("1000000", &u) == 0 && u == 1000000u);
    MLN_TEST_ASSERT(dl_parse_rate("2.5Gbit", &u) == 0 && u == 2500000000u);
    MLN_TEST_ASSERT(dl_parse_rate("0", &u) == 0 && u == 0);
    const char *bad_rate[] = {"", "fast", "-1gbit", "1gbps", "1 gbit", "0.1", "nan", "1gbitx"};
    for (size_t i = 0; i < sizeof(bad_rate) / sizeof(bad_rate[0]); i++)
        MLN_TEST_ASSERT(dl_parse_rate(bad_rate[i], &u) != 0);

    MLN_TEST_ASSERT(dl_parse_loss("0.001", &p) == 0 && fabs(p - 0.001) < 1e-12);
    MLN_TEST_ASSERT(dl_parse_loss("0.1%", &p) == 0 && fabs(p - 0.001) < 1e-12);
    MLN_TEST_ASSERT(dl_parse_loss("0", &p) == 0 && p == 0.0);
    MLN_TEST_ASSERT(dl_parse_loss("100%", &p) == 0 && p == 1.0);
    const char *bad_loss[] = {"", "-0.1", "1.5", "101%", "0.1%%", "x", "inf", "1e-3"};
    for (size_t i = 0; i < sizeof(bad_loss) / sizeof(bad_loss[0]); i++)
        MLN_TEST_ASSERT(dl_parse_loss(bad_loss[i], &p) != 0);

    MLN_TEST_ASSERT(dl_parse_size("4096", &u) == 0 && u == 4096);
    MLN_TEST_ASSERT(dl_parse_size("256K", &u) == 0 && u == 256 * 1024);
    MLN_TEST_ASSERT(dl_parse_size("1M", &u) == 0 && u == 1024 * 1024);
    MLN_TEST_ASSERT(dl_parse_size("1MiB", &u) == 0 && u == 1024 * 1024);
    MLN_TEST_ASSERT(dl_parse_size("-1", &u) != 0 && dl_parse_size("1X", &u) != 0);
    MLN_TEST_ASSERT(dl_parse_size("", &u) != 0 && dl_parse_size("99999999999T", &u) != 0);

    uint16_t port = 0;
    MLN_TEST_ASSERT(dl_parse_blackhole("21000:4M", &port, &u) == 0 && port == 21000);
    MLN_TEST_ASSERT(u == 4u << 20);
    MLN_TEST_ASSERT(dl_parse_blackhole("1:0", &port, &u) == 0 && port == 1 && u == 0);
    MLN_TEST_ASSERT(dl_parse_blackhole("65535:1000", &port, &u) == 0 && port == 65535);
    const char *bad_bh[] = {"",         "21000",    ":4M",     "0:4M",      "65536:1",
                            "-1:4M",    "21000:",   "21000:x", "2 1:4M",    "x:4M",
                            "021000:1", "21000:-1", "1e3:1",   "21000:4M:1"};
    for (size_t i = 0; i < sizeof(bad_bh) / sizeof(bad_bh[0]); i++) {
        if (dl_parse_blackhole(bad_bh[i], &port, &u) == 0)
            fprintf(stderr, "blackhole '%s' parsed\n", bad_bh[i]);
        MLN_TEST_ASSERT(dl_parse_blackhole(bad_bh[i], &port, &u) != 0);
    }
}

static int cli(char *err, size_t errlen, dl_config_t *cfg, int argc, char **argv)
{
    return dl_cli_parse(argc, argv, cfg, err, errlen);
}

static void test_cli(void)
{
    dl_config_t c;
    char err[256];
    char *good[] = {
        "mln-delayline", "--a",   "va",        "--b",  "vb",       "--delay",        "5ms",
        "--rate",        "1gbit", "--loss-ba", "0.1%", "--seed=7", "--flow-rate-ab", "100mbit"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 14, good) == 0);
    MLN_TEST_ASSERT(strcmp(c.ifname[0], "va") == 0 && strcmp(c.ifname[1], "vb") == 0);
    for (int d = 0; d < DL_NDIRS; d++) {
        MLN_TEST_ASSERT(c.dir[d].delay_ns == 5 * MS && c.dir[d].rate_bps == 1000000000u);
        MLN_TEST_ASSERT(c.dir[d].queue_bytes == 1250000); /* one BDP at 10 ms RTT */
        MLN_TEST_ASSERT(c.dir[d].flow_queue_bytes == DL_DEFAULT_FLOW_QUEUE);
    }
    MLN_TEST_ASSERT(c.dir[DL_AB].loss == 0.0 && fabs(c.dir[DL_BA].loss - 0.001) < 1e-12);
    MLN_TEST_ASSERT(c.dir[DL_AB].flow_rate_bps == 100000000u && c.dir[DL_BA].flow_rate_bps == 0);
    MLN_TEST_ASSERT(c.dir[DL_AB].seed == 7 && c.dir[DL_BA].seed != 7);

    char *defaults[] = {"x", "--a", "p", "--b", "q", "--queue-ab", "2M"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7, defaults) == 0);
    MLN_TEST_ASSERT(c.dir[DL_AB].queue_bytes == 2u << 20 && c.dir[DL_BA].queue_bytes == 65536);
    MLN_TEST_ASSERT(c.dir[DL_AB].delay_ns == 0 && c.dir[DL_AB].seed == 1);

    char *help[] = {"x", "--help"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 2, help) == 1);
    char *bad_delay[] = {"x", "--a", "p", "--b", "q", "--delay", "x"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7, bad_delay) == -1);
    MLN_TEST_ASSERT(strcmp(err, "--delay: invalid time 'x' (expected e.g. 5ms, 250us, 0)") == 0);
    char *missing[] = {"x", "--a", "p", "--b", "q", "--rate"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 6, missing) == -1 && strstr(err, "--rate"));
    char *unknown[] = {"x", "--a", "p", "--b", "q", "--jitter", "1ms"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7, unknown) == -1 && strstr(err, "--jitter"));
    char *no_b[] = {"x", "--a", "p"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 3, no_b) == -1 && strstr(err, "--b"));
    char *same[] = {"x", "--a", "p", "--b", "p"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 5, same) == -1);
    char *bad_loss[] = {"x", "--a", "p", "--b", "q", "--loss", "2"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7, bad_loss) == -1 && strstr(err, "--loss"));
    char *bad_iv[] = {"x", "--a", "p", "--b", "q", "--stats-interval", "0"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7, bad_iv) == -1);

    char *bh[] = {"x", "--a", "p", "--b", "q", "--blackhole", "21000:2M", "--blackhole=21100:0"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 8, bh) == 0 && c.nblackholes == 2);
    MLN_TEST_ASSERT(c.blackhole[0].port == 21000 && c.blackhole[0].after_bytes == 2u << 20);
    MLN_TEST_ASSERT(c.blackhole[1].port == 21100 && c.blackhole[1].after_bytes == 0);
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7, defaults) == 0 && c.nblackholes == 0);
    char *bad_bh[] = {"x", "--a", "p", "--b", "q", "--blackhole", "21000"};
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7, bad_bh) == -1);
    MLN_TEST_ASSERT(strcmp(err, "--blackhole: invalid blackhole '21000' (expected PORT:BYTES, "
                                "e.g. 21000:4M)") == 0);
    char *many[5 + 2 * (DL_MAX_BLACKHOLES + 1)] = {"x", "--a", "p", "--b", "q"};
    for (int i = 0; i <= DL_MAX_BLACKHOLES; i++) {
        many[5 + 2 * i] = "--blackhole";
        many[6 + 2 * i] = "80:1";
    }
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 5 + 2 * DL_MAX_BLACKHOLES, many) == 0);
    MLN_TEST_ASSERT(c.nblackholes == DL_MAX_BLACKHOLES);
    MLN_TEST_ASSERT(cli(err, sizeof(err), &c, 7 + 2 * DL_MAX_BLACKHOLES, many) == -1);
    MLN_TEST_ASSERT(strstr(err, "--blackhole: at most") != NULL);
}

static size_t eth_ipv4(uint8_t *f, int vlan, uint8_t proto, uint16_t frag, uint16_t sp, uint16_t dp)
{
    size_t o = 12;
    memset(f, 0, 128);
    if (vlan) {
        f[o++] = 0x81, f[o++] = 0x00, f[o++] = 0x00, f[o++] = 0x05;
    }
    f[o++] = 0x08, f[o++] = 0x00;
    uint8_t *ip = f + o;
    ip[0] = 0x45, ip[6] = (uint8_t)(frag >> 8), ip[7] = (uint8_t)frag, ip[9] = proto;
    ip[12] = 10, ip[13] = 250, ip[14] = 0, ip[15] = 1;
    ip[16] = 10, ip[17] = 250, ip[18] = 0, ip[19] = 2;
    ip[20] = (uint8_t)(sp >> 8), ip[21] = (uint8_t)sp, ip[22] = (uint8_t)(dp >> 8);
    ip[23] = (uint8_t)dp;
    return o + 40;
}

static void test_flow_key(void)
{
    uint8_t f[128];
    dl_flow_key_t k;
    size_t n;

    n = eth_ipv4(f, 0, 6, 0x4000 /* DF */, 40000, 5201);
    dl_flow_key_parse(f, n, &k);
    MLN_TEST_ASSERT(k.ethertype == 0x0800 && k.proto == 6 && k.src == 0x0afa0001u);
    MLN_TEST_ASSERT(k.dst == 0x0afa0002u && k.sport == 40000 && k.dport == 5201 && k.pad == 0);
    n = eth_ipv4(f, 1, 17, 0, 53, 9999); /* 802.1Q-tagged UDP */
    dl_flow_key_parse(f, n, &k);
    MLN_TEST_ASSERT(k.ethertype == 0x0800 && k.proto == 17 && k.sport == 53 && k.dport == 9999);
    n = eth_ipv4(f, 0, 1, 0, 0x0800, 0x1234); /* ICMP: no ports */
    dl_flow_key_parse(f, n, &k);
    MLN_TEST_ASSERT(k.proto == 1 && k.sport == 0 && k.dport == 0 && k.src == 0x0afa0001u);
    n = eth_ipv4(f, 0, 17, 0x2000 /* MF */, 53, 9999); /* a fragment: ports not trusted */
    dl_flow_key_parse(f, n, &k);
    MLN_TEST_ASSERT(k.proto == 17 && k.sport == 0 && k.dport == 0);
    memset(f, 0, sizeof(f)); /* ARP: one flow per ethertype */
    f[12] = 0x08, f[13] = 0x06;
    dl_flow_key_parse(f, 42, &k);
    MLN_TEST_ASSERT(k.ethertype == 0x0806 && k.src == 0 && k.proto == 0 && k.sport == 0);
    dl_flow_key_parse(f, 5, &k); /* runt */
    MLN_TEST_ASSERT(k.ethertype == 0);
    n = eth_ipv4(f, 0, 6, 0, 1, 2);
    dl_flow_key_parse(f, 30, &k); /* truncated IP header */
    MLN_TEST_ASSERT(k.ethertype == 0x0800 && k.src == 0 && k.sport == 0);
}

/* An Ethernet + IPv4 + TCP frame from 10.250.0.`s`:sp to 10.250.0.`d`:dp with `payload` bytes
 * (padded to 60 bytes like a real short frame); its length. */
static size_t eth_tcp(uint8_t *f, uint8_t s, uint16_t sp, uint8_t d, uint16_t dp, uint16_t payload)
{
    const size_t total = 20 + 32 + payload; /* IP, TCP with 12 bytes of options, payload */
    uint8_t *ip = f + 14;

    memset(f, 0, 14 + total + 64);
    f[12] = 0x08, f[13] = 0x00;
    ip[0] = 0x45, ip[2] = (uint8_t)(total >> 8), ip[3] = (uint8_t)total, ip[6] = 0x40;
    ip[9] = 6;
    ip[12] = 10, ip[13] = 250, ip[14] = 0, ip[15] = s;
    ip[16] = 10, ip[17] = 250, ip[18] = 0, ip[19] = d;
    ip[20] = (uint8_t)(sp >> 8), ip[21] = (uint8_t)sp, ip[22] = (uint8_t)(dp >> 8);
    ip[23] = (uint8_t)dp;
    ip[32] = 8 << 4; /* data offset: 8 words */
    return 14 + total < 60 ? 60 : 14 + total;
}

static void test_tcp_payload(void)
{
    uint8_t f[16384];
    size_t n;

    n = eth_tcp(f, 1, 40000, 2, 21000, 1000);
    MLN_TEST_ASSERT(n == 14 + 52 + 1000 && dl_tcp_payload(f, n) == 1000);
    n = eth_tcp(f, 1, 40000, 2, 21000, 0); /* a pure ACK, padded to 60 bytes */
    MLN_TEST_ASSERT(n == 66 && dl_tcp_payload(f, n) == 0);
    n = eth_tcp(f, 1, 40000, 2, 21000, 4);
    MLN_TEST_ASSERT(dl_tcp_payload(f, n) == 4);
    MLN_TEST_ASSERT(dl_tcp_payload(f, n - 10) == 0); /* truncated: claims more than it holds */
    f[14 + 9] = 17;                                  /* UDP */
    MLN_TEST_ASSERT(dl_tcp_payload(f, n) == 0);
    n = eth_tcp(f, 1, 40000, 2, 21000, 100);
    f[14 + 6] = 0x20; /* MF: a fragment */
    MLN_TEST_ASSERT(dl_tcp_payload(f, n) == 0);
    n = eth_tcp(f, 1, 40000, 2, 21000, 100);
    f[14 + 32] = 0xf0; /* data offset 60: 72 bytes of payload left */
    MLN_TEST_ASSERT(dl_tcp_payload(f, n) == 72);
    n = eth_tcp(f, 1, 40000, 2, 21000, 4);
    f[14 + 32] = 0xf0; /* data offset 60 > the 36 bytes the IP length leaves after its header */
    MLN_TEST_ASSERT(dl_tcp_payload(f, n) == 0);
    f[14 + 32] = 0x40; /* 16: less than a TCP header */
    MLN_TEST_ASSERT(dl_tcp_payload(f, n) == 0);
    n = eth_tcp(f, 1, 40000, 2, 21000, 100);
    f[14 + 3] = 30; /* IP total length below IP + TCP headers */
    f[14 + 2] = 0;
    MLN_TEST_ASSERT(dl_tcp_payload(f, n) == 0);
    MLN_TEST_ASSERT(dl_tcp_payload(f, 10) == 0 && dl_tcp_payload(f, 30) == 0);
}

/* The blackhole: the first flow to the port that passes the count is cut off both ways from the
 * next frame on; other flows (same port, other ports, reverse direction of others) go on. */
static void test_blackhole(void)
{
    dl_blackhole_spec_t spec[2] = {{.port = 21000, .after_bytes = 10000},
                                   {.port = 21100, .after_bytes = 0}};
    dl_blackhole_t b;
    uint8_t f[16384];
    size_t n;
    int rule = -1;
    char text[64];

    dl_blackhole_init(&b, spec, 2);
    MLN_TEST_ASSERT(b.nrules == 2 && !b.rule[0].struck && !b.rule[1].struck);
    /* Two lanes to port 21000 (from ports 40000 and 40001); the second carries more. */
    for (int i = 0; i < 5; i++) { /* 5 x 1000 B on lane 1, 5 x 1500 B on lane 2 */
        n = eth_tcp(f, 1, 40000, 2, 21000, 1000);
        MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
        n = eth_tcp(f, 1, 40001, 2, 21000, 1500);
        MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
        n = eth_tcp(f, 2, 21000, 1, 40001, 0); /* its ACK: not counted, not dropped */
        MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
    }
    n = eth_tcp(f, 2, 21000, 1, 40001, 9000); /* payload from the port: not counted */
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
    n = eth_tcp(f, 1, 40001, 2, 21000, 2500); /* 7500 + 2500 = 10000: not past it yet */
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS && !b.rule[0].struck);
    n = eth_tcp(f, 1, 40001, 2, 21000, 1); /* 10001: struck, this frame still goes */
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_STRUCK && rule == 0);
    MLN_TEST_ASSERT(b.rule[0].struck && b.rule[0].flow_bytes == 10001 && !b.rule[1].struck);
    dl_flow_key_format(&b.rule[0].flow, text, sizeof(text));
    MLN_TEST_ASSERT(strcmp(text, "10.250.0.1:40001>10.250.0.2:21000") == 0);
    n = eth_tcp(f, 1, 40001, 2, 21000, 0); /* everything of it, both ways, ACKs too */
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_DROP);
    n = eth_tcp(f, 2, 21000, 1, 40001, 0);
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_DROP);
    n = eth_tcp(f, 2, 21000, 1, 40001, 100);
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_DROP);
    for (int i = 0; i < 20; i++) { /* the other lane goes on, and never strikes again */
        n = eth_tcp(f, 1, 40000, 2, 21000, 8000);
        MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
        n = eth_tcp(f, 2, 21000, 1, 40000, 0);
        MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
    }
    n = eth_tcp(f, 3, 40001, 2, 21000, 100); /* same ports, another host: another flow */
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
    /* Rule 2 (after 0 bytes): the first payload byte to 21100 strikes; a pure ACK does not. */
    n = eth_tcp(f, 2, 50000, 1, 21100, 0);
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS && !b.rule[1].struck);
    n = eth_tcp(f, 2, 50000, 1, 21100, 1);
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_STRUCK && rule == 1);
    n = eth_tcp(f, 1, 21100, 2, 50000, 0);
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_DROP);
    f[14 + 9] = 17; /* the same ports over UDP: not the flow */
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);

    /* No rule: nothing is looked at.  A full count table: new flows are not counted. */
    dl_blackhole_init(&b, spec, 0);
    n = eth_tcp(f, 1, 40001, 2, 21000, 1000);
    MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS && b.ncount == 0);
    dl_blackhole_init(&b, spec, 1);
    for (uint16_t i = 0; i < DL_BLACKHOLE_FLOWS + 10; i++) {
        n = eth_tcp(f, 1, (uint16_t)(1000 + i), 2, 21000, 100);
        MLN_TEST_ASSERT(dl_blackhole_frame(&b, f, n, &rule) == DL_BH_PASS);
    }
    MLN_TEST_ASSERT(b.ncount == DL_BLACKHOLE_FLOWS && b.untracked == 10);
}

static void test_heap_pool(void)
{
    dl_heap_t h;
    dl_event_t e;
    uint64_t last_t = 0, last_seq = 0;
    dl_rng_t r;

    MLN_TEST_ASSERT(dl_heap_init(&h, 1000) == 0);
    dl_rng_seed(&r, 3);
    for (uint32_t i = 0; i < 1000; i++) {
        e.time_ns = dl_rng_next(&r) % 50; /* many ties */
        e.seq = i;
        e.tag = i;
        MLN_TEST_ASSERT(dl_heap_push(&h, &e) == 0);
    }
    MLN_TEST_ASSERT(dl_heap_push(&h, &e) == -1); /* full */
    for (uint32_t i = 0; i < 1000; i++) {
        MLN_TEST_ASSERT(dl_heap_pop(&h, &e) == 0);
        MLN_TEST_ASSERT(e.time_ns >= last_t);
        MLN_TEST_ASSERT(e.time_ns > last_t || i == 0 || e.seq > last_seq); /* FIFO on ties */
        last_t = e.time_ns;
        last_seq = e.seq;
    }
    MLN_TEST_ASSERT(dl_heap_pop(&h, &e) == -1 && dl_heap_top(&h) == NULL);
    dl_heap_fini(&h);

    dl_pool_t p;
    uint32_t s;
    MLN_TEST_ASSERT(dl_pool_init(&p, 3, 64) == 0);
    for (int i = 0; i < 3; i++)
        MLN_TEST_ASSERT(dl_pool_get(&p, &s) == 0 && s < 3 && dl_pool_buf(&p, s) != NULL);
    MLN_TEST_ASSERT(dl_pool_get(&p, &s) == -1);
    dl_pool_put(&p, 1);
    MLN_TEST_ASSERT(dl_pool_get(&p, &s) == 0 && s == 1);
    dl_pool_fini(&p);
}

static dl_dir_t make_dir(uint64_t delay, uint64_t rate, uint64_t queue, double loss, uint64_t seed)
{
    dl_dir_params_t prm = {.delay_ns = delay,
                           .rate_bps = rate,
                           .queue_bytes = queue,
                           .loss = loss,
                           .seed = seed,
                           .flow_queue_bytes = 65536};
    dl_dir_t d;
    MLN_TEST_ASSERT(dl_dir_init(&d, &prm, 1 << 16) == 0);
    return d;
}

static void test_delay_rate_queue(void)
{
    dl_dir_t d = make_dir(5 * MS, 0, 0, 0, 1);
    dl_flow_key_t k = {0};
    uint64_t rel = 0;
    uint32_t tag, len;

    MLN_TEST_ASSERT(dl_dir_enqueue(&d, 1000, 1500, &k, 42, &rel) == DL_ACCEPT);
    MLN_TEST_ASSERT(rel == 1000 + 5 * MS && dl_dir_next_event(&d) == rel);
    MLN_TEST_ASSERT(dl_dir_pop(&d, rel - 1, &tag, &len) == DL_POP_NONE);
    MLN_TEST_ASSERT(dl_dir_pop(&d, rel, &tag, &len) == DL_POP_SEND && tag == 42 && len == 1500);
    dl_dir_sent(&d, len, 1);
    dl_dir_sent(&d, 100, 0);
    MLN_TEST_ASSERT(d.ctr.tx_frames == 1 && d.ctr.tx_bytes == 1500 && d.ctr.drop_error == 1);
    MLN_TEST_ASSERT(dl_dir_next_event(&d) == DL_TIME_NEVER);
    dl_dir_fini(&d);

    /* 1 Gbit/s: 1250 B take 10 us; back-to-back frames leave 10 us apart, plus the delay. */
    MLN_TEST_ASSERT(dl_ser_ns(1250, 1000000000u) == 10 * US);
    MLN_TEST_ASSERT(dl_ser_ns(9000, 1000000000u) == 72 * US && dl_ser_ns(9000, 0) == 0);
    d = make_dir(1 * MS, 1000000000u, 1 << 20, 0, 1);
    for (uint32_t i = 0; i < 3; i++) {
        MLN_TEST_ASSERT(dl_dir_enqueue(&d, 0, 1250, &k, i, &rel) == DL_ACCEPT);
        MLN_TEST_ASSERT(rel == (i + 1) * 10 * US + 1 * MS);
    }
    /* After the link idles, a frame only pays its own serialisation. */
    MLN_TEST_ASSERT(dl_dir_enqueue(&d, 5 * MS, 1250, &k, 9, &rel) == DL_ACCEPT);
    MLN_TEST_ASSERT(rel == 5 * MS + 10 * US + 1 * MS);
    dl_dir_fini(&d);

    /* Tail drop: 10000-byte queue, 1000-byte frames at one instant: 10 fit, the 11th drops. */
    d = make_dir(0, 1000000000u, 10000, 0, 1);
    for (uint32_t i = 0; i < 11; i++) {
        dl_verdict_t v = dl_dir_enqueue(&d, 0, 1000, &k, i, &rel);
        MLN_TEST_ASSERT(v == (i < 10 ? DL_ACCEPT : DL_DROP_QUEUE));
    }
    MLN_TEST_ASSERT(d.ctr.rx_frames == 11 && d.ctr.rx_bytes == 11000 && d.ctr.drop_queue == 1);
    MLN_TEST_ASSERT(d.ctr.max_queue_bytes == 10000);
    /* Once one frame has left (8 us), there is room for one more. */
    MLN_TEST_ASSERT(dl_dir_enqueue(&d, 8 * US, 1000, &k, 11, &rel) == DL_ACCEPT);
    MLN_TEST_ASSERT(dl_dir_enqueue(&d, 8 * US, 1000, &k, 12, &rel) == DL_DROP_QUEUE);
    int sent = 0;
    while (dl_dir_pop(&d, DL_TIME_NEVER - 1, &tag, &len) == DL_POP_SEND)
        sent++;
    MLN_TEST_ASSERT(sent == 11);
    dl_dir_fini(&d);
}

static uint64_t loss_run(double p, uint64_t seed, int n, uint64_t *pattern)
{
    dl_dir_t d = make_dir(0, 0, 0, p, seed);
    dl_flow_key_t k = {0};
    uint64_t rel, h = 0;
    uint32_t tag, len;

    for (int i = 0; i < n; i++) {
        if (dl_dir_enqueue(&d, (uint64_t)i, 100, &k, 0, &rel) != DL_ACCEPT)
            h = h * 31 + (uint64_t)i; /* a fingerprint of which frames were lost */
        while (dl_dir_pop(&d, (uint64_t)i, &tag, &len) == DL_POP_SEND)
            ;
    }
    uint64_t drops = d.ctr.drop_loss;
    dl_dir_fini(&d);
    *pattern = h;
    return drops;
}

static void test_loss(void)
{
    uint64_t h1, h2, h3;
    const int n = 200000;
    uint64_t d1 = loss_run(0.01, 1, n, &h1);
    uint64_t d2 = loss_run(0.01, 1, n, &h2);
    uint64_t d3 = loss_run(0.01, 2, n, &h3);

    MLN_TEST_ASSERT(d1 == d2 && h1 == h2); /* same seed, same losses */
    MLN_TEST_ASSERT(h1 != h3);             /* another seed, other losses */
    /* 2000 expected, sd ~44: +-5 sd */
    MLN_TEST_ASSERT(d1 > 1780 && d1 < 2220 && d3 > 1780 && d3 < 2220);
    MLN_TEST_ASSERT(loss_run(0.0, 1, 1000, &h1) == 0 && loss_run(1.0, 1, 1000, &h1) == 1000);
}

/* Two flows offered 800 Mbit/s each to a 1 Gbit/s link with a 100 Mbit/s per-flow cap. */
static void test_flow_cap(void)
{
    dl_dir_params_t prm = {.delay_ns = 2 * MS,
                           .rate_bps = 1000000000u,
                           .queue_bytes = 1 << 20,
                           .flow_rate_bps = 100000000u,
                           .flow_queue_bytes = 65536,
                           .seed = 1};
    dl_dir_t d;
    dl_flow_key_t ka = {
        .src = 1, .dst = 2, .sport = 1000, .dport = 5201, .proto = 6, .ethertype = 0x0800};
    dl_flow_key_t kb = ka;
    uint64_t rel, bytes[2] = {0, 0}, offered[2] = {0, 0}, t;
    uint32_t tag, len;
    dl_pop_t r;

    kb.sport = 1001;
    MLN_TEST_ASSERT(dl_dir_init(&d, &prm, 1 << 16) == 0);
    for (t = 0; t < 50 * MS; t += 5 * US) { /* 1000 B every 10 us per flow, interleaved */
        uint32_t f = (uint32_t)((t / (5 * US)) & 1);
        while ((r = dl_dir_pop(&d, t, &tag, &len)) != DL_POP_NONE)
            if (r == DL_POP_SEND)
                bytes[tag] += len;
        offered[f] += 1000;
        (void)dl_dir_enqueue(&d, t, 1000, f ? &kb : &ka, f, &rel);
    }
    while ((t = dl_dir_next_event(&d)) != DL_TIME_NEVER)
        while ((r = dl_dir_pop(&d, t, &tag, &len)) != DL_POP_NONE)
            if (r == DL_POP_SEND)
                bytes[tag] += len;
    /* Each flow gets its cap over 50 ms (625 kB) plus what its queue held. */
    for (int f = 0; f < 2; f++)
        MLN_TEST_ASSERT(bytes[f] >= 600000 && bytes[f] <= 625000 + 65536 + 2000);
    MLN_TEST_ASSERT(d.ctr.drop_flow > 0 && d.ctr.drop_queue == 0);
    MLN_TEST_ASSERT(bytes[0] + bytes[1] + d.ctr.drop_flow * 1000 == offered[0] + offered[1]);
    dl_dir_fini(&d);

    /* A capped elephant and an uncapped-rate mouse: the mouse loses nothing. */
    MLN_TEST_ASSERT(dl_dir_init(&d, &prm, 1 << 16) == 0);
    bytes[0] = bytes[1] = offered[0] = offered[1] = 0;
    for (t = 0; t < 50 * MS; t += 10 * US) {
        while ((r = dl_dir_pop(&d, t, &tag, &len)) != DL_POP_NONE)
            if (r == DL_POP_SEND)
                bytes[tag] += len;
        offered[0] += 1000; /* 800 Mbit/s, capped to 100 */
        (void)dl_dir_enqueue(&d, t, 1000, &ka, 0, &rel);
        if ((t / (10 * US)) % 20 == 0) { /* 40 Mbit/s, under the cap */
            offered[1] += 1000;
            MLN_TEST_ASSERT(dl_dir_enqueue(&d, t, 1000, &kb, 1, &rel) == DL_ACCEPT);
        }
    }
    while ((t = dl_dir_next_event(&d)) != DL_TIME_NEVER)
        while ((r = dl_dir_pop(&d, t, &tag, &len)) != DL_POP_NONE)
            if (r == DL_POP_SEND)
                bytes[tag] += len;
    MLN_TEST_ASSERT(bytes[1] == offered[1] && bytes[0] <= 625000 + 65536 + 2000);
    dl_dir_fini(&d);

    /* Many more flows than table slots: idle entries are reused, nothing breaks. */
    MLN_TEST_ASSERT(dl_dir_init(&d, &prm, 1 << 16) == 0);
    for (uint32_t i = 0; i < 20000; i++) {
        dl_flow_key_t k = ka;
        k.sport = (uint16_t)i;
        k.src = i;
        t = (uint64_t)i * 100 * US; /* each flow idle before the next arrives */
        while (dl_dir_pop(&d, t, &tag, &len) != DL_POP_NONE)
            ;
        MLN_TEST_ASSERT(dl_dir_enqueue(&d, t, 1000, &k, 0, &rel) == DL_ACCEPT);
    }
    MLN_TEST_ASSERT(d.ctr.flow_evict_busy == 0 && d.ctr.drop_flow == 0);
    dl_dir_fini(&d);
}

/* The statistics object: interface names are JSON strings however they are spelled (Linux
 * allows '"' and '\\' in them), counters and parameters are numbers. */
static void test_stats_json(void)
{
    const char *const ifname[DL_NDIRS] = {"w\"a\\", "wb\xff"};
    const char *head = "{\"tool\":\"mln-delayline\",\"a\":\"w\\\"a\\\\\",\"b\":\"wb\\ufffd\",";
    dl_dir_t dir[DL_NDIRS];
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);

    memset(dir, 0, sizeof(dir));
    dir[DL_AB].ctr.tx_bytes = 1234;
    dir[DL_BA].prm.delay_ns = 5 * MS;
    MLN_TEST_ASSERT(fp != NULL);
    dl_blackhole_spec_t spec[2] = {{.port = 21000, .after_bytes = 5},
                                   {.port = 80, .after_bytes = 0}};
    dl_blackhole_t bh;
    dl_blackhole_init(&bh, spec, 2);
    bh.rule[0].struck = 1;
    bh.rule[0].flow = (dl_flow_key_t){.src = 0x0a4d0101u,
                                      .dst = 0x0a4d0201u,
                                      .sport = 40000,
                                      .dport = 21000,
                                      .proto = 6,
                                      .ethertype = 0x0800};
    bh.rule[0].flow_bytes = 9000;
    dir[DL_BA].ctr.drop_blackhole = 3;
    dl_stats_json(fp, ifname, 1.5, dir, &bh);
    MLN_TEST_ASSERT(fclose(fp) == 0);
    if (strncmp(out, head, strlen(head)) != 0)
        fprintf(stderr, "stats json: got %swant %s...\n", out, head);
    MLN_TEST_ASSERT(strncmp(out, head, strlen(head)) == 0);
    MLN_TEST_ASSERT(strstr(out, "\"uptime_s\":1.500,\"ab\":{\"rx_frames\":0,") != NULL);
    MLN_TEST_ASSERT(strstr(out, "\"tx_bytes\":1234,") != NULL);
    MLN_TEST_ASSERT(strstr(out, "\"ba\":{") != NULL &&
                    strstr(out, "\"delay_ns\":5000000,") != NULL);
    MLN_TEST_ASSERT(len > 2 && strcmp(out + len - 2, "}\n") == 0);
    MLN_TEST_ASSERT(strstr(out, "\"drop_blackhole\":3,") != NULL);
    const char *holes = ",\"blackhole\":[{\"port\":21000,\"after_bytes\":5,\"struck\":true,"
                        "\"flow\":\"10.77.1.1:40000>10.77.2.1:21000\",\"flow_bytes\":9000},"
                        "{\"port\":80,\"after_bytes\":0,\"struck\":false}]}\n";
    if (strstr(out, holes) == NULL)
        fprintf(stderr, "stats json: got %swant ...%s", out, holes);
    MLN_TEST_ASSERT(strstr(out, holes) != NULL);
    free(out);
    out = NULL;
    fp = open_memstream(&out, &len);
    MLN_TEST_ASSERT(fp != NULL);
    dl_stats_json(fp, ifname, 0, dir, NULL);
    MLN_TEST_ASSERT(fclose(fp) == 0 && strstr(out, ",\"blackhole\":[]}\n") != NULL);
    free(out);
}

int main(void)
{
    test_parsers();
    test_cli();
    test_flow_key();
    test_tcp_payload();
    test_blackhole();
    test_heap_pool();
    test_delay_rate_queue();
    test_loss();
    test_flow_cap();
    test_stats_json();
    puts("test_delayline: ok");
    return 0;
}
