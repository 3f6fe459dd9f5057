/* Sanitizer builds: every report fails the test that caused it.
 *
 * The test framework runs every test in a worker process and reports the result to the runner
 * before the worker exits, so what a sanitizer only reports at exit (or only counts towards the
 * exit status) comes after the verdict: it is printed, but the test still passes and the suite
 * still exits 0. Two cases need help; the others already end the worker at once (AddressSanitizer
 * errors abort, UndefinedBehaviorSanitizer aborts because the build uses
 * -fno-sanitize-recover), which the framework reports as a crash.
 *
 * Leaks (AddressSanitizer builds). Every test body is started through
 * criterion_internal_test_main (the framework's trampoline, called from each test's generated
 * wrapper); this file defines that symbol in the test executable, which takes precedence over
 * the library's, and calls the library's version with a body that runs the test and then a
 * recoverable leak check inside the test. A leak therefore fails the test that made it, with
 * LeakSanitizer's report (allocation stacks) above the failure. The check runs before the
 * test's fini hook; objects a suite keeps in globals are still reachable then and are not
 * reported. A test that fails an assertion leaves the body early and is not checked (it has
 * failed already).
 *
 * Data races (ThreadSanitizer builds). The default options make ThreadSanitizer stop the
 * process at its first report (halt_on_error), so the worker dies in the middle of the test,
 * which fails it; TSAN_OPTIONS set by hand still win.
 *
 * Every test executable links this file (tests/CMakeLists.txt adds tests/support/ to each), so
 * this covers every suite. Other builds compile nothing. */
#if defined(__SANITIZE_THREAD__)
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "halt_on_error=1"; }
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MIXRT_TESTS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MIXRT_TESTS_ASAN 1
#endif

#if defined(MIXRT_TESTS_ASAN)
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <sanitizer/lsan_interface.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*test_main_fn)(void (*fn)(void));

static void (*test_body)(void); /* the body criterion_internal_test_main was given */

static void body_then_leak_check(void) {
  test_body();
  if (__lsan_do_recoverable_leak_check() != 0)
    cr_assert_fail("host memory leaked during the test (LeakSanitizer report above)");
}

void criterion_internal_test_main(void (*fn)(void)) {
  static test_main_fn next;
  if (!next) next = (test_main_fn)dlsym(RTLD_NEXT, "criterion_internal_test_main");
  if (!next) {
    fprintf(stderr, "leak check: criterion_internal_test_main not found in the test library\n");
    abort();
  }
  test_body = fn;
  next(body_then_leak_check);
}
#else
/* An empty translation unit is not valid ISO C. */
typedef int mx_tests_no_sanitizer;
#endif
