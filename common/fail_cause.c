/* The per-thread cause of the last failure (see fail_cause.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/fail_cause.h"

static _Thread_local char cause[MX_FAIL_CAUSE_MAX + 1];
static _Thread_local bool cause_set;

const char *mx__fail_cause_set(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cause, sizeof cause, fmt, ap);
  va_end(ap);
  cause_set = true;
  return cause;
}

void mx__fail_cause_keep(const char *text) {
  cause_set = text != NULL;
  /* The text may already be this thread's buffer (a kernel's formatted cause). */
  if (text && text != cause) snprintf(cause, sizeof cause, "%s", text);
}

bool mx__fail_cause_take(char *buf, size_t cap) {
  bool had = cause_set;
  if (cap) snprintf(buf, cap, "%s", had ? cause : "");
  cause_set = false;
  return had;
}
