/* Progress lines on stderr (see progress.h). Single-threaded by design: only the thread that
 * drives a compile, write or load reports; the switch is atomic so reading it anywhere is safe. */
#include "common/progress.h"

#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static atomic_bool progress_on;
static double started;    /* seconds, monotonic, when the lines were turned on */
static double last_print; /* of the last bytes line */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mx__progress_enable(bool on) {
  atomic_store(&progress_on, on);
  started = now_seconds();
  last_print = 0;
}

bool mx__progress_enabled(void) { return atomic_load(&progress_on); }

void mx__progress_enable_for_cli(bool forced) { mx__progress_enable(forced || isatty(STDERR_FILENO)); }

void mx__progress_stage(const char *stage) {
  if (!mx__progress_enabled()) return;
  double t = now_seconds();
  fprintf(stderr, "mixrt: [%6.1f s] %s\n", t - started, stage);
  fflush(stderr);
  last_print = t;
}

void mx__progress_bytes(const char *stage, uint64_t done, uint64_t total) {
  if (!mx__progress_enabled()) return;
  double t = now_seconds();
  if (done < total && t - last_print < 0.5) return;
  last_print = t;
  double pct = total ? 100.0 * (double)done / (double)total : 100.0;
  fprintf(stderr, "mixrt: [%6.1f s] %s: %.1f / %.1f MiB (%.0f%%)\n", t - started, stage,
          (double)done / 1048576.0, (double)total / 1048576.0, pct);
  fflush(stderr);
}
