/* The small compiled block of the .mxm file tests (see mxm_block.h). */
#include "mxm_block.h"

#include <criterion/criterion.h>

#include "block.h"
#include "static_exec/static_exec_impl.h"

mx_static_plan *st_small_block_plan(void) {
  mxt_block_config cfg = mxt_block_default();
  cfg.seq = 4;
  cfg.hidden = 16;
  cfg.ffn = 32;
  mx_graph *g;
  cr_assert_eq(mxt_block_build(&cfg, &g), MX_OK);
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  return p;
}

void st_save_small_block(const char *path, bool external) {
  mx_static_plan *p = st_small_block_plan();
  mx_mxm_save_options so = {.external_weights = external};
  mx_error err;
  cr_assert_eq(mx__mxm_save(p, path, &so, &err), MX_OK, "%s", err.message);
  mx__static_plan_destroy(p);
}
