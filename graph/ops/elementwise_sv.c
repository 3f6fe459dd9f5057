/* Symbolic values through elementwise ops, and the dtype checks the elementwise definitions
 * share.
 *
 * Exported transformer graphs compute Reshape targets with integer arithmetic on shapes
 * (Shape -> Gather -> Mul/Div/Add -> Concat, Equal/Where to replace -1 entries, Max of two
 * shapes for Expand). The functions here carry the *values* of such small int32/int64/bool
 * tensors through those ops, element by element with numpy broadcasting, using the symbol
 * table's canonical arithmetic. A result that cannot be decided (a comparison of unrelated
 * symbols, a division by an unknown amount of a negative value) is MX_DIM_UNKNOWN, never a
 * guess. Integer Div truncates toward zero like ONNX; for symbolic operands the table's
 * division (exact or floor) is used, which agrees for the non-negative values shapes hold. */
#include <string.h>

#include "graph/ops/elementwise_impl.h"

mx_status mx__ew_check_dtype(mx_infer_ctx *ctx, uint32_t i, uint32_t allowed) {
  mx_dtype dt = ctx->in[i].dtype;
  if ((unsigned)dt < 32 && (allowed & MX__EW_DT(dt))) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u has dtype %s, which this op does not accept", i,
                        mx_dtype_name(dt));
}

mx_status mx__ew_check_same(mx_infer_ctx *ctx, uint32_t i, uint32_t j) {
  if (!mx__in_present(ctx, i) || !mx__in_present(ctx, j) || ctx->in[i].dtype == ctx->in[j].dtype)
    return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u has dtype %s but input %u has dtype %s", i,
                        mx_dtype_name(ctx->in[i].dtype), j, mx_dtype_name(ctx->in[j].dtype));
}

bool mx__sv_dtype(mx_dtype dt) { return dt == MX_INT64 || dt == MX_INT32 || dt == MX_BOOL; }

mx_dim mx__sv_fit(mx_symtab *t, mx_dim d, mx_dtype dt) {
  int64_t v;
  if (!mx_sym_const_value(t, d, &v)) return d;
  if (dt == MX_BOOL) return mx_sym_const(t, v != 0);
  if (dt == MX_INT32 && (v < INT32_MIN || v > INT32_MAX))
    return mx_sym_const(t, (int32_t)(uint32_t)(uint64_t)v);
  return d;
}

int64_t mx__sv_numel(const mx_shape *s) {
  if (s->rank < 0) return -1;
  int64_t n = 1;
  for (int32_t i = 0; i < s->rank; i++) {
    if (!mx_dim_is_concrete(s->dims[i])) return -1;
    n *= s->dims[i];
    if (n > MX_SV_MAX) return MX_SV_MAX + 1; /* too big to track; keeps the product small */
  }
  return n;
}

int64_t mx__sv_bcast_index(const mx_shape *out, const mx_shape *in, int64_t o) {
  int64_t idx = 0, stride = 1;
  for (int32_t k = out->rank - 1; k >= 0; k--) {
    int64_t pos = o % out->dims[k];
    o /= out->dims[k];
    int32_t ki = k - (out->rank - in->rank);
    if (ki < 0) continue;
    if (in->dims[ki] != 1) idx += pos * stride;
    stride *= in->dims[ki];
  }
  return idx;
}

/* 0/1 constant, or unknown when `known` is false. */
static mx_dim truth(mx_symtab *t, bool known, bool value) {
  return known ? mx_sym_const(t, value ? 1 : 0) : MX_DIM_UNKNOWN;
}

mx_dim mx__sv_unary(mx_symtab *t, mx__sv_op op, mx_dim a) {
  if (a == MX_DIM_UNKNOWN) return MX_DIM_UNKNOWN;
  int64_t v;
  bool c = mx_sym_const_value(t, a, &v);
  switch (op) {
    case MX__SV_NEG: return mx_sym_neg(t, a);
    case MX__SV_ABS: return c ? mx_sym_const(t, v < 0 ? (int64_t)(0 - (uint64_t)v) : v) : MX_DIM_UNKNOWN;
    case MX__SV_NOT: return truth(t, c, c && v == 0);
    default: return MX_DIM_UNKNOWN;
  }
}

/* Decides a <=> b: true with *sign in {-1, 0, 1} when known. */
static bool compare(mx_symtab *t, mx_dim a, mx_dim b, int *sign) {
  if (a == MX_DIM_UNKNOWN || b == MX_DIM_UNKNOWN) return false;
  if (a == b) {
    *sign = 0;
    return true;
  }
  return mx_sym_compare(t, a, b, sign);
}

/* C (truncating) division and remainder of constants; false for a zero divisor. */
static bool const_divmod(int64_t a, int64_t b, int64_t *q, int64_t *r) {
  if (b == 0) return false;
  if (b == -1) { /* INT64_MIN / -1 overflows: wrap like the kernels */
    *q = (int64_t)(0 - (uint64_t)a);
    *r = 0;
    return true;
  }
  *q = a / b;
  *r = a % b;
  return true;
}

mx_dim mx__sv_binary(mx_symtab *t, mx__sv_op op, mx_dim a, mx_dim b) {
  int64_t va = 0, vb = 0, q, r;
  bool ca = a != MX_DIM_UNKNOWN && mx_sym_const_value(t, a, &va);
  bool cb = b != MX_DIM_UNKNOWN && mx_sym_const_value(t, b, &vb);
  int sign = 0;
  bool known;
  switch (op) {
    case MX__SV_ADD: return mx_sym_add(t, a, b);
    case MX__SV_SUB: return mx_sym_sub(t, a, b);
    case MX__SV_MUL: return mx_sym_mul(t, a, b);
    case MX__SV_MAX: return mx_sym_max(t, a, b);
    case MX__SV_MIN: return mx_sym_min(t, a, b);
    case MX__SV_DIV:
      if (ca && cb) return const_divmod(va, vb, &q, &r) ? mx_sym_const(t, q) : MX_DIM_UNKNOWN;
      if (cb && vb == 0) return MX_DIM_UNKNOWN;
      if (a == MX_DIM_UNKNOWN || b == MX_DIM_UNKNOWN) return MX_DIM_UNKNOWN;
      return mx_sym_div(t, a, b);
    case MX__SV_MOD:
      if (ca && cb) {
        if (!const_divmod(va, vb, &q, &r)) return MX_DIM_UNKNOWN;
        if (r != 0 && ((r < 0) != (vb < 0))) r += vb;
        return mx_sym_const(t, r);
      }
      if (cb && vb == 0) return MX_DIM_UNKNOWN;
      if (a == MX_DIM_UNKNOWN || b == MX_DIM_UNKNOWN) return MX_DIM_UNKNOWN;
      return mx_sym_mod(t, a, b);
    case MX__SV_FMOD:
      if (ca && cb) return const_divmod(va, vb, &q, &r) ? mx_sym_const(t, r) : MX_DIM_UNKNOWN;
      return MX_DIM_UNKNOWN;
    case MX__SV_EQ: known = compare(t, a, b, &sign); return truth(t, known, sign == 0);
    case MX__SV_LT: known = compare(t, a, b, &sign); return truth(t, known, sign < 0);
    case MX__SV_LE: known = compare(t, a, b, &sign); return truth(t, known, sign <= 0);
    case MX__SV_GT: known = compare(t, a, b, &sign); return truth(t, known, sign > 0);
    case MX__SV_GE: known = compare(t, a, b, &sign); return truth(t, known, sign >= 0);
    case MX__SV_AND:
      if ((ca && va == 0) || (cb && vb == 0)) return mx_sym_const(t, 0);
      return truth(t, ca && cb, true);
    case MX__SV_OR:
      if ((ca && va != 0) || (cb && vb != 0)) return mx_sym_const(t, 1);
      return truth(t, ca && cb, false);
    case MX__SV_XOR: return truth(t, ca && cb, (va != 0) != (vb != 0));
    default: return MX_DIM_UNKNOWN;
  }
}

void mx__sv_elementwise(mx_infer_ctx *ctx, mx__sv_op op, uint32_t n_in) {
  mx_value_info *out = &ctx->out[0];
  if (op == MX__SV_NONE || !mx__sv_dtype(out->dtype) || n_in == 0) return;
  int64_t n = mx__sv_numel(&out->shape);
  if (n < 0 || n > MX_SV_MAX) return;
  for (uint32_t i = 0; i < n_in; i++) {
    const mx_value_info *in = &ctx->in[i];
    if (!in->present || !in->sv || in->sv_len < 0 || !mx__sv_dtype(in->dtype)) return;
    if (in->shape.rank > out->shape.rank || mx__sv_numel(&in->shape) != in->sv_len) return;
  }
  mx_dim *sv = mx__infer_out_sv(ctx, 0);
  for (int64_t o = 0; o < n; o++) {
    const mx_value_info *in0 = &ctx->in[0];
    mx_dim acc = in0->sv[mx__sv_bcast_index(&out->shape, &in0->shape, o)];
    if (n_in == 1) {
      if (op == MX__SV_NEG || op == MX__SV_ABS || op == MX__SV_NOT) acc = mx__sv_unary(ctx->syms, op, acc);
    } else {
      for (uint32_t i = 1; i < n_in; i++) {
        const mx_value_info *in = &ctx->in[i];
        acc = mx__sv_binary(ctx->syms, op, acc, in->sv[mx__sv_bcast_index(&out->shape, &in->shape, o)]);
      }
    }
    sv[o] = mx__sv_fit(ctx->syms, acc, out->dtype);
  }
  out->sv = sv;
  out->sv_len = (int32_t)n;
}
