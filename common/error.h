/* Internal helpers for filling mx_error records.
 *
 * Every function that can fail for a reason a user should read takes an `mx_error *err`
 * (which may be NULL) and returns mx__fail(err, status, "...") so the status and the message
 * travel together. mx__error_prefix adds context on the way up ("node 'attn/qk': ..."). */
#ifndef MIXRT_COMMON_ERROR_H
#define MIXRT_COMMON_ERROR_H

#include <stdarg.h>

#include "mixrt/status.h"

#if defined(__GNUC__)
#define MX_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define MX_PRINTF(fmt_idx, arg_idx)
#endif

/* Records `status` and a printf-style message in err (if not NULL); returns status. */
mx_status mx__fail(mx_error *err, mx_status status, const char *fmt, ...) MX_PRINTF(3, 4);

/* The same with a va_list: the one body every object's own "fail" helper (mx__graph_fail,
 * mx__part_fail, ...) forwards to, so each object records its errors in an mx_error alike. */
mx_status mx__error_vfail(mx_error *err, mx_status status, const char *fmt, va_list ap) MX_PRINTF(3, 0);

/* Prepends printf-style context to err's message (if not NULL and it holds an error). */
void mx__error_prefix(mx_error *err, const char *fmt, ...) MX_PRINTF(2, 3);

/* Copies src into dst (either may be NULL). */
void mx__error_copy(mx_error *dst, const mx_error *src);

/* Shorthand for "out of host memory" with what was being allocated. */
#define mx__fail_oom(err, what) mx__fail((err), MX_ERR_OUT_OF_MEMORY, "out of host memory (%s)", (what))

#endif /* MIXRT_COMMON_ERROR_H */
