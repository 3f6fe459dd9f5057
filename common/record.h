/* Records the caller allocates and the library fills (statistics, info), handed over at the
 * caller's size (docs/abi.md, "Records the library fills"): a caller built against an older
 * mixrt passes a smaller record, one built against a newer mixrt a larger one. */
#ifndef MIXRT_COMMON_RECORD_H
#define MIXRT_COMMON_RECORD_H

#include <stddef.h>
#include <string.h>

/* Writes exactly dst_size bytes of dst: the first bytes of the library's own record src (all of
 * it when it fits), then zeros for the fields of a newer layout that this library does not know
 * ("not counted"). Never writes past dst_size, which is all an older caller allocated. */
static inline void mx__record_fill(void *dst, size_t dst_size, const void *src, size_t src_size) {
  size_t n = dst_size < src_size ? dst_size : src_size;
  memcpy(dst, src, n);
  if (dst_size > n) memset((char *)dst + n, 0, dst_size - n);
}

#endif /* MIXRT_COMMON_RECORD_H */
