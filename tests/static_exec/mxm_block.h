/* The small compiled block the .mxm file tests save and load (Criterion helpers: they fail the
 * calling test on any error, so call them from the test's own thread). */
#ifndef MIXRT_TESTS_STATIC_EXEC_MXM_BLOCK_H
#define MIXRT_TESTS_STATIC_EXEC_MXM_BLOCK_H

#include <stdbool.h>

#include "static_exec/static_exec.h"

/* The transformer block of block.h at seq 4, hidden 16, ffn 32, compiled to a static plan; the
 * caller destroys it. */
mx_static_plan *st_small_block_plan(void);
/* st_small_block_plan saved to path, weights inline (external: in a side file beside it). */
void st_save_small_block(const char *path, bool external);

#endif
