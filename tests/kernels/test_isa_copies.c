/* The kernels gcc compiles three times (AVX-512, AVX2 and baseline x86-64 copies, picked at load
 * time: MX_KHOT in kernels/kmath.h) give the same bits whichever copy runs, so a model
 * computes the same outputs on every x86-64 machine. kernels_isa_digest (isa_digest.c) hashes
 * their outputs on seeded inputs; this runs it on this CPU and under qemu-x86_64 emulating an AVX2
 * CPU without AVX-512 (-cpu max) and a baseline one (-cpu qemu64), and expects the same hashes.
 *
 * qemu-user comes from scripts/deps.sh. Without it the test is skipped with a message (and fails
 * under CI=true, where deps.sh has run); so it is where the emulator cannot run even /bin/true. The sanitizer builds compile one copy only (kmath.h),
 * and an instrumented program does not run under the emulator: skipped there. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Runs `command` and keeps its whole output in out (NUL-terminated); returns its exit status,
 * or -1 when it could not run. */
static int capture(const char *command, char *out, size_t cap) {
  FILE *p = popen(command, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The text after the first line ("cpu LEVEL"), and LEVEL into level. */
static const char *digests(const char *out, char *level, size_t cap) {
  const char *nl = strchr(out, '\n');
  cr_assert(nl && strncmp(out, "cpu ", 4) == 0, "unexpected output:\n%s", out);
  snprintf(level, cap, "%.*s", (int)(nl - out - 4), out + 4);
  return nl + 1;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZER_BUILD 1
#else
#define SANITIZER_BUILD 0
#endif

Test(isa_copies, every_copy_rounds_alike) {
  if (SANITIZER_BUILD)
    cr_skip_test("sanitizer build: one copy of each kernel, and no emulation of an instrumented program");
  if (system("command -v qemu-x86_64 > /dev/null 2>&1") != 0) {
    const char *ci = getenv("CI");
    cr_assert(!(ci && strcmp(ci, "true") == 0), "qemu-x86_64 is missing: scripts/deps.sh installs qemu-user");
    fprintf(
        stderr,
        "\n*** isa_copies SKIPPED: qemu-x86_64 is not installed (scripts/deps.sh installs qemu-user)\n\n");
    cr_skip_test("qemu-x86_64 is not installed");
  }
  /* An environment that forbids the emulator (seccomp, no exec of foreign loaders) is not the
   * kernels' fault: skipped, loudly. */
  if (system("qemu-x86_64 -cpu qemu64 /bin/true > /dev/null 2>&1") != 0) {
    fprintf(stderr, "\n*** isa_copies SKIPPED: qemu-x86_64 cannot run /bin/true here\n\n");
    cr_skip_test("qemu-x86_64 cannot run programs here");
  }
  /* One OpenBLAS thread keeps its pool from spinning. The Conv cases' sgemm calls take integer
   * inputs (exact in any kernel), but OpenBLAS's kernel must exist on the emulated CPU: an
   * OPENBLAS_CORETYPE of the environment (Haswell, say) would be SIGILL under qemu64, so every
   * run gets the SSE3 kernels. */
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  static char native[1 << 14], avx2[1 << 14], base[1 << 14];
  cr_assert_eq(capture(MIXRT_ISA_DIGEST, native, sizeof native), 0, "%s", native);
  cr_assert_eq(capture("qemu-x86_64 -cpu max " MIXRT_ISA_DIGEST " 2>/dev/null", avx2, sizeof avx2), 0, "%s",
               avx2);
  cr_assert_eq(capture("qemu-x86_64 -cpu qemu64 " MIXRT_ISA_DIGEST " 2>/dev/null", base, sizeof base), 0,
               "%s", base);
  char ln[32], la[32], lb[32];
  const char *dn = digests(native, ln, sizeof ln), *da = digests(avx2, la, sizeof la);
  const char *db = digests(base, lb, sizeof lb);
  cr_assert_str_eq(lb, "baseline", "qemu64 is a baseline x86-64 CPU");
  cr_assert(strcmp(ln, "baseline") != 0 || strcmp(la, "baseline") != 0,
            "no run had a vector copy (this CPU: %s, emulated max: %s)", ln, la);
  cr_assert(strstr(dn, "matmul_1x256x256 ") && strstr(dn, "attention_decode_") &&
                strstr(dn, "conv_depthwise_") && strstr(dn, "maxpool_"),
            "cases missing:\n%s", dn);
  cr_assert_str_eq(da, dn, "%s (emulated) and %s (this CPU) differ:\n%s\n---\n%s", la, ln, da, dn);
  cr_assert_str_eq(db, dn, "%s (emulated) and %s (this CPU) differ:\n%s\n---\n%s", lb, ln, db, dn);
}
