/*
 * lane_sched.c - the chunk scheduling of striped transfers (lane_sched.h), one copy for the tcp
 * lanes (lane_tcp.c), the chunk size of striped messages (stripe.c) and the relays' trunks
 * (src/relay/relay_rank.c).
 *
 * Cost: chunk O(1); pick O(lanes) per chunk handed out (lanes <= 64).
 */
#include "lane_sched.h"

#include <string.h>

uint64_t mln_sched_chunk(uint64_t total, int lanes, int per_lane, uint64_t min, uint64_t max)
{
    uint64_t chunk =
        total / ((uint64_t)(lanes > 0 ? lanes : 1) * (uint64_t)(per_lane > 0 ? per_lane : 1));

    if (chunk > max)
        chunk = max;
    if (chunk < min)
        chunk = min;
    return chunk;
}

int mln_sched_pick(const void *lanes, size_t stride, size_t bytes_off, size_t count_off, int n,
                   int depth, int start)
{
    const unsigned char *base = lanes;
    uint64_t best_bytes = 0;
    int best = -1;

    if (n <= 0)
        return -1;
    start = start >= 0 ? start % n : 0;
    for (int k = 0; k < n; k++) {
        const int i = (start + k) % n;
        const unsigned char *lane = base + (size_t)i * stride;
        uint64_t bytes;
        int count;

        memcpy(&count, lane + count_off, sizeof(count));
        if (count >= depth)
            continue;
        memcpy(&bytes, lane + bytes_off, sizeof(bytes));
        if (best < 0 || bytes < best_bytes) {
            best = i;
            best_bytes = bytes;
        }
    }
    return best;
}
