/*
 * test_harness.c - the MPI-free parts of the benchmark harness (bench/harness_util.c):
 * size specs, iteration scaling, statistics, the validation pattern, JSON strings.
 */
#include "harness_util.h"
#include "mln_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIB (UINT64_C(1) << 20)

/* Parses `spec`; checks the count and, when given, the sizes. */
static void expect_sizes(const char *spec, size_t count, const uint64_t *want)
{
    mln_size_list_t l = {0};
    char err[256] = "";

    if (mln_size_list_parse(spec, &l, err, sizeof(err)) != MLN_OK) {
        fprintf(stderr, "spec '%s' rejected: %s\n", spec, err);
        MLN_TEST_ASSERT(0);
    }
    MLN_TEST_ASSERT(l.count == count);
    for (size_t i = 0; want != NULL && i < count; i++)
        MLN_TEST_ASSERT(l.sizes[i] == want[i]);
    for (size_t i = 1; i < l.count; i++) /* ascending, distinct */
        MLN_TEST_ASSERT(l.sizes[i - 1] < l.sizes[i]);
    mln_size_list_free(&l);
    MLN_TEST_ASSERT(l.sizes == NULL && l.count == 0);
}

/* `spec` is rejected with a message that quotes `quoted`; the output stays untouched. */
static void expect_bad_sizes(const char *spec, const char *quoted)
{
    uint64_t sentinel = 42;
    mln_size_list_t l = {.sizes = &sentinel, .count = 7};
    char err[256] = "";

    MLN_TEST_ASSERT(mln_size_list_parse(spec, &l, err, sizeof(err)) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(err[0] != '\0');
    MLN_TEST_ASSERT(strchr(err, '\n') == NULL);
    if (quoted != NULL && strstr(err, quoted) == NULL) {
        fprintf(stderr, "spec '%s': message '%s' does not quote '%s'\n", spec, err, quoted);
        MLN_TEST_ASSERT(0);
    }
    MLN_TEST_ASSERT(l.sizes == &sentinel && l.count == 7);
}

static void test_sizes(void)
{
    mln_size_list_t l = {0};
    char err[256];

    /* 1:64M = 2^0 .. 2^26 */
    MLN_TEST_ASSERT(mln_size_list_parse("1:64M", &l, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(l.count == 27);
    for (size_t i = 0; i < l.count; i++)
        MLN_TEST_ASSERT(l.sizes[i] == UINT64_C(1) << i);
    MLN_TEST_ASSERT(l.sizes[26] == 64 * MIB);
    mln_size_list_free(&l);

    expect_sizes("0:4", 4, (const uint64_t[]){0, 1, 2, 4});
    expect_sizes("0:0", 1, (const uint64_t[]){0});
    expect_sizes("3:100", 6, (const uint64_t[]){3, 6, 12, 24, 48, 96});
    expect_sizes("4K:4K", 1, (const uint64_t[]){4096});
    expect_sizes("0,1,3", 3, (const uint64_t[]){0, 1, 3});
    expect_sizes("0,1,3,1000,64K", 5, (const uint64_t[]){0, 1, 3, 1000, 65536});
    expect_sizes("4M", 1, (const uint64_t[]){4 * MIB});
    expect_sizes("1000,3,1", 3, (const uint64_t[]){1, 3, 1000});     /* sorted */
    expect_sizes("4,4,1:8", 4, (const uint64_t[]){1, 2, 4, 8});      /* deduplicated */
    expect_sizes("0:2,1M", 4, (const uint64_t[]){0, 1, 2, 1048576}); /* range and list */
    expect_sizes("2147483647", 1, (const uint64_t[]){2147483647});   /* largest MPI count */
    expect_sizes("1:1G", 31, NULL);

    expect_bad_sizes("abc", "'abc'");
    expect_bad_sizes("1:", "'1:'");
    expect_bad_sizes(":4", "':4'");
    expect_bad_sizes("8:4", "'8:4'");
    expect_bad_sizes("1:2:4", "'1:2:4'");
    expect_bad_sizes("", NULL);
    expect_bad_sizes(",", NULL);
    expect_bad_sizes("1,,2", NULL);
    expect_bad_sizes("1,", NULL);
    expect_bad_sizes("-1", "'-1'");
    expect_bad_sizes("4X", "'4X'");
    expect_bad_sizes("1,abc", "'abc'");
    expect_bad_sizes("2G", "'2G'");     /* above INT_MAX bytes */
    expect_bad_sizes("1:4G", "'1:4G'"); /* a range that goes there */
    expect_bad_sizes("99999999999999999999999", NULL);
    MLN_TEST_ASSERT(mln_size_list_parse(NULL, &l, err, sizeof(err)) == MLN_ERR_ARG);

    /* The message is what the harness prints after "--sizes: ". */
    MLN_TEST_ASSERT(mln_size_list_parse("abc", &l, err, sizeof(err)) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(strcmp(err, "invalid size 'abc' (expected e.g. 1:64M, 4K, or 0,1,1000)") == 0);
    mln_size_list_free(NULL);
}

static void test_iters(void)
{
    mln_iter_rule_t r;

    mln_iter_rule_default(&r);
    MLN_TEST_ASSERT(r.min_iters == MLN_ITER_DEFAULT_MIN && r.max_iters == MLN_ITER_DEFAULT_MAX);
    MLN_TEST_ASSERT(mln_iter_count(&r, 0) == r.max_iters); /* 0 bytes counts as 1 */
    MLN_TEST_ASSERT(mln_iter_count(&r, 1) == r.max_iters);
    MLN_TEST_ASSERT(mln_iter_count(&r, 2147483647) == r.min_iters);
    for (uint64_t b = 1; b <= 64 * MIB; b *= 2) { /* within bounds, never rising with size */
        int64_t n = mln_iter_count(&r, b);
        MLN_TEST_ASSERT(n >= r.min_iters && n <= r.max_iters);
        MLN_TEST_ASSERT(n <= mln_iter_count(&r, b / 2 ? b / 2 : 1));
    }

    r = (mln_iter_rule_t){.min_iters = 5, .max_iters = 1000, .budget_bytes = 64 * MIB};
    MLN_TEST_ASSERT(mln_iter_count(&r, 1024) == 1000);  /* 65536 clamped to max */
    MLN_TEST_ASSERT(mln_iter_count(&r, 1 * MIB) == 64); /* budget / bytes */
    MLN_TEST_ASSERT(mln_iter_count(&r, 3 * MIB) == 21); /* rounded down */
    MLN_TEST_ASSERT(mln_iter_count(&r, 64 * MIB) == 5); /* 1 clamped to min */
    r.min_iters = 0;
    r.budget_bytes = 1;
    MLN_TEST_ASSERT(mln_iter_count(&r, 1 * MIB) == 1); /* never 0 */

    r.warmup = -1; /* automatic: max(1, iters / 10) */
    MLN_TEST_ASSERT(mln_iter_warmup(&r, 1000) == 100);
    MLN_TEST_ASSERT(mln_iter_warmup(&r, 64) == 6);
    MLN_TEST_ASSERT(mln_iter_warmup(&r, 5) == 1);
    MLN_TEST_ASSERT(mln_iter_warmup(&r, 1) == 1);
    r.warmup = 0; /* given */
    MLN_TEST_ASSERT(mln_iter_warmup(&r, 1000) == 0);
    r.warmup = 7;
    MLN_TEST_ASSERT(mln_iter_warmup(&r, 5) == 7);
}

static void test_stats(void)
{
    double odd[] = {3.0, 1.0, 2.0, 9.0, 0.5};
    double even[] = {4.0, 1.0, 3.0, 2.0};
    double one[] = {7.25};
    mln_stats_t s = {-1, -1, -1};

    MLN_TEST_ASSERT(mln_stats_compute(odd, 5, &s) == MLN_OK);
    MLN_TEST_ASSERT(s.median == 2.0 && s.min == 0.5 && s.max == 9.0);
    MLN_TEST_ASSERT(odd[0] == 3.0 && odd[1] == 1.0 && odd[2] == 2.0 && odd[3] == 9.0 &&
                    odd[4] == 0.5); /* the caller's order is kept */
    MLN_TEST_ASSERT(mln_stats_compute(even, 4, &s) == MLN_OK);
    MLN_TEST_ASSERT(s.median == 2.5 && s.min == 1.0 && s.max == 4.0);
    MLN_TEST_ASSERT(even[0] == 4.0 && even[3] == 2.0);
    MLN_TEST_ASSERT(mln_stats_compute(even, 2, &s) == MLN_OK);
    MLN_TEST_ASSERT(s.median == 2.5 && s.min == 1.0 && s.max == 4.0);
    MLN_TEST_ASSERT(mln_stats_compute(one, 1, &s) == MLN_OK);
    MLN_TEST_ASSERT(s.median == 7.25 && s.min == 7.25 && s.max == 7.25);
    s.median = -1;
    MLN_TEST_ASSERT(mln_stats_compute(one, 0, &s) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(s.median == -1); /* not written on failure */
    MLN_TEST_ASSERT(mln_stats_compute(NULL, 3, &s) == MLN_ERR_ARG);
}

static void test_pattern(void)
{
    const size_t n = 4099; /* not a multiple of 8: the tail is covered too */
    unsigned char *buf = malloc(n + 16), *b;
    uint64_t seed = mln_pattern_seed(1, 2, n, 3);

    MLN_TEST_ASSERT(buf != NULL);
    for (size_t off = 0; off < 3; off++) { /* any alignment */
        b = buf + off;
        mln_pattern_fill(b, n, seed);
        MLN_TEST_ASSERT(mln_pattern_check(b, n, seed) == 0);
        for (size_t at = 0; at < n; at += n / 7) { /* one flipped byte anywhere, tail included */
            b[at] ^= 0x10;
            MLN_TEST_ASSERT(mln_pattern_check(b, n, seed) == 1);
            b[at] ^= 0x10;
        }
        b[n - 1] ^= 0xff;
        MLN_TEST_ASSERT(mln_pattern_check(b, n, seed) == 1);
        b[n - 1] ^= 0xff;
        MLN_TEST_ASSERT(mln_pattern_check(b, n, seed) == 0);
    }

    /* Shifted by one byte or by one word: (almost) every byte is wrong. */
    mln_pattern_fill(buf, n + 8, seed);
    MLN_TEST_ASSERT(mln_pattern_check(buf + 1, n, seed) > n * 9 / 10);
    MLN_TEST_ASSERT(mln_pattern_check(buf + 8, n, seed) > n * 9 / 10);

    /* Stale data: another rank, repetition, size or slot. */
    mln_pattern_fill(buf, n, seed);
    MLN_TEST_ASSERT(mln_pattern_check(buf, n, mln_pattern_seed(0, 2, n, 3)) > n * 9 / 10);
    MLN_TEST_ASSERT(mln_pattern_check(buf, n, mln_pattern_seed(1, 1, n, 3)) > n * 9 / 10);
    MLN_TEST_ASSERT(mln_pattern_check(buf, n, mln_pattern_seed(1, 2, n + 1, 3)) > n * 9 / 10);
    MLN_TEST_ASSERT(mln_pattern_check(buf, n, mln_pattern_seed(1, 2, n, 4)) > n * 9 / 10);

    /* A cleared buffer is wrong; a prefix of a longer pattern is right (the slot layout). */
    memset(buf, 0, n);
    MLN_TEST_ASSERT(mln_pattern_check(buf, n, seed) > n * 9 / 10);
    mln_pattern_fill(buf, n, seed);
    MLN_TEST_ASSERT(mln_pattern_check(buf, 5, seed) == 0);
    MLN_TEST_ASSERT(mln_pattern_check(buf, 0, seed) == 0);
    mln_pattern_fill(buf, 0, seed); /* 0 bytes: nothing written, nothing to check */

    /* Seeds differ in every component, including swapped ones. */
    MLN_TEST_ASSERT(mln_pattern_seed(0, 0, 0, 0) != mln_pattern_seed(1, 0, 0, 0));
    MLN_TEST_ASSERT(mln_pattern_seed(0, 1, 0, 0) != mln_pattern_seed(0, 0, 0, 1));
    MLN_TEST_ASSERT(mln_pattern_seed(0, 0, 1, 0) != mln_pattern_seed(0, 0, 0, 1));
    MLN_TEST_ASSERT(mln_pattern_seed(1, 2, 3, 4) == mln_pattern_seed(1, 2, 3, 4));
    free(buf);
}

/* What mln_json_write_string / mln_json_write_number print. */
static char *json_of(const char *s, double v, int number)
{
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);

    MLN_TEST_ASSERT(fp != NULL);
    if (number)
        mln_json_write_number(fp, v);
    else
        mln_json_write_string(fp, s);
    MLN_TEST_ASSERT(fclose(fp) == 0);
    return out;
}

static void expect_json(const char *s, double v, int number, const char *want)
{
    char *got = json_of(s, v, number);

    if (strcmp(got, want) != 0) {
        fprintf(stderr, "json: got [%s], want [%s]\n", got, want);
        MLN_TEST_ASSERT(0);
    }
    free(got);
}

static void test_output(void)
{
    char *const argv[] = {"mln-pt2pt", "--meta", "note=a b", "it's", "", "--sizes=1:4K"};
    char *line;

    expect_json("plain", 0, 0, "\"plain\"");
    expect_json("q\"b\\n\nt\tr\rc\x01 z", 0, 0, "\"q\\\"b\\\\n\\nt\\tr\\rc\\u0001 z\"");
    expect_json("caf\xc3\xa9 \xe2\x82\xac", 0, 0, "\"caf\xc3\xa9 \xe2\x82\xac\""); /* UTF-8 */
    expect_json("bad\xff\xc3(", 0, 0, "\"bad\\ufffd\\ufffd(\"");                   /* not UTF-8 */
    expect_json("\xed\xa0\x80", 0, 0, "\"\\ufffd\\ufffd\\ufffd\"");                /* a surrogate */
    expect_json(NULL, 0, 0, "\"\"");
    expect_json(NULL, 1.5, 1, "1.5");
    expect_json(NULL, 0.0, 1, "0");
    expect_json(NULL, 123456.789012, 1, "123456.789");
    expect_json(NULL, NAN, 1, "0");
    expect_json(NULL, INFINITY, 1, "0");
    expect_json(NULL, -INFINITY, 1, "0");

    line = mln_command_line(6, argv);
    MLN_TEST_ASSERT(line != NULL);
    MLN_TEST_ASSERT(strcmp(line, "mln-pt2pt --meta 'note=a b' 'it'\\''s' '' --sizes=1:4K") == 0);
    free(line);
}

int main(void)
{
    test_sizes();
    test_iters();
    test_stats();
    test_pattern();
    test_output();
    puts("test_harness: ok");
    return 0;
}
