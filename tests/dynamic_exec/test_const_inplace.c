/* Constants of the dynamic executor on host-memory devices: kernels read a large constant in the
 * graph's own bytes (no device block, no copy), while a checking device gets its own copy; either
 * way the bytes the executor reads are pinned (a holder can no longer take them over) and the
 * outputs equal the reference interpreter's. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "dynamic_exec/dynamic_exec_impl.h"
#include "graph/ir.h"
#include "support_dyn.h"

TestSuite(dyn_const_inplace);

/* x float32 [n, 64] -> MatMul by a [64, 64] weight (a stored constant) -> Relu. *w: the weight. */
static mx_graph *matmul_graph(mx_value_id *w) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("inplace", &g), MX_OK);
  mx_dim dims[2] = {mx_sym_named(mx_graph_symtab(g), "n"), 64};
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 2, dims);
  *w = dyn_weights(g, "w", 2, (int64_t[]){64, 64}, 0.5f, 7);
  cr_assert_not_null(g->values[*w].store, "a 16 KiB constant is stored outside the arena");
  mx_value_id y = dyn_op(g, "MatMul", (mx_value_id[]){x, *w}, 2, NULL, 0);
  y = dyn_op(g, "Relu", &y, 1, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

static void release_nothing(void *holder) { (void)holder; }

/* Creates an executor of g on dev, runs two batches against the reference and returns whether the
 * weight's device bytes were the graph's own. */
static bool weight_read_in_place(mx_graph *g, mx_value_id w, mx_device *dev) {
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  mx_dyn_plan *plan;
  mx_error err;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, &err), MX_OK, "%s", err.message);
  mx_dyn_exec *e;
  cr_assert_eq(mx__dyn_exec_create(dev, plan, NULL, NULL, 0, &e, &err), MX_OK, "%s", err.message);
  cr_assert_eq(e->g, g);
  const void *graph_bytes = g->values[w].data->data;
  bool in_place = e->vals[w].dev == graph_bytes;
  cr_expect(g->values[w].store->pinned, "the executor pins the bytes it reads");
  /* A holder offered the bytes now is refused: the executor reads them where they are. */
  static char other[64 * 64 * 4];
  cr_expect_not(mx__graph_const_rehome(g, w, other, sizeof other, other, release_nothing));
  cr_expect_eq(g->values[w].data->data, graph_bytes);
  for (int64_t batch = 1; batch <= 3; batch += 2) {
    mx_tensor in = dyn_random(MX_FLOAT32, 2, (int64_t[]){batch, 64}, 11 + (uint64_t)batch);
    mx_tensor out = {.placement = MX_HOST};
    cr_assert_eq(mx__dyn_exec_run(e, &in, 1, &out, 1, NULL), MX_OK, "%s", mx__dyn_exec_last_error(e));
    cr_expect_eq(dyn_compare_reference(g, &in, 1, &out, 1, 0.0, 0.0, "in place"), 0);
    mx_tensor_release(&in);
    mx_tensor_release(&out);
  }
  mx__dyn_exec_destroy(e);
  mx__dyn_plan_destroy(plan);
  return in_place;
}

Test(dyn_const_inplace, host_memory_devices_read_the_graph_bytes) {
  mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (size_t k = 0; k < 2; k++) {
    mx_value_id w;
    mx_graph *g = matmul_graph(&w);
    mx_device *dev = dyn_device(kinds[k], false);
    cr_expect(weight_read_in_place(g, w, dev), "device kind %d: the weight is read in place", (int)kinds[k]);
    mx_device_destroy(dev);
    mx_graph_destroy(g);
  }
  dyn_check_leaks();
}

Test(dyn_const_inplace, a_checking_device_gets_a_copy) {
  mx_value_id w;
  mx_graph *g = matmul_graph(&w);
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  cr_expect_not(weight_read_in_place(g, w, dev), "checking mode: every buffer a kernel reads is the device's");
  mx_device_destroy(dev);
  mx_graph_destroy(g);
  dyn_check_leaks();
}
