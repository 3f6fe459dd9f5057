/* Writing JSON text: the one string writer every JSON output of mixrt uses (partition dumps,
 * Chrome traces, `mixrt inspect --json`, the benchmarks), so every one escapes alike. */
#ifndef MIXRT_COMMON_JSON_H
#define MIXRT_COMMON_JSON_H

#include <stdio.h>

/* Writes s as a JSON string literal: quotes, backslash escapes for '"' and '\', \u00XX for
 * control characters; other bytes (UTF-8 included) as they are. NULL writes "". */
void mx__json_string(FILE *out, const char *s);

#endif /* MIXRT_COMMON_JSON_H */
