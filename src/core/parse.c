/*
 * parse.c - integer and byte-size parsing shared by the tunables, the benchmarks and the
 * native tools.  No MPI here: mln-delayline links this file alone (library mln_parse).
 */
#include "multilane_base.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

mln_status_t mln_parse_int(const char *text, int64_t *out)
{
    char *end = NULL;
    long long v;

    if (text == NULL || out == NULL)
        return MLN_ERR_ARG;
    while (isspace((unsigned char)*text))
        text++;
    if (*text == '\0')
        return MLN_ERR_ARG;
    errno = 0;
    v = strtoll(text, &end, 0);
    if (errno == ERANGE || end == text)
        return MLN_ERR_ARG;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return MLN_ERR_ARG;
    *out = (int64_t)v;
    return MLN_OK;
}

mln_status_t mln_parse_size(const char *text, uint64_t *out)
{
    const char *p;
    char *end = NULL;
    unsigned long long v;
    uint64_t mult = 1;

    if (text == NULL || out == NULL)
        return MLN_ERR_ARG;
    p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p)) /* rejects "", "-1", "+1", "abc" */
        return MLN_ERR_ARG;
    errno = 0;
    v = strtoull(p, &end, 10);
    if (errno == ERANGE)
        return MLN_ERR_ARG;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mult = UINT64_C(1) << 10;
        end++;
        break;
    case 'M':
        mult = UINT64_C(1) << 20;
        end++;
        break;
    case 'G':
        mult = UINT64_C(1) << 30;
        end++;
        break;
    case 'T':
        mult = UINT64_C(1) << 40;
        end++;
        break;
    default:
        break;
    }
    /* Optional "B" or "iB" after a suffix, "B" alone after a plain number. */
    if (mult > 1 && (*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b'))
        end += 2;
    else if (*end == 'B' || *end == 'b')
        end++;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return MLN_ERR_ARG;
    if (v > UINT64_MAX / mult)
        return MLN_ERR_ARG;
    *out = (uint64_t)v * mult;
    return MLN_OK;
}
