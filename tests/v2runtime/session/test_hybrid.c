/* Hybrid execution through the session API equals the reference interpreter. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

static void check_encoder(uint32_t streams, mx_executor_kind ex, int64_t min_ops) {
  mx_session *s = mxs_new_session(streams, ex, min_ops);
  mx_graph *g, *ref;
  mx_error err;
  mx_encoder_config cfg;
  mx_encoder_config_default(&cfg);
  cfg.layers = 2;
  cr_assert_eq(mx_model_encoder(&cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_model_encoder(&cfg, &ref, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  for (int step = 0; step < 4; step++) {
    int64_t b = 1 + step % 2, q = 3 + 5 * step;
    mx_tensor x;
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 3, (int64_t[]){b, q, 64}, 10 + step, &x), MX_OK);
    mx_tensor got = {0}, want = {0};
    cr_assert_eq(mx_session_run(s, &x, 1, &got, 1), MX_OK, "step %d: %s", step, mx_session_last_error(s));
    cr_assert_eq(mx_reference_run(ref, &x, 1, &want, 1, &err), MX_OK, "%s", err.message);
    char why[256];
    cr_assert(mxs_same(&got, &want, why, sizeof why), "step %d: %s", step, why);
    mx_tensor_release(&got);
    mx_tensor_release(&want);
    mx_tensor_release(&x);
  }
  mx_graph_destroy(ref);
  mx_session_destroy(s);
}

Test(hybrid, encoder_sequential) { check_encoder(1, MX_EXECUTOR_SEQUENTIAL, 4); }
Test(hybrid, encoder_topological_2_streams) { check_encoder(2, MX_EXECUTOR_TOPOLOGICAL, 4); }
Test(hybrid, encoder_multi_thread_4_streams) { check_encoder(4, MX_EXECUTOR_MULTI_THREAD, 4); }
Test(hybrid, encoder_all_dynamic) { check_encoder(1, MX_EXECUTOR_SEQUENTIAL, -1); }
