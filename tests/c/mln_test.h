/* mln_test.h - a minimal assertion helper for the C unit tests (no framework needed). */
#ifndef MLN_TEST_H
#define MLN_TEST_H

#include <stdio.h>
#include <stdlib.h>

#define MLN_TEST_ASSERT(cond)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif /* MLN_TEST_H */
