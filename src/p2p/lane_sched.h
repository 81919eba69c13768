/*
 * lane_sched.h - the chunk scheduling of striped transfers (ALGORITHMS.md S4), shared by the
 * striped point-to-point (stripe.c: the chunk size; lane_tcp.c: which lane takes the next
 * chunk) and the relays (src/relay/relay_rank.c: a large message over every trunk).  No MPI.
 *
 *   chunk   n / (k lanes), within [min, max]: about k chunks per lane, so that a slow lane
 *           gets fewer of them instead of setting the pace, and the lanes end a message within
 *           a chunk's time of each other (a k-th of a lane's share), none too small to be worth
 *           a frame
 *   pick    the lane with the least queued bytes among those with fewer than `depth` chunks
 *           queued (on a tie the first from a given lane on): dynamic, not NCCL's static
 *           equal split
 */
#ifndef MLN_LANE_SCHED_H
#define MLN_LANE_SCHED_H

#include <stddef.h>
#include <stdint.h>

/* Payload bytes per chunk of a message of `total` bytes over `lanes` lanes, about `per_lane`
 * chunks each: total / (per_lane x lanes) capped at max, then raised to min (min wins when
 * min > max). */
uint64_t mln_sched_chunk(uint64_t total, int lanes, int per_lane, uint64_t min, uint64_t max);

/* The lane to take the next chunk: index of the one with the least queued bytes among the n
 * lanes with fewer than `depth` chunks queued, the first on a tie counting from lane `start`
 * (0: the lowest index; a rotating start spreads chunks over idle lanes in turn); -1 when
 * every lane is full.  The lanes are n structs `stride` bytes apart from `lanes`, each with a
 * uint64_t of queued bytes at `bytes_off` and an int count of queued chunks at `count_off`:
 * use MLN_SCHED_PICK. */
int mln_sched_pick(const void *lanes, size_t stride, size_t bytes_off, size_t count_off, int n,
                   int depth, int start);

/* mln_sched_pick over an array of `type` whose members `queued_bytes` (uint64_t) and `nqueued`
 * (int) say what each lane holds; ties to the lowest index. */
#define MLN_SCHED_PICK(type, lanes, n, depth) MLN_SCHED_PICK_FROM(type, lanes, n, depth, 0)
/* The same with ties to the first lane from `start` on. */
#define MLN_SCHED_PICK_FROM(type, lanes, n, depth, start)                                          \
    mln_sched_pick((lanes), sizeof(type), offsetof(type, queued_bytes), offsetof(type, nqueued),   \
                   (n), (depth), (start))

#endif /* MLN_LANE_SCHED_H */
