/* mixrt status codes and error records.
 *
 * Every mixrt action returns an mx_status (MX_OK = 0). A failure also leaves a human-readable
 * message naming the node, tensor, file or argument at fault: on the object it happened to
 * (for example mx_graph_last_error) or, for calls that create an object, in the caller's
 * optional mx_error record. The status strings come from one X-macro table. */
#ifndef MIXRT_STATUS_H
#define MIXRT_STATUS_H

#include <stddef.h>

#include "mixrt/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, description): the one table of status codes. Order fixes the numeric values. */
#define MX_STATUS_MAP(X)                      \
  X(OK, "ok")                                 \
  X(ERR_INVALID_ARGUMENT, "invalid argument") \
  X(ERR_OUT_OF_MEMORY, "out of host memory")  \
  X(ERR_IO, "input/output error")             \
  X(ERR_MALFORMED, "malformed file")          \
  X(ERR_UNSUPPORTED, "unsupported")           \
  X(ERR_INVALID_GRAPH, "invalid graph")       \
  X(ERR_SHAPE, "shape mismatch")              \
  X(ERR_DTYPE, "dtype mismatch")              \
  X(ERR_NOT_FOUND, "not found")               \
  X(ERR_LIMIT, "limit exceeded")              \
  X(ERR_DEVICE, "device error")               \
  X(ERR_DEVICE_OOM, "device out of memory")   \
  X(ERR_KERNEL, "kernel failure")             \
  X(ERR_BUSY, "busy")                         \
  X(ERR_INTERNAL, "internal error")           \
  X(ERR_CANCELLED, "cancelled")

typedef enum mx_status {
#define MX_STATUS_ENUM_(name, desc) MX_##name,
  MX_STATUS_MAP(MX_STATUS_ENUM_)
#undef MX_STATUS_ENUM_
      MX_STATUS_COUNT_ /* number of codes; not a status */
} mx_status;

/* Short constant description of a status ("invalid argument"); never NULL. */
MX_API const char *mx_status_string(mx_status status);

/* Constant identifier of a status ("MX_ERR_INVALID_ARGUMENT"); never NULL. */
MX_API const char *mx_status_name(mx_status status);

#define MX_ERROR_MESSAGE_MAX 512

/* An error record a caller may pass to calls that can fail before any object exists. */
typedef struct mx_error {
  mx_status status;                   /* MX_OK when no error was recorded */
  char message[MX_ERROR_MESSAGE_MAX]; /* NUL-terminated; names the thing at fault */
} mx_error;

/* Resets an error record to MX_OK with an empty message. NULL is a no-op. */
MX_API void mx_error_clear(mx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_STATUS_H */
