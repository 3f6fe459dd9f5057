/* Helpers shared by the shape and index op groups: reading the values of shape-giving inputs
 * (symbolic values first, host constant data second), moving symbolic values of small integer
 * tensors through layout ops, and merging dims that must agree. */
#include <string.h>

#include "common/half.h"
#include "graph/ops/shape_impl.h"

bool mx__shp_values(mx_infer_ctx *ctx, uint32_t i, mx_dim *buf, int32_t cap, int32_t *n) {
  if (!mx__in_present(ctx, i)) return false;
  const mx_value_info *in = &ctx->in[i];
  if (in->sv && in->sv_len >= 0) {
    if (in->sv_len > cap) return false;
    memcpy(buf, in->sv, (size_t)in->sv_len * sizeof *buf);
    *n = in->sv_len;
    return true;
  }
  const mx_tensor *t = in->data;
  if (!t || !t->data || (t->dtype != MX_INT64 && t->dtype != MX_INT32)) return false;
  int64_t count;
  if (!mx_tensor_numel(t, &count) || count > cap) return false;
  for (int64_t k = 0; k < count; k++) {
    int64_t v = t->dtype == MX_INT64 ? ((const int64_t *)t->data)[k] : ((const int32_t *)t->data)[k];
    buf[k] = mx_sym_const(ctx->syms, v);
    if (buf[k] == MX_DIM_UNKNOWN) return false; /* out of memory in the table */
  }
  *n = (int32_t)count;
  return true;
}

bool mx__shp_ints(mx_infer_ctx *ctx, uint32_t i, int64_t *buf, int32_t cap, int32_t *n) {
  if (!mx__in_present(ctx, i)) return false;
  const mx_value_info *in = &ctx->in[i];
  if (!(in->sv && in->sv_len >= 0)) {
    /* Read host data directly: no need to intern large negative constants. */
    const mx_tensor *t = in->data;
    if (!t || !t->data || (t->dtype != MX_INT64 && t->dtype != MX_INT32)) return false;
    int64_t count;
    if (!mx_tensor_numel(t, &count) || count > cap) return false;
    for (int64_t k = 0; k < count; k++)
      buf[k] = t->dtype == MX_INT64 ? ((const int64_t *)t->data)[k] : ((const int32_t *)t->data)[k];
    *n = (int32_t)count;
    return true;
  }
  if (in->sv_len > cap) return false;
  for (int32_t k = 0; k < in->sv_len; k++)
    if (!mx_sym_const_value(ctx->syms, in->sv[k], &buf[k])) return false;
  *n = in->sv_len;
  return true;
}

bool mx__shp_scalar_f64(mx_infer_ctx *ctx, uint32_t i, double *out) {
  if (!mx__in_present(ctx, i)) return false;
  const mx_value_info *in = &ctx->in[i];
  int64_t v;
  if (in->sv && in->sv_len == 1 && mx_sym_const_value(ctx->syms, in->sv[0], &v)) {
    *out = (double)v;
    return true;
  }
  const mx_tensor *t = in->data;
  int64_t count;
  if (!t || !t->data || !mx_tensor_numel(t, &count) || count != 1) return false;
  switch (t->dtype) {
    case MX_FLOAT32: *out = *(const float *)t->data; return true;
    case MX_FLOAT64: *out = *(const double *)t->data; return true;
    case MX_INT16: *out = *(const int16_t *)t->data; return true;
    case MX_INT32: *out = *(const int32_t *)t->data; return true;
    case MX_INT64: *out = (double)*(const int64_t *)t->data; return true;
    case MX_INT8: *out = *(const int8_t *)t->data; return true;
    case MX_UINT8: *out = *(const uint8_t *)t->data; return true;
    case MX_FLOAT16: *out = mx__f16_to_f32(*(const uint16_t *)t->data); return true;
    case MX_BFLOAT16: *out = mx__bf16_to_f32(*(const uint16_t *)t->data); return true;
    default: return false;
  }
}

bool mx__shp_concrete(const mx_shape *s, int64_t *dims) {
  if (s->rank == MX_RANK_UNKNOWN) return false;
  for (int32_t k = 0; k < s->rank; k++) {
    if (!mx_dim_is_concrete(s->dims[k])) return false;
    dims[k] = s->dims[k];
  }
  return true;
}

bool mx__shp_concrete_numel(const mx_shape *s, int64_t *n) {
  int64_t dims[MX_MAX_RANK];
  if (!mx__shp_concrete(s, dims)) return false;
  int64_t total = 1;
  for (int32_t k = 0; k < s->rank; k++)
    if (__builtin_mul_overflow(total, dims[k], &total)) return false;
  *n = total;
  return true;
}

void mx__shp_set_sv(mx_infer_ctx *ctx, uint32_t i, const mx_dim *v, int32_t n) {
  if (n < 0 || n > MX_SV_MAX) return;
  mx_dim *dst = mx__infer_out_sv(ctx, i);
  if (n) memmove(dst, v, (size_t)n * sizeof *dst);
  ctx->out[i].sv = dst;
  ctx->out[i].sv_len = n;
}

void mx__shp_pass_values(mx_infer_ctx *ctx, uint32_t i, uint32_t j) {
  ctx->out[i].dtype = ctx->in[j].dtype;
  if (ctx->in[j].sv && ctx->in[j].sv_len >= 0) mx__shp_set_sv(ctx, i, ctx->in[j].sv, ctx->in[j].sv_len);
}

void mx__shp_pass(mx_infer_ctx *ctx, uint32_t i, uint32_t j) {
  mx__shp_pass_values(ctx, i, j);
  ctx->out[i].shape = ctx->in[j].shape;
}

bool mx__shp_sv_strided(mx_infer_ctx *ctx, uint32_t out, const mx_dim *in_sv, int32_t in_len, int32_t rank,
                        const int64_t *out_dims, int64_t base, const int64_t *strides, const int64_t *mods) {
  int64_t total = 1;
  for (int32_t k = 0; k < rank; k++) {
    if (out_dims[k] < 0 || (mods && mods[k] <= 0 && out_dims[k] > 0)) return false;
    if (out_dims[k] > 0 && total > MX_SV_MAX / out_dims[k])
      return false; /* also keeps total from overflowing */
    total *= out_dims[k];
  }
  mx_dim *dst = mx__infer_out_sv(ctx, out);
  int64_t coord[MX_MAX_RANK] = {0};
  for (int64_t e = 0; e < total; e++) {
    int64_t off = base;
    for (int32_t k = 0; k < rank; k++) off += (mods ? coord[k] % mods[k] : coord[k]) * strides[k];
    if (off < 0 || off >= in_len) return false;
    dst[e] = in_sv[off];
    for (int32_t k = rank - 1; k >= 0; k--) {
      if (++coord[k] < out_dims[k]) break;
      coord[k] = 0;
    }
  }
  ctx->out[out].sv = dst;
  ctx->out[out].sv_len = (int32_t)total;
  return true;
}

mx_status mx__shp_merge_dim(mx_infer_ctx *ctx, mx_dim a, mx_dim b, mx_dim *out, const char *what) {
  int sign;
  if (a == b || mx_dim_is_unknown(b)) {
    *out = a;
  } else if (mx_dim_is_unknown(a)) {
    *out = b;
  } else if (mx_sym_compare(ctx->syms, a, b, &sign) && sign != 0) {
    char ta[64], tb[64];
    mx_sym_format(ctx->syms, a, ta, sizeof ta);
    mx_sym_format(ctx->syms, b, tb, sizeof tb);
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s: dim %s does not match dim %s", what, ta, tb);
  } else {
    /* Equal at run time by the op's rules: keep the concrete one if there is one. */
    *out = mx_dim_is_concrete(b) ? b : a;
  }
  return MX_OK;
}

mx_status mx__shp_want_index(mx_infer_ctx *ctx, uint32_t i, const char *role) {
  if (!mx__in_present(ctx, i)) return MX_OK;
  mx_dtype dt = ctx->in[i].dtype;
  if (dt == MX_INT64 || dt == MX_INT32) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u (%s) must be int32 or int64, not %s", i, role,
                        mx_dtype_name(dt));
}

mx_status mx__shp_want_dtype(mx_infer_ctx *ctx, uint32_t i, mx_dtype want, const char *role) {
  if (!mx__in_present(ctx, i) || ctx->in[i].dtype == want) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u (%s) must be %s, not %s", i, role, mx_dtype_name(want),
                        mx_dtype_name(ctx->in[i].dtype));
}

mx_status mx__shp_dim_of_value(mx_infer_ctx *ctx, mx_dim v, mx_dim *out, const char *what) {
  int64_t c;
  if (mx_sym_const_value(ctx->syms, v, &c)) {
    if (c < 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s: negative size %lld", what, (long long)c);
    *out = (mx_dim)c;
    return MX_OK;
  }
  *out = v; /* a symbolic expression, or unknown */
  return MX_OK;
}

mx_status mx__shp_rank_of_length(mx_infer_ctx *ctx, uint32_t i, int32_t *rank) {
  const mx_shape *s = &ctx->in[i].shape;
  *rank = MX_RANK_UNKNOWN;
  if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (s->rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u must be 1-D, not rank %d", i, (int)s->rank);
  if (!mx_dim_is_concrete(s->dims[0])) return MX_OK;
  if (s->dims[0] > MX_MAX_RANK)
    return mx__infer_fail(ctx, MX_ERR_LIMIT, "input %u asks for rank %lld; mixrt supports up to %d", i,
                          (long long)s->dims[0], MX_MAX_RANK);
  *rank = (int32_t)s->dims[0];
  return MX_OK;
}

mx_status mx__shp_target_shape(mx_infer_ctx *ctx, uint32_t i, mx_shape *out, bool fresh, const char *what) {
  mx_dim vals[MX_MAX_RANK];
  int32_t n;
  memset(out, 0, sizeof *out);
  if (mx__shp_values(ctx, i, vals, MX_MAX_RANK, &n)) {
    out->rank = n;
    for (int32_t k = 0; k < n; k++) {
      mx_status st = mx__shp_dim_of_value(ctx, vals[k], &out->dims[k], what);
      if (st != MX_OK) return st;
    }
    return MX_OK;
  }
  mx_status st = mx__shp_rank_of_length(ctx, i, &out->rank);
  if (st != MX_OK) return st;
  for (int32_t k = 0; k < out->rank; k++) out->dims[k] = fresh ? mx__infer_fresh(ctx, what) : MX_DIM_UNKNOWN;
  return MX_OK;
}
