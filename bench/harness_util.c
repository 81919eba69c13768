/*
 * harness_util.c - size specs, iteration scaling, statistics and the validation pattern of
 * the benchmark harness.  No MPI here, so all of it is unit-tested without a launcher.
 */
#include "harness_util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE_SPEC_HINT "(expected e.g. 1:64M, 4K, or 0,1,1000)"

/* ---- message sizes ---------------------------------------------------------------------- */

typedef struct size_builder {
    uint64_t *v;
    size_t n;
    size_t cap;
} size_builder_t;

static mln_status_t size_builder_add(size_builder_t *sb, uint64_t bytes, char *err, size_t errlen)
{
    uint64_t *grown;

    if (sb->n == MLN_BENCH_MAX_SIZES) {
        snprintf(err, errlen, "more than %d message sizes", MLN_BENCH_MAX_SIZES);
        return MLN_ERR_ARG;
    }
    if (sb->n == sb->cap) {
        sb->cap = sb->cap ? sb->cap * 2 : 32;
        grown = realloc(sb->v, sb->cap * sizeof(*grown));
        if (grown == NULL) {
            snprintf(err, errlen, "out of memory");
            return MLN_ERR_NOMEM;
        }
        sb->v = grown;
    }
    sb->v[sb->n++] = bytes;
    return MLN_OK;
}

/* One size of an item: `text` must be a complete size within the MPI limit. */
static mln_status_t size_parse_one(const char *text, uint64_t *out, char *err, size_t errlen)
{
    uint64_t v;

    if (mln_parse_size(text, &v) != MLN_OK) {
        snprintf(err, errlen, "invalid size '%s' " SIZE_SPEC_HINT, text);
        return MLN_ERR_ARG;
    }
    if (v > MLN_BENCH_MAX_BYTES) {
        snprintf(err, errlen, "size '%s' is above the largest MPI message (%llu bytes)", text,
                 (unsigned long long)MLN_BENCH_MAX_BYTES);
        return MLN_ERR_ARG;
    }
    *out = v;
    return MLN_OK;
}

/* One comma-separated item: a size or a LO:HI range. */
static mln_status_t size_parse_item(char *item, size_builder_t *sb, char *err, size_t errlen)
{
    char *colon = strchr(item, ':');
    uint64_t lo, hi;
    mln_status_t st = MLN_OK;

    if (colon == NULL) {
        st = size_parse_one(item, &lo, err, errlen);
        return st == MLN_OK ? size_builder_add(sb, lo, err, errlen) : st;
    }
    *colon = '\0';
    if (strchr(colon + 1, ':') != NULL || mln_parse_size(item, &lo) != MLN_OK ||
        mln_parse_size(colon + 1, &hi) != MLN_OK) {
        *colon = ':';
        snprintf(err, errlen, "invalid range '%s' (expected LO:HI, e.g. 1:64M)", item);
        return MLN_ERR_ARG;
    }
    *colon = ':';
    if (lo > hi) {
        snprintf(err, errlen, "invalid range '%s': the lower bound is above the upper bound", item);
        return MLN_ERR_ARG;
    }
    if (hi > MLN_BENCH_MAX_BYTES) {
        snprintf(err, errlen, "range '%s' goes above the largest MPI message (%llu bytes)", item,
                 (unsigned long long)MLN_BENCH_MAX_BYTES);
        return MLN_ERR_ARG;
    }
    if (lo == 0) {
        st = size_builder_add(sb, 0, err, errlen);
        lo = 1;
    }
    for (uint64_t b = lo; st == MLN_OK && b <= hi; b *= 2) /* hi < 2^31: no overflow */
        st = size_builder_add(sb, b, err, errlen);
    return st;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

mln_status_t mln_size_list_parse(const char *spec, mln_size_list_t *out, char *err, size_t errlen)
{
    size_builder_t sb = {0};
    mln_status_t st = MLN_OK;
    char *copy = NULL, *item, *next;
    size_t uniq = 0;

    if (spec == NULL || out == NULL) {
        snprintf(err, errlen, "no size list given");
        return MLN_ERR_ARG;
    }
    if (spec[0] == '\0') {
        snprintf(err, errlen, "empty size list " SIZE_SPEC_HINT);
        return MLN_ERR_ARG;
    }
    copy = strdup(spec);
    if (copy == NULL) {
        snprintf(err, errlen, "out of memory");
        return MLN_ERR_NOMEM;
    }
    for (item = copy; item != NULL; item = next) {
        next = strchr(item, ',');
        if (next != NULL)
            *next++ = '\0';
        st = size_parse_item(item, &sb, err, errlen);
        if (st != MLN_OK)
            goto err_free;
    }
    qsort(sb.v, sb.n, sizeof(*sb.v), cmp_u64);
    for (size_t i = 0; i < sb.n; i++)
        if (uniq == 0 || sb.v[i] != sb.v[uniq - 1])
            sb.v[uniq++] = sb.v[i];
    free(copy);
    out->sizes = sb.v;
    out->count = uniq;
    return MLN_OK;

err_free:
    free(sb.v);
    free(copy);
    return st;
}

void mln_size_list_free(mln_size_list_t *list)
{
    if (list == NULL)
        return;
    free(list->sizes);
    list->sizes = NULL;
    list->count = 0;
}

/* ---- iteration scaling ------------------------------------------------------------------ */

void mln_iter_rule_default(mln_iter_rule_t *rule)
{
    rule->min_iters = MLN_ITER_DEFAULT_MIN;
    rule->max_iters = MLN_ITER_DEFAULT_MAX;
    rule->budget_bytes = MLN_ITER_DEFAULT_BUDGET;
    rule->warmup = -1;
}

int64_t mln_iter_count(const mln_iter_rule_t *rule, uint64_t bytes)
{
    uint64_t per = rule->budget_bytes / (bytes > 0 ? bytes : 1);
    int64_t iters = per > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)per;

    if (iters > rule->max_iters)
        iters = rule->max_iters;
    if (iters < rule->min_iters)
        iters = rule->min_iters;
    return iters < 1 ? 1 : iters;
}

int64_t mln_iter_warmup(const mln_iter_rule_t *rule, int64_t iters)
{
    if (rule->warmup >= 0)
        return rule->warmup;
    return iters / 10 > 1 ? iters / 10 : 1;
}

/* ---- statistics ------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

mln_status_t mln_stats_compute(const double *v, size_t n, mln_stats_t *out)
{
    double *sorted;

    if (v == NULL || n == 0 || out == NULL)
        return MLN_ERR_ARG;
    sorted = malloc(n * sizeof(*sorted));
    if (sorted == NULL)
        return MLN_ERR_NOMEM;
    memcpy(sorted, v, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), cmp_double);
    out->min = sorted[0];
    out->max = sorted[n - 1];
    out->median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    free(sorted);
    return MLN_OK;
}

/* ---- data pattern ----------------------------------------------------------------------- */

/* splitmix64's output function: a cheap bijective mixer with good avalanche. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

#define PATTERN_STEP UINT64_C(0x9e3779b97f4a7c15)

/* The 8 pattern bytes at offset 8 * word. */
static inline uint64_t pattern_word(uint64_t seed, uint64_t word)
{
    return mix64(seed + (word + 1) * PATTERN_STEP);
}

uint64_t mln_pattern_seed(int rank, int rep, uint64_t bytes, int slot)
{
    uint64_t s = mix64((uint64_t)(uint32_t)rank + PATTERN_STEP);
    s = mix64(s ^ ((uint64_t)(uint32_t)rep << 32 | (uint32_t)slot));
    return mix64(s ^ bytes);
}

void mln_pattern_fill(void *buf, size_t bytes, uint64_t seed)
{
    unsigned char *p = buf;
    size_t words = bytes / 8;
    uint64_t w;

    for (size_t i = 0; i < words; i++) {
        w = pattern_word(seed, i);
        memcpy(p + 8 * i, &w, 8);
    }
    if (bytes % 8) {
        w = pattern_word(seed, words);
        memcpy(p + 8 * words, &w, bytes % 8);
    }
}

static uint64_t bytes_differing(uint64_t x)
{
    uint64_t n = 0;
    for (; x != 0; x >>= 8)
        n += (x & 0xff) != 0;
    return n;
}

uint64_t mln_pattern_check(const void *buf, size_t bytes, uint64_t seed)
{
    const unsigned char *p = buf;
    size_t words = bytes / 8;
    uint64_t wrong = 0, got, want;

    for (size_t i = 0; i < words; i++) {
        memcpy(&got, p + 8 * i, 8);
        want = pattern_word(seed, i);
        if (got != want)
            wrong += bytes_differing(got ^ want);
    }
    if (bytes % 8) {
        got = 0;
        want = pattern_word(seed, words);
        memcpy(&got, p + 8 * words, bytes % 8);
        for (size_t k = 0; k < bytes % 8; k++)
            wrong += ((const unsigned char *)&got)[k] != ((const unsigned char *)&want)[k];
    }
    return wrong;
}

/* ---- output helpers --------------------------------------------------------------------- */

void mln_json_write_number(FILE *fp, double v)
{
    if (!isfinite(v))
        v = 0.0;
    fprintf(fp, "%.9g", v);
}

/* Characters that need no quoting in a POSIX shell word. */
static int shell_plain(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && strchr("@%+=:,./_-", *s) == NULL)
            return 0;
    return 1;
}

char *mln_command_line(int argc, char *const *argv)
{
    size_t len = 1, used = 0;
    char *out;

    for (int i = 0; i < argc; i++) /* worst case: every char becomes '\'' (4 chars) */
        len += 4 * strlen(argv[i]) + 3;
    out = malloc(len);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < argc; i++) {
        if (i > 0)
            out[used++] = ' ';
        if (shell_plain(argv[i])) {
            memcpy(out + used, argv[i], strlen(argv[i]));
            used += strlen(argv[i]);
            continue;
        }
        out[used++] = '\'';
        for (const char *c = argv[i]; *c; c++) {
            if (*c == '\'') {
                memcpy(out + used, "'\\''", 4);
                used += 4;
            } else {
                out[used++] = *c;
            }
        }
        out[used++] = '\'';
    }
    out[used] = '\0';
    return out;
}

void mln_help_text(FILE *fp, const char *text)
{
    int col = 25;

    while (*text) {
        const char *sp = strchr(text, ' ');
        int len = sp ? (int)(sp - text) : (int)strlen(text);
        if (col > 25 && col + 1 + len > 100) {
            fprintf(fp, "\n%25s", "");
            col = 25;
        } else if (col > 25) {
            fputc(' ', fp);
            col++;
        }
        fprintf(fp, "%.*s", len, text);
        col += len;
        text += len;
        while (*text == ' ')
            text++;
    }
    fputc('\n', fp);
}
