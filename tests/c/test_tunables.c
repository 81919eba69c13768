/*
 * test_tunables.c - the generic tunables parser and the library's own table: every type,
 * defaults, bounds, invalid values rejected with the variable named, output untouched on
 * error, and size/integer parsing edge cases.
 */
#include "multilane.h"
#include "mln_test.h"

#include <stddef.h>
#include <string.h>

typedef struct test_cfg {
    int64_t count;
    uint64_t bytes;
    int flag;
    int mode;
    char name[8];
} test_cfg_t;

static const char *const modes[] = {"fast", "safe", "auto", NULL};

static const mln_tunable_t table[] = {
    {.env = "T_COUNT",
     .type = MLN_TUNABLE_INT,
     .default_value = "8",
     .help = "count",
     MLN_TUNABLE_FIELD(test_cfg_t, count),
     .min = 1,
     .max = 64},
    {.env = "T_BYTES",
     .type = MLN_TUNABLE_SIZE,
     .default_value = "256K",
     .help = "bytes",
     MLN_TUNABLE_FIELD(test_cfg_t, bytes)},
    {.env = "T_FLAG",
     .type = MLN_TUNABLE_BOOL,
     .default_value = "no",
     .help = "flag",
     MLN_TUNABLE_FIELD(test_cfg_t, flag)},
    {.env = "T_MODE",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "auto",
     .help = "mode",
     MLN_TUNABLE_FIELD(test_cfg_t, mode),
     .choices = modes},
    {.env = "T_NAME",
     .type = MLN_TUNABLE_STRING,
     .default_value = "abc",
     .help = "name",
     MLN_TUNABLE_FIELD(test_cfg_t, name)},
};
static const size_t ntable = sizeof(table) / sizeof(table[0]);

/* A fake environment: pairs of name, value. */
typedef struct fake_env {
    const char *const *pairs;
} fake_env_t;

static const char *fake_get(const char *name, void *arg)
{
    const fake_env_t *env = arg;
    for (const char *const *p = env->pairs; p && p[0]; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static mln_status_t parse(const char *const *pairs, test_cfg_t *cfg, char *err, size_t len)
{
    fake_env_t env = {pairs};
    return mln_tunables_parse(table, ntable, fake_get, &env, cfg, sizeof(*cfg), err, len);
}

/* 1 when all `len` bytes at `p` are `byte` (an output struct the parser must not touch). */
static int all_bytes(const void *p, size_t len, unsigned char byte)
{
    for (size_t i = 0; i < len; i++)
        if (((const unsigned char *)p)[i] != byte)
            return 0;
    return 1;
}

/* Asserts that `pairs` is rejected, the message names `var`, and cfg stays untouched. */
static void expect_reject(const char *const *pairs, const char *var)
{
    test_cfg_t cfg;
    char err[256] = "";
    memset(&cfg, 0x5a, sizeof(cfg));
    MLN_TEST_ASSERT(parse(pairs, &cfg, err, sizeof(err)) == MLN_ERR_CONFIG);
    MLN_TEST_ASSERT(strncmp(err, var, strlen(var)) == 0);
    MLN_TEST_ASSERT(strstr(err, "expected") != NULL);
    MLN_TEST_ASSERT(all_bytes(&cfg, sizeof(cfg), 0x5a));
}

static void test_defaults_and_values(void)
{
    test_cfg_t cfg;
    char err[256] = "";
    const char *const none[] = {NULL};
    const char *const set[] = {"T_COUNT", "64",   "T_BYTES", "1M",    "T_FLAG", "On",
                               "T_MODE",  "SAFE", "T_NAME",  "hello", NULL};

    MLN_TEST_ASSERT(parse(none, &cfg, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(cfg.count == 8 && cfg.bytes == 256 * 1024 && cfg.flag == 0);
    MLN_TEST_ASSERT(cfg.mode == 2 && strcmp(cfg.name, "abc") == 0);

    MLN_TEST_ASSERT(parse(set, &cfg, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(cfg.count == 64 && cfg.bytes == 1 << 20 && cfg.flag == 1);
    MLN_TEST_ASSERT(cfg.mode == 1 && strcmp(cfg.name, "hello") == 0);
}

static void test_rejects(void)
{
    const char *const c1[] = {"T_COUNT", "0", NULL};   /* below min */
    const char *const c2[] = {"T_COUNT", "65", NULL};  /* above max */
    const char *const c3[] = {"T_COUNT", "4x", NULL};  /* junk */
    const char *const c4[] = {"T_COUNT", "", NULL};    /* empty */
    const char *const c5[] = {"T_BYTES", "-1", NULL};  /* negative size */
    const char *const c6[] = {"T_BYTES", "12Q", NULL}; /* bad suffix */
    const char *const c7[] = {"T_FLAG", "maybe", NULL};
    const char *const c8[] = {"T_MODE", "quick", NULL};
    const char *const c9[] = {"T_NAME", "waytoolongname", NULL}; /* does not fit 8 bytes */
    const char *const c10[] = {"T_BYTES", "99999999999999999999", NULL};

    expect_reject(c1, "T_COUNT");
    expect_reject(c2, "T_COUNT");
    expect_reject(c3, "T_COUNT");
    expect_reject(c4, "T_COUNT");
    expect_reject(c5, "T_BYTES");
    expect_reject(c6, "T_BYTES");
    expect_reject(c7, "T_FLAG");
    expect_reject(c8, "T_MODE");
    expect_reject(c9, "T_NAME");
    expect_reject(c10, "T_BYTES");

    /* The enum message lists the choices. */
    test_cfg_t cfg;
    char err[256] = "";
    MLN_TEST_ASSERT(parse(c8, &cfg, err, sizeof(err)) == MLN_ERR_CONFIG);
    MLN_TEST_ASSERT(strstr(err, "fast, safe, auto") != NULL);
    MLN_TEST_ASSERT(strstr(err, "'quick'") != NULL);
}

/* A STRING row holds size - 1 characters; a row with a wrong or missing size is refused. */
static void test_row_sizes(void)
{
    test_cfg_t cfg;
    char err[256] = "";
    const char *const fits[] = {"T_NAME", "seven77", NULL};
    const char *const over[] = {"T_NAME", "eight888", NULL};
    const char *const none[] = {NULL};
    fake_env_t env = {none};
    const mln_tunable_t wide = {.env = "T_WIDE",
                                .type = MLN_TUNABLE_INT,
                                .default_value = "1",
                                .help = "an INT row on an int field",
                                MLN_TUNABLE_FIELD(test_cfg_t, flag)};
    const mln_tunable_t unsized = {.env = "T_UNSIZED",
                                   .type = MLN_TUNABLE_STRING,
                                   .default_value = "",
                                   .help = "a STRING row without a size",
                                   .offset = offsetof(test_cfg_t, name)};

    MLN_TEST_ASSERT(parse(fits, &cfg, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(strcmp(cfg.name, "seven77") == 0);
    expect_reject(over, "T_NAME");
    MLN_TEST_ASSERT(parse(over, &cfg, err, sizeof(err)) == MLN_ERR_CONFIG);
    MLN_TEST_ASSERT(strstr(err, "'eight888' (expected text of at most 7 characters)") != NULL);

    memset(&cfg, 0x5a, sizeof(cfg));
    MLN_TEST_ASSERT(mln_tunables_parse(&wide, 1, fake_get, &env, &cfg, sizeof(cfg), err,
                                       sizeof(err)) == MLN_ERR_INTERNAL);
    MLN_TEST_ASSERT(strstr(err, "T_WIDE: table row's field has 4 bytes; type int takes 8") == err);
    MLN_TEST_ASSERT(mln_tunables_parse(&unsized, 1, fake_get, &env, &cfg, sizeof(cfg), err,
                                       sizeof(err)) == MLN_ERR_INTERNAL);
    MLN_TEST_ASSERT(strstr(err, "T_UNSIZED: table row gives no field size") == err);
    MLN_TEST_ASSERT(all_bytes(&cfg, sizeof(cfg), 0x5a));
}

static void test_parse_size_and_int(void)
{
    uint64_t v = 0;
    int64_t i = 0;

    MLN_TEST_ASSERT(mln_parse_size("0", &v) == MLN_OK && v == 0);
    MLN_TEST_ASSERT(mln_parse_size("4096", &v) == MLN_OK && v == 4096);
    MLN_TEST_ASSERT(mln_parse_size("1k", &v) == MLN_OK && v == 1024);
    MLN_TEST_ASSERT(mln_parse_size("64M", &v) == MLN_OK && v == 64u << 20);
    MLN_TEST_ASSERT(mln_parse_size("64MiB", &v) == MLN_OK && v == 64u << 20);
    MLN_TEST_ASSERT(mln_parse_size("2GB", &v) == MLN_OK && v == UINT64_C(2) << 30);
    MLN_TEST_ASSERT(mln_parse_size("100B", &v) == MLN_OK && v == 100);
    v = 77;
    MLN_TEST_ASSERT(mln_parse_size("abc", &v) == MLN_ERR_ARG && v == 77);
    MLN_TEST_ASSERT(mln_parse_size("", &v) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(mln_parse_size("-5", &v) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(mln_parse_size("1.5M", &v) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(mln_parse_size("1MM", &v) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(mln_parse_size("17179869184G", &v) == MLN_ERR_ARG); /* overflow */
    MLN_TEST_ASSERT(mln_parse_size(NULL, &v) == MLN_ERR_ARG);

    MLN_TEST_ASSERT(mln_parse_int("-12", &i) == MLN_OK && i == -12);
    MLN_TEST_ASSERT(mln_parse_int("0x10", &i) == MLN_OK && i == 16);
    MLN_TEST_ASSERT(mln_parse_int(" 7 ", &i) == MLN_OK && i == 7);
    MLN_TEST_ASSERT(mln_parse_int("7a", &i) == MLN_ERR_ARG && i == 7);
    MLN_TEST_ASSERT(mln_parse_int("99999999999999999999", &i) == MLN_ERR_ARG);
}

static void test_library_table(void)
{
    size_t n = 0;
    const mln_tunable_t *t = mln_tunables(&n);
    mln_config_t cfg;
    char err[256] = "";
    const char *const bad[] = {"MLN_LOG", "loud", NULL};
    const char *const dbg[] = {"MLN_LOG", "debug", NULL};
    fake_env_t env_bad = {bad}, env_dbg = {dbg};

    MLN_TEST_ASSERT(t != NULL && n >= 2);
    for (size_t i = 0; i < n; i++) {
        MLN_TEST_ASSERT(strncmp(t[i].env, "MLN_", 4) == 0);
        MLN_TEST_ASSERT(t[i].help != NULL && t[i].default_value != NULL);
    }
    MLN_TEST_ASSERT(mln_config_load(fake_get, &env_dbg, &cfg, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(cfg.log_level == MLN_LOG_DEBUG);
    MLN_TEST_ASSERT(mln_config_load(fake_get, &env_bad, &cfg, err, sizeof(err)) == MLN_ERR_CONFIG);
    MLN_TEST_ASSERT(strstr(err, "MLN_LOG: invalid value 'loud'") == err);

    /* Printing the table works as text and JSON. */
    FILE *fp = tmpfile();
    MLN_TEST_ASSERT(fp != NULL);
    MLN_TEST_ASSERT(mln_tunables_print(t, n, fake_get, &env_dbg, 1, fp) == MLN_OK);
    MLN_TEST_ASSERT(mln_tunables_print(t, n, fake_get, &env_dbg, 0, fp) == MLN_OK);
    MLN_TEST_ASSERT(ftell(fp) > 100);
    fclose(fp);
}

/* Asserts that the library table refuses `pairs` naming `var` and `limit`, cfg untouched. */
static void expect_config_reject(const char *const *pairs, const char *var, const char *limit)
{
    mln_config_t cfg;
    char err[256] = "";
    fake_env_t env = {pairs};

    memset(&cfg, 0x5a, sizeof(cfg));
    MLN_TEST_ASSERT(mln_config_load(fake_get, &env, &cfg, err, sizeof(err)) == MLN_ERR_CONFIG);
    MLN_TEST_ASSERT(strncmp(err, var, strlen(var)) == 0 && err[strlen(var)] == ':');
    MLN_TEST_ASSERT(strstr(err, limit) != NULL);
    MLN_TEST_ASSERT(all_bytes(&cfg, sizeof(cfg), 0x5a));
}

/* Writes `len` copies of `c` and a NUL into `buf` (which holds len + 1); returns buf. */
static char *text_of(char *buf, size_t len, char c)
{
    memset(buf, c, len);
    buf[len] = '\0';
    return buf;
}

/*
 * STRING rows of the library table are bounded by their own field, not by the rest of the
 * struct: an overlong value used to spill into the fields after it (MLN_STRIPE_FAULT into
 * stripe_progress, parsed before it) and to be cut by the rows parsed after it.
 */
static void test_library_string_bounds(void)
{
    char path[301], fault[101], iface[201], path_max[256], fault_max[64], iface_max[64];
    mln_config_t ref, cfg;
    char err[256] = "";
    const char *const thread[] = {"MLN_STRIPE_PROGRESS", "thread", NULL};
    const char *const long_path[] = {"MLN_LOG_FILE", text_of(path, 300, 'p'), NULL};
    const char *const long_fault[] = {"MLN_STRIPE_PROGRESS", "thread", "MLN_STRIPE_FAULT",
                                      text_of(fault, 100, 'f'), NULL};
    const char *const long_iface[] = {"MLN_STRIPE_PROGRESS", "thread", "MLN_STRIPE_IFACE",
                                      text_of(iface, 200, 'i'), NULL};
    const char *const max[] = {"MLN_STRIPE_PROGRESS",
                               "thread",
                               "MLN_LOG_FILE",
                               text_of(path_max, 255, 'p'),
                               "MLN_STRIPE_FAULT",
                               text_of(fault_max, 63, 'f'),
                               "MLN_STRIPE_IFACE",
                               text_of(iface_max, 63, 'i'),
                               NULL};
    fake_env_t env_ref = {thread}, env_max = {max};

    expect_config_reject(long_path, "MLN_LOG_FILE", "at most 255 characters");
    expect_config_reject(long_fault, "MLN_STRIPE_FAULT", "at most 63 characters");
    expect_config_reject(long_iface, "MLN_STRIPE_IFACE", "at most 63 characters");

    /* Exactly the maximum fits intact, and every other field is what it is without them. */
    MLN_TEST_ASSERT(mln_config_load(fake_get, &env_ref, &ref, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(mln_config_load(fake_get, &env_max, &cfg, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(strcmp(cfg.log_file, path_max) == 0);
    MLN_TEST_ASSERT(strcmp(cfg.stripe_fault, fault_max) == 0);
    MLN_TEST_ASSERT(strcmp(cfg.stripe_addr, iface_max) == 0);
    MLN_TEST_ASSERT(cfg.stripe_progress == 1);
    memcpy(ref.log_file, cfg.log_file, sizeof(ref.log_file));
    memcpy(ref.stripe_fault, cfg.stripe_fault, sizeof(ref.stripe_fault));
    memcpy(ref.stripe_addr, cfg.stripe_addr, sizeof(ref.stripe_addr));
    MLN_TEST_ASSERT(memcmp(&ref, &cfg, sizeof(cfg)) == 0);
}

/* The relays' rows (seed 004): defaults, and the chunk bounded by the frame's limit. */
static void test_library_relay(void)
{
    mln_config_t cfg;
    char err[256] = "";
    const char *const none[] = {NULL};
    const char *const set[] = {"MLN_RELAY_WINDOW",
                               "1M",
                               "MLN_RELAY_CHUNK",
                               "64K",
                               "MLN_RELAY_STRIPE_MIN",
                               "0",
                               "MLN_RELAY_TIMEOUT",
                               "5",
                               NULL};
    const char *const big_chunk[] = {"MLN_RELAY_CHUNK", "2M", NULL};
    const char *const no_timeout[] = {"MLN_RELAY_TIMEOUT", "0", NULL};
    fake_env_t env_none = {none}, env_set = {set};

    MLN_TEST_ASSERT(mln_config_load(fake_get, &env_none, &cfg, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(cfg.relay_window == 8u << 20 && cfg.relay_chunk == 1u << 20);
    MLN_TEST_ASSERT(cfg.relay_stripe_min == 256u << 10 && cfg.relay_timeout == 30);
    MLN_TEST_ASSERT(mln_config_load(fake_get, &env_set, &cfg, err, sizeof(err)) == MLN_OK);
    MLN_TEST_ASSERT(cfg.relay_window == 1u << 20 && cfg.relay_chunk == 64u << 10);
    MLN_TEST_ASSERT(cfg.relay_stripe_min == 0 && cfg.relay_timeout == 5);
    expect_config_reject(big_chunk, "MLN_RELAY_CHUNK", "from 65536 to 1048576");
    expect_config_reject(no_timeout, "MLN_RELAY_TIMEOUT", "from 1 to 86400");
}

int main(void)
{
    test_defaults_and_values();
    test_rejects();
    test_row_sizes();
    test_parse_size_and_int();
    test_library_table();
    test_library_string_bounds();
    test_library_relay();
    puts("test_tunables: ok");
    return 0;
}
