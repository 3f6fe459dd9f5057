/* Shared helpers of the op-inference tests (see ops_support.h). */
#include "graph/ops/ops_support.h"

#include <criterion/criterion.h>
#include <string.h>

mx_graph *G;
mx_symtab *T;

void mxt_ops_setup(const char *name) {
  cr_assert_eq(mx_graph_create(name, &G), MX_OK);
  T = mx_graph_symtab(G);
}

void mxt_ops_teardown(void) {
  mx_graph_destroy(G);
  G = NULL;
}

mx_dim S(const char *name) { return mx_sym_named(T, name); }
mx_dim C(int64_t v) { return mx_sym_const(T, v); }

mx_shape shp(int32_t rank, const mx_dim *dims) {
  mx_shape s = {rank, {0}};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  return s;
}
const mx_shape SCALAR = {0, {0}};

mx_value_id input(const char *name, mx_dtype dt, mx_shape s) {
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(G, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(G));
  return v;
}

mx_value_id input_unknown_rank(const char *name, mx_dtype dt) {
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(G, name, dt, NULL, &v), MX_OK);
  return v;
}

mx_value_id input_sv(const char *name, mx_dtype dt, int32_t n, mx_dim *sv) {
  mx_value_id v = input(name, dt, n < 0 ? SCALAR : SHAPE(n));
  mx_value *val = &G->values[v];
  val->sv = sv;
  val->sv_len = n < 0 ? 1 : n;
  return v;
}

mx_value_id const_i64(const char *name, int32_t rank, const int64_t *dims, const int64_t *data) {
  mx_tensor t = {.dtype = MX_INT64, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(G, name, &t, &v), MX_OK);
  return v;
}

mx_value_id const_scalar(const char *name, mx_dtype dt, double v) {
  union {
    float f;
    double d;
    int32_t i32;
    int64_t i64;
  } u;
  switch (dt) {
    case MX_FLOAT32: u.f = (float)v; break;
    case MX_FLOAT64: u.d = v; break;
    case MX_INT32: u.i32 = (int32_t)v; break;
    default: u.i64 = (int64_t)v; break;
  }
  mx_tensor t = {.dtype = dt, .rank = 0, .data = &u};
  mx_value_id id;
  cr_assert_eq(mx_graph_add_constant(G, name, &t, &id), MX_OK);
  return id;
}

mx_value_id op(const char *type, const mx_value_id *in, size_t n, const mx_attr *attrs, size_t na) {
  mx_value_id out;
  cr_assert_eq(mx_graph_add_op(G, type, in, n, attrs, na, &out), MX_OK, "%s", mx_graph_last_error(G));
  return out;
}

void op_multi(const char *type, const mx_value_id *in, size_t n, const mx_attr *attrs, size_t na,
              mx_value_id *outs, size_t n_out) {
  mx_node_desc d = {
      .op_type = type, .inputs = in, .n_inputs = n, .attrs = attrs, .n_attrs = na, .n_outputs = n_out};
  cr_assert_eq(mx_graph_add_node(G, &d, outs), MX_OK, "%s", mx_graph_last_error(G));
}

void infer_ok(void) { cr_assert_eq(mx_graph_infer(G), MX_OK, "%s", mx_graph_last_error(G)); }

void infer_fails(mx_status want, const char *needle) {
  mx_status st = mx_graph_infer(G);
  cr_assert_eq(st, want, "status %s: %s", mx_status_name(st), mx_graph_last_error(G));
  if (needle) cr_assert(strstr(mx_graph_last_error(G), needle), "message: %s", mx_graph_last_error(G));
}

void expect_shape(mx_value_id v, mx_dtype dt, mx_shape want) {
  mx_shape got;
  cr_assert(mx_graph_value_shape(G, v, &got));
  char a[160], b[160];
  mx_shape_format(T, &got, a, sizeof a);
  mx_shape_format(T, &want, b, sizeof b);
  cr_assert_eq(mx_graph_value_dtype(G, v), dt, "dtype %s", mx_dtype_name(mx_graph_value_dtype(G, v)));
  cr_assert_str_eq(a, b);
  cr_assert_eq(got.rank, want.rank);
  for (int32_t i = 0; i < got.rank; i++) cr_assert_eq(got.dims[i], want.dims[i], "dim %d", (int)i);
}

void expect_shape_str(mx_value_id v, mx_dtype dt, const char *want) {
  mx_shape got;
  cr_assert(mx_graph_value_shape(G, v, &got));
  char a[160];
  mx_shape_format(T, &got, a, sizeof a);
  cr_assert_eq(mx_graph_value_dtype(G, v), dt, "dtype %s", mx_dtype_name(mx_graph_value_dtype(G, v)));
  cr_assert_str_eq(a, want);
}

mx_shape shape_of(mx_value_id v) {
  mx_shape s;
  cr_assert(mx_graph_value_shape(G, v, &s));
  return s;
}

void expect_sv(mx_value_id v, int32_t n, const mx_dim *want) {
  const mx_value *val = &G->values[v];
  cr_assert_eq(val->sv_len, n, "sv_len %d, want %d", (int)val->sv_len, (int)n);
  for (int32_t i = 0; i < n; i++) {
    char a[64], b[64];
    mx_sym_format(T, val->sv[i], a, sizeof a);
    mx_sym_format(T, want[i], b, sizeof b);
    cr_assert_eq(val->sv[i], want[i], "element %d: %s, want %s", (int)i, a, b);
  }
}

void expect_no_sv(mx_value_id v) { cr_assert_lt(G->values[v].sv_len, 0); }

bool is_expr(mx_dim d) { return mx_dim_is_expr(d) && !mx_sym_const_value(T, d, NULL); }
