/* Stage 2 rewrite rules (mx_graph_fuse) on minimal graphs: each rule's hit, its near misses
 * that must stay as they are, and the fused graph's outputs against the unfused graph's through
 * the reference interpreter. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"

typedef void (*builder_fn)(mx_graph *g);

static mx_value_id in_f32(mx_graph *g, const char *name, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, MX_FLOAT32, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static mx_value_id cst(mx_graph *g, int32_t rank, const int64_t *dims, const float *data) {
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, NULL, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static mx_value_id scalar(mx_graph *g, float x) { return cst(g, 0, NULL, &x); }

static mx_value_id ints(mx_graph *g, size_t n, const int64_t *data) {
  int64_t d = (int64_t)n;
  mx_tensor t = {.dtype = MX_INT64, .rank = 1, .dims = {d}, .data = (void *)data};
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, NULL, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static mx_value_id op(mx_graph *g, const char *type, size_t n, const mx_value_id *in, const mx_attr *attrs,
                      size_t na) {
  mx_value_id y;
  cr_assert_eq(mx_graph_add_op(g, type, in, n, attrs, na, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}
#define OP1(g, t, a)    op(g, t, 1, (mx_value_id[]){a}, NULL, 0)
#define OP2(g, t, a, b) op(g, t, 2, (mx_value_id[]){a, b}, NULL, 0)

static size_t count_op(const mx_graph *g, const char *type) {
  size_t n = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    if (!(g->nodes[i].flags & MX_NODE_DEAD) && strcmp(g->nodes[i].op_type, type) == 0) n++;
  return n;
}

static size_t hits_of(const mx_fuse_report *r, const char *rule) {
  for (size_t i = 0; i < r->n_rules; i++)
    if (strcmp(r->rules[i].name, rule) == 0) return r->rules[i].hits;
  cr_assert_fail("no rule %s", rule);
  return 0;
}

/* Random inputs of the concrete shapes `dims` (one row per graph input, rank from the graph). */
static void make_inputs(mx_graph *g, const int64_t (*dims)[MX_MAX_RANK], mx_tensor *ins) {
  unsigned seed = 7;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const mx_value *v = &g->values[g->inputs[i]];
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, v->shape.rank, dims[i], &ins[i]), MX_OK);
    int64_t n;
    mx_tensor_numel(&ins[i], &n);
    for (int64_t k = 0; k < n; k++) {
      seed = seed * 1103515245u + 12345u;
      ((float *)ins[i].data)[k] = (float)((seed >> 8) % 2000) / 500.0f - 2.0f;
    }
  }
}

/* Builds the graph twice, fuses one with `passes`, and checks both give the same outputs on
 * random inputs of shapes `dims`. Returns the fused graph (caller destroys) and its report. */
static mx_graph *fuse_and_compare(builder_fn build, const char *passes, const int64_t (*dims)[MX_MAX_RANK],
                                  mx_fuse_report *rep) {
  mx_graph *ref, *g;
  cr_assert_eq(mx_graph_create("ref", &ref), MX_OK);
  cr_assert_eq(mx_graph_create("fused", &g), MX_OK);
  build(ref);
  build(g);
  cr_assert_eq(mx_graph_optimize(g, NULL), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_fuse(g, passes, rep), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_validate(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_tensor ins[8], a[4], b[4];
  make_inputs(ref, dims, ins);
  size_t no = ref->n_outputs;
  cr_assert_eq(g->n_outputs, no);
  mx_error err;
  cr_assert_eq(mx_reference_run(ref, ins, ref->n_inputs, a, no, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_reference_run(g, ins, g->n_inputs, b, no, &err), MX_OK, "%s", err.message);
  for (size_t k = 0; k < no; k++) {
    cr_assert_str_eq(mx_graph_value_name(g, g->outputs[k]), mx_graph_value_name(ref, ref->outputs[k]));
    char why[256];
    cr_assert(mx_tensor_allclose(&b[k], &a[k], 1e-4, 1e-5, why, sizeof why), "output %zu: %s", k, why);
    mx_tensor_release(&a[k]);
    mx_tensor_release(&b[k]);
  }
  for (size_t i = 0; i < ref->n_inputs; i++) mx_tensor_release(&ins[i]);
  mx_graph_destroy(ref);
  return g;
}

/* --- identity, transpose_pair, reshape_chain, cse -------------------------------------------- */

static void build_noops(mx_graph *g) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id x = in_f32(g, "x", 2, (mx_dim[]){b, 4});
  mx_value_id y = OP1(g, "Identity", x);
  y = OP1(g, "Dropout", y);
  mx_attr to = mx_attr_int("to", MX_FLOAT32);
  y = op(g, "Cast", 1, &y, &to, 1);
  y = OP1(g, "Relu", y);
  mx_value_id z = OP1(g, "Identity", y); /* a graph output keeps its name */
  cr_assert_eq(mx_graph_add_output(g, z), MX_OK);
}

Test(fusion, identity_removes_noops_keeps_output_name) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_noops, "identity", (const int64_t[][MX_MAX_RANK]){{3, 4}}, &r);
  cr_assert_eq(hits_of(&r, "identity"), 4);
  cr_assert_eq(g->n_live_nodes, 1);
  cr_assert_eq(count_op(g, "Relu"), 1);
  cr_assert_eq(r.ops_before, 5);
  cr_assert_eq(r.ops_after, 1);
  mx_graph_destroy(g);
}

static void build_cast_changes_type(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 1, (mx_dim[]){4});
  mx_attr to = mx_attr_int("to", MX_FLOAT64);
  mx_value_id y = op(g, "Cast", 1, &x, &to, 1);
  to = mx_attr_int("to", MX_FLOAT32);
  cr_assert_eq(mx_graph_add_output(g, op(g, "Cast", 1, &y, &to, 1)), MX_OK);
}

Test(fusion, identity_near_miss_real_cast) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_cast_changes_type, "default", (const int64_t[][MX_MAX_RANK]){{4}}, &r);
  cr_assert_eq(hits_of(&r, "identity"), 0);
  cr_assert_eq(count_op(g, "Cast"), 2);
  mx_graph_destroy(g);
}

static void build_transposes(mx_graph *g) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id x = in_f32(g, "x", 3, (mx_dim[]){b, 2, 3});
  int64_t p1[] = {0, 2, 1}, p2[] = {1, 0, 2};
  mx_attr a1 = mx_attr_ints("perm", p1, 3), a2 = mx_attr_ints("perm", p2, 3);
  mx_value_id t = op(g, "Transpose", 1, &x, &a1, 1);
  mx_value_id back = op(g, "Transpose", 1, &t, &a1, 1);  /* cancels */
  mx_value_id other = op(g, "Transpose", 1, &t, &a2, 1); /* composes */
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Add", back, x)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, OP1(g, "Relu", other)), MX_OK);
}

Test(fusion, transpose_pairs_cancel_and_compose) {
  mx_fuse_report r;
  mx_graph *g =
      fuse_and_compare(build_transposes, "transpose_pair", (const int64_t[][MX_MAX_RANK]){{2, 2, 3}}, &r);
  cr_assert_eq(hits_of(&r, "transpose_pair"), 2);
  cr_assert_eq(count_op(g, "Transpose"), 1);
  mx_graph_destroy(g);
}

static void build_reshapes(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 2, (mx_dim[]){4, 6});
  mx_value_id y = OP2(g, "Reshape", x, ints(g, 3, (int64_t[]){2, 2, 6}));
  y = OP2(g, "Reshape", y, ints(g, 2, (int64_t[]){3, -1}));
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  /* Near miss: a 0 in the outer target copies a dim of the inner result. */
  mx_value_id z = OP2(g, "Reshape", x, ints(g, 3, (int64_t[]){2, 2, 6}));
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Reshape", z, ints(g, 2, (int64_t[]){0, -1}))), MX_OK);
}

Test(fusion, reshape_chain_collapses_absolute_targets_only) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_reshapes, "reshape_chain", (const int64_t[][MX_MAX_RANK]){{4, 6}}, &r);
  cr_assert_eq(hits_of(&r, "reshape_chain"), 1);
  cr_assert_eq(count_op(g, "Reshape"), 3);
  mx_graph_destroy(g);
}

static void build_cse(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 1, (mx_dim[]){5});
  mx_value_id a = OP2(g, "Mul", x, scalar(g, 3.0f));
  mx_value_id b = OP2(g, "Mul", x, scalar(g, 3.0f)); /* same op, an equal constant */
  mx_value_id c = OP2(g, "Mul", x, scalar(g, 4.0f)); /* near miss */
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Add", OP1(g, "Exp", a), OP1(g, "Exp", b))), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, c), MX_OK);
}

Test(fusion, cse_merges_equal_nodes_and_constants) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_cse, "cse", (const int64_t[][MX_MAX_RANK]){{5}}, &r);
  cr_assert_geq(hits_of(&r, "cse"), 3); /* a constant, the Mul, the Exp */
  cr_assert_eq(count_op(g, "Mul"), 2);
  cr_assert_eq(count_op(g, "Exp"), 1);
  mx_graph_destroy(g);
}

/* --- bn_fold -------------------------------------------------------------------------------- */

static mx_value_id bn_after(mx_graph *g, mx_value_id y, int64_t c) {
  float sc[4] = {1.5f, 0.5f, 2.0f, 1.0f}, bi[4] = {0.1f, -0.2f, 0.3f, 0.0f};
  float mean[4] = {0.2f, -0.1f, 0.0f, 0.5f}, var[4] = {1.0f, 0.25f, 4.0f, 0.5f};
  mx_attr eps = mx_attr_float("epsilon", 1e-3f);
  mx_value_id in[5] = {y, cst(g, 1, &c, sc), cst(g, 1, &c, bi), cst(g, 1, &c, mean), cst(g, 1, &c, var)};
  return op(g, "BatchNormalization", 5, in, &eps, 1);
}

static void build_conv_bn(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 4, (mx_dim[]){1, 2, 5, 5});
  float w[4 * 2 * 3 * 3], b[4] = {0.5f, -0.5f, 0.25f, 0.0f};
  for (int i = 0; i < 72; i++) w[i] = (float)((i * 7) % 11) / 10.0f - 0.5f;
  int64_t pads[] = {1, 1, 1, 1};
  mx_attr pa = mx_attr_ints("pads", pads, 4);
  mx_value_id in[3] = {x, cst(g, 4, (int64_t[]){4, 2, 3, 3}, w), cst(g, 1, (int64_t[]){4}, b)};
  mx_value_id y = op(g, "Conv", 3, in, &pa, 1);
  cr_assert_eq(mx_graph_add_output(g, OP1(g, "Relu", bn_after(g, y, 4))), MX_OK);
}

Test(fusion, bn_folds_into_conv) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_conv_bn, "bn_fold", (const int64_t[][MX_MAX_RANK]){{1, 2, 5, 5}}, &r);
  cr_assert_eq(hits_of(&r, "bn_fold"), 1);
  cr_assert_eq(count_op(g, "BatchNormalization"), 0);
  cr_assert_eq(count_op(g, "Conv"), 1);
  mx_graph_destroy(g);
}

static void build_convt_bn(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 4, (mx_dim[]){1, 4, 3, 3});
  float w[4 * 2 * 2 * 2];
  for (int i = 0; i < 32; i++) w[i] = (float)((i * 5) % 9) / 8.0f - 0.5f;
  mx_attr gr = mx_attr_int("group", 2);
  mx_value_id in[2] = {x, cst(g, 4, (int64_t[]){4, 2, 2, 2}, w)};
  mx_value_id y = op(g, "ConvTranspose", 2, in, &gr, 1);
  cr_assert_eq(mx_graph_add_output(g, bn_after(g, y, 4)), MX_OK);
}

Test(fusion, bn_folds_into_grouped_conv_transpose) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_convt_bn, "bn_fold", (const int64_t[][MX_MAX_RANK]){{1, 4, 3, 3}}, &r);
  cr_assert_eq(hits_of(&r, "bn_fold"), 1);
  cr_assert_eq(count_op(g, "BatchNormalization"), 0);
  mx_graph_destroy(g);
}

static void build_gemm_bn(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 2, (mx_dim[]){3, 5});
  float w[4 * 5], c[4] = {1, 2, 3, 4};
  for (int i = 0; i < 20; i++) w[i] = (float)(i % 7) / 7.0f - 0.4f;
  mx_attr at[2] = {mx_attr_int("transB", 1), mx_attr_float("beta", 0.5f)};
  mx_value_id in[3] = {x, cst(g, 2, (int64_t[]){4, 5}, w), cst(g, 1, (int64_t[]){4}, c)};
  cr_assert_eq(mx_graph_add_output(g, bn_after(g, op(g, "Gemm", 3, in, at, 2), 4)), MX_OK);
}

Test(fusion, bn_folds_into_gemm) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_gemm_bn, "bn_fold", (const int64_t[][MX_MAX_RANK]){{3, 5}}, &r);
  cr_assert_eq(hits_of(&r, "bn_fold"), 1);
  cr_assert_eq(count_op(g, "BatchNormalization"), 0);
  mx_graph_destroy(g);
}

static void build_conv_bn_shared(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 4, (mx_dim[]){1, 2, 4, 4});
  float w[4 * 2];
  for (int i = 0; i < 8; i++) w[i] = (float)i / 8.0f;
  mx_value_id in[2] = {x, cst(g, 4, (int64_t[]){4, 2, 1, 1}, w)};
  mx_value_id y = op(g, "Conv", 2, in, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, bn_after(g, y, 4)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, OP1(g, "Relu", y)), MX_OK); /* the Conv result is read elsewhere too */
}

Test(fusion, bn_near_miss_conv_output_shared) {
  mx_fuse_report r;
  mx_graph *g =
      fuse_and_compare(build_conv_bn_shared, "bn_fold", (const int64_t[][MX_MAX_RANK]){{1, 2, 4, 4}}, &r);
  cr_assert_eq(hits_of(&r, "bn_fold"), 0);
  cr_assert_eq(count_op(g, "BatchNormalization"), 1);
  mx_graph_destroy(g);
}

/* --- layernorm, rmsnorm --------------------------------------------------------------------- */

static mx_value_id reduce_mean_last(mx_graph *g, mx_value_id x) {
  int64_t ax[] = {-1};
  mx_attr a = mx_attr_ints("axes", ax, 1);
  return op(g, "ReduceMean", 1, &x, &a, 1);
}

static void build_layernorm(mx_graph *g) {
  cr_assert_eq(mx_graph_set_opset(g, "", 13), MX_OK);
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id x = in_f32(g, "x", 3, (mx_dim[]){b, 3, 8});
  float gamma[8], beta[8];
  for (int i = 0; i < 8; i++) gamma[i] = 0.5f + 0.1f * (float)i, beta[i] = 0.05f * (float)i;
  mx_value_id d = OP2(g, "Sub", x, reduce_mean_last(g, x));
  mx_value_id var = reduce_mean_last(g, OP2(g, "Pow", d, scalar(g, 2.0f)));
  mx_value_id n = OP2(g, "Div", d, OP1(g, "Sqrt", OP2(g, "Add", var, scalar(g, 1e-5f))));
  n = OP2(g, "Mul", n, cst(g, 1, (int64_t[]){8}, gamma));
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Add", n, cst(g, 1, (int64_t[]){8}, beta))), MX_OK);
}

Test(fusion, layernorm_from_torch_opset13_form) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_layernorm, "layernorm", (const int64_t[][MX_MAX_RANK]){{2, 3, 8}}, &r);
  cr_assert_eq(hits_of(&r, "layernorm"), 1);
  cr_assert_eq(count_op(g, "LayerNormalization"), 1);
  cr_assert_eq(g->n_live_nodes, 1);
  mx_graph_destroy(g);
}

static void build_layernorm_wrong_axis(mx_graph *g) {
  cr_assert_eq(mx_graph_set_opset(g, "", 13), MX_OK);
  mx_value_id x = in_f32(g, "x", 2, (mx_dim[]){3, 8});
  int64_t ax0[] = {0};
  mx_attr a0 = mx_attr_ints("axes", ax0, 1);
  mx_value_id d = OP2(g, "Sub", x, op(g, "ReduceMean", 1, &x, &a0, 1)); /* mean over dim 0 */
  mx_value_id var = reduce_mean_last(g, OP2(g, "Pow", d, scalar(g, 2.0f)));
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Div", d, OP1(g, "Sqrt", OP2(g, "Add", var, scalar(g, 1e-5f))))),
               MX_OK);
}

Test(fusion, layernorm_near_miss_mean_over_other_axis) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_layernorm_wrong_axis, "layernorm,rmsnorm",
                                 (const int64_t[][MX_MAX_RANK]){{3, 8}}, &r);
  cr_assert_eq(hits_of(&r, "layernorm"), 0);
  cr_assert_eq(count_op(g, "LayerNormalization"), 0);
  mx_graph_destroy(g);
}

static void build_rmsnorm(mx_graph *g) {
  mx_dim s = mx_sym_named(mx_graph_symtab(g), "seq");
  mx_value_id x = in_f32(g, "x", 3, (mx_dim[]){1, s, 8});
  float gamma[8];
  for (int i = 0; i < 8; i++) gamma[i] = 1.0f + 0.1f * (float)i;
  mx_value_id var =
      op(g, "ReduceMean", 2, (mx_value_id[]){OP2(g, "Pow", x, scalar(g, 2.0f)), ints(g, 1, (int64_t[]){-1})},
         NULL, 0);
  mx_value_id r = OP1(g, "Reciprocal", OP1(g, "Sqrt", OP2(g, "Add", var, scalar(g, 1e-6f))));
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Mul", cst(g, 1, (int64_t[]){8}, gamma), OP2(g, "Mul", x, r))),
               MX_OK);
}

Test(fusion, rmsnorm_from_llama_export_form) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_rmsnorm, "rmsnorm", (const int64_t[][MX_MAX_RANK]){{1, 5, 8}}, &r);
  cr_assert_eq(hits_of(&r, "rmsnorm"), 1);
  cr_assert_eq(count_op(g, "RMSNormalization"), 1);
  cr_assert_eq(g->n_live_nodes, 1);
  mx_graph_destroy(g);
}

/* --- gelu, silu ----------------------------------------------------------------------------- */

static void build_gelu_erf(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 2, (mx_dim[]){2, 6});
  mx_value_id e = OP1(g, "Erf", OP2(g, "Div", x, scalar(g, 1.4142135f)));
  mx_value_id y = OP2(g, "Mul", OP2(g, "Mul", x, OP2(g, "Add", e, scalar(g, 1.0f))), scalar(g, 0.5f));
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
}

Test(fusion, gelu_from_erf_form) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_gelu_erf, "gelu", (const int64_t[][MX_MAX_RANK]){{2, 6}}, &r);
  cr_assert_eq(hits_of(&r, "gelu"), 1);
  cr_assert_eq(g->n_live_nodes, 1);
  cr_assert_eq(count_op(g, "Gelu"), 1);
  mx_graph_destroy(g);
}

static void build_gelu_tanh(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 2, (mx_dim[]){2, 6});
  mx_value_id cube = OP2(g, "Mul", OP2(g, "Pow", x, scalar(g, 3.0f)), scalar(g, 0.044715f));
  mx_value_id t = OP1(g, "Tanh", OP2(g, "Mul", OP2(g, "Add", x, cube), scalar(g, 0.7978845608f)));
  mx_value_id half = OP2(g, "Mul", x, scalar(g, 0.5f));
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Mul", half, OP2(g, "Add", t, scalar(g, 1.0f)))), MX_OK);
}

Test(fusion, gelu_from_tanh_form) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_gelu_tanh, "gelu", (const int64_t[][MX_MAX_RANK]){{2, 6}}, &r);
  cr_assert_eq(hits_of(&r, "gelu"), 1);
  cr_assert_eq(g->n_live_nodes, 1);
  mx_graph_destroy(g);
}

static void build_gelu_wrong_const(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 1, (mx_dim[]){6});
  mx_value_id e = OP1(g, "Erf", OP2(g, "Div", x, scalar(g, 2.0f)));
  cr_assert_eq(mx_graph_add_output(
                   g, OP2(g, "Mul", OP2(g, "Mul", x, OP2(g, "Add", e, scalar(g, 1.0f))), scalar(g, 0.5f))),
               MX_OK);
}

Test(fusion, gelu_near_miss_other_divisor) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_gelu_wrong_const, "gelu", (const int64_t[][MX_MAX_RANK]){{6}}, &r);
  cr_assert_eq(hits_of(&r, "gelu"), 0);
  cr_assert_eq(count_op(g, "Erf"), 1);
  mx_graph_destroy(g);
}

static void build_silu(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 1, (mx_dim[]){7}), z = in_f32(g, "z", 1, (mx_dim[]){7});
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Mul", OP1(g, "Sigmoid", x), x)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Mul", z, OP1(g, "Sigmoid", x))),
               MX_OK); /* near miss: another operand */
}

Test(fusion, silu_from_sigmoid_product) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_silu, "silu", (const int64_t[][MX_MAX_RANK]){{7}, {7}}, &r);
  cr_assert_eq(hits_of(&r, "silu"), 1);
  cr_assert_eq(count_op(g, "Swish"), 1);
  cr_assert_eq(count_op(g, "Sigmoid"), 1);
  mx_graph_destroy(g);
}

/* --- selection ------------------------------------------------------------------------------ */

Test(fusion, passes_selection) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("t", &g), MX_OK);
  build_noops(g);
  mx_fuse_report r;
  cr_assert_eq(mx_graph_fuse(g, "bogus", &r), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_graph_last_error(g), "bogus"));
  cr_assert_eq(mx_graph_fuse(g, "default,-identity", &r), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(hits_of(&r, "identity"), 0);
  cr_assert_eq(mx_graph_fuse(g, "none", &r), MX_OK);
  cr_assert_eq(r.ops_before, r.ops_after);
  mx_graph_destroy(g);
}

/* --- attention ------------------------------------------------------------------------------ */

/* BERT-style: heads split by Transpose, K^T as one Transpose [0, 2, 3, 1], Div, additive mask. */
static void build_bert_attention_axis(mx_graph *g, int64_t softmax_axis) {
  mx_value_id xq = in_f32(g, "xq", 4, (mx_dim[]){2, 5, 2, 4}),
              xk = in_f32(g, "xk", 4, (mx_dim[]){2, 5, 2, 4});
  mx_value_id xv = in_f32(g, "xv", 4, (mx_dim[]){2, 5, 2, 4}),
              mask = in_f32(g, "mask", 4, (mx_dim[]){2, 1, 1, 5});
  int64_t p_heads[] = {0, 2, 1, 3}, p_kt[] = {0, 2, 3, 1};
  mx_attr ah = mx_attr_ints("perm", p_heads, 4), akt = mx_attr_ints("perm", p_kt, 4);
  mx_value_id q = op(g, "Transpose", 1, &xq, &ah, 1), kt = op(g, "Transpose", 1, &xk, &akt, 1);
  mx_value_id v = op(g, "Transpose", 1, &xv, &ah, 1);
  mx_value_id s = OP2(g, "Add", OP2(g, "Div", OP2(g, "MatMul", q, kt), scalar(g, 2.0f)), mask);
  mx_attr sm = mx_attr_int("axis", softmax_axis);
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "MatMul", op(g, "Softmax", 1, &s, &sm, 1), v)), MX_OK);
}
static void build_bert_attention(mx_graph *g) { build_bert_attention_axis(g, -1); }
static void build_attention_other_axis(mx_graph *g) { build_bert_attention_axis(g, 2); }

static const int64_t attn_dims[][MX_MAX_RANK] = {{2, 5, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 4}, {2, 1, 1, 5}};

Test(fusion, attention_from_bert_form_with_mask) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_bert_attention, "attention", attn_dims, &r);
  cr_assert_eq(hits_of(&r, "attention"), 1);
  cr_assert_eq(count_op(g, "Attention"), 1);
  cr_assert_eq(count_op(g, "Softmax"), 0);
  mx_graph_destroy(g);
}

Test(fusion, attention_near_miss_softmax_over_queries) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_attention_other_axis, "attention", attn_dims, &r);
  cr_assert_eq(hits_of(&r, "attention"), 0);
  cr_assert_eq(count_op(g, "Softmax"), 1);
  mx_graph_destroy(g);
}

/* GPT-2 style: Where(causal, scores / c, lowest float) + additive mask; K from a cache Concat. */
static void build_gpt_attention(mx_graph *g) {
  mx_value_id q = in_f32(g, "q", 4, (mx_dim[]){1, 2, 3, 4}),
              past = in_f32(g, "past", 4, (mx_dim[]){1, 2, 2, 4});
  mx_value_id k = in_f32(g, "k", 4, (mx_dim[]){1, 2, 3, 4}), v = in_f32(g, "v", 4, (mx_dim[]){1, 2, 5, 4});
  mx_value_id am = in_f32(g, "am", 4, (mx_dim[]){1, 1, 1, 5});
  mx_attr cat = mx_attr_int("axis", 2);
  mx_value_id kk = op(g, "Concat", 2, (mx_value_id[]){past, k}, &cat, 1);
  int64_t p_t[] = {0, 1, 3, 2};
  mx_attr at = mx_attr_ints("perm", p_t, 4);
  bool causal[15];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++) causal[i * 5 + j] = j <= i + 2;
  mx_tensor ct = {.dtype = MX_BOOL, .rank = 4, .dims = {1, 1, 3, 5}, .data = causal};
  mx_value_id cond;
  cr_assert_eq(mx_graph_add_constant(g, "causal", &ct, &cond), MX_OK);
  mx_value_id s = OP2(g, "Div", OP2(g, "MatMul", q, op(g, "Transpose", 1, &kk, &at, 1)), scalar(g, 2.0f));
  s = op(g, "Where", 3, (mx_value_id[]){cond, s, scalar(g, -3.4028234e38f)}, NULL, 0);
  s = OP2(g, "Add", s, am);
  mx_attr sm = mx_attr_int("axis", -1);
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "MatMul", op(g, "Softmax", 1, &s, &sm, 1), v)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, kk), MX_OK);
}

Test(fusion, attention_from_gpt2_form_with_causal_where_and_mask) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(
      build_gpt_attention, "attention",
      (const int64_t[][MX_MAX_RANK]){{1, 2, 3, 4}, {1, 2, 2, 4}, {1, 2, 3, 4}, {1, 2, 5, 4}, {1, 1, 1, 5}},
      &r);
  cr_assert_eq(hits_of(&r, "attention"), 1);
  cr_assert_eq(count_op(g, "Attention"), 1);
  cr_assert_eq(count_op(g, "Softmax"), 0);
  mx_graph_destroy(g);
}

/* The inverted form torch writes for GPT-2: Where(Not(causal), lowest, scores), no other mask. */
static void build_gpt_attention_inverted(mx_graph *g) {
  mx_value_id q = in_f32(g, "q", 4, (mx_dim[]){1, 2, 3, 4}), k = in_f32(g, "k", 4, (mx_dim[]){1, 2, 5, 4});
  mx_value_id v = in_f32(g, "v", 4, (mx_dim[]){1, 2, 5, 4});
  int64_t p_t[] = {0, 1, 3, 2};
  mx_attr at = mx_attr_ints("perm", p_t, 4);
  bool causal[15];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++) causal[i * 5 + j] = j <= i + 2;
  mx_tensor ct = {.dtype = MX_BOOL, .rank = 2, .dims = {3, 5}, .data = causal};
  mx_value_id cond;
  cr_assert_eq(mx_graph_add_constant(g, "causal", &ct, &cond), MX_OK);
  mx_value_id s = OP2(g, "Div", OP2(g, "MatMul", q, op(g, "Transpose", 1, &k, &at, 1)), scalar(g, 2.0f));
  s = op(g, "Where", 3, (mx_value_id[]){OP1(g, "Not", cond), scalar(g, -3.4028234e38f), s}, NULL, 0);
  mx_attr sm = mx_attr_int("axis", -1);
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "MatMul", op(g, "Softmax", 1, &s, &sm, 1), v)), MX_OK);
}

Test(fusion, attention_from_gpt2_inverted_where) {
  mx_fuse_report r;
  mx_graph *g =
      fuse_and_compare(build_gpt_attention_inverted, "attention",
                       (const int64_t[][MX_MAX_RANK]){{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}}, &r);
  cr_assert_eq(hits_of(&r, "attention"), 1);
  cr_assert_eq(count_op(g, "Attention"), 1);
  cr_assert_eq(count_op(g, "Softmax"), 0);
  mx_graph_destroy(g);
}

/* --- conv_act ------------------------------------------------------------------------------- */

static mx_value_id small_conv(mx_graph *g, mx_value_id x, bool with_bias) {
  float w[4 * 2 * 3 * 3], b[4] = {0.1f, -0.2f, 0.3f, -0.4f};
  for (int i = 0; i < 72; i++) w[i] = (float)((i * 5) % 13) / 13.0f - 0.45f;
  int64_t pads[] = {1, 1, 1, 1};
  mx_attr pa = mx_attr_ints("pads", pads, 4);
  mx_value_id in[3] = {x, cst(g, 4, (int64_t[]){4, 2, 3, 3}, w),
                       with_bias ? cst(g, 1, (int64_t[]){4}, b) : 0};
  return op(g, "Conv", with_bias ? 3 : 2, in, &pa, 1);
}

static void build_conv_add_relu(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 4, (mx_dim[]){1, 2, 5, 5});
  float c[4] = {0.5f, -0.5f, 1.0f, 0.0f};
  mx_value_id y = OP2(g, "Add", small_conv(g, x, true), cst(g, 3, (int64_t[]){4, 1, 1}, c));
  cr_assert_eq(mx_graph_add_output(g, OP1(g, "Relu", y)), MX_OK);
  /* HardSigmoid right after a bias-less Conv. */
  mx_attr hs[2] = {mx_attr_float("alpha", 0.25f), mx_attr_float("beta", 0.4f)};
  mx_value_id z = small_conv(g, x, false);
  cr_assert_eq(mx_graph_add_output(g, op(g, "HardSigmoid", 1, &z, hs, 2)), MX_OK);
  /* SiLU written as x * Sigmoid(x): the silu rule then conv_act. */
  mx_value_id s = small_conv(g, x, true);
  cr_assert_eq(mx_graph_add_output(g, OP2(g, "Mul", s, OP1(g, "Sigmoid", s))), MX_OK);
  /* Clip with constant bounds. */
  mx_value_id k = small_conv(g, x, true);
  cr_assert_eq(
      mx_graph_add_output(g, op(g, "Clip", 3, (mx_value_id[]){k, scalar(g, 0.0f), scalar(g, 0.6f)}, NULL, 0)),
      MX_OK);
}

Test(fusion, conv_bias_add_activation_into_one_conv) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_conv_add_relu, "silu,conv_act",
                                 (const int64_t[][MX_MAX_RANK]){{1, 2, 5, 5}}, &r);
  cr_assert_eq(hits_of(&r, "conv_act"), 4);
  cr_assert_eq(g->n_live_nodes, 4);
  cr_assert_eq(count_op(g, "Conv"), 4);
  mx_graph_destroy(g);
}

static void build_conv_add_not_per_channel(mx_graph *g) {
  mx_value_id x = in_f32(g, "x", 4, (mx_dim[]){1, 2, 5, 5});
  float c[5] = {0.5f, -0.5f, 1.0f, 0.0f, 0.25f};
  mx_value_id y = OP2(g, "Add", small_conv(g, x, true), cst(g, 1, (int64_t[]){5}, c)); /* along W */
  cr_assert_eq(mx_graph_add_output(g, OP1(g, "Relu", y)), MX_OK);
}

Test(fusion, conv_act_near_miss_bias_along_width) {
  mx_fuse_report r;
  mx_graph *g = fuse_and_compare(build_conv_add_not_per_channel, "conv_act",
                                 (const int64_t[][MX_MAX_RANK]){{1, 2, 5, 5}}, &r);
  cr_assert_eq(hits_of(&r, "conv_act"), 0);
  cr_assert_eq(count_op(g, "Relu"), 1);
  mx_graph_destroy(g);
}
