/* Index group, part 1: the gathers and ScatterND — Gather, GatherElements, GatherND,
 * ScatterND — and the group's array of definitions (Slice lives in index_slice.c; Trilu, TopK
 * and NonZero in index_misc.c).
 *
 * Gather on a shape's symbolic value is the most common step of exported shape arithmetic
 * (Shape -> Gather(0) gives the batch symbol), so Gather picks symbolic values out whenever the
 * indices are known constants. Constant indices are also checked against concrete dims. */
#include <string.h>

#include "graph/ops/index_params.h"
#include "graph/ops/shape_impl.h"

static mx_status axis_parse(const mx_parse_ctx *pc, void *params) {
  mx_gather_params *p = params;
  p->axis = mx__parse_int(pc, "axis");
  if (pc->opset < 11 && p->axis < 0) return mx__parse_fail(pc, "axis must be >= 0 before opset 11");
  return MX_OK;
}

static const mx_attr_spec axis_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

/* --- Gather ----------------------------------------------------------------------------------- */

/* Gathers symbolic values when data's value and the indices are known and shapes concrete. */
static void gather_sv(mx_infer_ctx *ctx, int32_t axis, const int64_t *idx, int32_t n_idx) {
  const mx_value_info *data = &ctx->in[0];
  int64_t dims[MX_MAX_RANK];
  if (!data->sv || data->sv_len < 0 || !mx__shp_concrete(&data->shape, dims)) return;
  int64_t outer = 1, inner = 1;
  for (int32_t k = 0; k < axis; k++) outer *= dims[k];
  for (int32_t k = axis + 1; k < data->shape.rank; k++) inner *= dims[k];
  int64_t n = dims[axis];
  if (outer * n * inner != data->sv_len || outer * n_idx * inner > MX_SV_MAX) return;
  mx_dim *dst = mx__infer_out_sv(ctx, 0);
  int64_t e = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int32_t j = 0; j < n_idx; j++) {
      int64_t i = idx[j] < 0 ? idx[j] + n : idx[j];
      memcpy(dst + e, data->sv + (o * n + i) * inner, (size_t)inner * sizeof *dst);
      e += inner;
    }
  ctx->out[0].sv = dst;
  ctx->out[0].sv_len = (int32_t)e;
}

static mx_status gather_infer(mx_infer_ctx *ctx) {
  const mx_gather_params *p = ctx->params;
  const mx_value_info *data = &ctx->in[0], *ind = &ctx->in[1];
  mx_value_info *o = &ctx->out[0];
  o->dtype = data->dtype;
  mx_status st = mx__shp_want_index(ctx, 1, "indices");
  if (st != MX_OK) return st;
  if (data->shape.rank == MX_RANK_UNKNOWN || ind->shape.rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t r = data->shape.rank, q = ind->shape.rank, axis;
  if (r == 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "data must have rank >= 1");
  if (!mx__norm_axis(p->axis, r, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)r);
  if (r - 1 + q > MX_MAX_RANK)
    return mx__infer_fail(ctx, MX_ERR_LIMIT, "output rank %d exceeds %d", (int)(r - 1 + q), MX_MAX_RANK);
  o->shape.rank = r - 1 + q;
  int32_t k = 0;
  for (int32_t a = 0; a < axis; a++) o->shape.dims[k++] = data->shape.dims[a];
  for (int32_t a = 0; a < q; a++) o->shape.dims[k++] = ind->shape.dims[a];
  for (int32_t a = axis + 1; a < r; a++) o->shape.dims[k++] = data->shape.dims[a];

  int64_t idx[MX_SV_MAX];
  int32_t n_idx;
  if (!mx__shp_ints(ctx, 1, idx, MX_SV_MAX, &n_idx)) return MX_OK;
  mx_dim n = data->shape.dims[axis];
  if (mx_dim_is_concrete(n)) {
    for (int32_t j = 0; j < n_idx; j++)
      if (idx[j] < -n || idx[j] >= n)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "index %lld is out of range for axis %d of size %lld",
                              (long long)idx[j], (int)axis, (long long)n);
    gather_sv(ctx, axis, idx, n_idx);
  }
  return MX_OK;
}

static const mx_op_def gather_def = {
    .name = "Gather",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_HOST_PREFERRED,
    .attrs = axis_attrs,
    .params_size = sizeof(mx_gather_params),
    .parse = axis_parse,
    .infer = gather_infer,
};

/* --- GatherElements --------------------------------------------------------------------------- */

static mx_status gather_elements_infer(mx_infer_ctx *ctx) {
  const mx_gather_params *p = ctx->params;
  const mx_value_info *data = &ctx->in[0], *ind = &ctx->in[1];
  mx_value_info *o = &ctx->out[0];
  o->dtype = data->dtype;
  mx_status st = mx__shp_want_index(ctx, 1, "indices");
  if (st != MX_OK) return st;
  o->shape = ind->shape;
  int32_t r = data->shape.rank != MX_RANK_UNKNOWN ? data->shape.rank : ind->shape.rank;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  if (data->shape.rank != MX_RANK_UNKNOWN && ind->shape.rank != MX_RANK_UNKNOWN &&
      data->shape.rank != ind->shape.rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "indices have rank %d but data has rank %d",
                          (int)ind->shape.rank, (int)data->shape.rank);
  int32_t axis;
  if (r == 0 || !mx__norm_axis(p->axis, r, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)r);
  return MX_OK;
}

static const mx_op_def gather_elements_def = {
    .name = "GatherElements",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = axis_attrs,
    .params_size = sizeof(mx_gather_params),
    .parse = axis_parse,
    .infer = gather_elements_infer,
};

/* --- GatherND --------------------------------------------------------------------------------- */

static const mx_attr_spec gathernd_attrs[] = {
    {.name = "batch_dims", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status gathernd_parse(const mx_parse_ctx *pc, void *params) {
  mx_gathernd_params *p = params;
  p->batch_dims = mx__parse_int(pc, "batch_dims");
  if (p->batch_dims < 0) return mx__parse_fail(pc, "batch_dims must be >= 0");
  return MX_OK;
}

static mx_status gathernd_infer(mx_infer_ctx *ctx) {
  const mx_gathernd_params *p = ctx->params;
  const mx_value_info *data = &ctx->in[0], *ind = &ctx->in[1];
  mx_value_info *o = &ctx->out[0];
  o->dtype = data->dtype;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "indices");
  if (st != MX_OK) return st;
  int32_t r = data->shape.rank, q = ind->shape.rank;
  int64_t b = p->batch_dims;
  if (r == MX_RANK_UNKNOWN || q == MX_RANK_UNKNOWN) return MX_OK;
  if (r < 1 || q < 1) return mx__infer_fail(ctx, MX_ERR_SHAPE, "data and indices must have rank >= 1");
  if (b >= r || b >= q)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "batch_dims %lld must be less than both ranks (%d, %d)",
                          (long long)b, (int)r, (int)q);
  mx_dim m = ind->shape.dims[q - 1];
  if (!mx_dim_is_concrete(m)) return MX_OK; /* the output rank depends on it */
  if (m < 1 || m > r - b)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "indices' last dim %lld must be in 1..%lld", (long long)m,
                          (long long)(r - b));
  int64_t rank = (q - 1) + (r - b - m);
  if (rank > MX_MAX_RANK)
    return mx__infer_fail(ctx, MX_ERR_LIMIT, "output rank %lld exceeds %d", (long long)rank, MX_MAX_RANK);
  o->shape.rank = (int32_t)rank;
  int32_t k = 0;
  for (int32_t a = 0; a < q - 1; a++) {
    mx_dim d = ind->shape.dims[a];
    if (a < b) {
      st = mx__shp_merge_dim(ctx, d, data->shape.dims[a], &d, "batch dim of indices and data");
      if (st != MX_OK) return st;
    }
    o->shape.dims[k++] = d;
  }
  for (int64_t a = b + m; a < r; a++) o->shape.dims[k++] = data->shape.dims[a];
  return MX_OK;
}

static const mx_op_def gathernd_def = {
    .name = "GatherND",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = gathernd_attrs,
    .params_size = sizeof(mx_gathernd_params),
    .parse = gathernd_parse,
    .infer = gathernd_infer,
};

/* --- ScatterND -------------------------------------------------------------------------------- */

static const mx_attr_spec scatternd_attrs[] = {
    {.name = "reduction", .type = MX_ATTR_STRING, .def_s = "none"},
    {0},
};

static mx_status scatternd_parse(const mx_parse_ctx *pc, void *params) {
  mx_scatternd_params *p = params;
  memset(p, 0, sizeof *p);
  char red[16];
  mx_status st = mx__parse_string(pc, "reduction", red, sizeof red);
  if (st != MX_OK) return st;
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int32_t k = 0; k < 5; k++)
    if (strcmp(red, names[k]) == 0) {
      p->reduction = k;
      if ((k == MX_SCATTER_ADD || k == MX_SCATTER_MUL) && pc->opset < 16)
        return mx__parse_fail(pc, "reduction '%s' exists from opset 16", red);
      if ((k == MX_SCATTER_MAX || k == MX_SCATTER_MIN) && pc->opset < 18)
        return mx__parse_fail(pc, "reduction '%s' exists from opset 18", red);
      return MX_OK;
    }
  return mx__parse_fail(pc, "unknown reduction '%s'", red);
}

static mx_status scatternd_infer(mx_infer_ctx *ctx) {
  const mx_value_info *data = &ctx->in[0], *ind = &ctx->in[1], *upd = &ctx->in[2];
  mx_value_info *o = &ctx->out[0];
  o->dtype = data->dtype;
  o->shape = data->shape;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "indices");
  if (st == MX_OK) st = mx__shp_want_dtype(ctx, 2, data->dtype, "updates");
  if (st != MX_OK) return st;
  int32_t r = data->shape.rank, q = ind->shape.rank;
  if (r == MX_RANK_UNKNOWN || q == MX_RANK_UNKNOWN) return MX_OK;
  if (q < 1) return mx__infer_fail(ctx, MX_ERR_SHAPE, "indices must have rank >= 1");
  mx_dim m = ind->shape.dims[q - 1];
  if (!mx_dim_is_concrete(m)) return MX_OK;
  if (m > r)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "indices' last dim %lld exceeds the data rank %d", (long long)m,
                          (int)r);
  /* updates must have shape indices.shape[:-1] + data.shape[m:]. */
  if (upd->shape.rank != MX_RANK_UNKNOWN) {
    int64_t want = (q - 1) + (r - m);
    if (upd->shape.rank != want)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "updates have rank %d, expected %lld", (int)upd->shape.rank,
                            (long long)want);
    for (int32_t a = 0; a < upd->shape.rank; a++) {
      mx_dim expect = a < q - 1 ? ind->shape.dims[a] : data->shape.dims[m + a - (q - 1)];
      mx_dim d;
      st = mx__shp_merge_dim(ctx, upd->shape.dims[a], expect, &d, "updates");
      if (st != MX_OK) return st;
    }
  }
  return MX_OK;
}

static const mx_op_def scatternd_def = {
    .name = "ScatterND",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = scatternd_attrs,
    .params_size = sizeof(mx_scatternd_params),
    .parse = scatternd_parse,
    .infer = scatternd_infer,
};

/* --- the group -------------------------------------------------------------------------------- */

const mx_op_def *const mx__ops_index[] = {
    &gather_def,   &gather_elements_def, &gathernd_def,   &scatternd_def, &mx__op_slice,
    &mx__op_trilu, &mx__op_topk,         &mx__op_nonzero, NULL,
};
