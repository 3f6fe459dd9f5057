/* The dynamic executor's step mechanics: steady state (no device allocation, every shape and
 * task block reused), launch-metadata cache across changing shapes, output delivery (caller
 * buffers, hand-over of device blocks, empty results, outputs written in place into caller
 * buffers), the per-op step functions, shared allocators and caller streams, host kernels,
 * random DAGs over several streams, and failures: bad inputs, kernel failures (real and
 * injected), launch and allocation faults, each leaving the executor usable for the next step. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/models.h"
#include "mixrt/reference.h"
#include "support_dyn.h"

/* --- helpers ---------------------------------------------------------------------------------- */

/* x float32 [n] -> a chain of `len` unary/binary elementwise ops. */
static mx_graph *chain(int len) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("chain", &g), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 1, &n);
  float half = 0.5f;
  mx_tensor ht = {.dtype = MX_FLOAT32, .rank = 0, .data = &half};
  mx_value_id c;
  cr_assert_eq(mx_graph_add_constant(g, "half", &ht, &c), MX_OK);
  mx_value_id v = x;
  for (int i = 0; i < len; i++) {
    if (i % 3 == 0)
      v = dyn_op(g, "Mul", (mx_value_id[]){v, c}, 2, NULL, 0);
    else if (i % 3 == 1)
      v = dyn_op(g, "Add", (mx_value_id[]){v, x}, 2, NULL, 0);
    else
      v = dyn_op(g, "Tanh", &v, 1, NULL, 0);
  }
  cr_assert_eq(mx_graph_add_output(g, v), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

typedef struct rig {
  mx_device *dev;
  mx_dyn_plan *plan;
  mx_dyn_exec *e;
} rig;

static rig make_rig(mx_graph *g, mx_device *dev, uint32_t streams) {
  rig r = {.dev = dev};
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.max_streams = streams;
  mx_error err;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &r.plan, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx__dyn_exec_create(dev, r.plan, NULL, NULL, 0, &r.e, &err), MX_OK, "%s", err.message);
  return r;
}

static void free_rig(rig *r) {
  mx__dyn_exec_destroy(r->e);
  mx__dyn_plan_destroy(r->plan);
  mx_device_destroy(r->dev);
}

/* Runs one step with host outputs and compares with the reference; returns mismatches. */
static int step_ok(mx_graph *g, mx_dyn_exec *e, const mx_tensor *in, size_t n_in, const char *what) {
  size_t n_out = mx_graph_output_count(g);
  mx_tensor out[8];
  cr_assert(n_out <= 8);
  for (size_t k = 0; k < n_out; k++) out[k] = (mx_tensor){.placement = MX_HOST};
  cr_assert_eq(mx__dyn_exec_run(e, in, n_in, out, n_out, NULL), MX_OK, "%s: %s", what,
               mx__dyn_exec_last_error(e));
  int bad = dyn_compare_reference(g, in, n_in, out, n_out, 1e-5, 1e-6, what);
  for (size_t k = 0; k < n_out; k++) mx_tensor_release(&out[k]);
  return bad;
}

static mx_caching_stats alloc_stats(mx_dyn_exec *e) {
  mx_caching_stats st;
  mx__caching_stats_get(mx__dyn_exec_allocator(e), &st);
  return st;
}

static mx_dyn_exec_stats exec_stats(mx_dyn_exec *e) {
  mx_dyn_exec_stats st;
  mx__dyn_exec_stats_get(e, &st);
  return st;
}

/* --- steady state ----------------------------------------------------------------------------- */

Test(dyn_exec, steady_state_recomputes_nothing) {
  const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (int k = 0; k < 2; k++) {
    mx_graph *g = chain(30);
    rig r = make_rig(g, dyn_device(kinds[k], true), 1);
    static const int64_t ns[] = {8, 8, 8, 3, 3, 8, 8};
    for (size_t s = 0; s < sizeof ns / sizeof *ns; s++) {
      mx_tensor x = dyn_random(MX_FLOAT32, 1, &ns[s], s);
      mx_dyn_exec_stats before = exec_stats(r.e);
      mx_caching_stats abefore = alloc_stats(r.e);
      cr_expect_eq(step_ok(g, r.e, &x, 1, "chain"), 0);
      mx_dyn_exec_stats after = exec_stats(r.e);
      mx_caching_stats aafter = alloc_stats(r.e);
      uint64_t launches = after.launches - before.launches;
      cr_expect_eq(launches, 30);
      if (s == 1 || s == 2 || s == 4 || s == 6) {
        /* Same shapes as the previous step: nothing is evaluated or filled, nothing allocated. */
        cr_expect_eq(after.shape_evals - before.shape_evals, 0, "step %zu", s);
        cr_expect_eq(after.shape_reuses - before.shape_reuses, 30, "step %zu", s);
        cr_expect_eq(after.meta_hits - before.meta_hits, 30, "step %zu", s);
        cr_expect_eq(aafter.device_allocs, abefore.device_allocs, "step %zu allocated on the device", s);
      }
      if (s == 5) {
        /* Back to a shape seen two steps ago: evaluated again, task blocks still cached. */
        cr_expect_eq(after.shape_evals - before.shape_evals, 30);
        cr_expect_eq(after.meta_misses - before.meta_misses, 0);
      }
      mx_tensor_release(&x);
    }
    cr_expect_eq(alloc_stats(r.e).bytes_in_use, 0);
    free_rig(&r);
    mx_graph_destroy(g);
  }
  dyn_check_leaks();
}

/* --- outputs ---------------------------------------------------------------------------------- */

Test(dyn_exec, output_delivery) {
  mx_graph *g = chain(4);
  rig r = make_rig(g, dyn_device(MX_DEVICE_CPU, true), 1);
  int64_t n = 10;
  mx_tensor x = dyn_random(MX_FLOAT32, 1, &n, 5);
  mx_tensor ref;
  cr_assert_eq(mx_reference_run(g, &x, 1, &ref, 1, NULL), MX_OK);
  mx_stream *s0 = mx__dyn_exec_stream(r.e, 0);

  /* Caller host buffer. */
  float host[10];
  mx_tensor out = {.dtype = MX_FLOAT32, .rank = 1, .dims = {10}, .data = host, .placement = MX_HOST};
  cr_assert_eq(mx__dyn_exec_run(r.e, &x, 1, &out, 1, NULL), MX_OK, "%s", mx__dyn_exec_last_error(r.e));
  cr_expect(out.data == host);
  cr_expect_str_eq(out.name, mx_graph_value_name(g, mx_graph_output(g, 0)));
  cr_expect(mx_tensor_allclose(&out, &ref, 0, 0, NULL, 0));

  /* Caller device buffer, device input. */
  mx_tensor dx = dyn_to_device(r.e, &x);
  void *dbuf;
  cr_assert_eq(mx_device_alloc(r.dev, 40, 0, &dbuf), MX_OK);
  mx_tensor dout = {.dtype = MX_FLOAT32, .rank = 1, .dims = {10}, .data = dbuf, .placement = MX_DEVICE};
  cr_assert_eq(mx__dyn_exec_run(r.e, &dx, 1, &dout, 1, NULL), MX_OK, "%s", mx__dyn_exec_last_error(r.e));
  cr_assert_eq(mx_stream_synchronize(s0), MX_OK);
  mx_tensor back = dyn_to_host(r.dev, &dout);
  cr_expect(mx_tensor_allclose(&back, &ref, 0, 0, NULL, 0));
  mx_tensor_release(&back);

  /* A caller buffer of the wrong shape is refused, naming the output; the next step works. */
  mx_tensor wrong = {.dtype = MX_FLOAT32, .rank = 1, .dims = {9}, .data = host, .placement = MX_HOST};
  cr_expect_eq(mx__dyn_exec_run(r.e, &x, 1, &wrong, 1, NULL), MX_ERR_SHAPE);
  cr_expect(strstr(mx__dyn_exec_last_error(r.e), "output '"), "%s", mx__dyn_exec_last_error(r.e));
  cr_expect(strstr(mx__dyn_exec_last_error(r.e), "[10]"), "%s", mx__dyn_exec_last_error(r.e));

  /* Executor-allocated device output: the block is handed over. */
  mx_tensor hand = {.placement = MX_DEVICE};
  cr_assert_eq(mx__dyn_exec_run(r.e, &dx, 1, &hand, 1, NULL), MX_OK, "%s", mx__dyn_exec_last_error(r.e));
  cr_expect_eq(hand.rank, 1);
  cr_expect_eq(hand.dims[0], 10);
  cr_expect_eq(alloc_stats(r.e).blocks_in_use, 2, "the input and the handed-over output");
  cr_assert_eq(mx_stream_synchronize(s0), MX_OK);
  back = dyn_to_host(r.dev, &hand);
  cr_expect(mx_tensor_allclose(&back, &ref, 0, 0, NULL, 0));
  mx_tensor_release(&back);
  cr_assert_eq(mx__caching_free(mx__dyn_exec_allocator(r.e), hand.data, s0, NULL), MX_OK);
  cr_assert_eq(mx__caching_free(mx__dyn_exec_allocator(r.e), dx.data, s0, NULL), MX_OK);

  /* Empty results. */
  int64_t zero = 0;
  mx_tensor ex = dyn_random(MX_FLOAT32, 1, &zero, 1), eout = {.placement = MX_HOST};
  cr_assert_eq(mx__dyn_exec_run(r.e, &ex, 1, &eout, 1, NULL), MX_OK, "%s", mx__dyn_exec_last_error(r.e));
  cr_expect_eq(eout.rank, 1);
  cr_expect_eq(eout.dims[0], 0);
  mx_tensor_release(&eout);
  mx_tensor_release(&ex);

  cr_expect_eq(alloc_stats(r.e).bytes_in_use, 0);
  cr_assert_eq(mx_device_free(r.dev, dbuf), MX_OK);
  mx_tensor_release(&ref);
  mx_tensor_release(&x);
  free_rig(&r);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* x float32 [n] -> y0 = x * 0.5, y1 = Tanh(y0) (listed twice), y2 = y1 + x, x itself,
 * Identity(x) (an alias of the input) and Shape(x) (a host value): 7 outputs. */
static mx_graph *many_outputs(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("many_outputs", &g), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 1, &n);
  float half = 0.5f;
  mx_tensor ht = {.dtype = MX_FLOAT32, .rank = 0, .data = &half};
  mx_value_id c;
  cr_assert_eq(mx_graph_add_constant(g, "half", &ht, &c), MX_OK);
  mx_value_id y0 = dyn_op(g, "Mul", (mx_value_id[]){x, c}, 2, NULL, 0);
  mx_value_id y1 = dyn_op(g, "Tanh", &y0, 1, NULL, 0);
  mx_value_id y2 = dyn_op(g, "Add", (mx_value_id[]){y1, x}, 2, NULL, 0);
  mx_value_id id = dyn_op(g, "Identity", &x, 1, NULL, 0);
  mx_value_id shape = dyn_op(g, "Shape", &x, 1, NULL, 0);
  const mx_value_id outs[] = {y0, y1, y1, y2, x, id, shape};
  for (size_t k = 0; k < sizeof outs / sizeof *outs; k++)
    cr_assert_eq(mx_graph_add_output(g, outs[k]), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

enum { N_MANY = 7 };

/* Device buffers (mx_device_alloc) of the reference results' dtypes and shapes. */
static void device_outputs(mx_device *dev, const mx_tensor *ref, mx_tensor *out) {
  for (size_t k = 0; k < N_MANY; k++) {
    size_t nb;
    cr_assert(mx_tensor_nbytes(&ref[k], &nb));
    out[k] = ref[k];
    out[k].name = NULL;
    out[k].placement = MX_DEVICE;
    cr_assert_eq(mx_device_alloc(dev, nb, 64, &out[k].data), MX_OK);
  }
}

static void expect_outputs(mx_device *dev, const mx_tensor *out, const mx_tensor *ref, const bool *check,
                           const char *what) {
  for (size_t k = 0; k < N_MANY; k++) {
    if (check && !check[k]) continue;
    mx_tensor back = dyn_to_host(dev, &out[k]);
    cr_expect(mx_tensor_allclose(&back, &ref[k], 0, 0, NULL, 0), "%s: output %zu differs", what, k);
    mx_tensor_release(&back);
  }
}

/* Outputs computed by device ops are written straight into the caller's device buffers; an
 * input, an alias of one, a host value and a value listed twice (its second buffer) are copied. */
Test(dyn_exec, outputs_written_in_place) {
  const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (int dk = 0; dk < 2; dk++) {
    mx_graph *g = many_outputs();
    rig r = make_rig(g, dyn_device(kinds[dk], true), 2);
    int64_t n = 24;
    mx_tensor x = dyn_random(MX_FLOAT32, 1, &n, 11);
    mx_tensor ref[N_MANY];
    cr_assert_eq(mx_reference_run(g, &x, 1, ref, N_MANY, NULL), MX_OK);
    mx_tensor dx = dyn_to_device(r.e, &x);
    mx_tensor out[N_MANY];
    device_outputs(r.dev, ref, out);
    void *given[N_MANY];
    for (size_t k = 0; k < N_MANY; k++) given[k] = out[k].data;
    mx_stream *s0 = mx__dyn_exec_stream(r.e, 0);
    for (int step = 0; step < 3; step++) {
      mx_dyn_exec_stats before = exec_stats(r.e);
      cr_assert_eq(mx__dyn_exec_run(r.e, step == 1 ? &x : &dx, 1, out, N_MANY, NULL), MX_OK, "%s",
                   mx__dyn_exec_last_error(r.e));
      mx_dyn_exec_stats after = exec_stats(r.e);
      for (size_t k = 0; k < N_MANY; k++) cr_expect(out[k].data == given[k], "output %zu moved", k);
      cr_expect_eq(after.outputs_in_place - before.outputs_in_place, 3, "y0, y1 (first) and y2 in place");
      cr_expect_eq(after.output_copies - before.output_copies, 4,
                   "y1 (second), x, Identity(x), Shape(x) copied");
      cr_assert_eq(mx_stream_synchronize(s0), MX_OK);
      expect_outputs(r.dev, out, ref, NULL, "in place");
    }
    cr_expect_eq(alloc_stats(r.e).blocks_in_use, 1, "only the device input is live");

    /* A buffer overlapping an input is not written before the inputs are read: y0's buffer is
     * the input itself, yet y2 (which reads x after y0 is computed) comes out right. */
    mx_tensor xin = dyn_to_device(r.e, &x);
    mx_tensor over[N_MANY];
    memcpy(over, out, sizeof over);
    over[0].data = xin.data;
    mx_dyn_exec_stats before = exec_stats(r.e);
    cr_assert_eq(mx__dyn_exec_run(r.e, &xin, 1, over, N_MANY, NULL), MX_OK, "%s",
                 mx__dyn_exec_last_error(r.e));
    cr_expect_eq(exec_stats(r.e).outputs_in_place - before.outputs_in_place, 2, "y1 and y2 only");
    cr_assert_eq(mx_stream_synchronize(s0), MX_OK);
    const bool check[N_MANY] = {true, true, true, true, false, false, true}; /* x was overwritten by y0 */
    expect_outputs(r.dev, over, ref, check, "overlapping input");

    /* A buffer of another shape is not bound, and delivery refuses it as before. */
    mx_tensor wrong[N_MANY];
    memcpy(wrong, out, sizeof wrong);
    wrong[3].dims[0] = n - 1;
    cr_expect_eq(mx__dyn_exec_run(r.e, &dx, 1, wrong, N_MANY, NULL), MX_ERR_SHAPE);
    cr_expect(strstr(mx__dyn_exec_last_error(r.e), "the caller's buffer must be float32 [24]"), "%s",
              mx__dyn_exec_last_error(r.e));

    /* Binding needs a step and an existing output; an aborted step forgets its bindings. */
    cr_expect_eq(mx__dyn_bind_output(r.e, 0, &out[0]), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx__dyn_step_begin(r.e, &dx, 1, NULL), MX_OK, "%s", mx__dyn_exec_last_error(r.e));
    cr_expect_eq(mx__dyn_bind_output(r.e, N_MANY, &out[0]), MX_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(mx__dyn_exec_last_error(r.e), "has 7 outputs"), "%s", mx__dyn_exec_last_error(r.e));
    cr_expect_eq(mx__dyn_bind_output(r.e, 0, &out[0]), MX_OK);
    cr_expect_eq(mx__dyn_bind_output(r.e, 1, NULL), MX_OK, "NULL: no binding");
    mx__dyn_step_abort(r.e);
    mx_tensor host_out[N_MANY];
    for (size_t k = 0; k < N_MANY; k++) host_out[k] = (mx_tensor){.placement = MX_HOST};
    before = exec_stats(r.e);
    cr_assert_eq(mx__dyn_exec_run(r.e, &dx, 1, host_out, N_MANY, NULL), MX_OK, "%s",
                 mx__dyn_exec_last_error(r.e));
    cr_expect_eq(exec_stats(r.e).outputs_in_place, before.outputs_in_place);
    for (size_t k = 0; k < N_MANY; k++) {
      cr_expect(mx_tensor_allclose(&host_out[k], &ref[k], 0, 0, NULL, 0), "after abort: output %zu", k);
      mx_tensor_release(&host_out[k]);
    }

    cr_assert_eq(mx__caching_free(mx__dyn_exec_allocator(r.e), dx.data, s0, NULL), MX_OK);
    cr_assert_eq(mx__caching_free(mx__dyn_exec_allocator(r.e), xin.data, s0, NULL), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s0), MX_OK);
    cr_expect_eq(alloc_stats(r.e).bytes_in_use, 0);
    for (size_t k = 0; k < N_MANY; k++) {
      cr_assert_eq(mx_device_free(r.dev, given[k]), MX_OK);
      mx_tensor_release(&ref[k]);
    }
    mx_tensor_release(&x);
    free_rig(&r);
    mx_graph_destroy(g);
  }
  dyn_check_leaks();
}

/* --- per-op steps, shared allocator, caller stream -------------------------------------------- */

Test(dyn_exec, per_op_steps_shared_allocator_and_caller_stream) {
  mx_encoder_config cfg;
  mx_graph *g = dyn_default_encoder(&cfg);
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_caching_allocator *a;
  cr_assert_eq(mx__caching_allocator_create(dev, &a, NULL), MX_OK);
  mx_stream *s[3];
  for (int i = 0; i < 3; i++) cr_assert_eq(mx_stream_create(dev, 0, &s[i]), MX_OK);
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.max_streams = 2;
  mx_dyn_plan *plan;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, NULL), MX_OK);
  mx_dyn_exec *e1, *e2;
  cr_assert_eq(mx__dyn_exec_create(dev, plan, a, s, 2, &e1, NULL), MX_OK);
  cr_assert_eq(mx__dyn_exec_create(dev, plan, a, s + 1, 2, &e2, NULL), MX_OK);
  cr_expect(mx__dyn_exec_allocator(e1) == a && mx__dyn_exec_allocator(e2) == a);
  for (int step = 0; step < 3; step++) {
    mx_tensor x = dyn_random(MX_FLOAT32, 3, (int64_t[]){2, 3 + step, cfg.hidden}, 7 + (uint64_t)step);
    /* e1 through the per-op steps, with a caller stream of its own. */
    mx_tensor out1 = {.placement = MX_HOST};
    cr_assert_eq(mx__dyn_step_begin(e1, &x, 1, s[2]), MX_OK, "%s", mx__dyn_exec_last_error(e1));
    for (size_t i = 0; i < mx__dyn_op_count(plan); i++) {
      cr_assert_eq(mx__dyn_op_prepare(e1, i), MX_OK, "%s", mx__dyn_exec_last_error(e1));
      cr_assert_eq(mx__dyn_op_launch(e1, i), MX_OK, "%s", mx__dyn_exec_last_error(e1));
      if (mx__dyn_op_needs_sync(plan, i)) cr_assert_eq(mx__dyn_op_sync_shape(e1, i), MX_OK);
      mx__dyn_op_free_after(e1, i);
    }
    cr_assert_eq(mx__dyn_step_end(e1, &out1, 1), MX_OK, "%s", mx__dyn_exec_last_error(e1));
    /* e2 with mx__dyn_exec_run on the same allocator, caller stream = its first stream. */
    mx_tensor out2 = {.placement = MX_HOST};
    cr_assert_eq(mx__dyn_exec_run(e2, &x, 1, &out2, 1, s[1]), MX_OK, "%s", mx__dyn_exec_last_error(e2));
    cr_expect(mx_tensor_allclose(&out1, &out2, 0, 0, NULL, 0));
    cr_expect_eq(dyn_compare_reference(g, &x, 1, &out1, 1, 1e-4, 1e-5, "per-op steps"), 0);
    mx_tensor_release(&out1);
    mx_tensor_release(&out2);
    mx_tensor_release(&x);
  }
  mx_caching_stats st;
  mx__caching_stats_get(a, &st);
  cr_expect_eq(st.bytes_in_use, 0);
  mx__dyn_exec_destroy(e1);
  mx__dyn_exec_destroy(e2);
  mx__dyn_exec_destroy(NULL);
  mx__dyn_plan_destroy(plan);
  mx__dyn_plan_destroy(NULL);
  for (int i = 0; i < 3; i++) {
    mx__caching_forget_stream(a, s[i]);
    mx_stream_destroy(s[i]);
  }
  mx__caching_allocator_destroy(a);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- host kernels ----------------------------------------------------------------------------- */

/* With evaluation off, shape arithmetic runs through the CPU kernels on the host thread; with
 * aliasing off, Reshapes copy. Same results. */
Test(dyn_exec, host_kernels_and_copies) {
  mx_encoder_config cfg;
  mx_graph *g = dyn_default_encoder(&cfg);
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.eval_ops = false;
  o.alias_ops = false;
  o.max_streams = 2;
  mx_dyn_plan *plan;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, NULL), MX_OK);
  mx_dyn_plan_info info;
  mx__dyn_plan_info_get(plan, &info);
  cr_expect_gt(info.host_ops, 0);
  cr_expect_eq(info.eval_ops, 0);
  cr_expect_eq(info.alias_ops, 0);
  mx_dyn_exec *e;
  cr_assert_eq(mx__dyn_exec_create(dev, plan, NULL, NULL, 0, &e, NULL), MX_OK);
  static const int64_t bs[][2] = {{1, 4}, {2, 9}, {2, 9}};
  for (int step = 0; step < 3; step++) {
    mx_tensor x =
        dyn_random(MX_FLOAT32, 3, (int64_t[]){bs[step][0], bs[step][1], cfg.hidden}, 3 + (uint64_t)step);
    cr_expect_eq(step_ok(g, e, &x, 1, "host kernels"), 0);
    mx_tensor_release(&x);
  }
  cr_expect_gt(exec_stats(e).host_runs, 0);
  mx__dyn_exec_destroy(e);
  mx__dyn_plan_destroy(plan);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* A Transpose moving only dims of size 1 (here [b, 1, 4, 8] -> [b, 4, 1, 8] with symbolic b)
 * shares its input's buffer like a Reshape; one moving b past the 4 does not. Both equal the
 * reference. */
Test(dyn_exec, transpose_of_unit_dims_shares_its_input) {
  static const int64_t perms[2][4] = {{0, 2, 1, 3}, {2, 1, 0, 3}};
  for (int c = 0; c < 2; c++) {
    mx_graph *g;
    cr_assert_eq(mx_graph_create("unit_transpose", &g), MX_OK);
    mx_shape s = {4, {mx_sym_named(mx_graph_symtab(g), "b"), 1, 4, 8}};
    mx_value_id x, t, y;
    cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
    mx_attr perm = mx_attr_ints("perm", perms[c], 4);
    cr_assert_eq(mx_graph_add_op(g, "Transpose", &x, 1, &perm, 1, &t), MX_OK);
    cr_assert_eq(mx_graph_add_op(g, "Relu", &t, 1, NULL, 0, &y), MX_OK);
    cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
    cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
    rig r = make_rig(g, dyn_device(MX_DEVICE_CPU, true), 1);
    mx_dyn_plan_info info;
    mx__dyn_plan_info_get(r.plan, &info);
    cr_expect_eq(info.alias_ops, c == 0 ? 1u : 0u, "perm %d: %zu alias ops", c, info.alias_ops);
    for (int64_t b = 1; b <= 3; b += 2) {
      mx_tensor in = dyn_random(MX_FLOAT32, 4, (int64_t[]){b, 1, 4, 8}, 7 + (uint64_t)b);
      in.name = "x";
      cr_expect_eq(step_ok(g, r.e, &in, 1, "unit transpose"), 0);
      mx_tensor_release(&in);
    }
    free_rig(&r);
    mx_graph_destroy(g);
  }
  dyn_check_leaks();
}

/* --- random DAGs ------------------------------------------------------------------------------ */

/* n_ops elementwise ops, each reading one or two earlier values, over x [n]. */
static mx_graph *random_dag(uint64_t seed, int n_ops) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("dag", &g), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id vals[256];
  int nv = 0;
  vals[nv++] = dyn_input(g, "x", MX_FLOAT32, 1, &n);
  vals[nv++] = dyn_input(g, "y", MX_FLOAT32, 1, &n);
  static const char *un[] = {"Tanh", "Neg", "Sin"}, *bin[] = {"Add", "Mul", "Sub"};
  uint64_t rng = seed;
  for (int i = 0; i < n_ops && nv < 256; i++) {
    /* Mostly recent values, so chains and forks both appear. */
    int a = nv - 1 - (int)(dyn_rand(&rng) % (uint64_t)(nv < 6 ? nv : 6));
    int b = (int)(dyn_rand(&rng) % (uint64_t)nv);
    if (dyn_rand(&rng) % 3 == 0)
      vals[nv++] = dyn_op(g, un[dyn_rand(&rng) % 3], &vals[a], 1, NULL, 0);
    else
      vals[nv++] = dyn_op(g, bin[dyn_rand(&rng) % 3], (mx_value_id[]){vals[a], vals[b]}, 2, NULL, 0);
  }
  cr_assert_eq(mx_graph_add_output(g, vals[nv - 1]), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, vals[nv / 2]), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

Test(dyn_exec, random_dags_over_streams) {
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  for (uint64_t seed = 1; seed <= 12; seed++) {
    mx_graph *g = random_dag(seed, 60);
    mx_tensor steps[4];
    static const int64_t ns[] = {33, 1, 33, 0};
    for (int s = 0; s < 2; s++) {
      steps[2 * s] = dyn_random(MX_FLOAT32, 1, &ns[2 * s], seed * 10 + (uint64_t)s);
      steps[2 * s + 1] = dyn_random(MX_FLOAT32, 1, &ns[2 * s], seed * 20 + (uint64_t)s);
    }
    for (uint32_t streams = 1; streams <= 4; streams *= 2) {
      cr_expect_eq(dyn_run_steps(g, dev, streams, steps, 2, 2, 1e-5, 1e-6, "random dag"), 0, "seed %llu",
                   (unsigned long long)seed);
      mx_dyn_options o;
      mx__dyn_options_init(&o);
      o.max_streams = streams;
      mx_dyn_plan *plan;
      cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, NULL), MX_OK);
      mx_dyn_plan_info info;
      mx__dyn_plan_info_get(plan, &info);
      cr_expect_leq(info.streams, streams);
      cr_expect_leq(info.events, info.cross_edges);
      if (streams == 1) cr_expect_eq(info.cross_edges, 0);
      mx__dyn_plan_destroy(plan);
    }
    for (int i = 0; i < 4; i++) mx_tensor_release(&steps[i]);
    mx_graph_destroy(g);
  }
  mx_device_destroy(dev);
  dyn_check_leaks();
}

/* A fork of four independent chains joined at the end spreads over four streams; every
 * cross-stream edge costs a wait except the one already implied by earlier waits. */
Test(dyn_exec, fork_join_streams_and_events) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("fork", &g), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 1, &n);
  mx_value_id root = dyn_op(g, "Neg", &x, 1, NULL, 0);
  mx_value_id tails[4];
  for (int b = 0; b < 4; b++) {
    mx_value_id v = root;
    for (int i = 0; i < 5; i++) v = dyn_op(g, i % 2 ? "Tanh" : "Sin", &v, 1, NULL, 0);
    tails[b] = v;
  }
  mx_value_id s1 = dyn_op(g, "Add", (mx_value_id[]){tails[0], tails[1]}, 2, NULL, 0);
  mx_value_id s2 = dyn_op(g, "Add", (mx_value_id[]){tails[2], tails[3]}, 2, NULL, 0);
  mx_value_id y = dyn_op(g, "Add", (mx_value_id[]){s1, s2}, 2, NULL, 0);
  /* tails[3] is on another stream than y, but y's stream already waited (through s2) for it. */
  mx_value_id z = dyn_op(g, "Mul", (mx_value_id[]){y, tails[3]}, 2, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, z), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.max_streams = 4;
  mx_dyn_plan *plan;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, NULL), MX_OK);
  mx_dyn_plan_info info;
  mx__dyn_plan_info_get(plan, &info);
  cr_expect_eq(info.streams, 4);
  /* Three branches start on other streams than root's (3 waits), the joins need 3 more; the
   * final Mul's edge from the fourth branch is implied. */
  cr_expect_eq(info.events, 6, "%zu events", info.events);
  cr_expect_eq(info.cross_edges, 7, "%zu cross-stream edges", info.cross_edges);
  mx__dyn_plan_destroy(plan);
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  int64_t len = 100;
  mx_tensor in = dyn_random(MX_FLOAT32, 1, &len, 3);
  cr_expect_eq(dyn_run_steps(g, dev, 4, &in, 1, 1, 1e-5, 1e-6, "fork/join"), 0);
  mx_tensor_release(&in);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- failures --------------------------------------------------------------------------------- */

/* x float32 [batch, seq, 4], mask float32 [seq, seq] -> y = MatMul(mask, x) * w. */
static mx_graph *two_inputs(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("two_inputs", &g), MX_OK);
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim b = mx_sym_named(t, "batch"), s = mx_sym_named(t, "seq");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 3, (mx_dim[]){b, s, 4});
  mx_value_id m = dyn_input(g, "mask", MX_FLOAT32, 2, (mx_dim[]){s, s});
  mx_value_id w = dyn_weights(g, "w", 1, (int64_t[]){4}, 1.0f, 9);
  mx_value_id mm = dyn_op(g, "MatMul", (mx_value_id[]){m, x}, 2, NULL, 0);
  mx_value_id y = dyn_op(g, "Mul", (mx_value_id[]){mm, w}, 2, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  return g;
}

static void expect_error(mx_dyn_exec *e, const mx_tensor *in, size_t n, mx_status want, const char *text) {
  mx_tensor out = {.placement = MX_HOST};
  cr_expect_eq(mx__dyn_exec_run(e, in, n, &out, 1, NULL), want, "want %s: %s", mx_status_name(want),
               mx__dyn_exec_last_error(e));
  cr_expect(strstr(mx__dyn_exec_last_error(e), text), "'%s' not in '%s'", text, mx__dyn_exec_last_error(e));
  cr_expect_null(out.data);
  cr_expect_eq(alloc_stats(e).bytes_in_use, 0, "the failed step freed everything");
}

Test(dyn_exec, bad_inputs_leave_the_executor_usable) {
  mx_graph *g = two_inputs();
  rig r = make_rig(g, dyn_device(MX_DEVICE_CPU, true), 2);
  mx_tensor x = dyn_random(MX_FLOAT32, 3, (int64_t[]){2, 3, 4}, 1);
  mx_tensor m = dyn_random(MX_FLOAT32, 2, (int64_t[]){3, 3}, 2);
  mx_tensor good[2] = {x, m};
  cr_expect_eq(step_ok(g, r.e, good, 2, "good"), 0);

  expect_error(r.e, good, 1, MX_ERR_INVALID_ARGUMENT, "has 2 inputs, 1 given");
  mx_tensor bad[2] = {x, m};
  bad[0].dtype = MX_INT64;
  expect_error(r.e, bad, 2, MX_ERR_DTYPE, "input 'x': dtype int64 given, float32 expected");
  bad[0] = x;
  bad[0].rank = 2;
  expect_error(r.e, bad, 2, MX_ERR_SHAPE, "input 'x': rank 2 given, 3 expected");
  mx_tensor x5 = dyn_random(MX_FLOAT32, 3, (int64_t[]){2, 3, 5}, 1);
  bad[0] = x5;
  expect_error(r.e, bad, 2, MX_ERR_SHAPE, "input 'x': dim 2 is 5, 4 expected");
  mx_tensor m4 = dyn_random(MX_FLOAT32, 2, (int64_t[]){4, 4}, 2);
  bad[0] = x;
  bad[1] = m4;
  expect_error(r.e, bad, 2, MX_ERR_SHAPE, "input 'mask': dim 0 is 4, but symbol 'seq' is already 3");
  mx_tensor m34 = dyn_random(MX_FLOAT32, 2, (int64_t[]){3, 4}, 2);
  bad[1] = m34;
  expect_error(r.e, bad, 2, MX_ERR_SHAPE, "input 'mask': dim 1 is 4, but symbol 'seq' is already 3");
  bad[1] = m;
  bad[1].data = NULL;
  expect_error(r.e, bad, 2, MX_ERR_INVALID_ARGUMENT, "input 'mask': data is NULL");
  /* By name, in any order; an unknown name is an error. */
  mx_tensor named[2] = {m, x};
  named[0].name = "mask";
  named[1].name = "x";
  cr_expect_eq(step_ok(g, r.e, good, 2, "after errors"), 0);
  mx_tensor out = {.placement = MX_HOST};
  cr_expect_eq(mx__dyn_exec_run(r.e, named, 2, &out, 1, NULL), MX_OK, "%s", mx__dyn_exec_last_error(r.e));
  mx_tensor_release(&out);
  named[0].name = "masks";
  expect_error(r.e, named, 2, MX_ERR_NOT_FOUND, "input 'mask' is not given");
  cr_expect_eq(step_ok(g, r.e, good, 2, "after errors"), 0);
  cr_expect_gt(exec_stats(r.e).failed_steps, 5);
  mx_tensor_release(&x);
  mx_tensor_release(&m);
  mx_tensor_release(&x5);
  mx_tensor_release(&m4);
  mx_tensor_release(&m34);
  free_rig(&r);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* A kernel that fails on its own (an out-of-range Gather index) names its node and explains. */
Test(dyn_exec, kernel_failure_names_the_node) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("gather", &g), MX_OK);
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim n = mx_sym_named(t, "n"), k = mx_sym_named(t, "k");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){n, 4});
  mx_value_id idx = dyn_input(g, "idx", MX_INT64, 1, &k);
  mx_value_id th = dyn_op(g, "Tanh", &x, 1, NULL, 0);
  mx_node_desc d = {.op_type = "Gather",
                    .name = "pick_rows",
                    .inputs = (mx_value_id[]){th, idx},
                    .n_inputs = 2,
                    .n_outputs = 1};
  mx_value_id y;
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK);
  mx_value_id z = dyn_op(g, "Sin", &y, 1, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, z), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (int kd = 0; kd < 2; kd++) {
    rig r = make_rig(g, dyn_device(kinds[kd], true), 1);
    mx_tensor xs = dyn_random(MX_FLOAT32, 2, (int64_t[]){5, 4}, 1);
    int64_t good_idx[] = {4, 0, 2}, bad_idx[] = {1, 99, 2};
    mx_tensor in[2] = {xs, {.dtype = MX_INT64, .rank = 1, .dims = {3}, .data = bad_idx}};
    expect_error(r.e, in, 2, MX_ERR_KERNEL, "node 'pick_rows' (Gather): kernel failed: Gather: index");
    in[1].data = good_idx;
    cr_expect_eq(step_ok(g, r.e, in, 2, "after a kernel failure"), 0);
    mx_tensor_release(&xs);
    free_rig(&r);
  }
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* Injected faults: the Nth kernel, launch, allocation or copy fails; the step reports it and the
 * next step runs normally. */
Test(dyn_exec, injected_faults_leave_the_executor_usable) {
  mx_graph *g = chain(12);
  int64_t n = 16;
  mx_tensor x = dyn_random(MX_FLOAT32, 1, &n, 4);
  static const struct {
    mx_fault_point point;
    uint64_t nth;
    mx_status status;
    const char *text;
  } faults[] = {
      {MX_FAULT_KERNEL, 5, MX_ERR_KERNEL, "node '"},
      {MX_FAULT_KERNEL, 1, MX_ERR_KERNEL, "kernel failed"},
      {MX_FAULT_LAUNCH, 7, MX_ERR_DEVICE, "launch failed"},
      {MX_FAULT_ALLOC, 3, MX_ERR_DEVICE_OOM, "device allocation"},
      {MX_FAULT_COPY, 2, MX_ERR_DEVICE, "failed"},
  };
  const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (int kd = 0; kd < 2; kd++) {
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++) {
      for (uint32_t streams = 1; streams <= 2; streams++) {
        mx_device_options o;
        mx_device_options_init(&o);
        o.kind = kinds[kd];
        o.check = MX_CHECK_ON;
        o.fault_from_env = false;
        o.fault_nth[faults[f].point] = faults[f].nth;
        rig r = make_rig(g, dyn_device_opts(&o), streams);
        expect_error(r.e, &x, 1, faults[f].status, faults[f].text);
        cr_expect_eq(step_ok(g, r.e, &x, 1, "after a fault"), 0);
        cr_expect_eq(step_ok(g, r.e, &x, 1, "after a fault"), 0);
        free_rig(&r);
      }
    }
  }
  /* The injected kernel fault names the fifth op of the chain. */
  mx_device_options o;
  mx_device_options_init(&o);
  o.check = MX_CHECK_ON;
  o.fault_from_env = false;
  o.fault_nth[MX_FAULT_KERNEL] = 5;
  rig r = make_rig(g, dyn_device_opts(&o), 1);
  mx_tensor out = {.placement = MX_HOST};
  cr_expect_eq(mx__dyn_exec_run(r.e, &x, 1, &out, 1, NULL), MX_ERR_KERNEL);
  char want[128];
  snprintf(want, sizeof want, "node '%s'", g->nodes[mx__dyn_op_node(r.plan, 4)].name);
  cr_expect(strstr(mx__dyn_exec_last_error(r.e), want), "'%s' not in '%s'", want,
            mx__dyn_exec_last_error(r.e));
  free_rig(&r);
  mx_tensor_release(&x);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- plan errors ------------------------------------------------------------------------------ */

Test(dyn_exec, plan_errors) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("raw", &g), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 1, &n);
  mx_value_id y = dyn_op(g, "Relu", &x, 1, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  mx_dyn_plan *p = (mx_dyn_plan *)1;
  mx_error err;
  cr_expect_eq(mx__dyn_plan_create(g, NULL, &p, &err), MX_ERR_INVALID_ARGUMENT);
  cr_expect_null(p);
  cr_expect(strstr(err.message, "not inferred"), "%s", err.message);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.max_streams = 17;
  cr_expect_eq(mx__dyn_plan_create(g, &o, &p, &err), MX_ERR_INVALID_ARGUMENT);
  cr_expect_eq(mx__dyn_plan_create(NULL, NULL, &p, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx__dyn_plan_create(g, NULL, &p, &err), MX_OK);
  mx_dyn_exec *e = (mx_dyn_exec *)1;
  cr_expect_eq(mx__dyn_exec_create(NULL, p, NULL, NULL, 0, &e, &err), MX_ERR_INVALID_ARGUMENT);
  cr_expect_null(e);
  mx_device *dev = dyn_device(MX_DEVICE_INLINE, false), *other = dyn_device(MX_DEVICE_INLINE, false);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(other, 0, &s), MX_OK);
  cr_expect_eq(mx__dyn_exec_create(dev, p, NULL, &s, 1, &e, &err), MX_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(err.message, "another device"), "%s", err.message);
  mx_stream_destroy(s);
  mx_device_destroy(other);
  mx_device_destroy(dev);
  mx__dyn_plan_destroy(p);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* A Reshape whose target is only known at run time infers its output shape, after reading the
 * target back from the device; a step with the same input shapes and target values reuses the
 * last inference, and the symbols its output dims name are bound for the ops after it. */
Test(dyn_exec, run_time_inference_is_reused) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("reshape", &g), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 1, &n);
  mx_value_id t = dyn_input(g, "target", MX_INT64, 1, (mx_dim[]){2});
  mx_value_id one = dyn_ints(g, "one", (int64_t[]){1}, 1);
  mx_value_id t2 = dyn_op(g, "Mul", (mx_value_id[]){t, one}, 2, NULL, 0); /* computed: value unknown */
  mx_value_id r = dyn_op(g, "Reshape", (mx_value_id[]){x, t2}, 2, NULL, 0);
  mx_value_id y = dyn_op(g, "Softmax", &r, 1, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  rig rg = make_rig(g, dyn_device(MX_DEVICE_CPU, true), 1);
  mx_dyn_plan_info info;
  mx__dyn_plan_info_get(rg.plan, &info);
  cr_expect_eq(info.infer_ops, 1);
  int64_t six = 6;
  mx_tensor xs = dyn_random(MX_FLOAT32, 1, &six, 2);
  int64_t a[2] = {2, 3}, b[2] = {3, 2};
  mx_tensor ta = {.dtype = MX_INT64, .rank = 1, .dims = {2}, .data = a}, tb = ta;
  tb.data = b;
  mx_tensor in[2] = {xs, ta};
  cr_expect_eq(step_ok(g, rg.e, in, 2, "first"), 0);
  uint64_t inf = exec_stats(rg.e).inferences;
  cr_expect_eq(inf, 1);
  cr_expect_eq(step_ok(g, rg.e, in, 2, "same target"), 0);
  cr_expect_eq(exec_stats(rg.e).inferences, inf, "reused");
  in[1] = tb;
  cr_expect_eq(step_ok(g, rg.e, in, 2, "new target"), 0);
  cr_expect_eq(exec_stats(rg.e).inferences, inf + 1);
  cr_expect_gt(exec_stats(rg.e).readbacks, 0, "the computed target was read back");
  /* A target that does not fit is an inference error naming the node; the next step works. */
  int64_t bad[2] = {4, 2};
  mx_tensor tc = ta;
  tc.data = bad;
  in[1] = tc;
  expect_error(rg.e, in, 2, MX_ERR_SHAPE, "node 'Reshape");
  in[1] = ta;
  cr_expect_eq(step_ok(g, rg.e, in, 2, "after an error"), 0);
  mx_tensor_release(&xs);
  free_rig(&rg);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- constants -------------------------------------------------------------------------------- */

/* x float32 [n, w] -> `len` MatMuls by distinct seeded [w, w] weights. */
static mx_graph *weights_chain(int len, int64_t w) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("weights", &g), MX_OK);
  mx_dim dims[2] = {mx_sym_named(mx_graph_symtab(g), "n"), mx_sym_const(mx_graph_symtab(g), w)};
  mx_value_id v = dyn_input(g, "x", MX_FLOAT32, 2, dims);
  for (int i = 0; i < len; i++) {
    int64_t shape[2] = {w, w};
    mx_tensor t = dyn_random(MX_FLOAT32, 2, shape, 100 + (uint64_t)i);
    for (int64_t k = 0; k < w * w; k++) ((float *)t.data)[k] /= (float)w; /* keep values near 1 */
    char name[16];
    snprintf(name, sizeof name, "w%d", i);
    mx_value_id c;
    cr_assert_eq(mx_graph_add_constant(g, name, &t, &c), MX_OK);
    mx_tensor_release(&t);
    v = dyn_op(g, "MatMul", (mx_value_id[]){v, c}, 2, NULL, 0);
  }
  cr_assert_eq(mx_graph_add_output(g, v), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

Test(dyn_exec, constants_live_in_one_device_block) {
  /* However many weights the graph has, the executor uploads them into one device allocation
   * (one TLB-friendly block, huge pages when large), and every kernel still finds its own. */
  uint64_t made[2];
  const int lens[2] = {1, 6};
  for (int k = 0; k < 2; k++) {
    mx_graph *g = weights_chain(lens[k], 16);
    mx_device *dev = dyn_device(MX_DEVICE_INLINE, true);
    mx_device_memory_stats before, after;
    mx_device_memory_stats_get(dev, &before);
    rig r = make_rig(g, dev, 1);
    mx_device_memory_stats_get(dev, &after);
    made[k] = after.allocations - before.allocations;
    cr_expect_geq(after.bytes_in_use - before.bytes_in_use, (uint64_t)lens[k] * 16 * 16 * sizeof(float),
                  "the weights are on the device");
    static const int64_t xs[2] = {3, 16};
    mx_tensor x = dyn_random(MX_FLOAT32, 2, xs, 7);
    cr_expect_eq(step_ok(g, r.e, &x, 1, "weights"), 0);
    mx_tensor_release(&x);
    free_rig(&r);
    mx_graph_destroy(g);
  }
  cr_expect_eq(made[1], made[0], "1 weight: %llu device allocations at create; 6 weights: %llu",
               (unsigned long long)made[0], (unsigned long long)made[1]);
  dyn_check_leaks();
}
