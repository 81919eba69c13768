/* test_status.c - every status code has its own text; unknown codes do not crash. */
#include "multilane.h"
#include "mln_test.h"

#include <string.h>

int main(void)
{
    MLN_TEST_ASSERT(strcmp(mln_status_str(MLN_OK), "success") == 0);
    for (int i = 0; i < MLN_STATUS_COUNT; i++) {
        const char *s = mln_status_str((mln_status_t)i);
        MLN_TEST_ASSERT(s != NULL && *s != '\0');
        MLN_TEST_ASSERT(strcmp(s, "unknown status") != 0);
        for (int j = 0; j < i; j++) /* distinct texts */
            MLN_TEST_ASSERT(strcmp(s, mln_status_str((mln_status_t)j)) != 0);
    }
    MLN_TEST_ASSERT(strcmp(mln_status_str(MLN_STATUS_COUNT), "unknown status") == 0);
    MLN_TEST_ASSERT(strcmp(mln_status_str((mln_status_t)-1), "unknown status") == 0);
    MLN_TEST_ASSERT(strcmp(mln_status_str((mln_status_t)12345), "unknown status") == 0);

    int major = -1, minor = -1, patch = -1;
    char buf[32];
    mln_version(&major, &minor, &patch);
    snprintf(buf, sizeof(buf), "%d.%d.%d", major, minor, patch);
    MLN_TEST_ASSERT(strcmp(buf, mln_version_string()) == 0);
    MLN_TEST_ASSERT(strcmp(MLN_VERSION_STRING, mln_version_string()) == 0);
    mln_version(NULL, NULL, NULL); /* NULL outputs are allowed */
    puts("test_status: ok");
    return 0;
}
