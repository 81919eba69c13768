/*
 * tunables.c - a generic parser for tables of tunables (STYLE.md 8).
 *
 * A table row names an environment variable, its type, default text and help, and where the
 * parsed value goes in a context struct.  Parsing happens once (at mln_init, or in a tool);
 * an invalid value is rejected with one line naming the variable, the value and what is
 * expected.  The output struct is written only when every row parsed.
 */
#include "mln_core.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MLN_TUNABLE_ECHO 40 /* characters of an invalid value quoted in the error line */

static int parse_bool(const char *text, int *out)
{
    static const char *const yes[] = {"1", "yes", "true", "on", "y"};
    static const char *const no[] = {"0", "no", "false", "off", "n"};

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return 1;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return 1;
        }
    }
    return 0;
}

static const char *type_name(mln_tunable_type_t type)
{
    switch (type) {
    case MLN_TUNABLE_INT:
        return "int";
    case MLN_TUNABLE_SIZE:
        return "size";
    case MLN_TUNABLE_BOOL:
        return "bool";
    case MLN_TUNABLE_ENUM:
        return "enum";
    case MLN_TUNABLE_STRING:
        return "string";
    }
    return "?";
}

static void describe_expected(const mln_tunable_t *t, char *buf, size_t len)
{
    size_t used = 0;

    switch (t->type) {
    case MLN_TUNABLE_INT:
        if (t->min < t->max)
            used = (size_t)snprintf(buf, len, "an integer from %" PRId64 " to %" PRId64, t->min,
                                    t->max);
        else
            used = (size_t)snprintf(buf, len, "an integer");
        if (t->auto_word != NULL && used < len)
            snprintf(buf + used, len - used, ", or %s", t->auto_word);
        return;
    case MLN_TUNABLE_SIZE:
        if (t->min < t->max)
            snprintf(buf, len, "a size such as 4096, 256K or 1M, from %" PRId64 " to %" PRId64,
                     t->min, t->max);
        else
            snprintf(buf, len, "a size such as 4096, 256K or 1M");
        return;
    case MLN_TUNABLE_BOOL:
        snprintf(buf, len, "one of 1, 0, yes, no, true, false, on, off");
        return;
    case MLN_TUNABLE_ENUM:
        used = (size_t)snprintf(buf, len, "one of: ");
        for (const char *const *c = t->choices; c && *c && used < len; c++)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", *c, c[1] ? ", " : "");
        return;
    case MLN_TUNABLE_STRING:
        snprintf(buf, len, "text of at most %zu characters", t->size ? t->size - 1 : 0);
        return;
    }
}

/* Parses one value into `field` (t->size bytes for a STRING); returns 0 if it does not fit. */
static int parse_value(const mln_tunable_t *t, const char *text, void *field)
{
    int64_t iv;
    uint64_t uv;
    int bv;

    switch (t->type) {
    case MLN_TUNABLE_INT:
        if (t->auto_word != NULL && strcasecmp(text, t->auto_word) == 0) {
            iv = 0;
            memcpy(field, &iv, sizeof(iv));
            return 1;
        }
        if (mln_parse_int(text, &iv) != MLN_OK)
            return 0;
        if (t->min < t->max && (iv < t->min || iv > t->max))
            return 0;
        memcpy(field, &iv, sizeof(iv));
        return 1;
    case MLN_TUNABLE_SIZE:
        if (mln_parse_size(text, &uv) != MLN_OK)
            return 0;
        if (t->min < t->max && (uv < (uint64_t)t->min || uv > (uint64_t)t->max))
            return 0;
        memcpy(field, &uv, sizeof(uv));
        return 1;
    case MLN_TUNABLE_BOOL:
        if (!parse_bool(text, &bv))
            return 0;
        memcpy(field, &bv, sizeof(bv));
        return 1;
    case MLN_TUNABLE_ENUM:
        for (int i = 0; t->choices && t->choices[i]; i++) {
            if (strcasecmp(text, t->choices[i]) == 0) {
                memcpy(field, &i, sizeof(i));
                return 1;
            }
        }
        return 0;
    case MLN_TUNABLE_STRING:
        if (strlen(text) >= t->size)
            return 0;
        memcpy(field, text, strlen(text) + 1);
        return 1;
    }
    return 0;
}

/* The bytes a row writes: its type's width, or for STRING the field's own size (0 = unset). */
static size_t type_size(const mln_tunable_t *t)
{
    switch (t->type) {
    case MLN_TUNABLE_INT:
        return sizeof(int64_t);
    case MLN_TUNABLE_SIZE:
        return sizeof(uint64_t);
    case MLN_TUNABLE_BOOL:
    case MLN_TUNABLE_ENUM:
        return sizeof(int);
    case MLN_TUNABLE_STRING:
        return t->size;
    }
    return 0;
}

/*
 * A row must say how large its field is, and say it right: a STRING bounded only by the end
 * of the struct spills into the fields after it, and an INT row on an `int` field writes
 * 8 bytes into 4.  Returns 1 when the row is sound and its field lies inside `out_size`.
 */
static int row_fits(const mln_tunable_t *t, size_t out_size, char *err, size_t errlen)
{
    size_t need = type_size(t);

    if (need == 0) {
        snprintf(err, errlen, "%s: table row gives no field size", t->env);
        return 0;
    }
    if (t->size != 0 && t->size != need) {
        snprintf(err, errlen, "%s: table row's field has %zu bytes; type %s takes %zu", t->env,
                 t->size, type_name(t->type), need);
        return 0;
    }
    if (t->offset > out_size || need > out_size - t->offset) {
        snprintf(err, errlen, "%s: table row does not fit the output struct", t->env);
        return 0;
    }
    return 1;
}

static const char *env_get(const char *name, void *arg)
{
    (void)arg;
    return getenv(name);
}

mln_status_t mln_tunables_parse(const mln_tunable_t *table, size_t count, mln_getenv_fn get,
                                void *arg, void *out, size_t out_size, char *err, size_t errlen)
{
    mln_status_t st = MLN_OK;
    char expected[256], nowhere[1]; /* nowhere: the error line of a caller with no `err` */
    unsigned char *tmp;

    if (table == NULL || out == NULL || out_size == 0)
        return MLN_ERR_ARG;
    if (get == NULL)
        get = env_get;
    if (err == NULL) {
        err = nowhere;
        errlen = sizeof(nowhere);
    }
    tmp = calloc(1, out_size);
    if (tmp == NULL)
        return MLN_ERR_NOMEM;

    for (size_t i = 0; i < count; i++) {
        const mln_tunable_t *t = &table[i];
        const char *value = get(t->env, arg);
        int from_env = value != NULL;

        if (!row_fits(t, out_size, err, errlen)) {
            st = MLN_ERR_INTERNAL;
            goto out;
        }
        if (!from_env)
            value = t->default_value ? t->default_value : "";
        if (!parse_value(t, value, tmp + t->offset)) {
            /* Only the head of a long value: the limit must not fall off the end of `err`. */
            describe_expected(t, expected, sizeof(expected));
            snprintf(err, errlen, "%s: invalid %svalue '%.*s%s' (expected %s)", t->env,
                     from_env ? "" : "default ", MLN_TUNABLE_ECHO, value,
                     strlen(value) > MLN_TUNABLE_ECHO ? "..." : "", expected);
            st = from_env ? MLN_ERR_CONFIG : MLN_ERR_INTERNAL;
            goto out;
        }
    }
    memcpy(out, tmp, out_size);
out:
    free(tmp);
    return st;
}

mln_status_t mln_tunables_print(const mln_tunable_t *table, size_t count, mln_getenv_fn get,
                                void *arg, int json, FILE *fp)
{
    char expected[256];

    if (table == NULL || fp == NULL)
        return MLN_ERR_ARG;
    if (get == NULL)
        get = env_get;
    if (json)
        fputs("[\n", fp);
    else
        fprintf(fp, "%-22s %-7s %-10s %-10s %s\n", "# variable", "type", "default", "value",
                "description");
    for (size_t i = 0; i < count; i++) {
        const mln_tunable_t *t = &table[i];
        const char *value = get(t->env, arg);
        const char *shown = value ? value : (t->default_value ? t->default_value : "");

        describe_expected(t, expected, sizeof(expected));
        if (json) {
            fputs("  {\"env\": ", fp);
            mln_json_write_string(fp, t->env);
            fprintf(fp, ", \"type\": \"%s\", \"default\": ", type_name(t->type));
            mln_json_write_string(fp, t->default_value);
            fputs(", \"value\": ", fp);
            mln_json_write_string(fp, shown);
            fprintf(fp, ", \"set\": %s, \"expected\": ", value ? "true" : "false");
            mln_json_write_string(fp, expected);
            fputs(", \"help\": ", fp);
            mln_json_write_string(fp, t->help);
            fprintf(fp, "}%s\n", i + 1 < count ? "," : "");
        } else {
            fprintf(fp, "%-22s %-7s %-10s %-10s %s (%s)\n", t->env, type_name(t->type),
                    t->default_value && *t->default_value ? t->default_value : "\"\"",
                    *shown ? shown : "\"\"", t->help, expected);
        }
    }
    if (json)
        fputs("]\n", fp);
    return ferror(fp) ? MLN_ERR_SYS : MLN_OK;
}
