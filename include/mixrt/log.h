/* Log callbacks. mixrt never prints on its own: passes and sessions report through a callback
 * the caller installs, with a level and one line of text (no trailing newline). */
#ifndef MIXRT_LOG_H
#define MIXRT_LOG_H

#include "mixrt/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mx_log_level {
  MX_LOG_DEBUG = 0,
  MX_LOG_INFO = 1,
  MX_LOG_WARN = 2,
  MX_LOG_ERROR = 3
} mx_log_level;

/* Receives one message. `message` is valid only during the call. */
typedef void (*mx_log_fn)(void *user, mx_log_level level, const char *message);

/* Name of a level ("debug", "info", "warn", "error"). */
MX_API const char *mx_log_level_name(mx_log_level level);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_LOG_H */
