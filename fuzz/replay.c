/* fuzz_replay TARGET FILE...: runs files through one fuzz harness without libFuzzer, one after
 * the other in one process (to reproduce a finding under a debugger or with extra logging), and
 * prints each file's name before running it. Exit status 0 when every file ran; a finding
 * aborts like it does under libFuzzer. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

static unsigned char *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
      free(buf);
      buf = NULL;
    }
  }
  if (f) fclose(f);
  *size = n > 0 ? (size_t)n : 0;
  return buf;
}

int main(int argc, char **argv) {
  const mxf_target *t = argc >= 2 ? mxf_target_find(argv[1]) : NULL;
  if (!t) {
    fprintf(stderr, "usage: fuzz_replay TARGET FILE...   (TARGET:");
    for (const mxf_target *k = mxf_targets; k->name; k++) fprintf(stderr, " %s", k->name);
    fprintf(stderr, ")\n");
    return 2;
  }
  int rc = 0;
  for (int i = 2; i < argc; i++) {
    size_t size;
    unsigned char *data = slurp(argv[i], &size);
    if (!data) {
      fprintf(stderr, "fuzz_replay: cannot read %s\n", argv[i]);
      rc = 1;
      continue;
    }
    printf("%s\n", argv[i]);
    fflush(stdout);
    t->fn(data, size);
    free(data);
  }
  mxf_release();
  return rc;
}
