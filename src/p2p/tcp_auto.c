/*
 * tcp_auto.c - MLN_STRIPE_LANES=auto: each peer's tcp lane count follows its path (issue 20).
 *
 * One TCP connection is capped by its window (W / RTT), by loss or by a per-flow policer, so
 * a long fat path needs many lanes; a short or capped one needs few, and too many overflow the
 * bottleneck's queue.  The sender finds the count per peer by measuring what the lanes carry:
 *
 * Warm: a new level (lane count) runs for AUTO_WARM_RTTS round trips (at least AUTO_MIN_S)
 * unmeasured, and longer, up to AUTO_WARM_MAX_RTTS, until every lane of it left slow start (a loss
 * ended it, or its window caps it): on a lossy path new lanes' slow start overshoots by hundreds of
 * segments, whose losses and decaying rate are not the level's.
 *
 * Measure: AUTO_SAMPLES intervals of AUTO_SAMPLE_RTTS round trips (at least AUTO_MIN_S) in which
 * a striped send to the peer was moving for AUTO_BUSY of the time (between looks no further apart
 * than AUTO_GAP_S that both saw one): the rate is the bytes the peer's host acknowledged on the
 * level's lanes (TCP_INFO tcpi_bytes_acked) per second (lanes above it may still drain what a
 * larger level left them).  An interval in which the program had nothing to send (or was away,
 * computing) measures the program, not the path, and is dropped.  (Two intervals of 50 ms read
 * loss-bound lanes at twice their rate: wan-lossy's 4 lanes at 430-590 Mbit/s, 150 over seconds.)
 *
 * Decide: from AUTO_FIRST lanes, the level doubles (lanes opened without blocking, joining once
 * up) while that raises the rate by AUTO_GAIN; the first level that does not sends it back to
 * the level before, where it settles.  Every level is measured whole (a level doubled on one
 * early interval looked slower than it is, and the next level then won by more than it does).
 * But where the level before lost segments and this one lost no larger share of its own (within
 * AUTO_LOSS_RISE and AUTO_LOSS_SLACK), and at most AUTO_LOSS_RANDOM of them, the loss is the
 * path's own (random), not a queue the lanes overflow or a policer they exceed: each lane's rate is
 * its own, more lanes add up, and a rate that did not rise is the noise of a few round trips of
 * loss-bound lanes; the level doubles again.  (Settling there, auto stopped at 4-8 lanes on
 * wan-lossy, where 64 carry twice as much.)  Where its lanes also kept no standing queue (their
 * round trip under AUTO_QUEUE of the least they saw: the bottleneck is not always busy), the
 * doublings go on (the first level shows it alone: it lost a little, at most AUTO_LOSS_RANDOM,
 * with no queue, its lanes not bound by their windows), four times the lanes a step while no queue
 * builds (the path's loss then: at most AUTO_LOSS_RANDOM, its share risen over the level before's
 * or not, for new lanes lose a burst as they leave slow start), until a level fills the link (a
 * queue, or more loss than the path's) and settle on it, or on the level before where filling the
 * link cost AUTO_GAIN of the rate (after a step of four: twice the level before is tried, and kept
 * if no slower than it).
 * Otherwise, when the next doubling does not raise the rate by AUTO_GAIN either, the lanes do
 * not add up (the link is full: wan-2site, where 8 lanes fill it and 16 lost 0.1% once, went on
 * to 32): the level settles on the one before the first of the two, or on the last where the two
 * together raised the rate by AUTO_GAIN.
 *
 * Probe: a settled peer whose rate rose by AUTO_GAIN since it settled, over AUTO_ROSE intervals in
 * a row (one is the noise of a few round trips: wan-perflow, MPICH, 16 lanes read 665-832 Mbit/s
 * from one search to the next, and a search begun on one interval went on to 64 lanes, past the
 * policers' queues, where 16 stream at 950 and 64 at 860), starts the search again from its level
 * (the program's traffic changed: bursts too short for more lanes to pay, then a stream;
 * wan-perflow, where 4 lanes at 100 Mbit/s each won over 8 during 1 MiB bursts, then carried a 10
 * MiB stream at 4 x 100), measured whole under the new traffic: a probe of twice the lanes against
 * the one interval that rose, which straddles the change, won by the change.
 * (At MLN_STRIPE_LANES_MAX, where there is no level above to try, the rise only becomes the rate
 * to rise from.)  A settled level whose loss-bound lanes, losing the path's own share with no
 * queue, carry under 1/AUTO_FALL of the rate it settled at was measured on a transient (new lanes'
 * slow start read high): the search starts again from it too.
 * When its lanes are window-bound (the rate at least AUTO_WINDOW of level x window / round trip:
 * every lane carries all its window allows, so the path may have room), it probes twice the lanes
 * after AUTO_REPROBE_S seconds of measured traffic (the path may have freed up), kept if they raise
 * the rate by AUTO_GAIN.  A settled level that lost more than AUTO_LOSS_QUEUE of its segments over
 * its first AUTO_SAMPLES intervals, its lanes not application-limited (where the program's
 * traffic sets the rate fewer lanes look as fast as more), overflows a queue (wan-short: cubic
 * fills it at any count): once per search up it tries half the lanes, and halves again while
 * fewer are not slower by AUTO_GAIN and still lose that much; otherwise it goes back.
 *
 * Lone messages.  A message that finds the peer's lanes idle (no other send to it in flight,
 * nothing on the lanes waiting to be sent: a ping-pong's, a program's occasional large message) is
 * timed on its own, by size class (512 KiB, 1 MiB, 2 MiB, ...), with a count of its own: the best
 * count for one message alone is often larger than the best for a stream (each lane carries its
 * share in fewer round trips; wan-2site: 16 or 32 lanes for 1 MiB against 8 for a stream) and on a
 * short path with a small queue smaller (the lanes' first flights overflow it).  Its time runs
 * from its start to the moment its lanes' send queues are empty (SIOCOUTQ: every byte
 * acknowledged), looked at while the program waits (the engine polls then instead of sleeping
 * in MPI_Wait, mln_tcp_auto_watching; the receiver acknowledges a frame's end at once,
 * TCP_QUICKACK in lane_tcp.c, where a delayed ACK would add up to 40 ms); a level's time is the
 * fastest of BURST_SAMPLES (more, up to BURST_SAMPLES_MAX, on a short path, where they are cheap
 * and noise weighs more, unless the first already set the level BURST_CLEAR apart from the one
 * before), or their median where any of them retransmitted (on a lossy path a loss
 * is part of a message's time, and the fastest sample, one that lost nothing, hides what the lane
 * count costs the others); two levels of which one lost segments and the other did not are
 * compared by their medians.  Where the samples lost at most AUTO_LOSS_RANDOM of their segments and
 * the streaming level saw the path's own loss (segments lost with no queue: a lone message's burst
 * makes a queue of its own, so its round trips cannot tell), or two messages or more of few flights
 * (at most BURST_FLIGHTS_MAX round trips) each lost a few (a burst that overflows a queue loses a
 * run of segments in one message), in one level or over the levels of the search where none lost a
 * run (mln_tcp_lone_loss; a later level that loses a run settles the class on the level before it),
 * the class goes up in steps of four and keeps more lanes unless
 * both their fastest sample and their median are slower by AUTO_GAIN (the losses fall at random
 * whatever the count; each lane's share crosses in fewer round trips); a level that was slower is
 * measured once more (its lanes warm), and after a step of four twice the level before is tried.
 * A message of few flights with the path's own loss goes at once to the lanes whose loss-bound
 * windows carry it in one flight (mln_tcp_loss_floor: wan-lossy's 1 MiB, 32) and settles there
 * when they are no slower, or when they still are after the second measure against fewer than the
 * floor: those read faster on their early windows than they stay (measured at mln_tcp_loss_floor).
 * Otherwise, from the streaming level, when its lanes neither waited on their windows nor carried
 * half a window per round trip (wan-short: one lane fills the link), the class's count first halves
 * while fewer lanes are no slower (by AUTO_GAIN the first time, by BURST_FEWER after; fewer cost
 * less: sockets, queue overflow), and
 * half the streaming level slower by less than BURST_CAPPED is the noise of lanes that share the
 * link: the class keeps the streaming level; otherwise (the lanes waited on their windows, or
 * half took BURST_CAPPED as long: a per-flow cap) it doubles while that cuts the time by
 * AUTO_GAIN (by more when the lanes mostly waited on their windows: to the count that carries the
 * message in about one round trip) and settles on the last that did; a doubling that did not, where
 * the level's fastest message took BURST_FLIGHTS_MIN to BURST_FLIGHTS_MAX round trips, and its
 * bytes at the streaming level's rate (when one is known) under BURST_BYTES_BOUND of its time
 * (more lanes carry it in fewer flights, but one flight less hides in the noise), gets a second,
 * kept if the two together cut the time by AUTO_GAIN.  A settled class times one
 * message in BURST_REPROBE (the others are not watched) and, when its lanes still wait on windows
 * then, tries twice the lanes.  (Cutting every lone message for a quarter window per lane, without
 * timing, was tried and dropped: on wan-short the burst of 64 lanes' first segments overflowed the
 * 250 kB queue and each lost tail waited for a retransmission timeout, 130 ms one way where 2 lanes
 * take 12-15 ms.)  On this 2-core VM one message's time varies by 30% from one to the next, more
 * than the 10-20% between 1, 2 and 4 lanes on wan-short: there the class settles on 1 or 2 lanes,
 * sometimes 4.
 *
 * Every decision is logged at debug level (the rates, the retransmissions, the lone messages'
 * times); mln_stripe_lanes_used() reports the count the latest message to the peer took (its
 * class's for a lone message, else the streaming level).  A fixed MLN_STRIPE_LANES keeps auto
 * off.
 *
 * Cost: two TCP_INFO per lane of the level per interval (intervals of at least AUTO_MIN_S); O(peers
 * + sends in flight) per progress pass otherwise; a lone message of 512 KiB or more: one
 * SIOCOUTQNSD per lane up as it starts; while its class searches (and for one in BURST_REPROBE once
 * it settled), TCP_INFO on its lanes twice and SIOCOUTQ on them every
 * BURST_POLL_S while it drains (the program polls then instead of sleeping in MPI_Wait).  A class
 * settles after about BURST_SAMPLES x (levels tried) lone messages.  Finding the count on a path of
 * round trip R from AUTO_FIRST lanes to L takes about log2(L / AUTO_FIRST) x (AUTO_WARM_RTTS +
 * AUTO_SAMPLES x AUTO_SAMPLE_RTTS) x R of traffic, plus a round trip or two per level to open its
 * lanes (4 to 64 lanes at 60 ms: about 4 x 16 x 60 ms = 4 s); on a short path the intervals' floor
 * AUTO_MIN_S rules (wan-lossy, 10 ms: about 4 x 0.35 s from 4 lanes to 64, plus warm-ups of up
 * to AUTO_WARM_MAX_RTTS a level).  Deciding when new
 * lanes left slow start: one TCP_INFO per lane of the level every AUTO_WARM_LOOK_S while it
 * warms.
 */
#include "lane_tcp_int.h"

#include <linux/tcp.h> /* the kernel's struct tcp_info (glibc's lacks tcpi_bytes_acked) */
#include <netinet/in.h>
#include <linux/sockios.h> /* SIOCOUTQ, SIOCOUTQNSD */
#include <sys/ioctl.h>
#include <sys/socket.h>

#ifndef TCP_INFINITE_SSTHRESH
#define TCP_INFINITE_SSTHRESH 0x7fffffff /* the kernel's, not exported to user space */
#endif

#define AUTO_FIRST 4          /* lanes a peer starts with */
#define AUTO_GAIN 1.10        /* a doubling must raise the rate this much to be kept */
#define AUTO_LOSS_RISE 1.5    /* a level's share of segments lost this much above the one before */
#define AUTO_LOSS_SLACK 8.0   /* and this many retransmissions more: the lanes' doing */
#define AUTO_LOSS_RANDOM 0.01 /* a path's own loss: at most this share of segments */
#define AUTO_LOSS_QUEUE 0.02  /* a settled level that loses this share overflows a queue */
#define AUTO_WINDOW 0.75      /* window-bound: the rate is this much of what windows allow */
#define AUTO_WARM_RTTS 4.0    /* round trips a new level runs before it is measured */
#define AUTO_WARM_MAX_RTTS 32.0 /* or longer, up to this, until its lanes left slow start */
#define AUTO_WARM_LOOK_S 0.01   /* and looks whether they did no more often */
#define AUTO_QUEUE 1.2          /* lanes' round trip this much over the path's least: a queue */
#define AUTO_FALL 2.0           /* a settled level's rate fell this many times: a transient */
#define AUTO_ROSE 2             /* intervals in a row a settled level's rate rose by AUTO_GAIN */
#define AUTO_SAMPLE_RTTS 4.0    /* round trips per measured interval */
#define AUTO_SAMPLES 3          /* intervals per level */
#define AUTO_MIN_S 0.1          /* no interval is shorter (loopback, a LAN) */
#define AUTO_MAX_S 1.0          /* nor longer */
#define AUTO_REPROBE_S 20.0     /* seconds of measured traffic between probes of a settled peer */
#define AUTO_DEFAULT_RTT 0.01   /* before any lane has a round trip */
#define AUTO_GAP_S 0.05         /* looks further apart than this: the program was away */
#define AUTO_BUSY 0.8           /* an interval counts if a send moved for this share of it */
#define AUTO_WIN_AGE_S 1.0      /* the window is looked at again after this long */
#define AUTO_STREAM_GROW_LOG2 2 /* streamed messages 4x larger than before: new traffic */
#define BURST_MIN_LOG2 19       /* lone messages of 512 KiB and more have their own count */
#define BURST_POLL_S 0.0002     /* a drained lone message's queues are looked at no more often */
/* looks further apart than BURST_AWAY_S: the program was away, the time not the path's */
#define BURST_AWAY_S 0.003
#define BURST_LIMITED 0.5 /* lanes waiting on windows this share of their busy time */
#define BURST_CAPPED 1.3  /* half the lanes this much slower: each lane's rate is capped */
#define BURST_SAMPLES 3   /* lone messages timed per level at least */
/* and more, up to BURST_SAMPLES_MAX, until they took BURST_SAMPLED_S: cheap samples (a short
 * path), where noise weighs more */
#define BURST_SAMPLED_S 0.1
/* but BURST_SAMPLES are enough where they are this much faster or slower than the level before */
#define BURST_CLEAR 1.2
/* a level of fewer lanes than the one before, tried after the first halving, is kept only when
 * no slower than it by this */
#define BURST_FEWER 1.0
#define BURST_SAMPLES_MAX TCP_BURST_SAMPLES_MAX
/* lanes that carried less than BURST_ROOM of their windows per round trip had room */
#define BURST_ROOM 0.5
#define BURST_LONE_S 10.0 /* a lone message not drained by then is no longer looked at */
#define BURST_REPROBE 64  /* messages of a settled class between probes of twice its lanes */
/* a level whose fastest message took this many round trips or more, and at most
 * BURST_FLIGHTS_MAX (more: its size, not its flights, sets its time), gets a second doubling when
 * the first did not cut the time by AUTO_GAIN */
#define BURST_FLIGHTS_MIN 1.5
#define BURST_FLIGHTS_MAX 8.0
/* nor where its bytes alone, at the streaming level's rate, take this share of its time: the
 * bytes, not the flights, set it (wan-perflow, 8 MiB: 4.9 round trips, 90% of them the bytes at
 * 770 Mbit/s; the second doubling took the class to 64 lanes, past the policers' queues) */
#define BURST_BYTES_BOUND 0.5
/* a loss-bound lane's window, in segments, at loss rate q: about sqrt(3 / (2q)) (Mathis et al.,
 * "The macroscopic behavior of the TCP congestion avoidance algorithm", 1997) */
#define BURST_MATHIS 1.5

static void burst_step(mln_stripe_t *s, int peer, double now, int sending);

int mln_tcp_auto_first(const mln_stripe_t *s)
{
    const int cap = mln_stripe_lanes_cap(s);

    return s->cfg->stripe_lanes > 0 || cap < AUTO_FIRST ? cap : AUTO_FIRST;
}

/* The lanes' round trips, gathered lane by lane: the largest smoothed one (s), and the mean one
 * over the least (queue: 1 with no standing queue, 0 when unknown). */
typedef struct tcp_rtts {
    double rtt, srtt, least;
    int timed;
} tcp_rtts_t;

static void rtts_add(tcp_rtts_t *r, const struct tcp_info *ti)
{
    if (ti->tcpi_rtt / 1e6 > r->rtt)
        r->rtt = ti->tcpi_rtt / 1e6;
    if (ti->tcpi_rtt > 0 && ti->tcpi_min_rtt > 0) {
        r->srtt += ti->tcpi_rtt;
        if (r->least == 0 || ti->tcpi_min_rtt < r->least)
            r->least = ti->tcpi_min_rtt;
        r->timed++;
    }
}

/* The largest round trip (AUTO_DEFAULT_RTT when none is known yet); *queue as above. */
static double rtts_end(const tcp_rtts_t *r, double *queue)
{
    *queue = r->timed ? r->srtt / r->timed / r->least : 0;
    return r->rtt > 0 ? r->rtt : AUTO_DEFAULT_RTT;
}

/* Lanes [0, n)'s TCP_INFO (tcp_lanes_info_t). */
static tcp_lanes_info_t lanes_info(const tcp_peer_t *p, int n)
{
    tcp_lanes_info_t l = {0};
    tcp_rtts_t r = {0};

    for (int i = 0; i < n; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        if (getsockopt(p->out[i].fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1)
            continue;
        l.n++;
        l.acked += ti.tcpi_bytes_acked;
        l.retrans += ti.tcpi_total_retrans;
        l.segs += ti.tcpi_segs_out;
        l.app_limited += ti.tcpi_delivery_rate_app_limited;
        rtts_add(&r, &ti);
    }
    l.rtt = rtts_end(&r, &l.queue);
    return l;
}

/* Lone message class cls's least size in KiB (for the log). */
static int class_kib(int cls)
{
    return 1 << (BURST_MIN_LOG2 + cls - 10);
}

static double clamp_s(double seconds)
{
    return seconds < AUTO_MIN_S ? AUTO_MIN_S : seconds > AUTO_MAX_S ? AUTO_MAX_S : seconds;
}

/* 1 when lanes [0, n) left slow start: a loss ended it (a finite ssthresh), or the window caps
 * them (their congestion window covers it).  On a lossy path new lanes' slow start overshoots by
 * hundreds of segments and their rate then decays for many round trips: measured before, a
 * level looks faster than it is, and its overshoot's losses look like its own. */
static int lanes_warm(const tcp_peer_t *p, int n)
{
    for (int i = 0; i < n; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        if (getsockopt(p->out[i].fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1)
            continue;
        if (ti.tcpi_snd_ssthresh >= TCP_INFINITE_SSTHRESH &&
            (uint64_t)ti.tcpi_snd_cwnd * ti.tcpi_snd_mss < ti.tcpi_snd_wnd)
            return 0;
    }
    return 1;
}

/* Starts an interval of the current level at now, its lanes as `l` says. */
static void interval_from(tcp_peer_t *p, double now, tcp_lanes_info_t l)
{
    p->a.i0 = l;
    p->a.t0 = now;
    p->a.busy = 0;
}

/* Starts an interval of the current level at now. */
static void interval_start(tcp_peer_t *p, double now)
{
    interval_from(p, now, lanes_info(p, p->a.level));
}

/* The level to run next: lanes [0, level) take chunks once they are up (opened if need be). */
static void level_set(mln_stripe_t *s, int peer, int level, double now)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    p->a.level = level;
    p->a.sum = 0;
    p->a.nsamples = 0;
    p->a.retrans = p->a.segs = 0;
    if (level > p->nout && !mln_tcp_grow(s, peer, level) && p->nup < level)
        p->a.level = level = p->nup; /* no more lanes open: measure what there is */
    if (level > p->nup) {
        p->a.phase = AUTO_GROW;
        return;
    }
    p->active = level;
    p->a.phase = AUTO_WARM;
    interval_start(p, now);
}

/* From the current level, measured at `rate`, to `next`: the current one becomes the level
 * before, with its rate and its losses. */
static void level_next(mln_stripe_t *s, int peer, double rate, int next, double now)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    p->a.prev = p->a.level;
    p->a.prev_rate = rate;
    p->a.prev_retrans = p->a.retrans;
    p->a.prev_segs = p->a.segs;
    level_set(s, peer, next, now);
}

static void settle(mln_stripe_t *s, int peer, int level, double rate, const char *why)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    MLN_DEBUG("tcp auto: world rank %d settles on %d lanes (%.0f Mbit/s): %s", peer, level,
              rate * 8e-6, why);
    p->active = p->a.level = level;
    p->a.rate = p->a.settle_rate = rate;
    p->a.prev = p->a.loss_base = p->a.room = p->a.mid = 0;
    p->a.settled_busy = 0;
    p->a.settled_n = 0;
    p->a.rose = 0;
    p->a.down = 0;
    p->a.sum = 0;
    p->a.nsamples = 0;
    p->a.retrans = p->a.segs = 0;
    p->a.phase = AUTO_SETTLED;
    interval_start(p, mln_stripe_now());
}

void mln_tcp_auto_start(mln_stripe_t *s, int peer, double now)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    p->a = (tcp_auto_t){.phase = AUTO_OFF};
    p->burst = 0;
    p->bs.on = 0;
    for (int c = 0; c < BURST_CLASSES; c++)
        p->bc[c] = (tcp_burst_t){0};
    if (s->cfg->stripe_lanes > 0)
        return;
    p->a.prev = 0;
    level_set(s, peer, p->nup, now);
}

/* One lane's window: the peer's advertised receive window, within half our send buffer (the
 * kernel keeps the other half for its own bookkeeping); 0 when unknown. */
static uint64_t lane_window(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int sndbuf = 0;
    socklen_t blen = sizeof(sndbuf);
    uint64_t w;

    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1 || ti.tcpi_snd_wnd == 0)
        return 0;
    w = ti.tcpi_snd_wnd;
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &blen) == 0 && sndbuf > 0 &&
        (uint64_t)sndbuf / 2 < w)
        w = (uint64_t)sndbuf / 2;
    return w;
}

/* Bytes per second the level's lanes allow if each carries its whole window every round trip;
 * 0 when the window is unknown. */
static double window_rate(tcp_peer_t *p)
{
    const double now = mln_stripe_now();

    if (now - p->a.win_at > AUTO_WIN_AGE_S) {
        p->a.win = lane_window(p->out[0].fd);
        p->a.win_at = now;
    }
    return p->a.win > 0 && p->a.i0.rtt > 0 ? (double)p->a.level * (double)p->a.win / p->a.i0.rtt
                                           : 0;
}

static int window_bound(tcp_peer_t *p, double rate)
{
    const double allowed = window_rate(p);

    return allowed > 0 && rate >= AUTO_WINDOW * allowed;
}

/* 1 when both levels lost segments, this one no larger a share of its own than the level before
 * (within AUTO_LOSS_RISE, and AUTO_LOSS_SLACK retransmissions of chance) and at most
 * AUTO_LOSS_RANDOM of them: the loss is the path's own, random, not a queue the lanes overflow or
 * a policer they exceed.  Those take percents (wan-short, wan-2site: 5% from 4 or 8 lanes on,
 * cubic fills the queue at any count, so the share need not grow with the lanes; wan-perflow's
 * policer 2-3%), a path's own loss a tenth of one or less (wan-lossy 0.1%).  A level that lost
 * nothing is not loss-bound: a rate that did not rise is the link's. */
static int loss_is_paths(const tcp_auto_t *a)
{
    if (a->prev_retrans == 0 || a->prev_segs == 0 || a->retrans == 0 ||
        a->retrans > AUTO_LOSS_RANDOM * a->segs)
        return 0;
    return a->retrans <=
           AUTO_LOSS_RISE * a->prev_retrans / (double)a->prev_segs * a->segs + AUTO_LOSS_SLACK;
}

/* 1 when the level lost a few segments (2 or more: one is chance), at most AUTO_LOSS_RANDOM of
 * them: as few as a path's own loss. */
static int lost_few(const tcp_auto_t *a)
{
    return a->retrans >= 2 && a->retrans <= AUTO_LOSS_RANDOM * a->segs;
}

/* 1 when the link already showed room (a.room: the path's own loss with no queue) and this level
 * lost few segments (lost_few): the path's loss still, even where its share rose over the level
 * before's (a doubling's new lanes lose a burst as they leave slow start, which the level before's
 * did not: wan-lossy, 16 lanes lost 0.23% of their segments where 4 lost 0.10%, one retransmission
 * over loss_is_paths's bound, and the search went back to 4 lanes where 32-64 carry twice as
 * much); with no queue either, the link is not full. */
static int room_loss(const tcp_auto_t *a)
{
    return a->room && lost_few(a);
}

/* 1 when the lanes kept no standing queue: their round trip under AUTO_QUEUE of the path's
 * least (0: unknown, counted as a queue). */
static int no_queue(double queue)
{
    return queue > 0 && queue < AUTO_QUEUE;
}

/* 1 when n lanes to p are as many as there can be: MLN_STRIPE_LANES_MAX, or no more open. */
static int lanes_top(const tcp_peer_t *p, int n)
{
    return n >= p->cap || (p->grow_stop && n >= p->nup);
}

/* The streaming level saw the path's own loss: lanes lost segments with no queue, or twice the
 * lanes lost no larger share of theirs (loss_is_paths), with no queue either (wan-short: 2 lanes
 * lost 0.26% where 1 lost 0.57%, cubic filling the queue; its 64 MiB class then went to 16).  Lone
 * classes that settled before, without that to go on, search again from their level: their samples
 * lose as the path does, and more lanes as fast are worth keeping there (wan-lossy: the 1 MiB class
 * of the first ping-pong settled on 4 lanes, 4 and 8 alike over their first messages on fresh
 * lanes, and stayed there at 66-77 ms a message, where 32 take 27). */
static void path_loss_seen(tcp_peer_t *p, int peer)
{
    if (p->a.path_loss)
        return;
    p->a.path_loss = 1;
    for (int c = 0; c < BURST_CLASSES; c++) {
        tcp_burst_t *b = &p->bc[c];
        if (!b->settled || b->room)
            continue;
        MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: searched again from %d "
                  "lanes, the path's loss now known",
                  peer, class_kib(c), b->level);
        b->settled = b->down = b->mid = b->again = b->twice = 0;
        b->prev.n = b->nsamples = 0;
        b->sampled = 0;
        b->first = b->level;
    }
}

/* A level measured at `rate` (bytes/s) with `retrans` retransmissions: the next step. */
static void decide(mln_stripe_t *s, int peer, double rate, double now)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    const int level = p->a.level, prev = p->a.prev, max = p->cap;

    const int no_gain = prev != 0 && rate < p->a.prev_rate * AUTO_GAIN;
    int next;

    MLN_DEBUG("tcp auto: world rank %d, %d lanes: %.0f Mbit/s, %u retransmissions in %u segments, "
              "round trip %.2fx the least%s",
              peer, level, rate * 8e-6, p->a.retrans, p->a.segs, p->a.queue,
              prev ? "" : " (first level)");
    if (p->a.mid) { /* between a level with room and four times it, which filled the link */
        p->a.mid = 0;
        if (rate >= p->a.prev_rate)
            settle(s, peer, level, rate, "twice the lanes with room, four times filled the link");
        else
            settle(s, peer, prev, p->a.prev_rate, "more lanes did not raise the rate");
        return;
    }
    if (p->a.down) {
        if (rate * AUTO_GAIN < p->a.prev_rate) /* back, with the rate it had settled at */
            settle(s, peer, prev,
                   p->a.down_from_rate > p->a.prev_rate ? p->a.down_from_rate : p->a.prev_rate,
                   "fewer lanes were slower by 10%");
        else if (level > 1 && p->a.retrans > AUTO_LOSS_QUEUE * p->a.segs)
            level_next(s, peer, rate, level / 2, now);
        else
            settle(s, peer, level, rate, "fewer lanes were as fast, and lose less");
        return;
    }
    if (no_gain && no_queue(p->a.queue) && (loss_is_paths(&p->a) || room_loss(&p->a))) {
        MLN_DEBUG(
            "tcp auto: world rank %d: %d lanes did not raise the rate by 10%%, but lost %u of "
            "%u segments, the path's share (%d lanes: %u of %u), and kept no queue (round "
            "trip %.2fx the least): the link has room; more lanes are tried",
            peer, level, p->a.retrans, p->a.segs, prev, p->a.prev_retrans, p->a.prev_segs,
            p->a.queue);
        p->a.room = 1;
        path_loss_seen(p, peer);
    } else if (no_gain && p->a.room) {
        /* doublings kept for the link's room (their rates the noise of loss-bound lanes) end
         * where the lanes keep a queue or lose more: the link is full here, which the level before
         * did not fill; unless that cost the rate a tenth (the queue's overflow) */
        if (rate * AUTO_GAIN >= p->a.prev_rate)
            settle(s, peer, level, rate, "these lanes fill the link, the level before had room");
        else if (level >= 4 * prev) { /* a jump past the link: twice the level before is tried */
            MLN_DEBUG("tcp auto: world rank %d: %d lanes fill the link but lowered the rate by "
                      "10%%: trying %d",
                      peer, level, 2 * prev);
            p->a.mid = 1;
            level_set(s, peer, 2 * prev, now);
        } else
            settle(s, peer, prev, p->a.prev_rate,
                   "these lanes fill the link but lowered the rate by 10%");
        return;
    } else if (no_gain && p->a.loss_base != 0) {
        /* the level before was kept for the path's loss and this one did not add 10% either: the
         * lanes do not add up (the link is full) */
        if (rate >= p->a.loss_base_rate * AUTO_GAIN)
            settle(s, peer, level, rate, "two doublings raised the rate by 10%, not one");
        else
            settle(s, peer, p->a.loss_base, p->a.loss_base_rate,
                   "two doublings did not raise the rate by 10%");
        return;
    } else if (no_gain && loss_is_paths(&p->a)) {
        MLN_DEBUG("tcp auto: world rank %d: %d lanes did not raise the rate by 10%%, but lost no "
                  "larger share of their segments than %d: the path's loss, each lane's rate its "
                  "own; more lanes are tried",
                  peer, level, prev);
        p->a.loss_base = prev;
        p->a.loss_base_rate = p->a.prev_rate;
        if (no_queue(p->a.queue)) /* with a queue, the losses may be its overflow */
            path_loss_seen(p, peer);
    } else if (no_gain) { /* no better than the level before */
        settle(s, peer, prev, p->a.prev_rate,
               rate < p->a.prev_rate && p->a.retrans > 0
                   ? "more lanes lowered the rate, with retransmissions"
                   : "more lanes did not raise the rate by 10%");
        return;
    } else if (!p->a.room)
        p->a.loss_base = 0;
    if (!no_gain && prev != 0)
        p->a.down_tried = 0; /* more lanes paid: fewer may be tried again once settled */
    if (prev == 0 && lost_few(&p->a) && no_queue(p->a.queue) && !window_bound(p, rate)) {
        /* the first level already loses a little with no queue on the path: loss-bound lanes on
         * a link with room (wan-lossy's 4 lanes: 0.1-0.2% of their segments, round trip 1.05x
         * the least), the path's own loss; the search starts with four times the lanes.  Not
         * where the lanes carry what their windows allow: their rate is the windows', not the
         * loss's, and a few segments lost are a burst's (wan-2site, 128 KiB windows: 4 lanes at
         * 416 Mbit/s lost 8 of 1967 when a lone message's 16 lanes overflowed the queue; read as
         * the path's loss, the search went on in steps of four to 32 lanes, where 8 fill it) */
        MLN_DEBUG("tcp auto: world rank %d: %d lanes lost %u of %u segments and kept no queue "
                  "(round trip %.2fx the least): the path's loss, and the link has room",
                  peer, level, p->a.retrans, p->a.segs, p->a.queue);
        p->a.room = 1;
        path_loss_seen(p, peer);
    }
    if (lanes_top(p, level)) {
        settle(s, peer, level, rate, level >= max ? "MLN_STRIPE_LANES_MAX" : "no more lanes open");
        return;
    }
    /* with the link's room and no queue on it, four times the lanes: the rate grows with the
     * lanes until they fill it (wan-lossy: 64 lanes twice 16's), and a search a level shorter
     * spends a level's warm-up and measure less at the slower counts */
    next = (p->a.room && no_queue(p->a.queue) ? 4 : 2) * level;
    level_next(s, peer, rate, next < max ? next : max, now);
}

/* From a settled level whose lanes are window-bound, a probe of twice the lanes: every lane
 * carries all its window allows, so the path may have room. */
static void probe(mln_stripe_t *s, int peer, double now)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    const int level = p->a.level;
    int next = 2 * level;

    p->a.settled_busy = 0;
    if (next > p->cap)
        next = p->cap;
    if (next == level || (p->grow_stop && next > p->nup) || !window_bound(p, p->a.rate))
        return;
    MLN_DEBUG("tcp auto: world rank %d: probing %d lanes (settled on %d)", peer, next, level);
    level_next(s, peer, p->a.rate, next, now);
}

/* A settled level whose rate rose by AUTO_GAIN: the program's traffic changed (a stream after
 * bursts too short for more lanes to pay), and whatever bound the level then, a per-flow cap
 * included, may not now.  The search starts again from it: measured whole under the new traffic
 * (the interval that rose straddles the change), then doubled while that pays. */
static void search_again(mln_stripe_t *s, int peer, double now)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    p->a.prev = p->a.loss_base = p->a.room = p->a.down = p->a.mid = 0;
    level_set(s, peer, p->a.level, now);
}

/* A settled level's interval of `span` seconds, measured at `rate`, its lanes as `l` says: the
 * level stays, or the search starts again (the traffic changed, or the level settled on a
 * transient), or the lanes are probed (twice as many) or cut (half as many). */
static void settled_step(mln_stripe_t *s, int peer, double rate, double span,
                         const tcp_lanes_info_t *l, double now)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    const int loss_bound = 2 * l->app_limited <= l->n;
    int rose;

    p->a.rose = rate > AUTO_GAIN * p->a.settle_rate ? p->a.rose + 1 : 0;
    rose = p->a.rose >= AUTO_ROSE;
    p->a.rate = p->a.nsamples ? 0.75 * p->a.rate + 0.25 * rate : rate;
    p->a.nsamples = 1;
    p->a.settled_busy += span;
    p->a.settled_n++;
    if (p->a.stream_grew) {
        p->a.stream_grew = 0;
        if (!lanes_top(p, p->a.level)) {
            /* the program now streams messages four times larger or more than any before: the
             * level was measured under other traffic (wan-lossy, MPICH: settled on 16 lanes at
             * 452 Mbit/s over 1 MiB windows, 32 and 64 no faster there; the 10 and 64 MiB streams
             * then carried 375-395 on 16, where tcp:64 carries 616-671), and a rate that did not
             * rise says nothing of more lanes: the search starts again from the level */
            MLN_DEBUG("tcp auto: world rank %d: messages of %llu KiB or more streamed now, %d "
                      "lanes settled before them: searched again",
                      peer, (1ULL << p->a.stream_log2) >> 10, p->a.level);
            p->a.settle_rate = rate;
            search_again(s, peer, now);
            return;
        }
    }
    if (rose && lanes_top(p, p->a.level)) {
        /* no more lanes to try: the new rate is the one to rise from, again over AUTO_ROSE
         * intervals */
        p->a.settle_rate = rate;
        p->a.rose = 0;
    } else if (rose && p->a.rose_searched && p->a.settled_busy < AUTO_REPROBE_S) {
        /* a rise searched from once already (the traffic changed then), again within
         * AUTO_REPROBE_S of measured traffic: the noise of loss-bound lanes, whose rate moves by
         * more than AUTO_GAIN from one interval to the next (wan-lossy, MPICH, at a24fb3a: 32
         * lanes settled at 569 Mbit/s rose to 745 and searched again, 32 at 703 and 64 at 748
         * settled on 32, which rose again and searched again, 32 at 737 and 64 at 888; the 10
         * MiB stream's repetitions over these searches 658 and 678, tcp:32's 776); the new rate
         * is the one to rise from */
        p->a.settle_rate = rate;
        p->a.rose = 0;
    } else if (rose) {
        /* the program's traffic changed (a stream after bursts too short for more lanes to pay):
         * the search starts again from the level */
        p->a.rose_searched = 1;
        MLN_DEBUG("tcp auto: world rank %d: %d lanes now carry %.0f Mbit/s (%.0f when settled; "
                  "%d intervals in a row over it by 10%%)",
                  peer, p->a.level, rate * 8e-6, p->a.settle_rate * 8e-6, p->a.rose);
        p->a.rate = p->a.settle_rate = rate; /* the new traffic's rate, or nothing */
        search_again(s, peer, now);
    } else if (p->a.settled_n >= AUTO_SAMPLES && AUTO_FALL * p->a.rate < p->a.settle_rate &&
               p->a.retrans > 0 && p->a.retrans <= AUTO_LOSS_RANDOM * p->a.segs &&
               no_queue(l->queue) && loss_bound) {
        /* loss-bound lanes with no queue (the path's own loss) now carry under half the rate
         * the level settled at: it was measured on a transient (wan-lossy, MPICH: new lanes'
         * slow start read 4 lanes at 438 Mbit/s, 8 at 413, both losing 2%; settled on 4, they
         * then streamed at 150-170), and the rates the search compared were not the path's */
        MLN_DEBUG("tcp auto: world rank %d: %d lanes now carry %.0f Mbit/s, under half the %.0f "
                  "they settled at, losing %u of %u segments with no queue: searched again",
                  peer, p->a.level, p->a.rate * 8e-6, p->a.settle_rate * 8e-6, p->a.retrans,
                  p->a.segs);
        p->a.settle_rate = p->a.rate;
        search_again(s, peer, now);
    } else if (p->a.settled_busy >= AUTO_REPROBE_S)
        probe(s, peer, now);
    else if (p->a.settled_n >= AUTO_SAMPLES && !p->a.down_tried && p->a.level > 1 &&
             p->a.retrans > AUTO_LOSS_QUEUE * p->a.segs && loss_bound) {
        /* the settled lanes overflow a queue (a short path: cubic fills it at any count): fewer,
         * while no slower by AUTO_GAIN, cost less (sockets, losses, a lone message's first
         * flights) */
        MLN_DEBUG("tcp auto: world rank %d: %d lanes lose %u of %u segments: trying %d", peer,
                  p->a.level, p->a.retrans, p->a.segs, p->a.level / 2);
        p->a.down_tried = p->a.down = 1;
        p->a.down_from_rate = p->a.settle_rate;
        level_next(s, peer, p->a.rate, p->a.level / 2, now);
    }
}

void mln_tcp_auto_step(mln_stripe_t *s, double now)
{
    mln_tcp_state_t *t = s->tcp;

    if (s->cfg->stripe_lanes > 0)
        return;
    t->auto_pass++;
    for (const mln_req_t *r = s->active; r; r = r->next)
        if (r->is_send && r->kind == MLN_LANE_TCP && r->peer_world >= 0 &&
            (r->state == MLN_REQ_DATA || r->state == MLN_REQ_CTS))
            t->peers[r->peer_world].a.sending = t->auto_pass;
    for (int peer = 0; peer < s->wsize; peer++) {
        tcp_peer_t *p = &t->peers[peer];
        tcp_lanes_info_t l;
        double span, rate, last;
        uint32_t retrans, segs;

        if (p->state != PEER_UP || p->a.phase == AUTO_OFF)
            continue;
        if (p->bs.on)
            burst_step(s, peer, now, p->a.sending == t->auto_pass);
        if (p->a.phase == AUTO_GROW) {
            if (p->nup >= p->a.level || p->nup == p->nout) /* up, or the rest did not open */
                level_set(s, peer, p->nup < p->a.level ? p->nup : p->a.level, now);
            continue;
        }
        last = p->a.looked;
        p->a.looked = now;
        if (p->a.sending != t->auto_pass || now - last > AUTO_GAP_S) {
            MLN_TRACE("tcp auto: world rank %d: %s", peer,
                      p->a.sending != t->auto_pass ? "nothing to send" : "a gap between looks");
            continue; /* the program had nothing for the lanes: not the path's time */
        }
        p->a.busy += now - last;
        span = now - p->a.t0;
        if (span <
            clamp_s((p->a.phase == AUTO_WARM ? AUTO_WARM_RTTS : AUTO_SAMPLE_RTTS) * p->a.i0.rtt))
            continue;
        if (p->a.phase == AUTO_WARM && span < clamp_s(AUTO_WARM_MAX_RTTS * p->a.i0.rtt)) {
            if (now - p->a.warm_looked < AUTO_WARM_LOOK_S)
                continue;
            p->a.warm_looked = now;
            if (!lanes_warm(p, p->a.level))
                continue;
        }
        l = lanes_info(p, p->a.level);
        if (p->a.phase == AUTO_WARM) {
            MLN_DEBUG("tcp auto: world rank %d, %d lanes: warm after %.0f ms%s", peer, p->a.level,
                      span * 1e3,
                      span >= clamp_s(AUTO_WARM_MAX_RTTS * p->a.i0.rtt) ? " (the limit)" : "");
            p->a.phase = AUTO_MEASURE;
            interval_from(p, now, l);
            continue;
        }
        if (p->a.busy < AUTO_BUSY * span) {
            interval_from(p, now, l); /* the program was away too long: measured again */
            continue;
        }
        rate = (double)(l.acked - p->a.i0.acked) / span;
        retrans = l.retrans - p->a.i0.retrans;
        segs = l.segs - p->a.i0.segs;
        p->a.retrans += retrans;
        p->a.segs += segs;
        interval_from(p, now, l);
        if (p->a.phase == AUTO_SETTLED) {
            MLN_TRACE("tcp auto: world rank %d, settled on %d lanes: %.0f Mbit/s, %u "
                      "retransmissions in %u segments, round trip %.2fx the least",
                      peer, p->a.level, rate * 8e-6, retrans, segs, l.queue);
            settled_step(s, peer, rate, span, &l, now);
            continue;
        }
        p->a.sum += rate;
        p->a.queue = l.queue;
        if (++p->a.nsamples >= AUTO_SAMPLES)
            decide(s, peer, p->a.sum / p->a.nsamples, now);
    }
}

/* ---- lone messages ------------------------------------------------------------------------ */

/* Lanes [0, n) in one TCP_INFO each: Σ busy time and time waiting on a window (receive window
 * or send buffer), in microseconds (the kernel's chronographs, counted in jiffies); Σ
 * retransmissions; the largest smoothed round trip (s), and the mean one over the least
 * (queue, 0 when unknown); lane 0's segment size (1448 when unknown). */
typedef struct tcp_chrono {
    uint64_t busy, limit;
    uint32_t retrans;
    double rtt, queue, mss;
} tcp_chrono_t;

static tcp_chrono_t lanes_chrono(const tcp_peer_t *p, int n)
{
    tcp_chrono_t c = {.mss = 1448};
    tcp_rtts_t r = {0};

    for (int i = 0; i < n; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        if (getsockopt(p->out[i].fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1 ||
            len < offsetof(struct tcp_info, tcpi_sndbuf_limited) + sizeof(ti.tcpi_sndbuf_limited))
            continue;
        c.busy += ti.tcpi_busy_time;
        c.limit += ti.tcpi_rwnd_limited + ti.tcpi_sndbuf_limited;
        c.retrans += ti.tcpi_total_retrans;
        rtts_add(&r, &ti);
        if (i == 0 && ti.tcpi_snd_mss > 0)
            c.mss = ti.tcpi_snd_mss;
    }
    c.rtt = rtts_end(&r, &c.queue);
    return c;
}

/* 1 when lanes [0, n) hold nothing unacknowledged (request SIOCOUTQ), or nothing unsent
 * (SIOCOUTQNSD). */
static int lanes_drained(const tcp_peer_t *p, int n, unsigned long request)
{
    for (int i = 0; i < n; i++) {
        int queued = 0;
        if (ioctl(p->out[i].fd, request, &queued) == -1 || queued > 0)
            return 0;
    }
    return 1;
}

/* The power of two at or under bytes, its exponent (0 for 0 and 1). */
static int log2_floor(uint64_t bytes)
{
    return bytes ? 63 - __builtin_clzll(bytes) : 0;
}

static int burst_class(uint64_t bytes)
{
    const int c = log2_floor(bytes) - BURST_MIN_LOG2;

    return c >= BURST_CLASSES ? BURST_CLASSES - 1 : c;
}

static int pow2_at_least(double x)
{
    int n = 1;

    while (n < x && n < (1 << 20))
        n *= 2;
    return n;
}

/*
 * With the path's own loss, the fewest lanes (a power of two, at most cap) whose windows carry
 * a message of `segs` segments in one flight once each is loss-bound: lost / sent the loss rate q,
 * a window sqrt(1.5 / q) segments (BURST_MATHIS).  A lone message's early samples on fewer lanes
 * read them faster than they stay: lanes that have lost little yet still have the windows of their
 * slow start, which the path's loss then cuts to that size over tens of messages (wan-lossy, 1
 * MiB: 4 lanes 28-45 ms a message in a class's first samples, then 39-70 ms, median 50, in 25
 * ping-pongs of `tcp:4`, where 32 lanes take 20-25 ms; a loss rate of 0.1% gives windows of 39
 * segments, 724 segments over them 19 lanes: 32).  0 where the message takes more than
 * BURST_FLIGHTS_MAX round trips anyway (its size, not its flights, sets its time).
 */
int mln_tcp_loss_floor(double segs, uint32_t lost, double sent, double rounds, int cap)
{
    int n = 1;

    if (lost == 0 || sent <= 0 || cap < 1 || rounds > BURST_FLIGHTS_MAX)
        return 0;
    /* n x window >= segs, squared: n^2 x 1.5 x sent / lost >= segs^2 (no libm) */
    while (n < cap && (double)n * n * BURST_MATHIS * sent < segs * segs * lost)
        n *= 2;
    return n > cap ? cap : n;
}

int mln_tcp_lone_loss(uint32_t retrans, double segs, double rounds)
{
    if (retrans == 0)
        return TCP_LOSS_NONE;
    if (retrans > AUTO_LOSS_RANDOM * segs)
        return TCP_LOSS_RUN;
    return rounds <= BURST_FLIGHTS_MAX ? TCP_LOSS_FEW : TCP_LOSS_NONE;
}

/*
 * The first level's lanes did not wait on their windows, and each carried much less than its
 * window per round trip: fewer may carry the message as fast (wan-short: one lane fills the
 * link), and cost less.  Tried where the messages are cheap to time (a wrong try on 64 MiB
 * messages costs seconds, more than fewer lanes could save), or where a message lost a run of
 * segments: the lanes' bursts overflowed a queue, which fewer lanes spare, however long the
 * messages took (wan-short, 1 MiB on the 4 lanes of a new connection: 37 and 43 ms in their
 * first two messages, from their initial windows, 25-44 of 117 segments lost in each; that
 * median read the level as too slow to time, and the class went up to 8 lanes and settled there,
 * 25 ms a ping-pong where tcp:2 takes 14-15).
 */
int mln_tcp_lone_fewer(int n, double share, double lane_bytes, double window, double t, int runs)
{
    if (n <= 1 || share >= BURST_LIMITED || lane_bytes >= BURST_ROOM * window)
        return 0;
    return t * BURST_SAMPLES < BURST_SAMPLED_S || runs > 0;
}

/* The level of class b changes to `level` (lanes opened if need be). */
static void burst_level(mln_stripe_t *s, int peer, tcp_burst_t *b, int level)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    if (level > p->cap)
        level = p->cap;
    if (level > p->nout && !mln_tcp_grow(s, peer, level) && p->nup < level)
        level = p->nout > p->nup ? p->nout : p->nup; /* no more lanes will open */
    b->level = level;
}

static void burst_settle(tcp_peer_t *p, int peer, int cls, int level, double t, const char *why)
{
    tcp_burst_t *b = &p->bc[cls];

    b->room = b->mid = b->again = b->twice = b->floor = 0;
    b->few = b->runs = b->run = b->from_few = 0;
    MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d lanes (%.2f ms): %s",
              peer, class_kib(cls), level, t * 1e3, why);
    b->level = level;
    b->prev.n = 0;
    b->down = 0;
    b->settled = 1;
    b->since = 0;
}

/* The level of n lanes from its samples.  Its time: the fastest where none lost a segment (the
 * others' extra is the machine's noise: on this 2-core VM one message's time varies by 30%), else
 * the median: on a lossy path a loss is part of a message's time (a lane's tail retransmitted
 * after a round trip or a timeout, sooner where a lane carries more segments), and the fastest
 * sample, a message that lost nothing, hides what the lane count costs in the others (wan-lossy:
 * 4 lanes' fastest 1 MiB as fast as 16 lanes', their median twice as slow).  With the path's own
 * loss (room), the fastest anyway: the losses fall at random, whatever the count, and the fastest
 * sample, which lost least, says what the count itself costs (wan-lossy, 1 MiB: 16 lanes' median
 * 28-60 ms from one run to the next, its fastest 27-31); level_vs_prev weighs the medians too. */
static tcp_burst_level_t level_of(const tcp_burst_t *b, int n)
{
    double t[BURST_SAMPLES_MAX];
    const int k = b->nsamples;
    tcp_burst_level_t l = {.n = n, .lost = b->lost > 0};

    for (int i = 0; i < k; i++) { /* insertion sort: 8 samples at most */
        int j = i;
        for (; j > 0 && t[j - 1] > b->times[i]; j--)
            t[j] = t[j - 1];
        t[j] = b->times[i];
    }
    l.med = k % 2 ? t[k / 2] : (t[k / 2 - 1] + t[k / 2]) / 2;
    l.t = l.lost && !b->room ? l.med : b->best;
    return l;
}

/* Level a's time over level b's, like with like: where one of them lost segments and the other
 * did not, their medians (the fastest of one against the median of the other chose by how the
 * losses fell: wan-short, 1 MiB, 1 lane's fastest 15.7 ms against 2 lanes' median 15.6, one lost
 * a segment, where 2 lanes take 12.8 ms a message and 1 lane 17.7). */
static double level_ratio(const tcp_burst_level_t *a, const tcp_burst_level_t *b)
{
    return a->lost != b->lost ? a->med / b->med : a->t / b->t;
}

/* Level cur's time over the level before's (1: none before): like with like; with the path's own
 * loss (room), the lesser of their fastest's ratio and their medians': more lanes are slower only
 * where both say so (wan-lossy, MPICH, 1 MiB: 8 lanes 52, 33 and 42 ms, 16 lanes 37 ms three times;
 * 16 read 1.13 times as slow from 8's one fast message and the class settled on 8, where 32 take
 * 28 ms and 8 take 40). */
static double level_vs_prev(const tcp_burst_t *b, const tcp_burst_level_t *cur)
{
    double fast, med;

    if (b->prev.n == 0)
        return 1;
    if (!b->room)
        return level_ratio(cur, &b->prev);
    fast = cur->t / b->prev.t;
    med = cur->med / b->prev.med;
    return fast < med ? fast : med;
}

/* 1 when the samples so far of n lanes set them apart from the level before: BURST_CLEAR faster
 * or slower (no more are needed to tell). */
static int burst_clear(const tcp_burst_t *b, int n)
{
    const tcp_burst_level_t cur = level_of(b, n);
    const double r = level_vs_prev(b, &cur);

    return b->prev.n != 0 && (r >= BURST_CLEAR || r * BURST_CLEAR <= 1);
}

/*
 * A lone message of class cls took t seconds on n lanes (its start to its last byte
 * acknowledged), its lanes as `c` says over that time (`share` of their busy time waiting on
 * windows; rtt their round trip).  A level's time is level_of()'s, compared with the level
 * before's like with like (level_ratio).  From the class's first level, when its lanes had room in
 * their windows, the lanes halve while that costs less than AUTO_GAIN (the first time) or nothing
 * (BURST_FEWER, after); otherwise they double while that cuts the time by AUTO_GAIN (by four with
 * the path's own loss, while no slower); when the lanes mostly waited on their windows and the
 * message took `rounds` round trips, at most BURST_FLIGHTS_MAX, the next level is the one that
 * would carry it in about one (a power of two, at least twice the lanes).  The first level that
 * does not help sends the class back to the one before (after a second doubling where the message
 * took a few flights).  A settled class's timed message (one in BURST_REPROBE) probes twice its
 * lanes when they still waited on windows.
 */
static void burst_decide(mln_stripe_t *s, int peer, const tcp_sample_t *bs, double t,
                         const tcp_chrono_t *c)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    const int cls = bs->cls, n = bs->n;
    const double rtt = c->rtt;
    tcp_burst_t *b = &p->bc[cls];
    double vs, rounds, share = c->busy > 0 ? (double)c->limit / (double)c->busy : 0;
    tcp_burst_level_t cur;
    int next, by_level;

    MLN_DEBUG("tcp auto: world rank %d, a lone message of class %d KiB on %d lanes: %.2f ms (%.1f "
              "round trips, %.0f%% of the lanes' time waiting on windows, %u retransmissions, "
              "round trip %.2fx the least)",
              peer, class_kib(cls), n, t * 1e3, t / rtt, share * 100, c->retrans, c->queue);
    if (b->settled) {
        b->since = 0;
        if (share < BURST_LIMITED || lanes_top(p, n))
            return;
        b->settled = 0;
        b->first = 0; /* a probe goes up only */
        b->prev = (tcp_burst_level_t){.n = n, .t = t, .med = t, .lost = c->retrans > 0};
        burst_level(s, peer, b, 2 * n);
        return;
    }
    if (b->nsamples == 0 || t < b->best) {
        b->best = t;
        b->best_share = share;
        b->best_rounds = t / rtt;
    }
    if (b->nsamples == 0) {
        b->lost = 0;
        b->retrans = 0;
        b->segs = 0;
        b->run = 0;
    }
    switch (mln_tcp_lone_loss(c->retrans, (double)bs->bytes / c->mss, t / rtt)) {
    case TCP_LOSS_FEW:
        b->few++;
        break;
    case TCP_LOSS_RUN:
        b->runs++;
        b->run = 1;
        break;
    }
    b->lost += c->retrans > 0;
    b->retrans += c->retrans;
    b->segs += (double)bs->bytes / c->mss;
    b->sampled += t;
    b->times[b->nsamples] = t;
    if (++b->nsamples < BURST_SAMPLES ||
        (b->sampled < BURST_SAMPLED_S && b->nsamples < BURST_SAMPLES_MAX && !burst_clear(b, n)))
        return;
    share = b->best_share;
    by_level = p->a.path_loss || (b->lost >= 2 && b->best_rounds <= BURST_FLIGHTS_MAX);
    if (b->lost > 0 && b->retrans <= AUTO_LOSS_RANDOM * b->segs && !b->room && !b->down &&
        (by_level || (b->few >= 2 && b->runs == 0))) {
        /* the path's own loss: the streaming level saw it (segments lost with no queue), or the
         * samples lost a few segments in two messages or more, each of few flights.  A lone
         * message's round trips cannot tell (its burst makes a queue: wan-lossy's 1 MiB on 4
         * lanes, round trip 1.3-1.8x the least), but a queue its burst overflows loses a run of
         * segments in one message (wan-short's 1 MiB on 4 lanes: 16-42 of 117), a random loss a
         * few spread over the messages (wan-lossy's 1 MiB on 4 lanes: 0-3 of 724 each).  A
         * message of many flights may lose as few where cubic fills the queue (wan-short's 64
         * MiB on 2 lanes: 0.5-0.8%, and more lanes only cost there): only the streaming level's
         * loss counts for it */
        /* Or the same evidence over the search's levels: two of its messages or more lost a few
         * segments each, none a run (wan-lossy, the reply direction of a ping-pong, which had not
         * streamed yet: 4 lanes lost none in their first three 1 MiB messages, 8 lanes 2 in one of
         * three, 16 lanes 1 in one of three; each level alone looked lossless or nearly, and the
         * class settled on 4 lanes after 8 and 16 were no faster than 4's fresh windows: 57 ms a
         * ping-pong where tcp:16 took 37.6).  Where a later level loses a run, it was a queue */
        if (by_level)
            MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d lanes lost %u of "
                      "about %.0f segments (in %d messages), the path's loss; more lanes are tried "
                      "while no slower",
                      peer, class_kib(cls), n, b->retrans, b->segs, b->lost);
        else
            MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d messages of this "
                      "search lost a few segments each, none a run, the path's loss; more lanes "
                      "are tried while no slower",
                      peer, class_kib(cls), b->few);
        b->room = 1;
        b->from_few = !by_level;
        b->floor = mln_tcp_loss_floor((double)bs->bytes / c->mss, b->retrans, b->segs,
                                      b->best_rounds, p->cap);
    }
    cur = level_of(b, n);
    vs = level_vs_prev(b, &cur);
    b->nsamples = 0;
    b->sampled = 0;
    if (b->from_few && b->run && b->prev.n != 0) {
        /* the search took the loss for the path's from messages that lost a few segments, and
         * more lanes lost a run: a queue they overflowed */
        burst_settle(p, peer, cls, b->prev.n, b->prev.t,
                     "more lanes lost a run of segments: a queue, not the path's loss");
        return;
    }
    if (b->mid) { /* between a level and four times it, which was slower */
        if (vs <= AUTO_GAIN)
            burst_settle(p, peer, cls, n, cur.t, "as fast as fewer lanes, with the path's loss");
        else
            burst_settle(p, peer, cls, b->prev.n, b->prev.t, "more lanes were slower by 10%");
        return;
    }
    if (b->down) { /* fewer lanes than the first: kept where no slower (BURST_FEWER) */
        if (vs > BURST_CAPPED && b->prev.n == b->first) {
            /* half the first level took BURST_CAPPED as long or more: each lane's rate is
             * capped (a per-flow policer), and more lanes may be faster.  Slower by less is the
             * noise of lanes that share the link (wan-short: 2 lanes 10-30% slower than 4 in some
             * searches, then 8 lanes' bursts overflowed its queue, 28-40 ms against 16) */
            b->down = 0;
            b->first = 0;
            burst_level(s, peer, b, 2 * b->prev.n);
        } else if (vs > (b->prev.n == b->first ? AUTO_GAIN : BURST_FEWER))
            /* the first halving slower by less than AUTO_GAIN is the noise of lanes sharing the
             * link, and is kept; a later one must be no slower at all: a count too small costs
             * more than lanes do (wan-short, 1 MiB: 1 lane 1.4 times as long as 2, read 1.07
             * times from samples that vary by 30%) */
            burst_settle(p, peer, cls, b->prev.n, b->prev.t, "fewer lanes were slower");
        else if (n <= 1)
            burst_settle(p, peer, cls, n, cur.t, "one lane");
        else {
            b->prev = cur;
            burst_level(s, peer, b, n / 2);
        }
        return;
    }
    if (b->prev.n == 0 && n == b->first && !b->room &&
        mln_tcp_lone_fewer(n, share, (double)bs->bytes / (n * (cur.t / rtt)),
                           (double)lane_window(p->out[0].fd), cur.t, b->runs)) {
        MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d lanes not "
                  "window-bound (%.2f ms, %d messages lost a run of segments); trying %d",
                  peer, class_kib(cls), n, cur.t * 1e3, b->runs, n / 2);
        b->down = 1;
        b->prev = cur;
        burst_level(s, peer, b, n / 2);
        return;
    }
    if (b->room && b->prev.n != 0 && vs > AUTO_GAIN) {
        if (!b->again) {
            /* lanes new to the class start from their initial windows, or were idle past a
             * retransmission timeout and start over (wan-lossy, 1 MiB: 16 lanes 50-53 ms in
             * their first three messages, 4 lanes used all along 38-42): measured once more */
            MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d lanes were "
                      "slower by 10%%: measured again",
                      peer, class_kib(cls), n);
            b->again = 1;
        } else if (b->floor > n) {
            /* fewer lanes than the path's loss calls for read faster on their early windows
             * (mln_tcp_loss_floor): the floor is tried */
            MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d lanes were "
                      "slower by 10%%, but %d carry a message in one flight at the path's loss: "
                      "trying %d",
                      peer, class_kib(cls), n, b->floor, b->floor);
            b->again = 0;
            burst_level(s, peer, b, b->floor);
        } else if (b->floor != 0 && n >= b->floor && b->prev.n < b->floor) {
            /* the faster level had fewer lanes than the path's loss calls for */
            burst_settle(p, peer, cls, n, cur.t,
                         "slower than fewer lanes on their early windows, but as many as the "
                         "path's loss calls for");
        } else if (n >= 4 * b->prev.n) {
            /* a step of four was slower: twice the level before is tried */
            MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d lanes were "
                      "slower by 10%%: trying %d",
                      peer, class_kib(cls), n, 2 * b->prev.n);
            b->mid = 1;
            b->again = 0;
            burst_level(s, peer, b, 2 * b->prev.n);
        } else
            burst_settle(p, peer, cls, b->prev.n, b->prev.t, "more lanes were slower by 10%");
        return;
    }
    if (b->room && b->prev.n != 0) {
        /* with the path's own loss, more lanes as fast are kept, up to the floor: the median moves
         * by more than AUTO_GAIN with where the losses fell (wan-lossy, 1 MiB: 16 lanes 28-60 ms
         * from one run to the next, 32 lanes 27-38), while each lane's share crosses in fewer
         * round trips and a loss holds back less of the message (the sweep's fixed counts: 32
         * lanes the fastest at 1 MiB, 32 and 64 at 10 and 64 MiB) */
        if (b->floor != 0 && b->prev.n >= b->floor && vs * AUTO_GAIN > 1) {
            /* the level before had as many as the path's loss calls for, and more did not cut the
             * time by 10%: each lane's share is shorter, so that a loss in it is more often at
             * its tail, with too few segments behind it for three duplicate acknowledgements
             * (recovered by a probe or a timeout, round trips later).  wan-lossy, 1 MiB, the
             * sweeps' fixed counts: tcp:64 36-42 ms a message, tcp:32 24-30; a class that went 16,
             * 32, 64 (two doublings, the path's loss seen only at 64) and settled there took 42 */
            burst_settle(p, peer, cls, b->prev.n, b->prev.t,
                         "more lanes than the path's loss calls for did not cut the time by 10%");
            return;
        }
        if (b->floor != 0 && n >= b->floor) {
            /* as many as the path's loss calls for (mln_tcp_loss_floor): more carry the message in
             * no fewer flights */
            burst_settle(p, peer, cls, n, cur.t,
                         "no slower than fewer lanes, and as many as the path's loss calls for");
            return;
        }
        if (b->prev.t < cur.t)
            cur.t = b->prev.t;
        b->again = 0;
    } else if (b->twice && level_ratio(&cur, &b->base) * AUTO_GAIN > 1) {
        burst_settle(p, peer, cls, b->base.n, b->base.t,
                     "two more doublings did not cut the time by 10%");
        return;
    } else if (b->prev.n != 0 && !b->twice && vs * AUTO_GAIN > 1) {
        if (b->best_rounds < BURST_FLIGHTS_MIN || b->best_rounds > BURST_FLIGHTS_MAX ||
            lanes_top(p, n) ||
            (p->a.rate > 0 && (double)bs->bytes / p->a.rate >= BURST_BYTES_BOUND * b->best)) {
            burst_settle(p, peer, cls, b->prev.n, b->prev.t,
                         "more lanes did not cut the time by 10%");
            return;
        }
        /* the message still took several round trips (lanes' flights): more lanes carry it in
         * fewer, but one doubling's gain may hide in the noise (wan-lossy, 1 MiB, before the
         * streaming level saw the path's loss: 8 lanes' median 32.5 ms against 4 lanes' 35.8,
         * where 32 lanes take 25 and 4 take 43): one more doubling, kept if the two together
         * cut the time by AUTO_GAIN */
        MLN_DEBUG("tcp auto: world rank %d, lone messages of class %d KiB: %d lanes did not cut "
                  "the time by 10%% (%.1f round trips): trying %d",
                  peer, class_kib(cls), n, b->best_rounds, 2 * n);
        b->twice = 1;
        b->base = b->prev;
        b->prev = cur;
        burst_level(s, peer, b, 2 * n);
        return;
    }
    b->twice = 0;
    if (lanes_top(p, n)) {
        burst_settle(p, peer, cls, n, cur.t,
                     n >= p->cap ? "MLN_STRIPE_LANES_MAX" : "no more lanes open");
        return;
    }
    next = (b->room ? 4 : 2) * n; /* the path's loss: a search a level shorter */
    if (b->room && b->floor > n)
        next = b->floor; /* and straight to the lanes it calls for, not past them */
    rounds = cur.t / rtt;
    /* lanes that waited on their windows, a message of a few flights: the lanes that carry it in
     * about one.  Not one of many (its size, not its flights, sets its time): the lanes would be
     * a window per round trip of its whole size (wan-2site, MPICH, 128 KiB windows: a 64 MiB
     * class went from 8 lanes, 50 round trips, to 64, which overflowed the queue, 740-1005 ms a
     * message where 8 took 580-680 and the 64M stream 0.755x of tcp:8); it doubles */
    if (share >= BURST_LIMITED && rounds >= 2 && rounds <= BURST_FLIGHTS_MAX &&
        pow2_at_least(n * (rounds - 1)) > next)
        next = pow2_at_least(n * (rounds - 1));
    b->prev = cur;
    burst_level(s, peer, b, next);
}

/* A message of `bytes` sent to p beside another in flight (a stream): one AUTO_STREAM_GROW_LOG2
 * powers of two larger than any before, while the level is settled, calls a search again. */
static void stream_message(tcp_peer_t *p, int peer, uint64_t bytes)
{
    const int lg = log2_floor(bytes);

    if (lg <= p->a.stream_log2)
        return;
    if (p->a.phase == AUTO_SETTLED && p->a.stream_log2 != 0 &&
        lg >= p->a.stream_log2 + AUTO_STREAM_GROW_LOG2) {
        MLN_TRACE("tcp auto: world rank %d: a message of 2^%d bytes streamed, the largest before "
                  "2^%d",
                  peer, lg, p->a.stream_log2);
        p->a.stream_grew = 1;
    }
    p->a.stream_log2 = lg;
}

void mln_tcp_auto_message(mln_stripe_t *s, int peer_world, uint64_t bytes)
{
    tcp_peer_t *p;
    tcp_burst_t *b;
    int cls, n;

    if (s->cfg->stripe_lanes > 0 || s->tcp == NULL || peer_world < 0 || peer_world >= s->wsize)
        return;
    p = &s->tcp->peers[peer_world];
    if (p->state != PEER_UP || p->a.phase == AUTO_OFF)
        return;
    if (p->bs.on)
        MLN_TRACE("tcp auto: world rank %d: message %llu came before the lone one's last bytes "
                  "were acknowledged: that one untimed",
                  peer_world, (unsigned long long)s->next_msg_id);
    p->bs.on = 0;
    p->burst = 0;
    for (const mln_req_t *r = s->active; r; r = r->next)
        if (r->is_send && r->kind == MLN_LANE_TCP && r->peer_world == peer_world &&
            r->state != MLN_REQ_DONE) {
            MLN_TRACE("tcp auto: world rank %d: message %llu not alone (message %llu in flight)",
                      peer_world, (unsigned long long)s->next_msg_id,
                      (unsigned long long)r->msg_id);
            stream_message(p, peer_world, bytes);
            return; /* not alone: the active lanes */
        }
    if (bytes < (UINT64_C(1) << BURST_MIN_LOG2))
        return;
    cls = burst_class(bytes);
    b = &p->bc[cls];
    if (b->level == 0) {
        burst_level(s, peer_world, b, p->active);
        b->first = b->level;
    }
    n = b->level < p->nup ? b->level : p->nup;
    if (!lanes_drained(p, p->nup, SIOCOUTQNSD)) {
        MLN_TRACE("tcp auto: world rank %d: message %llu not alone (the lanes have bytes to send)",
                  peer_world, (unsigned long long)s->next_msg_id);
        return; /* an earlier message is still on its way: not alone */
    }
    p->burst = n;
    if (n < b->level) {
        MLN_TRACE("tcp auto: world rank %d: message %llu alone on %d lanes (%d opening): untimed",
                  peer_world, (unsigned long long)s->next_msg_id, n, b->level);
        return; /* its lanes are still opening: not the level's time */
    }
    if (b->settled && ++b->since < BURST_REPROBE) {
        MLN_TRACE("tcp auto: world rank %d: message %llu alone on %d lanes, its class settled: "
                  "untimed",
                  peer_world, (unsigned long long)s->next_msg_id, n);
        return;
    }
    p->bs = (tcp_sample_t){.on = 1, .cls = cls, .n = n, .bytes = bytes};
    p->bs.t0 = p->bs.looked = p->bs.polled = s->tcp->lone_at = mln_stripe_now();
    {
        const tcp_chrono_t c = lanes_chrono(p, n);
        p->bs.busy0 = c.busy;
        p->bs.limit0 = c.limit;
        p->bs.retrans0 = c.retrans;
    }
}

/* A look at the lone message in flight to p: timed once its lanes drained, if the look before
 * was close enough to tell when (the program was not away then). */
static void burst_step(mln_stripe_t *s, int peer, double now, int sending)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    tcp_sample_t *bs = &p->bs;
    const double gap = now - bs->looked;
    tcp_chrono_t c;

    bs->looked = now;
    if (sending || now - bs->polled < BURST_POLL_S)
        return;
    bs->polled = now;
    if (!lanes_drained(p, bs->n, SIOCOUTQ))
        return;
    bs->on = 0;
    if (gap > BURST_AWAY_S) {
        MLN_TRACE("tcp auto: world rank %d: a lone message drained while the program was away "
                  "(%.1f ms): untimed",
                  peer, gap * 1e3);
        return;
    }
    c = lanes_chrono(p, bs->n);
    c.busy -= bs->busy0;
    c.limit -= bs->limit0;
    c.retrans -= bs->retrans0;
    burst_decide(s, peer, bs, now - bs->t0, &c);
}

/* 1 while a lone message may be being timed: auto on, one started within BURST_LONE_S. */
static int lone_recent(const mln_stripe_t *s, double now)
{
    return s->cfg->stripe_lanes <= 0 && now - s->tcp->lone_at <= BURST_LONE_S;
}

/* 1 when the drain of a lone message to peer is awaited. */
static int lone_timed(const mln_stripe_t *s, int peer)
{
    return s->tcp->peers[peer].state == PEER_UP && s->tcp->peers[peer].bs.on;
}

void mln_tcp_auto_idle(mln_stripe_t *s, double now)
{
    if (!lone_recent(s, now))
        return;
    for (int peer = 0; peer < s->wsize; peer++)
        if (lone_timed(s, peer))
            burst_step(s, peer, now, 0);
}

int mln_tcp_auto_watching(const mln_stripe_t *s)
{
    if (s->tcp == NULL || !lone_recent(s, mln_stripe_now()))
        return 0;
    for (int peer = 0; peer < s->wsize; peer++)
        if (lone_timed(s, peer))
            return 1;
    return 0;
}

/* Our lanes to peer_world when they are up, else NULL. */
static const tcp_peer_t *peer_up(const mln_stripe_t *s, int peer_world)
{
    if (s == NULL || s->tcp == NULL || peer_world < 0 || peer_world >= s->wsize ||
        s->tcp->peers[peer_world].state != PEER_UP)
        return NULL;
    return &s->tcp->peers[peer_world];
}

int mln_tcp_lanes_active(const mln_stripe_t *s, int peer_world)
{
    const tcp_peer_t *p = peer_up(s, peer_world);

    return p ? mln_tcp_lanes_now(p) : 0;
}

int mln_tcp_lanes_open(const mln_stripe_t *s, int peer_world)
{
    const tcp_peer_t *p = peer_up(s, peer_world);

    return p ? p->nup : 0;
}

uint64_t mln_tcp_lane_written(const mln_stripe_t *s, int peer_world, int lane)
{
    const tcp_peer_t *p = peer_up(s, peer_world);

    return p && lane >= 0 && lane < p->nup ? p->out[lane].written : 0;
}

int mln_tcp_lane_notsent(const mln_stripe_t *s, int peer_world, int lane)
{
    const tcp_peer_t *p = peer_up(s, peer_world);
    int value = -1;
    socklen_t len = sizeof(value);

    if (p == NULL || lane < 0 || lane >= p->nup ||
        getsockopt(p->out[lane].fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &value, &len) == -1)
        return -1;
    return value;
}
