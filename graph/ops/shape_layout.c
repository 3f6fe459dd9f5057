/* Shape group, part 2: ops that move elements around — Transpose, Concat, Split, Expand, Tile.
 *
 * Concat sums possibly symbolic dims along its axis and concatenates the symbolic values of
 * small integer tensors (the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain of exported
 * transformers). Expand broadcasts bidirectionally against the symbolic value of its shape
 * input, Tile multiplies dims by the repeats' values, and Split divides a symbolic dim exactly
 * when it can. Every op also moves the symbolic value of a small integer tensor when the shapes
 * involved are concrete. */
#include <stdio.h>
#include <string.h>

#include "graph/ops/shape_impl.h"
#include "graph/ops/shape_params.h"

/* Row-major strides of concrete dims. */
static void strides_of(const int64_t *dims, int32_t rank, int64_t *strides) {
  int64_t s = 1;
  for (int32_t k = rank - 1; k >= 0; k--) {
    strides[k] = s;
    s *= dims[k];
  }
}

/* --- Transpose -------------------------------------------------------------------------------- */

static const mx_attr_spec transpose_attrs[] = {
    {.name = "perm", .type = MX_ATTR_INTS},
    {0},
};

static mx_status transpose_parse(const mx_parse_ctx *pc, void *params) {
  mx_transpose_params *p = params;
  memset(p, 0, sizeof *p);
  size_t n;
  mx_status st = mx__parse_ints(pc, "perm", p->perm, MX_MAX_RANK, &n);
  if (st != MX_OK) return st;
  p->n_perm = (int32_t)n;
  p->has_perm = mx__parse_attr(pc, "perm") != NULL;
  uint32_t seen = 0;
  for (size_t k = 0; k < n; k++) {
    int64_t a = p->perm[k];
    if (a < 0 || a >= (int64_t)n || (seen & (1u << a)))
      return mx__parse_fail(pc, "perm is not a permutation of 0..%zu", n ? n - 1 : 0);
    seen |= 1u << a;
  }
  return MX_OK;
}

static mx_status transpose_infer(mx_infer_ctx *ctx) {
  const mx_transpose_params *p = ctx->params;
  const mx_value_info *in = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = in->dtype;
  int32_t rank = in->shape.rank;
  if (rank == MX_RANK_UNKNOWN) {
    if (p->has_perm) {
      o->shape.rank = p->n_perm;
      for (int32_t k = 0; k < p->n_perm; k++) o->shape.dims[k] = MX_DIM_UNKNOWN;
    }
    return MX_OK;
  }
  if (p->has_perm && p->n_perm != rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "perm has %d entries for a rank-%d input", (int)p->n_perm,
                          (int)rank);
  int64_t perm[MX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) perm[k] = p->has_perm ? p->perm[k] : rank - 1 - k;
  o->shape.rank = rank;
  for (int32_t k = 0; k < rank; k++) o->shape.dims[k] = in->shape.dims[perm[k]];

  int64_t in_dims[MX_MAX_RANK], out_dims[MX_MAX_RANK], in_strides[MX_MAX_RANK], strides[MX_MAX_RANK];
  if (in->sv && in->sv_len >= 0 && mx__shp_concrete(&in->shape, in_dims)) {
    strides_of(in_dims, rank, in_strides);
    for (int32_t k = 0; k < rank; k++) {
      out_dims[k] = in_dims[perm[k]];
      strides[k] = in_strides[perm[k]];
    }
    mx__shp_sv_strided(ctx, 0, in->sv, in->sv_len, rank, out_dims, 0, strides, NULL);
  }
  return MX_OK;
}

/* A transpose that moves only dims of size 1 (the others keep their order) leaves every element
 * at its offset: [1, 1, H, D] -> [1, H, 1, D] is a reshape. */
static bool transpose_keeps_bytes(const void *params, const mx_shape *in0) {
  const mx_transpose_params *p = params;
  int32_t rank = in0->rank;
  if (rank < 0 || rank > MX_MAX_RANK || (p->has_perm && p->n_perm != rank)) return false;
  int64_t last = -1;
  for (int32_t k = 0; k < rank; k++) {
    int64_t a = p->has_perm ? p->perm[k] : rank - 1 - k;
    if (in0->dims[a] == 1) continue;
    if (a < last) return false;
    last = a;
  }
  return true;
}

const mx_op_def mx__op_transpose = {
    .name = "Transpose",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = transpose_attrs,
    .params_size = sizeof(mx_transpose_params),
    .parse = transpose_parse,
    .infer = transpose_infer,
    .keeps_bytes = transpose_keeps_bytes,
};

/* --- Concat ----------------------------------------------------------------------------------- */

static const mx_attr_spec concat_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .required = true},
    {0},
};

static mx_status concat_parse(const mx_parse_ctx *pc, void *params) {
  mx_concat_params *p = params;
  p->axis = mx__parse_int(pc, "axis");
  if (pc->opset < 11 && p->axis < 0) return mx__parse_fail(pc, "axis must be >= 0 before opset 11");
  return MX_OK;
}

/* Concatenates the symbolic values of all inputs when every one is known and every shape is
 * concrete. */
static void concat_sv(mx_infer_ctx *ctx, int32_t axis) {
  int64_t dims[MX_MAX_RANK];
  int64_t outer = 1, inner = 1, total = 0;
  int32_t rank = ctx->out[0].shape.rank;
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    const mx_value_info *in = &ctx->in[i];
    int64_t n;
    if (!in->sv || in->sv_len < 0 || !mx__shp_concrete_numel(&in->shape, &n) || n != in->sv_len) return;
    total += n;
    if (total > MX_SV_MAX) return;
  }
  if (!mx__shp_concrete(&ctx->in[0].shape, dims)) return;
  for (int32_t k = 0; k < axis; k++) outer *= dims[k];
  for (int32_t k = axis + 1; k < rank; k++) inner *= dims[k];
  mx_dim *dst = mx__infer_out_sv(ctx, 0);
  int64_t e = 0;
  for (int64_t o = 0; o < outer; o++) {
    for (uint32_t i = 0; i < ctx->n_in; i++) {
      const mx_value_info *in = &ctx->in[i];
      int64_t chunk = in->shape.dims[axis] * inner;
      memcpy(dst + e, in->sv + o * chunk, (size_t)chunk * sizeof *dst);
      e += chunk;
    }
  }
  ctx->out[0].sv = dst;
  ctx->out[0].sv_len = (int32_t)total;
}

static mx_status concat_infer(mx_infer_ctx *ctx) {
  const mx_concat_params *p = ctx->params;
  mx_value_info *o = &ctx->out[0];
  o->dtype = ctx->in[0].dtype;
  int32_t rank = MX_RANK_UNKNOWN;
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    if (!ctx->in[i].present) return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "input %u is missing", i);
    if (ctx->in[i].dtype != o->dtype)
      return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u is %s but input 0 is %s", i,
                            mx_dtype_name(ctx->in[i].dtype), mx_dtype_name(o->dtype));
    int32_t r = ctx->in[i].shape.rank;
    if (r == MX_RANK_UNKNOWN) continue;
    if (rank != MX_RANK_UNKNOWN && r != rank)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u has rank %d but an earlier input has rank %d", i,
                            (int)r, (int)rank);
    rank = r;
  }
  if (rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t axis;
  if (!mx__norm_axis(p->axis, rank, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)rank);
  o->shape.rank = rank;
  for (int32_t k = 0; k < rank; k++) o->shape.dims[k] = k == axis ? 0 : MX_DIM_UNKNOWN;
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    const mx_shape *s = &ctx->in[i].shape;
    if (s->rank == MX_RANK_UNKNOWN) {
      o->shape.dims[axis] = MX_DIM_UNKNOWN;
      continue;
    }
    for (int32_t k = 0; k < rank; k++) {
      if (k == axis) {
        o->shape.dims[k] = mx_sym_add(ctx->syms, o->shape.dims[k], s->dims[k]);
        continue;
      }
      char what[48];
      snprintf(what, sizeof what, "input %u, axis %d", i, (int)k);
      mx_status st = mx__shp_merge_dim(ctx, o->shape.dims[k], s->dims[k], &o->shape.dims[k], what);
      if (st != MX_OK) return st;
    }
  }
  concat_sv(ctx, axis);
  return MX_OK;
}

const mx_op_def mx__op_concat = {
    .name = "Concat",
    .min_inputs = 1,
    .max_inputs = MX_VARIADIC,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_HOST_PREFERRED,
    .attrs = concat_attrs,
    .params_size = sizeof(mx_concat_params),
    .parse = concat_parse,
    .infer = concat_infer,
};

/* --- Split ------------------------------------------------------------------------------------ */

static const mx_attr_spec split_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "split", .type = MX_ATTR_INTS},
    {.name = "num_outputs", .type = MX_ATTR_INT},
    {0},
};

static mx_status split_parse(const mx_parse_ctx *pc, void *params) {
  mx_split_params *p = params;
  memset(p, 0, sizeof *p);
  p->axis = mx__parse_int(pc, "axis");
  size_t n;
  mx_status st = mx__parse_ints(pc, "split", p->split, MX_SPLIT_MAX, &n);
  if (st != MX_OK) return st;
  p->n_split = (int32_t)n;
  p->has_split = mx__parse_attr(pc, "split") != NULL;
  if (p->has_split && pc->opset >= 13)
    return mx__parse_fail(pc, "split is an input from opset 13, not an attribute");
  if (p->has_split && (size_t)p->n_split != pc->n_outputs)
    return mx__parse_fail(pc, "split lists %d sizes for %u outputs", (int)p->n_split, pc->n_outputs);
  const mx_attr *num = mx__parse_attr(pc, "num_outputs");
  if (num) {
    if (pc->opset < 18) return mx__parse_fail(pc, "num_outputs exists from opset 18");
    if (num->i != (int64_t)pc->n_outputs)
      return mx__parse_fail(pc, "num_outputs is %lld but the node has %u outputs", (long long)num->i,
                            pc->n_outputs);
    if (pc->n_inputs > 1) return mx__parse_fail(pc, "num_outputs and the split input cannot both be given");
    p->num_outputs = num->i;
  }
  if (pc->opset < 11 && p->axis < 0) return mx__parse_fail(pc, "axis must be >= 0 before opset 11");
  return MX_OK;
}

static mx_status split_infer(mx_infer_ctx *ctx) {
  const mx_split_params *p = ctx->params;
  const mx_value_info *in = &ctx->in[0];
  uint32_t n = ctx->n_out;
  for (uint32_t i = 0; i < n; i++) ctx->out[i].dtype = in->dtype;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "split");
  if (st != MX_OK) return st;
  int32_t rank = in->shape.rank;
  if (rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t axis;
  if (!mx__norm_axis(p->axis, rank, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)rank);
  mx_dim d = in->shape.dims[axis];
  mx_dim sizes[MX_SV_MAX];
  if (n > MX_SV_MAX) return mx__infer_fail(ctx, MX_ERR_LIMIT, "more than %d outputs", MX_SV_MAX);

  bool from_input = ctx->opset >= 13 && mx__in_present(ctx, 1);
  if (p->has_split || from_input) {
    mx_dim vals[MX_SV_MAX];
    int32_t count = 0;
    bool known = true;
    if (p->has_split) {
      count = p->n_split;
      for (int32_t k = 0; k < count; k++) vals[k] = mx_sym_const(ctx->syms, p->split[k]);
    } else {
      known = mx__shp_values(ctx, 1, vals, MX_SV_MAX, &count);
    }
    if (!known) {
      for (uint32_t i = 0; i < n; i++) sizes[i] = mx__infer_fresh(ctx, "split");
    } else {
      if ((uint32_t)count != n)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "split has %d sizes for %u outputs", (int)count, n);
      mx_dim sum = 0;
      for (uint32_t i = 0; i < n; i++) {
        st = mx__shp_dim_of_value(ctx, vals[i], &sizes[i], "split");
        if (st != MX_OK) return st;
        sum = mx_sym_add(ctx->syms, sum, sizes[i]);
      }
      int sign;
      if (mx_sym_compare(ctx->syms, sum, d, &sign) && sign != 0) {
        char ts[64], td[64];
        mx_sym_format(ctx->syms, sum, ts, sizeof ts);
        mx_sym_format(ctx->syms, d, td, sizeof td);
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "split sizes add up to %s but axis %d has size %s", ts,
                              (int)axis, td);
      }
    }
  } else if (p->num_outputs > 0) {
    /* Opset 18: chunks of ceil(d / n); the last one gets what is left. */
    mx_dim chunk = mx_sym_ceildiv(ctx->syms, d, (mx_dim)n);
    mx_dim last = mx_sym_sub(ctx->syms, d, mx_sym_mul(ctx->syms, chunk, (mx_dim)(n - 1)));
    int64_t lv;
    if (mx_sym_const_value(ctx->syms, last, &lv) && lv < 0)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "cannot split size %lld into %u chunks", (long long)d, n);
    for (uint32_t i = 0; i < n; i++) sizes[i] = i + 1 < n ? chunk : last;
  } else {
    if (mx_dim_is_concrete(d) && d % (mx_dim)n != 0)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %d of size %lld does not split into %u equal parts",
                            (int)axis, (long long)d, n);
    mx_dim part = mx_sym_div(ctx->syms, d, (mx_dim)n);
    for (uint32_t i = 0; i < n; i++) sizes[i] = part;
  }

  int64_t offset = 0;
  bool sv_ok = in->sv && in->sv_len >= 0 && rank == 1 && mx_dim_is_concrete(d) && in->sv_len == d;
  for (uint32_t i = 0; i < n; i++) {
    mx_value_info *o = &ctx->out[i];
    o->shape = in->shape;
    o->shape.dims[axis] = sizes[i];
    if (!sv_ok || !mx_dim_is_concrete(sizes[i]) || offset + sizes[i] > in->sv_len) {
      sv_ok = false;
      continue;
    }
    mx__shp_set_sv(ctx, i, in->sv + offset, (int32_t)sizes[i]);
    offset += sizes[i];
  }
  return MX_OK;
}

const mx_op_def mx__op_split = {
    .name = "Split",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = MX_VARIADIC,
    .value_inputs = 1u << 1,
    .attrs = split_attrs,
    .params_size = sizeof(mx_split_params),
    .parse = split_parse,
    .infer = split_infer,
};

/* --- Expand ----------------------------------------------------------------------------------- */

static const mx_attr_spec no_attrs[] = {{0}};

static mx_status expand_infer(mx_infer_ctx *ctx) {
  const mx_value_info *in = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = in->dtype;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "shape");
  if (st != MX_OK) return st;
  mx_shape target;
  st = mx__shp_target_shape(ctx, 1, &target, false, "Expand shape");
  if (st != MX_OK) return st;
  st = mx__broadcast_shapes(ctx, &in->shape, &target, &o->shape);
  if (st != MX_OK) return st;

  int64_t in_dims[MX_MAX_RANK], out_dims[MX_MAX_RANK], strides[MX_MAX_RANK];
  if (in->sv && in->sv_len >= 0 && mx__shp_concrete(&in->shape, in_dims) &&
      mx__shp_concrete(&o->shape, out_dims)) {
    int32_t r = o->shape.rank, off = r - in->shape.rank;
    int64_t s = 1;
    for (int32_t k = r - 1; k >= 0; k--) {
      int32_t j = k - off;
      strides[k] = j < 0 || in_dims[j] == 1 ? 0 : s;
      if (j >= 0) s *= in_dims[j];
    }
    mx__shp_sv_strided(ctx, 0, in->sv, in->sv_len, r, out_dims, 0, strides, NULL);
  }
  return MX_OK;
}

const mx_op_def mx__op_expand = {
    .name = "Expand",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .attrs = no_attrs,
    .infer = expand_infer,
};

/* --- Tile ------------------------------------------------------------------------------------- */

static mx_status tile_infer(mx_infer_ctx *ctx) {
  const mx_value_info *in = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = in->dtype;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "repeats");
  if (st != MX_OK) return st;
  int32_t rank = in->shape.rank;
  if (rank == MX_RANK_UNKNOWN) return MX_OK;
  o->shape.rank = rank;
  mx_dim reps[MX_MAX_RANK];
  int32_t n;
  if (!mx__shp_values(ctx, 1, reps, MX_MAX_RANK, &n)) {
    for (int32_t k = 0; k < rank; k++)
      o->shape.dims[k] = in->shape.dims[k] == 0 ? 0 : mx__infer_fresh(ctx, "tile");
    return MX_OK;
  }
  if (n != rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "repeats has %d entries for a rank-%d input", (int)n, (int)rank);
  for (int32_t k = 0; k < rank; k++) {
    mx_dim r;
    st = mx__shp_dim_of_value(ctx, reps[k], &r, "Tile repeats");
    if (st != MX_OK) return st;
    o->shape.dims[k] = r == 0 ? 0 : mx_sym_mul(ctx->syms, in->shape.dims[k], r);
  }

  int64_t in_dims[MX_MAX_RANK], out_dims[MX_MAX_RANK], strides[MX_MAX_RANK];
  if (in->sv && in->sv_len >= 0 && mx__shp_concrete(&in->shape, in_dims) &&
      mx__shp_concrete(&o->shape, out_dims)) {
    strides_of(in_dims, rank, strides);
    mx__shp_sv_strided(ctx, 0, in->sv, in->sv_len, rank, out_dims, 0, strides, in_dims);
  }
  return MX_OK;
}

const mx_op_def mx__op_tile = {
    .name = "Tile",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .attrs = no_attrs,
    .infer = tile_infer,
};
