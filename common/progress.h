/* Progress lines on stderr for long operations on large models (compile, .mxm write and load,
 * `mixrt gen`): one line per stage and, for stages that move bytes, throttled lines with the
 * bytes done and the percentage. Off unless a program turns it on (the command-line tools do
 * when stderr is a terminal or --progress is given), so library users and tests see nothing. */
#ifndef MIXRT_COMMON_PROGRESS_H
#define MIXRT_COMMON_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

/* Turns the progress lines on or off for the whole process. */
void mx__progress_enable(bool on);
bool mx__progress_enabled(void);

/* The tools' rule: on when `forced` (--progress) or when stderr is a terminal. */
void mx__progress_enable_for_cli(bool forced);

/* Announces a stage ("compile: import ONNX") with the seconds since the lines were turned on. */
void mx__progress_stage(const char *stage);

/* Bytes done of total in the current stage: printed at most about twice a second, and always
 * when done == total. */
void mx__progress_bytes(const char *stage, uint64_t done, uint64_t total);

#endif /* MIXRT_COMMON_PROGRESS_H */
