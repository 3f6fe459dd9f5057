/* Errors and corner cases: compile refuses non-static graphs naming the value or node; a step
 * with the wrong input count, dtype, shape, a too-small or missing buffer fails naming the input
 * or output and changes nothing; outputs that are graph inputs, constants or repeats are copied;
 * frozen inputs from a partition call's const_inputs; an external FM arena; run addresses. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/partition.h"
#include "static_exec/static_exec_impl.h"
#include "support_static.h"

Test(static_errors, compile_refuses_symbolic_shapes) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("sym", &g), MX_OK);
  mx_shape s = {2, {mx_sym_named(mx_graph_symtab(g), "batch"), 4}};
  mx_value_id x, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &x, 1, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_static_plan *p = (mx_static_plan *)1;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_ERR_SHAPE);
  cr_assert_null(p);
  cr_assert(strstr(err.message, "'x'") && strstr(err.message, "batch"), "%s", err.message);
  cr_assert_eq(mx_graph_bind_symbol(g, "batch", 3), MX_OK);
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

Test(static_errors, compile_refuses_data_dependent_ops) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("nz", &g), MX_OK);
  mx_shape s = {1, {6}};
  mx_value_id x, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
  mx_node_desc d = {.op_type = "NonZero", .name = "find", .inputs = &x, .n_inputs = 1, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_static_plan *p;
  mx_error err;
  mx_status st = mx__static_compile(g, NULL, &p, &err);
  cr_assert_neq(st, MX_OK);
  cr_assert(strstr(err.message, "find"), "%s", err.message);
  mx_graph_destroy(g);
}

Test(static_errors, bad_options) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("o", &g), MX_OK);
  mx_shape s = {1, {4}};
  mx_value_id x, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &x, 1, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_static_options o;
  mx__static_options_init(&o);
  o.max_streams = 1000;
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_ERR_INVALID_ARGUMENT);
  mx__static_options_init(&o);
  o.frozen_inputs = (uint32_t[]){3};
  o.n_frozen = 1;
  cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "frozen input 3"), "%s", err.message);
  mx__static_plan_destroy(NULL);
  mx__static_model_destroy(NULL);
  mx_graph_destroy(g);
}

/* y = x + w (w constant); outputs: y, x (an input), w (a constant), y again. */
static mx_graph *corner_graph(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("corners", &g), MX_OK);
  mx_shape s = {2, {3, 5}};
  mx_value_id x, w, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
  float wd[15];
  for (int i = 0; i < 15; i++) wd[i] = (float)i * 0.5f;
  mx_tensor wt = {.dtype = MX_FLOAT32, .rank = 2, .dims = {3, 5}, .data = wd};
  cr_assert_eq(mx_graph_add_constant(g, "w", &wt, &w), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Add", (mx_value_id[]){x, w}, 2, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, x), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, w), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  return g;
}

Test(static_errors, copies_for_input_constant_and_repeated_outputs) {
  mx_graph *g = corner_graph();
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  for (uint32_t streams = 1; streams <= 2; streams++) {
    mx_static_options o;
    mx__static_options_init(&o);
    o.max_streams = streams;
    char why[512] = "";
    cr_assert(st_check_against_reference(g, &o, NULL, dev, 1, why, sizeof why), "%s", why);
  }
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK);
  mx_static_report r;
  mx__static_plan_report(p, &r);
  cr_assert_eq(r.kernel_tasks, 1);
  cr_assert_eq(r.copy_tasks, 3);
  cr_assert_eq(r.fm_bytes, 0, "the only computed value goes straight to the caller");
  mx__static_plan_destroy(p);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}

Test(static_errors, wrong_arguments_name_the_input) {
  mx_graph *g = corner_graph();
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK);
  mx_static_model *m;
  cr_assert_eq(mx__static_model_create(dev, p, NULL, &m, &err), MX_OK, "%s", err.message);
  float xin[15] = {0}, outs[4][15];
  mx_tensor in = {.dtype = MX_FLOAT32, .rank = 2, .dims = {3, 5}, .data = xin, .placement = MX_HOST};
  mx_tensor out[4];
  for (int j = 0; j < 4; j++)
    out[j] =
        (mx_tensor){.dtype = MX_FLOAT32, .rank = 2, .dims = {3, 5}, .data = outs[j], .placement = MX_HOST};
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  /* execute before any update_args */
  cr_assert_eq(mx__static_model_execute(m, s), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__static_model_last_error(m), "update_args"));
  cr_assert_eq(mx__static_model_update_args(m, &in, 1, out, 3), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__static_model_last_error(m), "3 outputs"), "%s", mx__static_model_last_error(m));
  mx_tensor bad = in;
  bad.dtype = MX_INT32;
  cr_assert_eq(mx__static_model_update_args(m, &bad, 1, out, 4), MX_ERR_DTYPE);
  cr_assert(strstr(mx__static_model_last_error(m), "input 0 ('x')"), "%s", mx__static_model_last_error(m));
  bad = in;
  bad.dims[1] = 6;
  cr_assert_eq(mx__static_model_update_args(m, &bad, 1, out, 4), MX_ERR_SHAPE);
  cr_assert(strstr(mx__static_model_last_error(m), "'x'") && strstr(mx__static_model_last_error(m), "[3, 5]"),
            "%s", mx__static_model_last_error(m));
  bad = in;
  bad.dims[1] = 4;
  cr_assert_eq(mx__static_model_update_args(m, &bad, 1, out, 4), MX_ERR_SHAPE);
  cr_assert(strstr(mx__static_model_last_error(m), "too small"), "%s", mx__static_model_last_error(m));
  mx_tensor bad_out[4];
  memcpy(bad_out, out, sizeof out);
  bad_out[2].rank = 1;
  bad_out[2].dims[0] = 7;
  cr_assert_eq(mx__static_model_update_args(m, &in, 1, bad_out, 4), MX_ERR_SHAPE);
  cr_assert(strstr(mx__static_model_last_error(m), "output 2 ('w')") &&
                strstr(mx__static_model_last_error(m), "too small"),
            "%s", mx__static_model_last_error(m));
  memcpy(bad_out, out, sizeof out);
  bad_out[1].data = NULL;
  cr_assert_eq(mx__static_model_update_args(m, &in, 1, bad_out, 4), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__static_model_last_error(m), "output 1 ('x')"), "%s", mx__static_model_last_error(m));
  /* Failed calls changed nothing: a good step still works. */
  for (int i = 0; i < 15; i++) xin[i] = (float)i;
  cr_assert_eq(mx__static_model_update_args(m, &in, 1, out, 4), MX_OK, "%s", mx__static_model_last_error(m));
  cr_assert_eq(mx__static_model_execute(m, s), MX_OK, "%s", mx__static_model_last_error(m));
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  for (int i = 0; i < 15; i++) {
    cr_assert_eq(outs[0][i], (float)i + (float)i * 0.5f);
    cr_assert_eq(outs[1][i], (float)i);
    cr_assert_eq(outs[2][i], (float)i * 0.5f);
    cr_assert_eq(outs[3][i], outs[0][i]);
  }
  /* run addresses: the weight region holds w */
  float *w_dev = mx__static_model_run_address(m, MX_STATIC_WEIGHT, 0);
  cr_assert_not_null(w_dev);
  float w0[15];
  cr_assert_eq(mx_device_copy(dev, w0, w_dev, sizeof w0, MX_COPY_D2H), MX_OK);
  cr_assert_eq(w0[3], 1.5f);
  cr_assert_null(mx__static_model_run_address(m, MX_STATIC_WEIGHT, 1u << 20));
  cr_assert_eq(mx__static_model_update_workspaces(m, NULL), MX_ERR_INVALID_ARGUMENT);
  mx_stream_destroy(s);
  mx__static_model_destroy(m);
  mx__static_plan_destroy(p);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}

Test(static_errors, external_fm_must_be_supplied) {
  mx_graph *g;
  cr_assert_eq(st_random_graph(5, 20, false, &g), MX_OK);
  mx_device *dev = st_device(MX_DEVICE_INLINE, true);
  mx_static_options o;
  mx__static_options_init(&o);
  o.fm_external = true;
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_OK);
  mx_static_model *m;
  cr_assert_eq(mx__static_model_create(dev, p, NULL, &m, &err), MX_OK, "%s", err.message);
  cr_assert_gt(mx__static_model_fm_size(m), 0);
  mx_tensor in[4], out[8];
  cr_assert_eq(st_random_inputs(g, 1, in), MX_OK);
  size_t ni = mx_graph_input_count(g), no = mx_graph_output_count(g);
  float *obuf[8];
  for (size_t j = 0; j < no; j++) {
    mx_static_io io;
    mx__static_model_output(m, j, &io);
    obuf[j] = malloc(io.nbytes ? io.nbytes : 1);
    out[j] = (mx_tensor){.dtype = io.dtype, .rank = io.rank, .data = obuf[j], .placement = MX_HOST};
    memcpy(out[j].dims, io.dims, sizeof io.dims);
  }
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  cr_assert_eq(mx__static_model_update_args(m, in, ni, out, no), MX_OK, "%s", mx__static_model_last_error(m));
  cr_assert_eq(mx__static_model_execute(m, s), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__static_model_last_error(m), "FM arena"), "%s", mx__static_model_last_error(m));
  void *fm;
  cr_assert_eq(mx_device_alloc(dev, mx__static_model_fm_size(m), 64, &fm), MX_OK);
  cr_assert_eq(mx__static_model_update_workspaces(m, (char *)fm + 8), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx__static_model_update_workspaces(m, fm), MX_OK);
  cr_assert_eq(mx__static_model_run_address(m, MX_STATIC_FM, 0), fm);
  cr_assert_eq(mx__static_model_execute(m, s), MX_OK, "%s", mx__static_model_last_error(m));
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  mx_stream_destroy(s);
  for (size_t i = 0; i < ni; i++) mx_tensor_release(&in[i]);
  for (size_t j = 0; j < no; j++) free(obuf[j]);
  mx__static_model_destroy(m);
  mx_device_free(dev, fm);
  mx__static_plan_destroy(p);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}

/* A KNOWN subgraph of a partitioned model, with its shared-constant inputs frozen as the
 * partition call's const_inputs attribute lists them. */
Test(static_errors, partition_known_subgraph_with_const_inputs) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("parted", &g), MX_OK);
  mx_symtab *t = mx_graph_symtab(g);
  mx_shape sx = {2, {4, 8}}, sn = {1, {mx_sym_named(t, "n")}};
  mx_value_id x, z, w, a, b, c, d, e, nz;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &sx, &x), MX_OK);
  cr_assert_eq(mx_graph_add_input(g, "z", MX_FLOAT32, &sn, &z), MX_OK);
  float wd[32];
  for (int i = 0; i < 32; i++) wd[i] = (float)(i % 7) * 0.25f;
  mx_tensor wt = {.dtype = MX_FLOAT32, .rank = 2, .dims = {4, 8}, .data = wd};
  cr_assert_eq(mx_graph_add_constant(g, "w", &wt, &w), MX_OK);
  /* known: four ops on x and w; unknown: ops on z that also read w's shape-compatible copy */
  cr_assert_eq(mx_graph_add_op(g, "Add", (mx_value_id[]){x, w}, 2, NULL, 0, &a), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &a, 1, NULL, 0, &b), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Mul", (mx_value_id[]){b, w}, 2, NULL, 0, &c), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Tanh", &c, 1, NULL, 0, &d), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Neg", &d, 1, NULL, 0, &e), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &z, 1, NULL, 0, &nz), MX_OK);
  mx_value_id wz;
  cr_assert_eq(mx_graph_add_op(g, "ReduceSum", &w, 1, NULL, 0, &wz), MX_OK);
  mx_value_id nz2;
  cr_assert_eq(mx_graph_add_op(g, "Add", (mx_value_id[]){nz, wz}, 2, NULL, 0, &nz2), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, e), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, nz2), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_partition *part;
  mx_error err;
  cr_assert_eq(mx_partition_create(g, NULL, &part, &err), MX_OK, "%s", err.message);
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  int known = 0;
  for (size_t id = 0; id < mx_partition_cluster_count(part); id++) {
    mx_partition_cluster_info ci;
    cr_assert(mx_partition_cluster(part, id, &ci));
    if (ci.type != MX_CLUSTER_KNOWN) continue;
    known++;
    uint32_t frozen[16];
    size_t nf = 0;
    for (size_t k = 0; k < ci.n_inputs; k++) {
      mx_partition_boundary bd;
      cr_assert(mx_partition_cluster_input(part, id, k, &bd));
      if (bd.constant && nf < 16) frozen[nf++] = bd.parent_index;
    }
    mx_static_options o;
    mx__static_options_init(&o);
    o.frozen_inputs = frozen;
    o.n_frozen = nf;
    char why[512] = "";
    cr_assert(st_check_against_reference(ci.body, &o, NULL, dev, 2, why, sizeof why), "%s", why);
    mx_static_plan *p;
    cr_assert_eq(mx__static_compile(ci.body, &o, &p, &err), MX_OK, "%s", err.message);
    for (size_t k = 0; k < nf; k++) {
      mx_static_io io;
      cr_assert(mx__static_plan_input(p, frozen[k], &io));
      cr_assert(io.frozen);
    }
    mx__static_plan_destroy(p);
  }
  cr_assert_geq(known, 1);
  mx_device_destroy(dev);
  mx_partition_destroy(part);
  mx_graph_destroy(g);
}
