/* Status strings (from the one MX_STATUS_MAP table) and error-record helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "mixrt/log.h"

static const char *const status_strings[] = {
#define MX_STATUS_STR_(name, desc) desc,
    MX_STATUS_MAP(MX_STATUS_STR_)
#undef MX_STATUS_STR_
};

static const char *const status_names[] = {
#define MX_STATUS_NAME_(name, desc) "MX_" #name,
    MX_STATUS_MAP(MX_STATUS_NAME_)
#undef MX_STATUS_NAME_
};

const char *mx_status_string(mx_status status) {
  if ((unsigned)status >= (unsigned)MX_STATUS_COUNT_) return "unknown status";
  return status_strings[status];
}

const char *mx_status_name(mx_status status) {
  if ((unsigned)status >= (unsigned)MX_STATUS_COUNT_) return "MX_UNKNOWN_STATUS";
  return status_names[status];
}

void mx_error_clear(mx_error *err) {
  if (!err) return;
  err->status = MX_OK;
  err->message[0] = '\0';
}

mx_status mx__error_vfail(mx_error *err, mx_status status, const char *fmt, va_list ap) {
  if (!err) return status;
  err->status = status;
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  return status;
}

mx_status mx__fail(mx_error *err, mx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx__error_vfail(err, status, fmt, ap);
  va_end(ap);
  return status;
}

void mx__error_prefix(mx_error *err, const char *fmt, ...) {
  if (!err || err->status == MX_OK) return;
  char prefix[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  /* Shift the message right and put the prefix in front, truncating the tail if needed. */
  size_t plen = (size_t)n < sizeof err->message - 1 ? (size_t)n : sizeof err->message - 1;
  size_t mlen = strlen(err->message);
  if (plen + mlen > sizeof err->message - 1) mlen = sizeof err->message - 1 - plen;
  memmove(err->message + plen, err->message, mlen);
  memcpy(err->message, prefix, plen);
  err->message[plen + mlen] = '\0';
}

void mx__error_copy(mx_error *dst, const mx_error *src) {
  if (!dst || !src || dst == src) return;
  *dst = *src;
}

const char *mx_log_level_name(mx_log_level level) {
  switch (level) {
    case MX_LOG_DEBUG: return "debug";
    case MX_LOG_INFO: return "info";
    case MX_LOG_WARN: return "warn";
    case MX_LOG_ERROR: return "error";
  }
  return "?";
}
