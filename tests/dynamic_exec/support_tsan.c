/* ThreadSanitizer builds only: a rand_r that lets Criterion's runner start.
 *
 * Criterion places its shared arena at an address drawn with rand_r from a range that
 * ThreadSanitizer mostly reserves for shadow memory, and aborts when ten draws in a row land
 * there. This generator keeps the draws' high bits and maps the low 22 bits (the arena slot
 * index the runner uses) into the application range ThreadSanitizer leaves free
 * (0x5500_0000_0000 upwards), so the first draw is usable. Other builds use the C library's. */
#if defined(__SANITIZE_THREAD__)
#include <stdlib.h>

int rand_r(unsigned int *seed) {
  *seed = *seed * 1103515245u + 12345u;
  unsigned int x = (*seed >> 1) & 0x7fffffffu;
  return (int)((x & ~0x3fffffu) | (0x350000u + x % 0x18000u));
}
#else
/* ISO C wants at least one declaration per translation unit. */
typedef int mx_tests_dynamic_exec_no_tsan;
#endif
