/* Test helper: a strict JSON syntax check (RFC 8259) for the JSON mixrt writes (traces, dumps,
 * benchmark output), plus a way to count occurrences of a text. Plain C, no Criterion. */
#ifndef MIXRT_TESTS_SUPPORT_JSON_CHECK_H
#define MIXRT_TESTS_SUPPORT_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* True when text is exactly one JSON value (surrounding whitespace allowed); otherwise false
 * with the byte offset and reason in why (may be NULL). */
bool mxt_json_valid(const char *text, char *why, size_t cap);
/* Reads a whole text file into a malloc'd NUL-terminated string (free()); NULL on error. */
char *mxt_read_text(const char *path);
/* Occurrences of needle in haystack. */
size_t mxt_count(const char *haystack, const char *needle);

#endif /* MIXRT_TESTS_SUPPORT_JSON_CHECK_H */
