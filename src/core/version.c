/* version.c - the version of the linked library. */
#include "multilane.h"

const char *mln_version_string(void)
{
    return MLN_VERSION_STRING;
}

void mln_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = MLN_VERSION_MAJOR;
    if (minor)
        *minor = MLN_VERSION_MINOR;
    if (patch)
        *patch = MLN_VERSION_PATCH;
}
