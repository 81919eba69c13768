/*
 * fault.c - MLN_STRIPE_FAULT, the test hook that makes striped messages fail on purpose, so
 * that the failure paths (docs/STRIPE.md "Failures") are run by tests and not only read:
 *
 *   reset:LANE:BYTES   tcp lane LANE of this rank resets (RST) once BYTES payload bytes went
 *                      out on it (lane_tcp.c)
 *   nak:N              the N-th striped receive of this rank fails before its CTS, as an
 *                      out-of-memory would (the sender gets a NAK)
 *   rabort:N:BYTES     the N-th striped receive fails once BYTES of it landed (RABORT)
 *   sabort:N:BYTES     the N-th striped send fails once BYTES of it went to the lanes (SABORT)
 *   mute:LANE:BYTES    tcp lane LANE of this rank hears nothing more from the peer (a socket
 *                      filter drops every packet arriving on it, acknowledgements included)
 *                      once BYTES payload bytes went out on it: to this rank, the peer's host
 *                      looks gone, and only the kernel's evidence can tell (tcp_conn.c)
 *   tamper:LANE:BYTES  the next frame with a payload on tcp lane LANE, once BYTES went out on
 *                      it, has one payload bit flipped after it was sealed (src/link), as by
 *                      an attacker on the path: aead and the payload MAC catch it, auth alone
 *                      and none cannot (docs/SECURITY.md)
 *   forge:LANE:BYTES   the same with one bit of the frame's header (its offset)
 *   split:LANE:BYTES   the next frame on lane LANE with a payload tag (aead, payload MAC) goes
 *                      out in two parts, the tag 0.2 s after the payload: its send must not
 *                      complete (nor be freed) before the tag is out
 *
 * N counts from 1; each fault strikes once.
 */
#include "stripe_int.h"

#include <stdio.h>
#include <string.h>

/* reset and mute strike a tcp lane (lane_tcp.c), the others a message (stripe.c) */
static int on_lane(mln_fault_kind_t kind)
{
    return kind == MLN_FAULT_RESET || kind == MLN_FAULT_MUTE || kind == MLN_FAULT_TAMPER ||
           kind == MLN_FAULT_FORGE || kind == MLN_FAULT_SPLIT;
}

mln_status_t mln_fault_parse(const char *spec, int64_t lanes, mln_fault_t *out)
{
    static const struct {
        const char *name;
        mln_fault_kind_t kind;
        int nums;
    } kinds[] = {{"reset", MLN_FAULT_RESET, 2},   {"nak", MLN_FAULT_NAK, 1},
                 {"rabort", MLN_FAULT_RABORT, 2}, {"sabort", MLN_FAULT_SABORT, 2},
                 {"mute", MLN_FAULT_MUTE, 2},     {"tamper", MLN_FAULT_TAMPER, 2},
                 {"forge", MLN_FAULT_FORGE, 2},   {"split", MLN_FAULT_SPLIT, 2}};
    unsigned long long a = 0, b = 0;
    char name[16];
    int used = 0, got;

    *out = (mln_fault_t){.kind = MLN_FAULT_NONE};
    if (spec[0] == '\0')
        return MLN_OK;
    got = sscanf(spec, "%15[a-z]:%llu%n:%llu%n", name, &a, &used, &b, &used);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(name, kinds[i].name) != 0 || got != 1 + kinds[i].nums || spec[used] != '\0')
            continue;
        if (on_lane(kinds[i].kind) ? a >= (unsigned long long)lanes : a == 0)
            break;
        *out = (mln_fault_t){.kind = kinds[i].kind, .n = a, .bytes = b, .armed = 1};
        return MLN_OK;
    }
    MLN_ERROR(
        "MLN_STRIPE_FAULT: invalid value '%s' (expected reset:LANE:BYTES, "
        "mute:LANE:BYTES, tamper:LANE:BYTES, forge:LANE:BYTES or split:LANE:BYTES with LANE below "
        "MLN_STRIPE_LANES, nak:N, rabort:N:BYTES or sabort:N:BYTES with N >= 1)",
        spec);
    return MLN_ERR_CONFIG;
}

int mln_fault_begin(mln_fault_t *f, const mln_req_t *r)
{
    const int recv_fault = f->kind == MLN_FAULT_NAK || f->kind == MLN_FAULT_RABORT;

    if (!f->armed || f->target != NULL || (recv_fault ? r->is_send : !r->is_send) ||
        on_lane(f->kind) || ++f->seen != f->n)
        return 0;
    if (f->kind == MLN_FAULT_NAK) {
        f->armed = 0;
        MLN_WARN("MLN_STRIPE_FAULT: failing striped receive %llu (message %llu from world rank "
                 "%d) before its CTS",
                 (unsigned long long)f->n, (unsigned long long)r->msg_id, r->peer_world);
        return 1;
    }
    f->target = r;
    return 0;
}

int mln_fault_strikes(mln_fault_t *f, const mln_req_t *r)
{
    const uint64_t moved = r->is_send ? r->next_off : r->bytes_done;

    if (!f->armed || f->target != r || moved < f->bytes)
        return 0;
    f->armed = 0;
    f->target = NULL;
    MLN_WARN("MLN_STRIPE_FAULT: failing striped %s of message %llu %s world rank %d after %llu "
             "bytes",
             r->is_send ? "send" : "receive", (unsigned long long)r->msg_id,
             r->is_send ? "to" : "from", r->peer_world, (unsigned long long)moved);
    return 1;
}

mln_fault_kind_t mln_fault_lane_strikes(mln_fault_t *f, int lane, uint64_t written)
{
    if (!f->armed || !on_lane(f->kind) || (uint64_t)lane != f->n || written < f->bytes)
        return MLN_FAULT_NONE;
    f->armed = 0;
    return f->kind;
}
