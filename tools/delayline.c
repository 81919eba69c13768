/*
 * delayline.c - mln-delayline: a layer-2 forwarder between two interfaces that emulates a WAN
 * link (delay, loss, rate with a tail-drop queue, per-flow rate cap, blackholed flows).  The link
 * model lives in delayline_core.c (the blackhole in delayline_blackhole.c); this file holds the
 * sockets and the event loop.
 *
 * Loop: transmit every frame whose release time has come (sendmmsg), handle signals, then
 * ppoll() both AF_PACKET sockets with a nanosecond timeout to the next release; read bursts
 * with recvmmsg straight into pool slots.  Signals are blocked except inside ppoll(), so the
 * handler's flag is only ever read and cleared while no handler can run.  A port whose link
 * goes down (POLLERR, ENETDOWN) stays open and is looked at every 0.2 s until it is up again.
 * Cost per frame: one copy in (kernel -> slot), one copy out, O(log n) heap work.
 */
#define _GNU_SOURCE
#include "delayline_core.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DL_BATCH 64
#define DL_RX_BURSTS 8 /* recvmmsg calls per socket per wakeup, so one side cannot starve */
#define DL_MAX_POOL_BYTES (UINT64_C(2) << 30)
#define DL_DOWN_CHECK_NS (DL_NS_PER_S / 5) /* how often a down port's interface is looked up */

enum { DL_SIG_STOP = 1, DL_SIG_DUMP = 2 };
static volatile sig_atomic_t dl_signal; /* the only mutable global: set by the handler */

typedef struct dl_port {
    int fd;
    int ifindex;
    int mtu;
    int ignore_outgoing; /* the kernel filters our own transmissions */
    int down;            /* ENETDOWN seen, and the interface not seen up again since */
} dl_port_t;

typedef struct dl_app {
    dl_config_t cfg;
    dl_port_t port[DL_NDIRS]; /* port[0] = --a, port[1] = --b; direction d reads port[d] */
    dl_pool_t pool;
    dl_dir_t dir[DL_NDIRS];
    dl_blackhole_t blackhole; /* --blackhole: shared by both directions */
    uint8_t *scratch;         /* receives frames for counting when the pool is empty */
    uint64_t start_ns, next_stats_ns;
    uint64_t next_check_ns; /* next look at the down ports; DL_TIME_NEVER while none is down */
    int warned_trunc;
    struct mmsghdr msg[DL_BATCH];
    struct iovec iov[DL_BATCH];
    struct sockaddr_ll addr[DL_BATCH];
    uint32_t slot[DL_BATCH], len[DL_BATCH];
} dl_app_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * DL_NS_PER_S + (uint64_t)ts.tv_nsec;
}

static double uptime_s(const dl_app_t *app)
{
    return (double)(now_ns() - app->start_ns) / 1e9;
}

static void on_signal(int sig)
{
    dl_signal |= (sig == SIGUSR1) ? DL_SIG_DUMP : DL_SIG_STOP;
}

/* ---- sockets ------------------------------------------------------------------------------- */

/* Returns 0, or 1 after printing one error line naming the interface. */
static int port_open(const char *opt, const char *name, dl_port_t *p)
{
    struct sockaddr_ll sll;
    struct packet_mreq mr;
    struct ifreq ifr;
    int one = 1, rcvbuf = 32 << 20, sndbuf = 8 << 20;

    p->fd = -1;
    p->ifindex = (int)if_nametoindex(name);
    if (p->ifindex == 0) {
        fprintf(stderr, "mln-delayline: error: %s: no such interface '%s'\n", opt, name);
        goto err;
    }
    p->fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: nothing arrives before bind() */
    if (p->fd < 0) {
        fprintf(stderr, "mln-delayline: error: %s '%s': socket(AF_PACKET): %s%s\n", opt, name,
                strerror(errno), errno == EPERM ? " (needs root or CAP_NET_RAW)" : "");
        goto err;
    }
    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = p->ifindex;
    if (bind(p->fd, (struct sockaddr *)&sll, sizeof(sll)) != 0) {
        fprintf(stderr, "mln-delayline: error: %s '%s': bind: %s\n", opt, name, strerror(errno));
        goto err_fd;
    }
#ifdef PACKET_IGNORE_OUTGOING
    p->ignore_outgoing =
        setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) == 0;
#endif
    (void)one;
    memset(&mr, 0, sizeof(mr));
    mr.mr_ifindex = p->ifindex;
    mr.mr_type = PACKET_MR_PROMISC;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0) {
        fprintf(stderr, "mln-delayline: error: %s '%s': promiscuous mode: %s\n", opt, name,
                strerror(errno));
        goto err_fd;
    }
    if (setsockopt(p->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0)
        (void)setsockopt(p->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (setsockopt(p->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0)
        (void)setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    p->mtu = ioctl(p->fd, SIOCGIFMTU, &ifr) == 0 ? ifr.ifr_mtu : 1500;
    return 0;

err_fd:
    close(p->fd);
    p->fd = -1;
err:
    return 1;
}

/*
 * The interface of port d went down: the kernel's af_packet notifier sets sk_err = ENETDOWN
 * on NETDEV_DOWN (ip link set down; an MTU or ethtool change that resets the link) and hooks
 * the socket back in on NETDEV_UP, so this is a link flap to ride out.  Frames sent to the
 * port meanwhile fail and count as drop_error.  One line per flap; ports_recheck watches it.
 */
static void port_down(dl_app_t *app, int d)
{
    uint64_t check = now_ns() + DL_DOWN_CHECK_NS;

    if (!app->port[d].down)
        fprintf(stderr,
                "mln-delayline: warning: '%s' went down; forwarding resumes when it is up\n",
                app->cfg.ifname[d]);
    app->port[d].down = 1;
    app->next_check_ns = check < app->next_check_ns ? check : app->next_check_ns;
}

/*
 * POLLERR on port d: reads and so clears the socket error (poll reports it until then).
 * af_packet sets sk_err to ENETDOWN only, on NETDEV_DOWN and NETDEV_UNREGISTER (the latter
 * is caught by ports_recheck); ENXIO and ENODEV come back from send() once the interface is
 * gone, never as a socket error.  So anything but ENETDOWN is fatal.  Returns 0 to go on, or
 * -1 after one error line.
 */
static int port_error(dl_app_t *app, int d)
{
    int e = 0;
    socklen_t len = sizeof(e);

    if (getsockopt(app->port[d].fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
        e = errno;
    if (e == ENETDOWN) {
        port_down(app, d);
        return 0;
    }
    fprintf(stderr, "mln-delayline: error: socket on '%s' failed: %s\n", app->cfg.ifname[d],
            e ? strerror(e) : "poll reported an error, but none is pending");
    return -1;
}

/*
 * Looks at the down ports: one whose interface is up again is back (the kernel has re-attached
 * its socket); one whose interface has left this namespace (deleted, moved) never will be, as
 * af_packet then unbinds the socket for good, and a delay line that forwards nothing must not
 * look alive to the test bed's watchdog.  Returns 0, or -1 after one error line.
 */
static int ports_recheck(dl_app_t *app, uint64_t now)
{
    app->next_check_ns = DL_TIME_NEVER;
    for (int d = 0; d < DL_NDIRS; d++) {
        dl_port_t *p = &app->port[d];
        struct ifreq ifr;

        if (!p->down)
            continue;
        memset(&ifr, 0, sizeof(ifr));
        ifr.ifr_ifindex = p->ifindex;
        if (ioctl(p->fd, SIOCGIFNAME, &ifr) != 0) {
            fprintf(stderr, "mln-delayline: error: '%s' is gone: %s\n", app->cfg.ifname[d],
                    strerror(errno));
            return -1;
        }
        if (ioctl(p->fd, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP)) {
            fprintf(stderr, "mln-delayline: '%s' is up again\n", app->cfg.ifname[d]);
            p->down = 0;
        } else {
            app->next_check_ns = now + DL_DOWN_CHECK_NS;
        }
    }
    return 0;
}

/* ---- counters ------------------------------------------------------------------------------ */

/* Adds the kernel's receive drops (PACKET_STATISTICS resets on read) to each direction. */
static void kernel_drops_update(dl_app_t *app)
{
    for (int d = 0; d < DL_NDIRS; d++) {
        struct tpacket_stats st;
        socklen_t sl = sizeof(st);
        if (getsockopt(app->port[d].fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0)
            app->dir[d].ctr.drop_kernel += st.tp_drops;
    }
}

/* Writes --stats atomically (FILE.tmp, then rename); warns once per failure. */
static void stats_file_write(dl_app_t *app)
{
    char tmp[4096];
    FILE *fp;
    int bad;

    if (app->cfg.stats_path == NULL)
        return;
    kernel_drops_update(app);
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", app->cfg.stats_path) >= (int)sizeof(tmp))
        goto err;
    fp = fopen(tmp, "w");
    if (fp == NULL)
        goto err;
    dl_stats_json(fp, app->cfg.ifname, uptime_s(app), app->dir, &app->blackhole);
    bad = ferror(fp);
    if (fclose(fp) != 0 || bad)
        goto err_unlink;
    if (rename(tmp, app->cfg.stats_path) != 0)
        goto err_unlink;
    return;

err_unlink:
    unlink(tmp);
err:
    fprintf(stderr, "mln-delayline: warning: cannot write --stats '%s': %s\n", app->cfg.stats_path,
            strerror(errno));
}

/* The human line on stderr and the JSON object on stdout, plus --stats. */
static void stats_report(dl_app_t *app)
{
    kernel_drops_update(app);
    for (int d = 0; d < DL_NDIRS; d++) {
        const dl_counters_t *c = &app->dir[d].ctr;
        fprintf(stderr,
                "mln-delayline: %s rx %llu frames %llu B, tx %llu frames %llu B, drops loss %llu "
                "queue %llu flow %llu error %llu nobuf %llu kernel %llu blackhole %llu, max "
                "queue %llu B\n",
                dl_dir_name[d], (unsigned long long)c->rx_frames, (unsigned long long)c->rx_bytes,
                (unsigned long long)c->tx_frames, (unsigned long long)c->tx_bytes,
                (unsigned long long)c->drop_loss, (unsigned long long)c->drop_queue,
                (unsigned long long)c->drop_flow, (unsigned long long)c->drop_error,
                (unsigned long long)c->drop_nobuf, (unsigned long long)c->drop_kernel,
                (unsigned long long)c->drop_blackhole, (unsigned long long)c->max_queue_bytes);
    }
    dl_stats_json(stdout, app->cfg.ifname, uptime_s(app), app->dir, &app->blackhole);
    fflush(stdout);
    stats_file_write(app);
}

/* ---- data path ----------------------------------------------------------------------------- */

/* Sends every frame of direction d that is due at `now`. */
static void tx_due(dl_app_t *app, int d, uint64_t now)
{
    dl_dir_t *dir = &app->dir[d];
    int fd = app->port[1 - d].fd;

    for (;;) {
        uint32_t k = 0, tag, len;
        dl_pop_t r;

        while (k < DL_BATCH && (r = dl_dir_pop(dir, now, &tag, &len)) != DL_POP_NONE) {
            if (r == DL_POP_DROPPED) {
                dl_pool_put(&app->pool, tag);
                continue;
            }
            app->slot[k] = tag;
            app->len[k] = len;
            app->iov[k].iov_base = dl_pool_buf(&app->pool, tag);
            app->iov[k].iov_len = len;
            memset(&app->msg[k], 0, sizeof(app->msg[k]));
            app->msg[k].msg_hdr.msg_iov = &app->iov[k];
            app->msg[k].msg_hdr.msg_iovlen = 1;
            k++;
        }
        for (uint32_t i = 0; i < k;) {
            int n = sendmmsg(fd, &app->msg[i], k - i, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) { /* frame i failed: count it and go on with the rest */
                dl_dir_sent(dir, app->len[i], 0);
                i++;
                continue;
            }
            for (int j = 0; j < n; j++)
                dl_dir_sent(dir, app->len[i + (uint32_t)j], 1);
            i += (uint32_t)n;
        }
        for (uint32_t i = 0; i < k; i++)
            dl_pool_put(&app->pool, app->slot[i]);
        if (k < DL_BATCH)
            return;
    }
}

/* The blackhole's verdict on a frame of direction d: 1 when it is dropped (and counted). */
static int blackhole_drop(dl_app_t *app, int d, const uint8_t *frame, uint32_t len)
{
    dl_counters_t *c = &app->dir[d].ctr;
    char flow[64];
    int rule = -1;

    switch (dl_blackhole_frame(&app->blackhole, frame, len, &rule)) {
    case DL_BH_DROP:
        c->rx_frames++;
        c->rx_bytes += len;
        c->drop_blackhole++;
        return 1;
    case DL_BH_STRUCK:
        dl_flow_key_format(&app->blackhole.rule[rule].flow, flow, sizeof(flow));
        fprintf(stderr,
                "mln-delayline: blackhole %u:%llu: flow %s cut off after %llu payload bytes "
                "(%s); every later frame of it, both ways, is dropped\n",
                app->blackhole.rule[rule].spec.port,
                (unsigned long long)app->blackhole.rule[rule].spec.after_bytes, flow,
                (unsigned long long)app->blackhole.rule[rule].flow_bytes, dl_dir_name[d]);
        return 0;
    case DL_BH_PASS:
        break;
    }
    return 0;
}

/* Drains up to DL_RX_BURSTS batches from port d into direction d. */
static int rx_port(dl_app_t *app, int d)
{
    dl_dir_t *dir = &app->dir[d];
    const dl_port_t *port = &app->port[d];
    const int flows = dir->prm.flow_rate_bps > 0;

    for (int burst = 0; burst < DL_RX_BURSTS; burst++) {
        uint32_t n = 0;
        int got;

        while (n < DL_BATCH && dl_pool_get(&app->pool, &app->slot[n]) == 0)
            n++;
        for (uint32_t i = 0; i < (n ? n : 1); i++) {
            memset(&app->msg[i], 0, sizeof(app->msg[i]));
            app->iov[i].iov_base = n ? dl_pool_buf(&app->pool, app->slot[i]) : app->scratch;
            app->iov[i].iov_len = app->pool.slot_size;
            app->msg[i].msg_hdr.msg_iov = &app->iov[i];
            app->msg[i].msg_hdr.msg_iovlen = 1;
            app->msg[i].msg_hdr.msg_name = &app->addr[i];
            app->msg[i].msg_hdr.msg_namelen = sizeof(app->addr[i]);
        }
        got = recvmmsg(port->fd, app->msg, n ? n : 1, MSG_DONTWAIT | MSG_TRUNC, NULL);
        if (got < 0) {
            int e = errno;
            for (uint32_t i = 0; i < n; i++)
                dl_pool_put(&app->pool, app->slot[n - 1 - i]);
            if (e == ENETDOWN) /* the socket error, read here before poll could report it */
                port_down(app, d);
            if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ENETDOWN)
                return 0;
            fprintf(stderr, "mln-delayline: error: recvmmsg on '%s': %s\n", app->cfg.ifname[d],
                    strerror(e));
            return -1;
        }
        uint64_t now = now_ns();
        for (int i = 0; i < got; i++) {
            uint32_t len = app->msg[i].msg_len;
            uint64_t release;
            dl_flow_key_t key;

            if (!port->ignore_outgoing && app->addr[i].sll_pkttype == PACKET_OUTGOING) {
                if (n)
                    dl_pool_put(&app->pool, app->slot[i]);
                continue;
            }
            if (n == 0) { /* no buffer: count it as received and dropped */
                dir->ctr.rx_frames++;
                dir->ctr.rx_bytes += len;
                dir->ctr.drop_nobuf++;
                continue;
            }
            if (len > app->pool.slot_size) { /* larger than the MTU: offloads on? */
                dir->ctr.rx_frames++;
                dir->ctr.rx_bytes += len;
                dir->ctr.drop_error++;
                dl_pool_put(&app->pool, app->slot[i]);
                if (!app->warned_trunc++)
                    fprintf(stderr,
                            "mln-delayline: warning: %u-byte frame on '%s' exceeds the MTU "
                            "buffers (%u B); dropped (turn off GRO/TSO: ethtool -K)\n",
                            len, app->cfg.ifname[d], app->pool.slot_size);
                continue;
            }
            if (app->blackhole.nrules &&
                blackhole_drop(app, d, dl_pool_buf(&app->pool, app->slot[i]), len)) {
                dl_pool_put(&app->pool, app->slot[i]);
                continue;
            }
            if (flows)
                dl_flow_key_parse(dl_pool_buf(&app->pool, app->slot[i]), len, &key);
            if (dl_dir_enqueue(dir, now, len, &key, app->slot[i], &release) != DL_ACCEPT)
                dl_pool_put(&app->pool, app->slot[i]);
        }
        for (uint32_t i = (uint32_t)got; i < n; i++)
            dl_pool_put(&app->pool, app->slot[i]);
        if (got < (int)(n ? n : 1))
            return 0;
    }
    return 0;
}

/* ---- setup and main loop ------------------------------------------------------------------- */

/* Frames in flight: link queue + one delay-and-a-bit of the rate (10 Gbit/s when unlimited)
 * + some flow queues, per direction, in 512-byte units (so small frames fit too). */
static uint32_t pool_frames(const dl_config_t *cfg, uint32_t slot_size)
{
    double frames = 0;
    for (int d = 0; d < DL_NDIRS; d++) {
        const dl_dir_params_t *p = &cfg->dir[d];
        double rate = p->rate_bps ? (double)p->rate_bps : 10e9;
        double bytes = (double)p->queue_bytes + rate / 8.0 * ((double)p->delay_ns / 1e9 + 0.002);
        if (p->flow_rate_bps)
            bytes += 64.0 * (double)p->flow_queue_bytes;
        frames += bytes / 512.0 + 1024.0;
    }
    if (frames > (double)(DL_MAX_POOL_BYTES / slot_size))
        frames = (double)(DL_MAX_POOL_BYTES / slot_size);
    return frames < 4096 ? 4096 : (uint32_t)frames;
}

static int run_loop(dl_app_t *app, const sigset_t *waitmask)
{
    struct pollfd pfd[DL_NDIRS];

    for (int d = 0; d < DL_NDIRS; d++) {
        pfd[d].fd = app->port[d].fd;
        pfd[d].events = POLLIN;
    }
    for (;;) {
        uint64_t now = now_ns(), next = app->next_stats_ns;
        struct timespec ts;
        int r;

        for (int d = 0; d < DL_NDIRS; d++)
            tx_due(app, d, now);
        if (dl_signal & DL_SIG_STOP)
            return 0;
        if (now >= app->next_check_ns && ports_recheck(app, now) != 0)
            return 1;
        if (dl_signal & DL_SIG_DUMP) {
            dl_signal &= ~DL_SIG_DUMP;
            stats_report(app);
        }
        if (now >= app->next_stats_ns) {
            stats_file_write(app);
            app->next_stats_ns = now + app->cfg.stats_interval_ns;
            next = app->next_stats_ns;
        }
        next = app->next_check_ns < next ? app->next_check_ns : next;
        for (int d = 0; d < DL_NDIRS; d++) {
            uint64_t t = dl_dir_next_event(&app->dir[d]);
            next = t < next ? t : next;
        }
        now = now_ns();
        if (next <= now)
            continue;
        if (next != DL_TIME_NEVER) {
            ts.tv_sec = (time_t)((next - now) / DL_NS_PER_S);
            ts.tv_nsec = (long)((next - now) % DL_NS_PER_S);
        }
        r = ppoll(pfd, DL_NDIRS, next == DL_TIME_NEVER ? NULL : &ts, waitmask);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "mln-delayline: error: ppoll: %s\n", strerror(errno));
            return 1;
        }
        for (int d = 0; d < DL_NDIRS; d++) {
            if (pfd[d].revents & POLLNVAL) { /* our descriptor is not open: a bug */
                fprintf(stderr, "mln-delayline: error: socket on '%s' is not open\n",
                        app->cfg.ifname[d]);
                return 1;
            }
            if ((pfd[d].revents & POLLERR) && port_error(app, d) != 0)
                return 1;
            if ((pfd[d].revents & POLLIN) && rx_port(app, d) != 0)
                return 1;
        }
    }
}

int main(int argc, char **argv)
{
    dl_app_t *app;
    char err[512];
    struct sigaction sa;
    sigset_t block, waitmask;
    uint32_t slot_size, frames;
    int rc = 1, pr, mtu;

    app = calloc(1, sizeof(*app)); /* large (batch arrays): not on the stack */
    if (app == NULL) {
        fputs("mln-delayline: error: out of memory\n", stderr);
        return 1;
    }
    pr = dl_cli_parse(argc, argv, &app->cfg, err, sizeof(err));
    if (pr == 1) {
        fputs(dl_cli_usage(), stdout);
        rc = 0;
        goto out;
    }
    if (pr < 0) {
        fprintf(stderr, "mln-delayline: error: %s\n", err);
        rc = 2;
        goto out;
    }
    app->port[0].fd = app->port[1].fd = -1;
    if (port_open("--a", app->cfg.ifname[0], &app->port[0]) != 0)
        goto out;
    if (port_open("--b", app->cfg.ifname[1], &app->port[1]) != 0)
        goto err_ports;

    mtu = app->port[0].mtu > app->port[1].mtu ? app->port[0].mtu : app->port[1].mtu;
    slot_size = ((uint32_t)(mtu < 1500 ? 1500 : mtu) + 32 + 63) & ~63u; /* + Ethernet/VLAN */
    frames = pool_frames(&app->cfg, slot_size);
    if (dl_pool_init(&app->pool, frames, slot_size) != 0) {
        fprintf(stderr, "mln-delayline: error: cannot allocate %u frame buffers\n", frames);
        goto err_ports;
    }
    dl_blackhole_init(&app->blackhole, app->cfg.blackhole, app->cfg.nblackholes);
    app->scratch = malloc(slot_size);
    if (app->scratch == NULL)
        goto err_pool;
    for (int d = 0; d < DL_NDIRS; d++) {
        if (dl_dir_init(&app->dir[d], &app->cfg.dir[d], frames) != 0) {
            fprintf(stderr, "mln-delayline: error: out of memory\n");
            for (int k = 0; k < d; k++)
                dl_dir_fini(&app->dir[k]);
            goto err_scratch;
        }
    }

    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &waitmask); /* signals arrive only inside ppoll() */
    sigdelset(&waitmask, SIGINT);
    sigdelset(&waitmask, SIGTERM);
    sigdelset(&waitmask, SIGUSR1);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_mask = block;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = SIG_IGN; /* a closed stdout pipe must not kill the link */
    sigaction(SIGPIPE, &sa, NULL);
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* wake within ~1 us of a release */

    app->start_ns = now_ns();
    app->next_check_ns = DL_TIME_NEVER;
    app->next_stats_ns = app->cfg.stats_interval_ns && app->cfg.stats_path
                             ? app->start_ns + app->cfg.stats_interval_ns
                             : DL_TIME_NEVER;
    stats_file_write(app); /* a baseline, so the file exists from `ready` on */
    fputs("ready\n", stdout);
    fflush(stdout);
    rc = run_loop(app, &waitmask);
    stats_report(app);

    for (int d = 0; d < DL_NDIRS; d++)
        dl_dir_fini(&app->dir[d]);
err_scratch:
    free(app->scratch);
err_pool:
    dl_pool_fini(&app->pool);
err_ports:
    for (int d = 0; d < DL_NDIRS; d++)
        if (app->port[d].fd >= 0)
            close(app->port[d].fd);
out:
    free(app);
    return rc;
}
