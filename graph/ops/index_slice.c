/* Index group, part 2: Slice.
 *
 * Starts, ends and axes are attributes before opset 10 and inputs (with steps) from 10. On a
 * concrete dim the ONNX clamping rules give a concrete length (negative positions count from the
 * end; INT64_MAX / INT64_MIN ends mean "to the end"; negative steps walk backwards). On a
 * symbolic dim d a few forms stay exact: start 0 or an end of 2^31 and more ("to the end")
 * resolve to 0 and d, a negative position k to d + k, a value that is d plus a constant to
 * itself (clamped at d); a lone symbol s as an end gives min(s, d). Anything else is a size
 * only known at run time (a fresh symbol). Slices of a shape's symbolic value keep their values. */
#include <string.h>

#include "graph/ops/index_params.h"
#include "graph/ops/shape_impl.h"
#include "graph/ops/slice_range.h"

static const mx_attr_spec slice_attrs[] = {
    {.name = "starts", .type = MX_ATTR_INTS},
    {.name = "ends", .type = MX_ATTR_INTS},
    {.name = "axes", .type = MX_ATTR_INTS},
    {0},
};

static mx_status slice_parse(const mx_parse_ctx *pc, void *params) {
  mx_slice_params *p = params;
  memset(p, 0, sizeof *p);
  if (pc->opset >= 10) {
    if (mx__parse_attr(pc, "starts") || mx__parse_attr(pc, "ends") || mx__parse_attr(pc, "axes"))
      return mx__parse_fail(pc, "starts/ends/axes are inputs from opset 10, not attributes");
    if (pc->n_inputs < 3) return mx__parse_fail(pc, "Slice needs data, starts and ends inputs from opset 10");
    return MX_OK;
  }
  if (pc->n_inputs != 1) return mx__parse_fail(pc, "Slice takes one input before opset 10");
  p->from_attrs = 1;
  size_t ns, ne, na;
  mx_status st = mx__parse_ints(pc, "starts", p->starts, MX_MAX_RANK, &ns);
  if (st == MX_OK) st = mx__parse_ints(pc, "ends", p->ends, MX_MAX_RANK, &ne);
  if (st == MX_OK) st = mx__parse_ints(pc, "axes", p->axes, MX_MAX_RANK, &na);
  if (st != MX_OK) return st;
  if (!mx__parse_attr(pc, "starts") || !mx__parse_attr(pc, "ends"))
    return mx__parse_fail(pc, "starts and ends are required before opset 10");
  p->has_axes = mx__parse_attr(pc, "axes") != NULL;
  if (ns != ne || (p->has_axes && na != ns))
    return mx__parse_fail(pc, "starts, ends and axes must have the same length");
  p->n = (int32_t)ns;
  return MX_OK;
}

/* Resolves a start or end x on an axis of symbolic size d (see the file comment). */
static bool slice_position(mx_symtab *t, mx_dim x, mx_dim d, bool forward, bool is_end, mx_dim *pos) {
  int64_t k;
  if (mx_sym_const_value(t, x, &k)) {
    if (k >= MX__SLICE_BIG) {
      *pos = forward ? d : mx_sym_sub(t, d, 1);
    } else if (k <= -MX__SLICE_BIG) {
      *pos = forward || !is_end ? 0 : mx_sym_const(t, -1);
    } else if (k == 0) {
      *pos = 0;
    } else if (k < 0) {
      *pos = mx_sym_add(t, d, x); /* d + k, taking |k| <= d as the model does */
    } else {
      return false; /* min(k, d) with d unknown relative to k */
    }
    return true;
  }
  if (mx_dim_is_unknown(x)) return false;
  int sign;
  if (mx_sym_compare(t, x, d, &sign)) {
    *pos = sign < 0 ? x : forward ? d : mx_sym_sub(t, d, 1);
    return true;
  }
  if (forward && is_end && mx_sym_symbol_index(t, x) >= 0) {
    *pos = mx_sym_min(t, x, d); /* a lone symbol is a size, never negative */
    return true;
  }
  return false;
}

/* Length of a slice on a non-concrete axis, or false when it is only known at run time. */
static bool slice_symbolic(mx_symtab *t, mx_dim d, mx_dim s, mx_dim e, int64_t step, mx_dim *len) {
  bool forward = step > 0;
  mx_dim ps, pe;
  if (!slice_position(t, s, d, forward, false, &ps) || !slice_position(t, e, d, forward, true, &pe))
    return false;
  int64_t mag = step == INT64_MIN ? INT64_MAX : step < 0 ? -step : step;
  mx_dim diff = forward ? mx_sym_sub(t, pe, ps) : mx_sym_sub(t, ps, pe);
  if (mx_dim_is_unknown(diff)) {
    *len = MX_DIM_UNKNOWN;
    return true;
  }
  int64_t c, anchor;
  if (mx_sym_const_value(t, diff, &c)) {
    *len = c <= 0 ? 0 : (c - 1) / mag + 1;
    return true;
  }
  /* A non-constant span is known non-negative only when it starts at the axis' beginning
   * (forward from 0) or runs to it (backward to -1). */
  if (forward ? !(mx_sym_const_value(t, ps, &anchor) && anchor == 0)
              : !(mx_sym_const_value(t, pe, &anchor) && anchor == -1))
    return false;
  *len = mx_sym_ceildiv(t, diff, (mx_dim)mag);
  return true;
}

static mx_status slice_infer(mx_infer_ctx *ctx) {
  const mx_slice_params *p = ctx->params;
  const mx_value_info *in = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = in->dtype;
  mx_dim starts[MX_MAX_RANK], ends[MX_MAX_RANK];
  int64_t axes[MX_MAX_RANK], steps[MX_MAX_RANK];
  int32_t n = -1;
  bool known_se = false, known_axes = false, known_steps = true;
  mx_status st;

  if (p->from_attrs) {
    n = p->n;
    for (int32_t k = 0; k < n; k++) {
      starts[k] = mx_sym_const(ctx->syms, p->starts[k]);
      ends[k] = mx_sym_const(ctx->syms, p->ends[k]);
      axes[k] = p->has_axes ? p->axes[k] : k;
      steps[k] = 1;
    }
    known_se = known_axes = true;
  } else {
    static const char *const roles[] = {"", "starts", "ends", "axes", "steps"};
    for (uint32_t i = 1; i < 5; i++) {
      st = mx__shp_want_index(ctx, i, roles[i]);
      if (st != MX_OK) return st;
    }
    int32_t ns = -1, ne = -1, na, nt;
    bool ks = mx__shp_values(ctx, 1, starts, MX_MAX_RANK, &ns);
    bool ke = mx__shp_values(ctx, 2, ends, MX_MAX_RANK, &ne);
    if (ks && ke && ns != ne)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "starts has %d entries but ends has %d", (int)ns, (int)ne);
    known_se = ks && ke;
    n = ks ? ns : ke ? ne : -1;
    const mx_shape *s1 = &ctx->in[1].shape;
    if (n < 0 && s1->rank == 1 && mx_dim_is_concrete(s1->dims[0]) && s1->dims[0] <= MX_MAX_RANK)
      n = (int32_t)s1->dims[0];
    if (mx__in_present(ctx, 3)) {
      known_axes = mx__shp_ints(ctx, 3, axes, MX_MAX_RANK, &na);
      if (known_axes && n >= 0 && na != n)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "axes has %d entries but starts has %d", (int)na, (int)n);
      if (known_axes) n = na;
    } else if (n >= 0) {
      for (int32_t k = 0; k < n; k++) axes[k] = k;
      known_axes = true;
    }
    if (mx__in_present(ctx, 4)) {
      known_steps = mx__shp_ints(ctx, 4, steps, MX_MAX_RANK, &nt);
      if (known_steps && n >= 0 && nt != n)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "steps has %d entries but starts has %d", (int)nt, (int)n);
    } else if (n >= 0) {
      for (int32_t k = 0; k < n; k++) steps[k] = 1;
    }
  }

  int32_t r = in->shape.rank;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  o->shape = in->shape;
  if (!known_axes) {
    /* Any axis may be sliced. */
    for (int32_t k = 0; k < r; k++) o->shape.dims[k] = mx__infer_fresh(ctx, "slice");
    return MX_OK;
  }
  uint32_t seen = 0;
  int64_t first[MX_MAX_RANK] = {0}, step_of[MX_MAX_RANK];
  for (int32_t k = 0; k < r; k++) step_of[k] = 1;
  bool all_concrete = known_se && known_steps;
  for (int32_t k = 0; k < n; k++) {
    int32_t a;
    if (!mx__norm_axis(axes[k], r, &a))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axes[k],
                            (int)r);
    if (seen & (1u << a))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is repeated", (long long)axes[k]);
    seen |= 1u << a;
    if (known_steps && steps[k] == 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "step %d is 0", (int)k);
    mx_dim d = in->shape.dims[a];
    if (!known_se || !known_steps) {
      o->shape.dims[a] = mx__infer_fresh(ctx, "slice");
      continue;
    }
    int64_t s, e;
    if (mx_dim_is_concrete(d) && mx_sym_const_value(ctx->syms, starts[k], &s) &&
        mx_sym_const_value(ctx->syms, ends[k], &e)) {
      int64_t len;
      mx__slice_range(d, s, e, steps[k], &first[a], &len);
      o->shape.dims[a] = len;
      step_of[a] = steps[k];
      continue;
    }
    all_concrete = false;
    mx_dim len;
    o->shape.dims[a] = slice_symbolic(ctx->syms, d, starts[k], ends[k], steps[k], &len)
                           ? len
                           : mx__infer_fresh(ctx, "slice");
  }

  int64_t in_dims[MX_MAX_RANK], out_dims[MX_MAX_RANK], strides[MX_MAX_RANK];
  if (all_concrete && in->sv && in->sv_len >= 0 && mx__shp_concrete(&in->shape, in_dims) &&
      mx__shp_concrete(&o->shape, out_dims)) {
    int64_t stride = 1, base = 0;
    for (int32_t k = r - 1; k >= 0; k--) {
      base += first[k] * stride;
      strides[k] = step_of[k] * stride;
      stride *= in_dims[k];
    }
    mx__shp_sv_strided(ctx, 0, in->sv, in->sv_len, r, out_dims, base, strides, NULL);
  }
  return MX_OK;
}

const mx_op_def mx__op_slice = {
    .name = "Slice",
    .min_inputs = 1,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_HOST_PREFERRED,
    .value_inputs = 0x1e,
    .attrs = slice_attrs,
    .params_size = sizeof(mx_slice_params),
    .parse = slice_parse,
    .infer = slice_infer,
};
