/*
 * test_tcp_auto.c - MLN_STRIPE_LANES=auto's arithmetic that needs no network: the lane count a
 * lone message needs at the path's own loss (mln_tcp_loss_floor: its segments over loss-bound
 * windows of sqrt(1.5 / q) segments, rounded up to a power of two, at most the cap), and what
 * one lone message's losses say of the path (mln_tcp_lone_loss), and when a lone message class's
 * first level tries fewer lanes (mln_tcp_lone_fewer).
 */
#include "lane_tcp_int.h"
#include "mln_test.h"

int main(void)
{
    /* wan-lossy's 1 MiB (724 segments of 1448 bytes), 3 of 2897 segments lost (0.1%): windows
     * of 39 segments, 19 lanes: 32 */
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 3, 2897, 2.0, 64) == 32);
    /* twice the loss: windows of 27 segments, 27 lanes: still 32; four times: 54 lanes: 64 */
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 6, 2897, 2.0, 64) == 32);
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 12, 2897, 2.0, 64) == 64);
    /* at most the cap */
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 12, 2897, 2.0, 16) == 16);
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 3, 2897, 2.0, 1) == 1);
    /* little loss: windows of 387 segments, 2 lanes carry 724 */
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 1, 100000, 2.0, 64) == 2);
    /* a message that fits one loss-bound window: 1 lane */
    MLN_TEST_ASSERT(mln_tcp_loss_floor(10, 1, 1000, 1.0, 64) == 1);
    /* exactly on a power of two: 16 lanes of 38.7-segment windows carry 619 segments */
    MLN_TEST_ASSERT(mln_tcp_loss_floor(619, 1, 1000, 2.0, 64) == 16);
    MLN_TEST_ASSERT(mln_tcp_loss_floor(620, 1, 1000, 2.0, 64) == 32);
    /* none: nothing lost, nothing sent, no lanes, or a message of many round trips (its size,
     * not its flights, sets its time) */
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 0, 2897, 2.0, 64) == 0);
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 3, 0, 2.0, 64) == 0);
    MLN_TEST_ASSERT(mln_tcp_loss_floor(724, 3, 2897, 2.0, 0) == 0);
    MLN_TEST_ASSERT(mln_tcp_loss_floor(46341, 30, 139000, 30.0, 64) == 0);
    MLN_TEST_ASSERT(mln_tcp_loss_floor(46341, 30, 139000, 8.0, 64) == 64);

    /* one message's losses: none; a few (wan-lossy's 1 MiB, MTU 1500: 1-3 of 724 in 2-4 round
     * trips, up to 1%: 7); a run (wan-short's 1 MiB on 4 lanes, MTU 9000: 2-46 of 117, a queue
     * overflowed) */
    MLN_TEST_ASSERT(mln_tcp_lone_loss(0, 724, 2.0) == TCP_LOSS_NONE);
    MLN_TEST_ASSERT(mln_tcp_lone_loss(1, 724, 2.0) == TCP_LOSS_FEW);
    MLN_TEST_ASSERT(mln_tcp_lone_loss(7, 724, 8.0) == TCP_LOSS_FEW);
    MLN_TEST_ASSERT(mln_tcp_lone_loss(8, 724, 2.0) == TCP_LOSS_RUN);
    MLN_TEST_ASSERT(mln_tcp_lone_loss(1, 117, 5.0) == TCP_LOSS_FEW);
    MLN_TEST_ASSERT(mln_tcp_lone_loss(2, 117, 5.0) == TCP_LOSS_RUN);
    MLN_TEST_ASSERT(mln_tcp_lone_loss(46, 117, 11.2) == TCP_LOSS_RUN);
    /* a few over many round trips says nothing (cubic filling a queue loses as few) */
    MLN_TEST_ASSERT(mln_tcp_lone_loss(3, 724, 8.5) == TCP_LOSS_NONE);
    MLN_TEST_ASSERT(mln_tcp_lone_loss(300, 46341, 30.0) == TCP_LOSS_NONE);

    /* fewer lanes tried: wan-short's 1 MiB on 4 lanes, not window-bound (autotuned windows of
     * about 4 MB, 25 KB a lane a round trip), cheap to time (14-16 ms a message) */
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(4, 0.0, 25e3, 4e6, 0.015, 0) == 1);
    /* the 4 lanes of a new connection: a median of 37 ms reads too costly to time, but the
     * messages lost runs of segments (a queue their bursts overflowed) */
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(4, 0.0, 25e3, 4e6, 0.037, 0) == 0);
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(4, 0.0, 25e3, 4e6, 0.037, 2) == 1);
    /* not: lanes that waited on their windows half their time or more (wan-2site, wan-long: 128
     * KiB windows), lanes that carried half their window a round trip or more, one lane */
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(4, 0.5, 25e3, 4e6, 0.015, 2) == 0);
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(4, 0.0, 2e6, 4e6, 0.015, 2) == 0);
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(1, 0.0, 25e3, 4e6, 0.015, 2) == 0);
    /* nor costly messages that lost no run (wan-perflow's 1 MiB on 4 lanes, per-flow policers:
     * 38-45 ms, nothing lost; a 64 MiB message, seconds) */
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(4, 0.0, 130e3, 4e6, 0.040, 0) == 0);
    MLN_TEST_ASSERT(mln_tcp_lone_fewer(4, 0.1, 1e6, 4e6, 0.6, 0) == 0);
    return 0;
}
