/*
 * stripe_buf.c - the bytes a striped request moves: the user's buffer itself when (count,
 * datatype) is contiguous, else a pack buffer (MPI_Pack on the way out, MPI_Unpack of exactly
 * what arrived on the way in).
 *
 * A receive unpacks only the bytes that arrived, as MPI_Recv writes only the elements it
 * received: "receive up to N" of a derived type leaves the rest of the user's buffer alone.
 * When the message ends inside an element (its length is no multiple of the type's size, as
 * MPI allows), that element gets its received prefix and keeps the rest: it is packed from the
 * user's buffer, the prefix overwritten, and unpacked back.
 */
#include "stripe_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

mln_status_t mln_stripe_req_buffer(mln_req_t *r, const void *buf, int is_send)
{
    mln_status_t st = MLN_OK;
    MPI_Count size, offset = 0;
    int isize = 0, pos = 0;

    MLN_MPI_CHECK(MPI_Type_size_x(r->dtype, &size), st, out);
    if (size < 0 || (size > 0 && (uint64_t)r->count > UINT64_MAX / (uint64_t)size)) {
        MLN_ERROR("striped message: count %lld x type size %lld overflows", (long long)r->count,
                  (long long)size);
        return MLN_ERR_ARG;
    }
    r->cap = (uint64_t)r->count * (uint64_t)size;
    if (mln_type_contiguous(r->dtype, r->count, &offset)) {
        r->buf = (char *)buf + offset; /* the bytes are in place */
        return MLN_OK;
    }
    /* MPI_Pack counts in int: a larger non-contiguous message is refused, never cut */
    if (r->count > INT_MAX || r->cap > INT_MAX) {
        MLN_ERROR("striped message: a non-contiguous datatype is packed, and %llu bytes are "
                  "over the 2^31 - 1 bytes MPI_Pack can handle",
                  (unsigned long long)r->cap);
        return MLN_ERR_UNSUPPORTED;
    }
    MLN_MPI_CHECK(MPI_Pack_size((int)r->count, r->dtype, r->comm, &isize), st, out);
    r->pack = malloc((size_t)isize > 0 ? (size_t)isize : 1);
    if (r->pack == NULL)
        return MLN_ERR_NOMEM;
    r->packed = 1;
    r->buf = r->pack;
    if (is_send) {
        MLN_MPI_CHECK(MPI_Pack(buf, (int)r->count, r->dtype, r->pack, isize, &pos, r->comm), st,
                      out);
        r->cap = (uint64_t)pos;
    } else {
        r->cap = (uint64_t)isize;
    }
out:
    return st;
}

/* The element at index `at` gets the `len` bytes at `prefix` as its first packed bytes. */
static mln_status_t unpack_partial(const mln_req_t *r, int at, const char *prefix, int len)
{
    mln_status_t st = MLN_OK;
    MPI_Aint lb = 0, extent = 0;
    int isize = 0, pos = 0;
    char *elem = NULL, *base;

    MLN_MPI_CHECK(MPI_Type_get_extent(r->dtype, &lb, &extent), st, out);
    MLN_MPI_CHECK(MPI_Pack_size(1, r->dtype, r->comm, &isize), st, out);
    elem = malloc((size_t)isize > 0 ? (size_t)isize : 1);
    if (elem == NULL)
        return MLN_ERR_NOMEM;
    base = (char *)r->ubuf + (MPI_Aint)at * extent;
    MLN_MPI_CHECK(MPI_Pack(base, 1, r->dtype, elem, isize, &pos, r->comm), st, out);
    memcpy(elem, prefix, (size_t)len);
    pos = 0;
    MLN_MPI_CHECK(MPI_Unpack(elem, isize, &pos, base, 1, r->dtype, r->comm), st, out);
out:
    free(elem);
    return st;
}

mln_status_t mln_stripe_req_unpack(const mln_req_t *r)
{
    mln_status_t st = MLN_OK;
    MPI_Count size = 0;
    uint64_t bytes = r->st_bytes < r->cap ? r->st_bytes : r->cap;
    int whole, rest, pos = 0;

    MLN_MPI_CHECK(MPI_Type_size_x(r->dtype, &size), st, out);
    if (size <= 0 || bytes == 0)
        return MLN_OK;
    /* cap <= INT_MAX (mln_stripe_req_buffer), so both fit an int */
    whole = (int)(bytes / (uint64_t)size);
    rest = (int)(bytes % (uint64_t)size);
    if (whole > 0)
        MLN_MPI_CHECK(MPI_Unpack(r->pack, (int)r->cap, &pos, r->ubuf, whole, r->dtype, r->comm), st,
                      out);
    if (rest > 0 && whole < r->count)
        st = unpack_partial(r, whole, r->pack + pos, rest);
out:
    return st;
}
