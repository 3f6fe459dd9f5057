/* Partitions on several streams: independent clusters of the root graph run on different step
 * streams with events on the edges between them; results equal the reference whatever the
 * stream count and executor, over many steps. */
#include <criterion/criterion.h>
#include <string.h>

#include "v2runtime/session/session_support.h"
#include "v2runtime/session_impl.h"

/* Built in this order, so the stable partitioning gives three partitions:
 *   A: y [8, 8] -> MatMul(W) -> Relu -> ReduceSum -> sa   (static: every shape concrete)
 *   B: x [n]    -> Exp -> ReduceSum -> sb                 (dynamic: symbolic n)
 *   C: out = (sa + sb) * 2                                (static, reads A and B)
 * A and B are independent (two streams); C continues A's stream and waits for B's event. */
static mx_graph *two_branches(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("branches", &g), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x, y, w, a1, a2, sa, b1, sb, out;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &(mx_shape){1, {n}}, &x), MX_OK);
  cr_assert_eq(mx_graph_add_input(g, "y", MX_FLOAT32, &(mx_shape){2, {8, 8}}, &y), MX_OK);
  float wd[64];
  for (int i = 0; i < 64; i++) wd[i] = (float)((i * 7) % 11) / 11.0f - 0.4f;
  mx_tensor wt = {.dtype = MX_FLOAT32, .rank = 2, .dims = {8, 8}, .data = wd};
  cr_assert_eq(mx_graph_add_constant(g, "w", &wt, &w), MX_OK);
  mx_attr keep0 = mx_attr_int("keepdims", 0);
  cr_assert_eq(mx_graph_add_op(g, "MatMul", (mx_value_id[]){y, w}, 2, NULL, 0, &a1), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &a1, 1, NULL, 0, &a2), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "ReduceSum", &a2, 1, &keep0, 1, &sa), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Exp", &x, 1, NULL, 0, &b1), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "ReduceSum", &b1, 1, &keep0, 1, &sb), MX_OK);
  mx_value_id sum, two;
  float twov = 2.0f;
  mx_tensor tt = {.dtype = MX_FLOAT32, .rank = 0, .data = &twov};
  cr_assert_eq(mx_graph_add_constant(g, "two", &tt, &two), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Add", (mx_value_id[]){sa, sb}, 2, NULL, 0, &sum), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Mul", (mx_value_id[]){sum, two}, 2, NULL, 0, &out), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, sa), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, sb), MX_OK);
  return g;
}

static void run(uint32_t streams, mx_executor_kind ex) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.streams = streams;
  o.executor = ex;
  o.static_min_ops = 0;
  o.stable_partition = true;
  o.passes = "none"; /* the partitions of the graph as built (fusion would merge MatMul and Relu) */
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  mx_graph *ref = two_branches();
  cr_assert_eq(mx_session_load_graph(s, two_branches()), MX_OK, "%s", mx_session_last_error(s));
  const mx_program *p = s->prog;
  cr_assert_eq(p->static_calls, 2);
  cr_assert_eq(p->dynamic_calls, 1);
  if (streams > 1) {
    cr_assert_neq(p->used_streams, 1u, "independent partitions spread over streams");
    size_t waits = 0;
    for (size_t c = 0; c < p->n_calls; c++) waits += p->calls[c].n_waits;
    cr_assert_eq(waits, 1, "the joining partition waits for the other stream once");
  } else {
    cr_assert_eq(p->used_streams, 1u);
  }
  for (int step = 0; step < 40; step++) {
    mx_tensor in[2], got[3], want[3];
    memset(got, 0, sizeof got);
    memset(want, 0, sizeof want);
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 1, (int64_t[]){1 + step * 3}, step, &in[0]), MX_OK);
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 2, (int64_t[]){8, 8}, 1000 + step, &in[1]), MX_OK);
    cr_assert_eq(mx_session_run(s, in, 2, got, 3), MX_OK, "%s", mx_session_last_error(s));
    cr_assert_eq(mx_reference_run(ref, in, 2, want, 3, &err), MX_OK, "%s", err.message);
    for (int k = 0; k < 3; k++) {
      char why[256];
      cr_assert(mxs_same(&got[k], &want[k], why, sizeof why), "step %d output %d: %s", step, k, why);
      mx_tensor_release(&got[k]);
      mx_tensor_release(&want[k]);
    }
    mx_tensor_release(&in[0]);
    mx_tensor_release(&in[1]);
  }
  mx_graph_destroy(ref);
  mx_session_destroy(s);
}

Test(streams, one_stream) { run(1, MX_EXECUTOR_SEQUENTIAL); }
Test(streams, two_streams_sequential) { run(2, MX_EXECUTOR_SEQUENTIAL); }
Test(streams, two_streams_topological) { run(2, MX_EXECUTOR_TOPOLOGICAL); }
Test(streams, four_streams_multi_thread) { run(4, MX_EXECUTOR_MULTI_THREAD); }
