/* The cause of a failing function, formatted (a value, a position, a bound), handed to whoever
 * reports the failure on the same thread.
 *
 * Kernels run on device worker threads and return only a status; the code that turns that
 * status into a message (the HAL's stream and model errors, the reference interpreter) runs
 * right after on the same thread. A kernel that knows more than static text can say formats it
 * here (mx__fail_cause_set) and points call->why at the result; the reporter copies it out with
 * mx__fail_cause_take. The text lives in a per-thread buffer until the thread's next set. */
#ifndef MIXRT_COMMON_FAIL_CAUSE_H
#define MIXRT_COMMON_FAIL_CAUSE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Longest cause kept (longer text is cut). */
#define MX_FAIL_CAUSE_MAX 240

/* Formats the calling thread's cause and returns it (valid on this thread until the next set). */
const char *mx__fail_cause_set(const char *fmt, ...) MX_PRINTF(1, 2);
/* Makes `text` (static or not) the calling thread's cause; NULL clears it. */
void mx__fail_cause_keep(const char *text);
/* Copies the calling thread's cause into buf and clears it; false (buf "") when there is none. */
bool mx__fail_cause_take(char *buf, size_t cap);

#endif /* MIXRT_COMMON_FAIL_CAUSE_H */
