/* Op definitions of the resampling and geometry group: Pad, CenterCropPad, Resize, Upsample,
 * DepthToSpace, SpaceToDepth, GridSample, AffineGrid, RoiAlign and NonMaxSuppression, and the
 * group's array.
 *
 * Shapes stay symbolic where the rule allows it: Pad gives dim + begin + end (pads may be
 * symbolic values of shape arithmetic), DepthToSpace c/(b*b) and h*b, Resize by an integer
 * scale d*s. A size that depends on values unknown at compile time (float scales fed as a
 * graph input, pads of a graph input) becomes a fresh symbol. NonMaxSuppression's row count
 * depends on the data: it is data-dependent with an upper bound of every candidate box. */
#include <math.h>
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/resample_params.h"
#include "graph/ops/shape_impl.h"

/* --- shared helpers ---------------------------------------------------------------------------- */

/* Index of `name` in names[0..n), or -1. */
static int32_t name_index(const char *name, const char *const *names, int32_t n) {
  for (int32_t k = 0; k < n; k++)
    if (strcmp(name, names[k]) == 0) return k;
  return -1;
}

/* Reads string attribute `attr` and maps it through names[0..n); fails naming the attribute. */
static mx_status parse_enum(const mx_parse_ctx *pc, const char *attr, const char *const *names, int32_t n,
                            int32_t *out) {
  char buf[64];
  mx_status st = mx__parse_string(pc, attr, buf, sizeof buf);
  if (st != MX_OK) return st;
  int32_t k = name_index(buf, names, n);
  if (k < 0) return mx__parse_fail(pc, "attribute %s: unknown value '%s'", attr, buf);
  *out = k;
  return MX_OK;
}

/* True when input i is absent or provably has no elements (an empty scales tensor). */
static bool input_empty(const mx_infer_ctx *ctx, int32_t i) {
  if (i < 0 || !mx__in_present(ctx, (uint32_t)i)) return true;
  int64_t n;
  return mx__shp_concrete_numel(&ctx->in[i].shape, &n) && n == 0;
}

/* The float values of input i from host data (float32/float64/float16); false when unknown. */
static bool input_floats(const mx_infer_ctx *ctx, uint32_t i, double *out, int32_t cap, int32_t *n) {
  if (!mx__in_present(ctx, i)) return false;
  const mx_tensor *t = ctx->in[i].data;
  int64_t count;
  if (!t || !mx_tensor_numel(t, &count) || count > cap || (count > 0 && !t->data)) return false;
  for (int64_t k = 0; k < count; k++) {
    switch (t->dtype) {
      case MX_FLOAT32: out[k] = ((const float *)t->data)[k]; break;
      case MX_FLOAT64: out[k] = ((const double *)t->data)[k]; break;
      default: return false;
    }
  }
  *n = (int32_t)count;
  return true;
}

/* Normalizes an axes list against rank r into out; fails naming `what` on a value out of range
 * or a repeated axis. */
static mx_status norm_axes(mx_infer_ctx *ctx, const int64_t *axes, int32_t n, int32_t r, int32_t *out,
                           const char *what) {
  for (int32_t k = 0; k < n; k++) {
    if (!mx__norm_axis(axes[k], r, &out[k]))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s: axis %lld is out of range for rank %d", what,
                            (long long)axes[k], (int)r);
    for (int32_t j = 0; j < k; j++)
      if (out[j] == out[k])
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s: axis %d is repeated", what, (int)out[k]);
  }
  return MX_OK;
}

/* A dim from a shape-giving value: its value when known, else a fresh symbol named `what`. */
static mx_status dim_from_value(mx_infer_ctx *ctx, mx_dim v, const char *what, mx_dim *out) {
  mx_status st = mx__shp_dim_of_value(ctx, v, out, what);
  if (st == MX_OK && mx_dim_is_unknown(*out)) *out = mx__infer_fresh(ctx, what);
  return st;
}

/* Fails unless input i is a float tensor. */
static mx_status want_float(mx_infer_ctx *ctx, uint32_t i, const char *role) {
  if (!mx__in_present(ctx, i) || mx_dtype_is_float(ctx->in[i].dtype)) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u (%s) must be a float tensor, not %s", i, role,
                        mx_dtype_name(ctx->in[i].dtype));
}

/* --- Pad -------------------------------------------------------------------------------------- */

static const mx_attr_spec pad_attrs[] = {
    {.name = "mode", .type = MX_ATTR_STRING, .def_s = "constant"},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "paddings", .type = MX_ATTR_INTS},
    {.name = "value", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {0},
};

static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap"};

static mx_status pad_parse(const mx_parse_ctx *pc, void *params) {
  mx_pad_params *p = params;
  memset(p, 0, sizeof *p);
  mx_status st = parse_enum(pc, "mode", pad_modes, 4, &p->mode);
  if (st != MX_OK) return st;
  if (p->mode == MX_PAD_WRAP && pc->opset < 19)
    return mx__parse_fail(pc, "attribute mode: 'wrap' exists from opset 19");
  if (pc->opset >= 11) {
    if (mx__parse_attr(pc, "pads") || mx__parse_attr(pc, "paddings") || mx__parse_attr(pc, "value"))
      return mx__parse_fail(pc, "attributes pads/value are inputs from opset 11");
    if (pc->n_inputs < 2) return mx__parse_fail(pc, "input pads is required from opset 11");
    if (pc->n_inputs > 3 && pc->opset < 18) return mx__parse_fail(pc, "input axes exists from opset 18");
    return MX_OK;
  }
  if (pc->n_inputs != 1) return mx__parse_fail(pc, "Pad takes one input before opset 11");
  const char *name = mx__parse_attr(pc, "pads") ? "pads" : "paddings";
  if (!mx__parse_attr(pc, name)) return mx__parse_fail(pc, "attribute pads is required before opset 11");
  size_t n;
  st = mx__parse_ints(pc, name, p->pads, 2 * MX_MAX_RANK, &n);
  if (st != MX_OK) return st;
  p->n_pads = (int32_t)n;
  p->value = mx__parse_float(pc, "value");
  p->from_attrs = 1;
  return MX_OK;
}

static mx_status pad_infer(mx_infer_ctx *ctx) {
  const mx_pad_params *p = ctx->params;
  const mx_value_info *x = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = x->dtype;
  o->shape = x->shape;
  mx_status st = MX_OK;
  if (!p->from_attrs) {
    st = mx__shp_want_dtype(ctx, 1, MX_INT64, "pads");
    if (st == MX_OK && mx__in_present(ctx, 2)) st = mx__infer_same_dtype(ctx, 2, 0);
    if (st == MX_OK) st = mx__shp_want_index(ctx, 3, "axes");
    if (st != MX_OK) return st;
    if (mx__in_present(ctx, 2) && ctx->in[2].shape.rank > 1)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "constant_value must be a scalar");
  }
  int32_t r = x->shape.rank;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  int32_t axes[MX_MAX_RANK], na = r;
  bool axes_known = true;
  for (int32_t k = 0; k < r; k++) axes[k] = k;
  if (!p->from_attrs && mx__in_present(ctx, 3)) {
    int64_t av[MX_MAX_RANK];
    int32_t n;
    if (mx__shp_ints(ctx, 3, av, MX_MAX_RANK, &n)) {
      st = norm_axes(ctx, av, n, r, axes, "input axes");
      if (st != MX_OK) return st;
      na = n;
    } else {
      axes_known = false;
    }
  }
  mx_dim pv[2 * MX_MAX_RANK];
  int32_t np = 0;
  bool pads_known;
  if (p->from_attrs) {
    for (int32_t k = 0; k < p->n_pads; k++) pv[k] = mx_sym_const(ctx->syms, p->pads[k]);
    np = p->n_pads;
    pads_known = true;
  } else {
    pads_known = mx__shp_values(ctx, 1, pv, 2 * MX_MAX_RANK, &np);
    if (!pads_known) {
      const mx_shape *ps = &ctx->in[1].shape;
      if (ps->rank != MX_RANK_UNKNOWN && ps->rank != 1)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "input pads must be 1-D, not rank %d", (int)ps->rank);
      if (ps->rank == 1 && mx_dim_is_concrete(ps->dims[0]))
        np = (int32_t)ps->dims[0];
      else
        np = -1;
    }
  }
  if (axes_known && np >= 0 && np != 2 * na)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "pads has %d values, expected %d (a begin and an end for each of %d axes)", (int)np,
                          (int)(2 * na), (int)na);
  if (!axes_known || !pads_known) {
    for (int32_t k = 0; k < na; k++) o->shape.dims[axes[k]] = mx__infer_fresh(ctx, "pad");
    return MX_OK;
  }
  for (int32_t k = 0; k < na; k++) {
    mx_dim d = x->shape.dims[axes[k]], b = pv[k], e = pv[k + na];
    if (mx_dim_is_unknown(b) || mx_dim_is_unknown(e) || mx_dim_is_unknown(d)) {
      o->shape.dims[axes[k]] = mx_dim_is_unknown(d) ? MX_DIM_UNKNOWN : mx__infer_fresh(ctx, "pad");
      continue;
    }
    mx_dim sum = mx_sym_add(ctx->syms, mx_sym_add(ctx->syms, d, b), e);
    int64_t c;
    if (mx_sym_const_value(ctx->syms, sum, &c) && c < 0)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "pads make axis %d negative (%lld)", (int)axes[k],
                            (long long)c);
    o->shape.dims[axes[k]] = sum;
  }
  return MX_OK;
}

static const mx_op_def pad_def = {
    .name = "Pad",
    .min_inputs = 1,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 3),
    .attrs = pad_attrs,
    .params_size = sizeof(mx_pad_params),
    .parse = pad_parse,
    .infer = pad_infer,
};

/* --- CenterCropPad ---------------------------------------------------------------------------- */

static const mx_attr_spec center_crop_pad_attrs[] = {
    {.name = "axes", .type = MX_ATTR_INTS},
    {0},
};

static mx_status center_crop_pad_parse(const mx_parse_ctx *pc, void *params) {
  mx_center_crop_pad_params *p = params;
  memset(p, 0, sizeof *p);
  size_t n;
  mx_status st = mx__parse_ints(pc, "axes", p->axes, MX_MAX_RANK, &n);
  p->n_axes = (int32_t)n;
  return st;
}

static mx_status center_crop_pad_infer(mx_infer_ctx *ctx) {
  const mx_center_crop_pad_params *p = ctx->params;
  const mx_value_info *x = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = x->dtype;
  o->shape = x->shape;
  mx_status st = mx__shp_want_index(ctx, 1, "shape");
  if (st != MX_OK) return st;
  int32_t r = x->shape.rank;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  int32_t axes[MX_MAX_RANK], na = r;
  for (int32_t k = 0; k < r; k++) axes[k] = k;
  if (p->n_axes) {
    st = norm_axes(ctx, p->axes, p->n_axes, r, axes, "attribute axes");
    if (st != MX_OK) return st;
    na = p->n_axes;
  }
  mx_dim sv[MX_MAX_RANK];
  int32_t n;
  if (!mx__shp_values(ctx, 1, sv, MX_MAX_RANK, &n)) {
    for (int32_t k = 0; k < na; k++) o->shape.dims[axes[k]] = mx__infer_fresh(ctx, "crop");
    return MX_OK;
  }
  if (n != na)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "shape has %d values, expected %d (one per axis)", (int)n,
                          (int)na);
  for (int32_t k = 0; k < na; k++) {
    st = dim_from_value(ctx, sv[k], "crop", &o->shape.dims[axes[k]]);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

static const mx_op_def center_crop_pad_def = {
    .name = "CenterCropPad",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .attrs = center_crop_pad_attrs,
    .params_size = sizeof(mx_center_crop_pad_params),
    .parse = center_crop_pad_parse,
    .infer = center_crop_pad_infer,
};

/* --- Resize and Upsample ---------------------------------------------------------------------- */

static const mx_attr_spec resize_attrs[] = {
    {.name = "antialias", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "axes", .type = MX_ATTR_INTS},
    {.name = "coordinate_transformation_mode", .type = MX_ATTR_STRING, .def_s = "half_pixel"},
    {.name = "cubic_coeff_a", .type = MX_ATTR_FLOAT, .def_f = -0.75f},
    {.name = "exclude_outside", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "extrapolation_value", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "keep_aspect_ratio_policy", .type = MX_ATTR_STRING, .def_s = "stretch"},
    {.name = "mode", .type = MX_ATTR_STRING, .def_s = "nearest"},
    {.name = "nearest_mode", .type = MX_ATTR_STRING, .def_s = "round_prefer_floor"},
    {0},
};

static const char *const resize_modes[] = {"nearest", "linear", "cubic"};
static const char *const resize_coords[] = {
    "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",  "align_corners",
    "asymmetric", "tf_crop_and_resize",   "tf_half_pixel_for_nn"};
static const char *const resize_nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
static const char *const resize_aspects[] = {"stretch", "not_larger", "not_smaller"};

static mx_status resize_parse(const mx_parse_ctx *pc, void *params) {
  mx_resize_params *p = params;
  memset(p, 0, sizeof *p);
  mx_status st = parse_enum(pc, "mode", resize_modes, 3, &p->mode);
  if (st == MX_OK) st = parse_enum(pc, "nearest_mode", resize_nearests, 4, &p->nearest);
  if (st == MX_OK) st = parse_enum(pc, "keep_aspect_ratio_policy", resize_aspects, 3, &p->aspect);
  if (st != MX_OK) return st;
  if (pc->opset < 11) {
    /* Resize-10: X and scales, sampling at x / scale. */
    p->coord = MX_COORD_ASYMMETRIC;
    p->nearest = MX_NEAREST_FLOOR;
    p->roi_input = -1;
    p->scales_input = 1;
    p->sizes_input = -1;
    if (pc->n_inputs != 2) return mx__parse_fail(pc, "Resize takes X and scales before opset 11");
  } else {
    st = parse_enum(pc, "coordinate_transformation_mode", resize_coords, 7, &p->coord);
    if (st != MX_OK) return st;
    if (p->coord == MX_COORD_TF_HALF_PIXEL_FOR_NN && pc->opset >= 13)
      return mx__parse_fail(
          pc, "attribute coordinate_transformation_mode: 'tf_half_pixel_for_nn' was removed in opset 13");
    if (p->coord == MX_COORD_HALF_PIXEL_SYMMETRIC && pc->opset < 19)
      return mx__parse_fail(
          pc, "attribute coordinate_transformation_mode: 'half_pixel_symmetric' exists from opset 19");
    p->roi_input = 1;
    p->scales_input = 2;
    p->sizes_input = 3;
    if (pc->opset < 13 && pc->n_inputs < 3)
      return mx__parse_fail(pc, "input scales is required in opsets 11 and 12");
  }
  int64_t aa = mx__parse_int(pc, "antialias"), ex = mx__parse_int(pc, "exclude_outside");
  if (aa != 0 && aa != 1)
    return mx__parse_fail(pc, "attribute antialias must be 0 or 1, not %lld", (long long)aa);
  if (ex != 0 && ex != 1)
    return mx__parse_fail(pc, "attribute exclude_outside must be 0 or 1, not %lld", (long long)ex);
  if (aa && p->mode == MX_RESIZE_NEAREST)
    return mx__parse_fail(pc, "attribute antialias: not defined for mode 'nearest'");
  p->antialias = (int32_t)aa;
  p->exclude_outside = (int32_t)ex;
  p->cubic_coeff_a = mx__parse_float(pc, "cubic_coeff_a");
  p->extrapolation_value = mx__parse_float(pc, "extrapolation_value");
  size_t n;
  st = mx__parse_ints(pc, "axes", p->axes, MX_MAX_RANK, &n);
  p->n_axes = (int32_t)n;
  return st;
}

static const mx_attr_spec upsample_attrs[] = {
    {.name = "mode", .type = MX_ATTR_STRING, .def_s = "nearest"},
    {.name = "scales", .type = MX_ATTR_FLOATS},
    {0},
};

static mx_status upsample_parse(const mx_parse_ctx *pc, void *params) {
  mx_resize_params *p = params;
  memset(p, 0, sizeof *p);
  char buf[32];
  mx_status st = mx__parse_string(pc, "mode", buf, sizeof buf);
  if (st != MX_OK) return st;
  if (strcmp(buf, "nearest") == 0)
    p->mode = MX_RESIZE_NEAREST;
  else if (strcmp(buf, "linear") == 0 || strcmp(buf, "bilinear") == 0)
    p->mode = MX_RESIZE_LINEAR;
  else
    return mx__parse_fail(pc, "attribute mode: unknown value '%s'", buf);
  /* Upsample samples at x / scale and takes the floor for nearest. */
  p->coord = MX_COORD_ASYMMETRIC;
  p->nearest = MX_NEAREST_FLOOR;
  p->cubic_coeff_a = -0.75f;
  p->roi_input = -1;
  p->sizes_input = -1;
  if (pc->opset >= 9) {
    if (mx__parse_attr(pc, "scales")) return mx__parse_fail(pc, "attribute scales is an input from opset 9");
    if (pc->n_inputs != 2) return mx__parse_fail(pc, "Upsample takes X and scales from opset 9");
    p->scales_input = 1;
    return MX_OK;
  }
  if (pc->n_inputs != 1) return mx__parse_fail(pc, "Upsample takes one input before opset 9");
  size_t n;
  st = mx__parse_floats(pc, "scales", p->attr_scales, MX_MAX_RANK, &n);
  if (st != MX_OK) return st;
  if (n == 0) return mx__parse_fail(pc, "attribute scales is required before opset 9");
  for (size_t k = 0; k < n; k++)
    if (!(p->attr_scales[k] >= 1.0f)) return mx__parse_fail(pc, "attribute scales: values must be >= 1");
  p->n_attr_scales = (int32_t)n;
  p->scales_input = -1;
  return MX_OK;
}

/* Output size of a dim d scaled by s: floor(d * s), symbolic when s is 1, an integer or the
 * inverse of a power of two. */
static mx_dim scaled_dim(mx_infer_ctx *ctx, mx_dim d, double s) {
  if (s == 1.0 || mx_dim_is_unknown(d)) return d;
  if (mx_dim_is_concrete(d)) return (mx_dim)floor((double)d * s);
  if (s == floor(s) && s < 1e9) return mx_sym_mul(ctx->syms, d, (mx_dim)s);
  double inv = 1.0 / s;
  if (inv == floor(inv) && inv < 1e9 && s * inv == 1.0) return mx_sym_floordiv(ctx->syms, d, (mx_dim)inv);
  return mx__infer_fresh(ctx, "resize");
}

static mx_status resize_infer(mx_infer_ctx *ctx) {
  const mx_resize_params *p = ctx->params;
  const mx_value_info *x = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = x->dtype;
  o->shape = x->shape;
  if (x->dtype == MX_BOOL) return mx__infer_fail(ctx, MX_ERR_DTYPE, "input X must be numeric, not bool");
  mx_status st = MX_OK;
  if (p->sizes_input >= 0) st = mx__shp_want_dtype(ctx, (uint32_t)p->sizes_input, MX_INT64, "sizes");
  if (st == MX_OK && p->scales_input >= 0) st = want_float(ctx, (uint32_t)p->scales_input, "scales");
  if (st == MX_OK && p->roi_input >= 0) st = want_float(ctx, (uint32_t)p->roi_input, "roi");
  if (st != MX_OK) return st;
  int32_t r = x->shape.rank;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  int32_t axes[MX_MAX_RANK], na = r;
  for (int32_t k = 0; k < r; k++) axes[k] = k;
  if (p->n_axes) {
    st = norm_axes(ctx, p->axes, p->n_axes, r, axes, "attribute axes");
    if (st != MX_OK) return st;
    na = p->n_axes;
  }
  bool has_sizes = !input_empty(ctx, p->sizes_input);
  bool has_scales = p->n_attr_scales > 0 || !input_empty(ctx, p->scales_input);
  if (has_sizes && has_scales && p->n_attr_scales == 0) {
    int64_t a, b;
    if (mx__shp_concrete_numel(&ctx->in[p->sizes_input].shape, &a) &&
        mx__shp_concrete_numel(&ctx->in[p->scales_input].shape, &b))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "only one of scales and sizes may be given");
    /* One of them is empty at run time: the outputs are unknown until then. */
    for (int32_t k = 0; k < na; k++) o->shape.dims[axes[k]] = mx__infer_fresh(ctx, "resize");
    return MX_OK;
  }
  if (has_sizes) {
    mx_dim sv[MX_MAX_RANK];
    int32_t n;
    if (!mx__shp_values(ctx, (uint32_t)p->sizes_input, sv, MX_MAX_RANK, &n)) {
      for (int32_t k = 0; k < na; k++) o->shape.dims[axes[k]] = mx__infer_fresh(ctx, "resize");
      return MX_OK;
    }
    if (n != na)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "sizes has %d values, expected %d", (int)n, (int)na);
    if (p->aspect == MX_ASPECT_STRETCH) {
      for (int32_t k = 0; k < na; k++) {
        st = dim_from_value(ctx, sv[k], "resize", &o->shape.dims[axes[k]]);
        if (st != MX_OK) return st;
      }
      return MX_OK;
    }
    /* keep_aspect_ratio_policy: one scale for every axis, the smallest or largest ratio. */
    double scale = 0.0;
    bool known = true;
    for (int32_t k = 0; k < na && known; k++) {
      int64_t want;
      mx_dim d = x->shape.dims[axes[k]];
      known = mx_sym_const_value(ctx->syms, sv[k], &want) && mx_dim_is_concrete(d) && d > 0;
      if (!known) break;
      if (want < 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "sizes: negative size %lld", (long long)want);
      double ratio = (double)want / (double)d;
      if (k == 0 || (p->aspect == MX_ASPECT_NOT_LARGER ? ratio < scale : ratio > scale)) scale = ratio;
    }
    for (int32_t k = 0; k < na; k++)
      o->shape.dims[axes[k]] =
          known ? (mx_dim)(scale * (double)x->shape.dims[axes[k]] + 0.5) : mx__infer_fresh(ctx, "resize");
    return MX_OK;
  }
  if (!has_scales) return mx__infer_fail(ctx, MX_ERR_SHAPE, "one of scales and sizes is required");
  double sc[MX_MAX_RANK];
  int32_t n = 0;
  if (p->n_attr_scales > 0) {
    n = p->n_attr_scales;
    for (int32_t k = 0; k < n; k++) sc[k] = p->attr_scales[k];
  } else if (!input_floats(ctx, (uint32_t)p->scales_input, sc, MX_MAX_RANK, &n)) {
    for (int32_t k = 0; k < na; k++) o->shape.dims[axes[k]] = mx__infer_fresh(ctx, "resize");
    return MX_OK;
  }
  if (n != na) return mx__infer_fail(ctx, MX_ERR_SHAPE, "scales has %d values, expected %d", (int)n, (int)na);
  for (int32_t k = 0; k < na; k++) {
    if (!(sc[k] > 0.0)) return mx__infer_fail(ctx, MX_ERR_SHAPE, "scales: value %g is not positive", sc[k]);
    o->shape.dims[axes[k]] = scaled_dim(ctx, x->shape.dims[axes[k]], sc[k]);
  }
  return MX_OK;
}

static const mx_op_def resize_def = {
    .name = "Resize",
    .min_inputs = 1,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 2) | (1u << 3),
    .attrs = resize_attrs,
    .params_size = sizeof(mx_resize_params),
    .parse = resize_parse,
    .infer = resize_infer,
};

static const mx_op_def upsample_def = {
    .name = "Upsample",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .attrs = upsample_attrs,
    .params_size = sizeof(mx_resize_params),
    .parse = upsample_parse,
    .infer = resize_infer,
};

/* --- DepthToSpace / SpaceToDepth -------------------------------------------------------------- */

static const mx_attr_spec depth_space_attrs[] = {
    {.name = "blocksize", .type = MX_ATTR_INT, .required = true},
    {.name = "mode", .type = MX_ATTR_STRING, .def_s = "DCR"},
    {0},
};

static mx_status depth_space_parse(const mx_parse_ctx *pc, void *params) {
  mx_depth_space_params *p = params;
  memset(p, 0, sizeof *p);
  p->blocksize = mx__parse_int(pc, "blocksize");
  if (p->blocksize < 1 || p->blocksize > (1 << 20))
    return mx__parse_fail(pc, "attribute blocksize must be >= 1, not %lld", (long long)p->blocksize);
  char mode[8];
  mx_status st = mx__parse_string(pc, "mode", mode, sizeof mode);
  if (st != MX_OK) return st;
  if (strcmp(mode, "CRD") == 0)
    p->crd = 1;
  else if (strcmp(mode, "DCR") != 0)
    return mx__parse_fail(pc, "attribute mode: unknown value '%s' (DCR or CRD)", mode);
  if (p->crd && strcmp(pc->def->name, "DepthToSpace") != 0)
    return mx__parse_fail(pc, "attribute mode: SpaceToDepth has no mode");
  return MX_OK;
}

/* Checks that a concrete dim is a multiple of m. */
static mx_status want_multiple(mx_infer_ctx *ctx, mx_dim d, int64_t m, const char *what, int64_t b) {
  if (mx_dim_is_concrete(d) && d % m != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute blocksize %lld: %s %lld is not a multiple of %lld",
                          (long long)b, what, (long long)d, (long long)m);
  return MX_OK;
}

static mx_status depth_to_space_infer(mx_infer_ctx *ctx) {
  const mx_depth_space_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = ctx->in[0].dtype;
  o->shape = *s;
  if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (s->rank != 4)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input must be 4-D [N, C, H, W], not rank %d", (int)s->rank);
  int64_t b = p->blocksize;
  mx_status st = want_multiple(ctx, s->dims[1], b * b, "channels", b);
  if (st != MX_OK) return st;
  o->shape.dims[1] = mx_sym_div(ctx->syms, s->dims[1], b * b);
  o->shape.dims[2] = mx_sym_mul(ctx->syms, s->dims[2], b);
  o->shape.dims[3] = mx_sym_mul(ctx->syms, s->dims[3], b);
  return MX_OK;
}

static mx_status space_to_depth_infer(mx_infer_ctx *ctx) {
  const mx_depth_space_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = ctx->in[0].dtype;
  o->shape = *s;
  if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (s->rank != 4)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input must be 4-D [N, C, H, W], not rank %d", (int)s->rank);
  int64_t b = p->blocksize;
  mx_status st = want_multiple(ctx, s->dims[2], b, "height", b);
  if (st == MX_OK) st = want_multiple(ctx, s->dims[3], b, "width", b);
  if (st != MX_OK) return st;
  o->shape.dims[1] = mx_sym_mul(ctx->syms, s->dims[1], b * b);
  o->shape.dims[2] = mx_sym_div(ctx->syms, s->dims[2], b);
  o->shape.dims[3] = mx_sym_div(ctx->syms, s->dims[3], b);
  return MX_OK;
}

static const mx_op_def depth_to_space_def = {
    .name = "DepthToSpace",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = depth_space_attrs,
    .params_size = sizeof(mx_depth_space_params),
    .parse = depth_space_parse,
    .infer = depth_to_space_infer,
};

static const mx_op_def space_to_depth_def = {
    .name = "SpaceToDepth",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = depth_space_attrs,
    .params_size = sizeof(mx_depth_space_params),
    .parse = depth_space_parse,
    .infer = space_to_depth_infer,
};

/* --- GridSample ------------------------------------------------------------------------------- */

static const mx_attr_spec grid_sample_attrs[] = {
    {.name = "align_corners", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "mode", .type = MX_ATTR_STRING},
    {.name = "padding_mode", .type = MX_ATTR_STRING, .def_s = "zeros"},
    {0},
};

static mx_status grid_sample_parse(const mx_parse_ctx *pc, void *params) {
  mx_grid_sample_params *p = params;
  memset(p, 0, sizeof *p);
  /* Opset 16 names the modes bilinear/bicubic; from 20 linear/cubic (the default follows). */
  static const char *const old_modes[] = {"nearest", "bilinear", "bicubic"};
  char mode[32];
  mx_status st = mx__parse_string(pc, "mode", mode, sizeof mode);
  if (st != MX_OK) return st;
  if (!mode[0])
    p->mode = MX_RESIZE_LINEAR;
  else if ((p->mode = name_index(mode, pc->opset >= 20 ? resize_modes : old_modes, 3)) < 0)
    return mx__parse_fail(pc, "attribute mode: unknown value '%s'", mode);
  static const char *const paddings[] = {"zeros", "border", "reflection"};
  st = parse_enum(pc, "padding_mode", paddings, 3, &p->padding);
  if (st != MX_OK) return st;
  int64_t ac = mx__parse_int(pc, "align_corners");
  if (ac != 0 && ac != 1)
    return mx__parse_fail(pc, "attribute align_corners must be 0 or 1, not %lld", (long long)ac);
  p->align_corners = (int32_t)ac;
  return MX_OK;
}

static mx_status grid_sample_infer(mx_infer_ctx *ctx) {
  const mx_shape *xs = &ctx->in[0].shape, *gs = &ctx->in[1].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = ctx->in[0].dtype;
  mx_status st = want_float(ctx, 1, "grid");
  if (st != MX_OK) return st;
  if (xs->rank == MX_RANK_UNKNOWN && gs->rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t r = xs->rank != MX_RANK_UNKNOWN ? xs->rank : gs->rank;
  if (r < 3)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "X must have rank >= 3 [N, C, spatial...], not %d", (int)r);
  if (ctx->opset < 20 && r != 4)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "X must be 4-D before opset 20, not rank %d", (int)r);
  if (xs->rank != MX_RANK_UNKNOWN && gs->rank != MX_RANK_UNKNOWN && xs->rank != gs->rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "grid has rank %d but X has rank %d", (int)gs->rank,
                          (int)xs->rank);
  o->shape.rank = r;
  mx_dim n = xs->rank != MX_RANK_UNKNOWN ? xs->dims[0] : MX_DIM_UNKNOWN;
  if (gs->rank != MX_RANK_UNKNOWN) {
    st = mx__shp_merge_dim(ctx, n, gs->dims[0], &n, "batch of X and grid");
    if (st != MX_OK) return st;
    mx_dim last = gs->dims[r - 1];
    if (mx_dim_is_concrete(last) && last != r - 2)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "grid's last dim is %lld, expected %d", (long long)last,
                            (int)(r - 2));
  }
  o->shape.dims[0] = n;
  o->shape.dims[1] = xs->rank != MX_RANK_UNKNOWN ? xs->dims[1] : MX_DIM_UNKNOWN;
  for (int32_t k = 2; k < r; k++)
    o->shape.dims[k] = gs->rank != MX_RANK_UNKNOWN ? gs->dims[k - 1] : MX_DIM_UNKNOWN;
  return MX_OK;
}

static const mx_op_def grid_sample_def = {
    .name = "GridSample",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = grid_sample_attrs,
    .params_size = sizeof(mx_grid_sample_params),
    .parse = grid_sample_parse,
    .infer = grid_sample_infer,
};

/* --- AffineGrid ------------------------------------------------------------------------------- */

static const mx_attr_spec affine_grid_attrs[] = {
    {.name = "align_corners", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status affine_grid_parse(const mx_parse_ctx *pc, void *params) {
  mx_affine_grid_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t ac = mx__parse_int(pc, "align_corners");
  if (ac != 0 && ac != 1)
    return mx__parse_fail(pc, "attribute align_corners must be 0 or 1, not %lld", (long long)ac);
  p->align_corners = (int32_t)ac;
  return MX_OK;
}

static mx_status affine_grid_infer(mx_infer_ctx *ctx) {
  const mx_shape *ts = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = ctx->in[0].dtype;
  mx_status st = want_float(ctx, 0, "theta");
  if (st == MX_OK) st = mx__shp_want_dtype(ctx, 1, MX_INT64, "size");
  if (st != MX_OK) return st;
  if (ts->rank != MX_RANK_UNKNOWN && ts->rank != 3)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "theta must be 3-D [N, 2, 3] or [N, 3, 4], not rank %d",
                          (int)ts->rank);
  mx_dim sv[8];
  int32_t n = -1;
  bool known = mx__shp_values(ctx, 1, sv, 8, &n);
  if (!known) {
    const mx_shape *ss = &ctx->in[1].shape;
    if (ss->rank == 1 && mx_dim_is_concrete(ss->dims[0]))
      n = (int32_t)ss->dims[0];
    else if (ts->rank == 3 && mx_dim_is_concrete(ts->dims[1]))
      n = (int32_t)ts->dims[1] + 2;
  }
  if (n < 0) return MX_OK;
  if (n != 4 && n != 5)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "size must have 4 or 5 values, not %d", (int)n);
  int32_t sp = n - 2;
  if (ts->rank == 3) {
    if ((mx_dim_is_concrete(ts->dims[1]) && ts->dims[1] != sp) ||
        (mx_dim_is_concrete(ts->dims[2]) && ts->dims[2] != sp + 1))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "theta must be [N, %d, %d] for a %d-D size", (int)sp,
                            (int)sp + 1, (int)n);
  }
  o->shape.rank = n;
  mx_dim batch = ts->rank == 3 ? ts->dims[0] : MX_DIM_UNKNOWN;
  if (known) {
    st = mx__shp_dim_of_value(ctx, sv[0], &o->shape.dims[0], "size");
    if (st == MX_OK)
      st = mx__shp_merge_dim(ctx, batch, o->shape.dims[0], &o->shape.dims[0], "batch of theta and size");
    if (st != MX_OK) return st;
    for (int32_t k = 0; k < sp; k++) {
      st = dim_from_value(ctx, sv[k + 2], "grid", &o->shape.dims[k + 1]);
      if (st != MX_OK) return st;
    }
  } else {
    o->shape.dims[0] = batch;
    for (int32_t k = 0; k < sp; k++) o->shape.dims[k + 1] = mx__infer_fresh(ctx, "grid");
  }
  o->shape.dims[n - 1] = sp;
  return MX_OK;
}

static const mx_op_def affine_grid_def = {
    .name = "AffineGrid",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .attrs = affine_grid_attrs,
    .params_size = sizeof(mx_affine_grid_params),
    .parse = affine_grid_parse,
    .infer = affine_grid_infer,
};

/* --- RoiAlign --------------------------------------------------------------------------------- */

static const mx_attr_spec roi_align_attrs[] = {
    {.name = "coordinate_transformation_mode", .type = MX_ATTR_STRING, .def_s = "half_pixel"},
    {.name = "mode", .type = MX_ATTR_STRING, .def_s = "avg"},
    {.name = "output_height", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "output_width", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "sampling_ratio", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "spatial_scale", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {0},
};

static mx_status roi_align_parse(const mx_parse_ctx *pc, void *params) {
  mx_roi_align_params *p = params;
  memset(p, 0, sizeof *p);
  static const char *const modes[] = {"avg", "max"};
  static const char *const coords[] = {"output_half_pixel", "half_pixel"};
  mx_status st = parse_enum(pc, "mode", modes, 2, &p->max_mode);
  if (st != MX_OK) return st;
  if (pc->opset < 16) {
    /* RoiAlign-10 had no half-pixel shift. */
    if (mx__parse_attr(pc, "coordinate_transformation_mode"))
      return mx__parse_fail(pc, "attribute coordinate_transformation_mode exists from opset 16");
  } else {
    st = parse_enum(pc, "coordinate_transformation_mode", coords, 2, &p->half_pixel);
    if (st != MX_OK) return st;
  }
  p->output_height = mx__parse_int(pc, "output_height");
  p->output_width = mx__parse_int(pc, "output_width");
  p->sampling_ratio = mx__parse_int(pc, "sampling_ratio");
  p->spatial_scale = mx__parse_float(pc, "spatial_scale");
  if (p->output_height < 1 || p->output_width < 1)
    return mx__parse_fail(pc, "attributes output_height/output_width must be >= 1");
  if (p->sampling_ratio < 0) return mx__parse_fail(pc, "attribute sampling_ratio must be >= 0");
  return MX_OK;
}

static mx_status roi_align_infer(mx_infer_ctx *ctx) {
  const mx_roi_align_params *p = ctx->params;
  const mx_shape *xs = &ctx->in[0].shape, *rs = &ctx->in[1].shape, *bs = &ctx->in[2].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = ctx->in[0].dtype;
  mx_status st = want_float(ctx, 0, "X");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__shp_want_index(ctx, 2, "batch_indices");
  if (st != MX_OK) return st;
  if (xs->rank != MX_RANK_UNKNOWN && xs->rank != 4)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "X must be 4-D [N, C, H, W], not rank %d", (int)xs->rank);
  if (rs->rank != MX_RANK_UNKNOWN && rs->rank != 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "rois must be 2-D [num_rois, 4], not rank %d", (int)rs->rank);
  if (bs->rank != MX_RANK_UNKNOWN && bs->rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "batch_indices must be 1-D, not rank %d", (int)bs->rank);
  if (rs->rank == 2 && mx_dim_is_concrete(rs->dims[1]) && rs->dims[1] != 4)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "rois must have 4 columns, not %lld", (long long)rs->dims[1]);
  mx_dim n = rs->rank == 2 ? rs->dims[0] : MX_DIM_UNKNOWN;
  if (bs->rank == 1) {
    st = mx__shp_merge_dim(ctx, n, bs->dims[0], &n, "rows of rois and batch_indices");
    if (st != MX_OK) return st;
  }
  o->shape.rank = 4;
  o->shape.dims[0] = n;
  o->shape.dims[1] = xs->rank == 4 ? xs->dims[1] : MX_DIM_UNKNOWN;
  o->shape.dims[2] = p->output_height;
  o->shape.dims[3] = p->output_width;
  return MX_OK;
}

static const mx_op_def roi_align_def = {
    .name = "RoiAlign",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = roi_align_attrs,
    .params_size = sizeof(mx_roi_align_params),
    .parse = roi_align_parse,
    .infer = roi_align_infer,
};

/* --- NonMaxSuppression ------------------------------------------------------------------------ */

static const mx_attr_spec nms_attrs[] = {
    {.name = "center_point_box", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status nms_parse(const mx_parse_ctx *pc, void *params) {
  mx_nms_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t c = mx__parse_int(pc, "center_point_box");
  if (c != 0 && c != 1)
    return mx__parse_fail(pc, "attribute center_point_box must be 0 or 1, not %lld", (long long)c);
  p->center_point_box = (int32_t)c;
  return MX_OK;
}

static mx_status nms_infer(mx_infer_ctx *ctx) {
  const mx_shape *bs = &ctx->in[0].shape, *ss = &ctx->in[1].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = MX_INT64;
  mx_status st = want_float(ctx, 0, "boxes");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__shp_want_dtype(ctx, 2, MX_INT64, "max_output_boxes_per_class");
  if (st == MX_OK) st = want_float(ctx, 3, "iou_threshold");
  if (st == MX_OK) st = want_float(ctx, 4, "score_threshold");
  if (st != MX_OK) return st;
  if (bs->rank != MX_RANK_UNKNOWN && (bs->rank != 3 || (mx_dim_is_concrete(bs->dims[2]) && bs->dims[2] != 4)))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "boxes must be [batches, boxes, 4]");
  if (ss->rank != MX_RANK_UNKNOWN && ss->rank != 3)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "scores must be [batches, classes, boxes], not rank %d",
                          (int)ss->rank);
  if (bs->rank == 3 && ss->rank == 3) {
    mx_dim d;
    st = mx__shp_merge_dim(ctx, bs->dims[0], ss->dims[0], &d, "batches of boxes and scores");
    if (st == MX_OK) st = mx__shp_merge_dim(ctx, bs->dims[1], ss->dims[2], &d, "boxes of boxes and scores");
    if (st != MX_OK) return st;
  }
  o->shape.rank = 2;
  o->shape.dims[0] = mx__infer_fresh(ctx, "selected");
  o->shape.dims[1] = 3;
  return MX_OK;
}

static mx_status nms_upper_bound(mx_infer_ctx *ctx, uint32_t index, mx_shape *bound) {
  const mx_shape *ss = &ctx->in[1].shape;
  int64_t dims[MX_MAX_RANK];
  if (index != 0 || ss->rank != 3 || !mx__shp_concrete(ss, dims))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "NonMaxSuppression's upper bound needs concrete scores");
  /* At most max_output_boxes_per_class boxes per batch and class, when that value is known. */
  int64_t per_class = dims[2], max_out[1];
  int32_t n;
  if (mx__shp_ints(ctx, 2, max_out, 1, &n) && n == 1)
    per_class = max_out[0] < 0 ? 0 : max_out[0] < dims[2] ? max_out[0] : dims[2];
  memset(bound, 0, sizeof *bound);
  bound->rank = 2;
  bound->dims[0] = dims[0] * dims[1] * per_class;
  bound->dims[1] = 3;
  return MX_OK;
}

static const mx_op_def nms_def = {
    .name = "NonMaxSuppression",
    .min_inputs = 2,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_DATA_DEPENDENT,
    .value_inputs = 1u << 2,
    .attrs = nms_attrs,
    .params_size = sizeof(mx_nms_params),
    .parse = nms_parse,
    .infer = nms_infer,
    .upper_bound = nms_upper_bound,
};

/* --- the group -------------------------------------------------------------------------------- */

const mx_op_def *const mx__ops_resample[] = {
    &pad_def,
    &center_crop_pad_def,
    &resize_def,
    &upsample_def,
    &depth_to_space_def,
    &space_to_depth_def,
    &grid_sample_def,
    &affine_grid_def,
    &roi_align_def,
    &nms_def,
    NULL,
};
