/*
 * json.c - JSON string literals for every writer of JSON in the tree: the benchmark results,
 * `multilane config --json` and mln-delayline's --stats.  No MPI here (library mln_parse), so
 * the MPI-free tools link it too.  Text from outside (interface names, --meta values, paths)
 * may hold quotes, backslashes, control characters and bytes that are not UTF-8.
 */
#include "multilane_base.h"

#include <stdint.h>
#include <stdio.h>

/* Length of the valid UTF-8 sequence at `p` (1-4), or 0 when it is not valid. */
static size_t utf8_len(const unsigned char *p)
{
    size_t n;
    uint32_t cp;

    if (p[0] < 0x80)
        return 1;
    if ((p[0] & 0xe0) == 0xc0) {
        n = 2;
        cp = p[0] & 0x1f;
    } else if ((p[0] & 0xf0) == 0xe0) {
        n = 3;
        cp = p[0] & 0x0f;
    } else if ((p[0] & 0xf8) == 0xf0) {
        n = 4;
        cp = p[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    /* Overlong forms, surrogates and code points above U+10FFFF are not valid. */
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return n;
}

void mln_json_write_string(FILE *fp, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n;

    fputc('"', fp);
    while (*p) {
        switch (*p) {
        case '"':
            fputs("\\\"", fp);
            break;
        case '\\':
            fputs("\\\\", fp);
            break;
        case '\n':
            fputs("\\n", fp);
            break;
        case '\r':
            fputs("\\r", fp);
            break;
        case '\t':
            fputs("\\t", fp);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                fprintf(fp, "\\u%04x", *p);
                break;
            }
            n = utf8_len(p);
            if (n == 0) {
                fputs("\\ufffd", fp);
                break;
            }
            fwrite(p, 1, n, fp);
            p += n;
            continue;
        }
        p++;
    }
    fputc('"', fp);
}
