/* ThreadSanitizer builds only: lets the test runner start.
 *
 * The test framework's runner maps a shared arena at a random address between 0x2000_0000_0000
 * and 0x6000_0000_0000, choosing the address with rand_r and giving up after ten occupied
 * candidates. Under ThreadSanitizer almost all of that range is reserved for shadow memory, so
 * the runner aborts ("Could not initialize inheritable arena") before any test runs. This
 * rand_r keeps the generator's high bits but steers the 16 MiB slot index (the low 22 bits the
 * runner uses) into 0x5500_0000_0000 - 0x5680_0000_0000, the application range ThreadSanitizer
 * leaves free, so every candidate is usable. Other builds use the C library's rand_r. */
#if defined(__SANITIZE_THREAD__)
#include <stdlib.h>

int rand_r(unsigned int *seed) {
  *seed = *seed * 1103515245u + 12345u;
  unsigned int x = (*seed >> 1) & 0x7fffffffu;
  return (int)((x & ~0x3fffffu) | (0x350000u + x % 0x18000u));
}
#else
/* An empty translation unit is not valid ISO C. */
typedef int mx_tests_no_tsan;
#endif
