/* MX_API marks the declarations of mixrt's public API: the only symbols libmixrt.so exports.
 * The library is compiled with -fvisibility=hidden, so everything not marked (the internal
 * mx__ functions) stays inside it; programs linking libmixrt.a still see all of it. */
#ifndef MIXRT_API_H
#define MIXRT_API_H

#if defined(__GNUC__) || defined(__clang__)
#define MX_API __attribute__((visibility("default")))
#else
#define MX_API
#endif

/* MX_MUST_USE marks functions whose status the caller must look at: ignoring it is a compiler
 * warning (an error in mixrt's own -Werror builds). Every function returning mx_status carries
 * it except three kinds: the frees (mx_device_free and its kin), which fail only on a pointer
 * the library never handed out and leave nothing to undo; the stream calls whose status repeats
 * what they report (mx_stream_get_error fills in the same status, mx_stream_reset returns the
 * error it cleared); and the internal error helpers that record a message and return the
 * status they were given. A cast to void does not silence the
 * warning in GCC; a caller with truly nothing to do on failure writes MX_IGNORE_STATUS(call). */
#if defined(__GNUC__) || defined(__clang__)
#define MX_MUST_USE __attribute__((warn_unused_result))
#else
#define MX_MUST_USE
#endif
#define MX_IGNORE_STATUS(call)             \
  do {                                     \
    mx_status mx_ignored_status_ = (call); \
    (void)mx_ignored_status_;              \
  } while (0)

#endif /* MIXRT_API_H */
