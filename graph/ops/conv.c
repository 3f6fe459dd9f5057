/* Op definitions of the convolutions group: Conv, ConvTranspose, ConvInteger, QLinearConv,
 * DeformConv (opsets 1-22) and Col2Im (opset 18), plus the window helpers the pooling ops in
 * pool.c share (attribute parsing and the output size of a sliding window).
 *
 * Output sizes stay symbolic: an input height `h` with a 3x3 kernel, stride 2 and pads 1+1
 * gives floor((h - 1) / 2) + 1, not an unknown dim. Kernel sizes, strides, dilations and pads
 * are attributes (concrete) or come from the weights' shape. */
#include <stdio.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "graph/ops/groups.h"
#include "graph/ops/op.h"

/* --- shared window helpers ---------------------------------------------------------------------- */

static mx_status parse_list_attr(const mx_parse_ctx *pc, const char *name, int64_t *out, size_t cap,
                                 int32_t *n, int64_t min_value) {
  size_t count = 0;
  mx_status st = mx__parse_ints(pc, name, out, cap, &count);
  if (st != MX_OK) return st;
  for (size_t i = 0; i < count; i++)
    if (out[i] < min_value)
      return mx__parse_fail(pc, "attribute '%s' entry %zu is %lld; it must be at least %lld", name, i,
                            (long long)out[i], (long long)min_value);
  *n = (int32_t)count;
  return MX_OK;
}

mx_status mx__conv_parse_window(const mx_parse_ctx *pc, mx_conv_params *p, int32_t op) {
  memset(p, 0, sizeof *p);
  p->op = op;
  char pad_mode[16];
  mx_status st = mx__parse_string(pc, "auto_pad", pad_mode, sizeof pad_mode);
  if (st != MX_OK) return st;
  if (pad_mode[0] == '\0' || strcmp(pad_mode, "NOTSET") == 0)
    p->auto_pad = MX_AUTO_PAD_NOTSET;
  else if (strcmp(pad_mode, "SAME_UPPER") == 0)
    p->auto_pad = MX_AUTO_PAD_SAME_UPPER;
  else if (strcmp(pad_mode, "SAME_LOWER") == 0)
    p->auto_pad = MX_AUTO_PAD_SAME_LOWER;
  else if (strcmp(pad_mode, "VALID") == 0)
    p->auto_pad = MX_AUTO_PAD_VALID;
  else
    return mx__parse_fail(
        pc, "attribute 'auto_pad' is '%s'; it must be NOTSET, SAME_UPPER, SAME_LOWER or VALID", pad_mode);
  if ((st = parse_list_attr(pc, "kernel_shape", p->kernel_shape, MX_CONV_MAX_SPATIAL, &p->n_kernel, 1)) !=
          MX_OK ||
      (st = parse_list_attr(pc, "strides", p->strides, MX_CONV_MAX_SPATIAL, &p->n_strides, 1)) != MX_OK ||
      (st = parse_list_attr(pc, "dilations", p->dilations, MX_CONV_MAX_SPATIAL, &p->n_dilations, 1)) !=
          MX_OK ||
      (st = parse_list_attr(pc, "pads", p->pads, 2 * MX_CONV_MAX_SPATIAL, &p->n_pads, 0)) != MX_OK ||
      (st = parse_list_attr(pc, "output_padding", p->output_padding, MX_CONV_MAX_SPATIAL,
                            &p->n_output_padding, 0)) != MX_OK ||
      (st = parse_list_attr(pc, "output_shape", p->output_shape, MX_CONV_MAX_SPATIAL + 2, &p->n_output_shape,
                            0)) != MX_OK)
    return st;
  if (p->n_pads % 2 != 0)
    return mx__parse_fail(pc, "attribute 'pads' has %d entries; it needs a begin and an end per spatial dim",
                          (int)p->n_pads);
  /* Lists that are given must agree on the number of spatial dims. */
  int32_t spatial = p->n_kernel      ? p->n_kernel
                    : p->n_strides   ? p->n_strides
                    : p->n_dilations ? p->n_dilations
                                     : p->n_pads / 2;
  if (spatial) {
    if (p->n_strides && p->n_strides != spatial)
      return mx__parse_fail(pc, "attribute 'strides' has %d entries for %d spatial dims", (int)p->n_strides,
                            (int)spatial);
    if (p->n_dilations && p->n_dilations != spatial)
      return mx__parse_fail(pc, "attribute 'dilations' has %d entries for %d spatial dims",
                            (int)p->n_dilations, (int)spatial);
    if (p->n_pads && p->n_pads != 2 * spatial)
      return mx__parse_fail(pc, "attribute 'pads' has %d entries; %d spatial dims need %d", (int)p->n_pads,
                            (int)spatial, (int)(2 * spatial));
    if (p->n_output_padding && p->n_output_padding != spatial)
      return mx__parse_fail(pc, "attribute 'output_padding' has %d entries for %d spatial dims",
                            (int)p->n_output_padding, (int)spatial);
  }
  int64_t group = mx__parse_attr(pc, "group") ? mx__parse_int(pc, "group") : 1;
  if (group < 1)
    return mx__parse_fail(pc, "attribute 'group' is %lld; it must be at least 1", (long long)group);
  p->group = group;
  int64_t offset_group = mx__parse_attr(pc, "offset_group") ? mx__parse_int(pc, "offset_group") : 1;
  if (offset_group < 1)
    return mx__parse_fail(pc, "attribute 'offset_group' is %lld; it must be at least 1",
                          (long long)offset_group);
  p->offset_group = offset_group;
  p->ceil_mode = mx__parse_int(pc, "ceil_mode") != 0;
  p->count_include_pad = mx__parse_int(pc, "count_include_pad") != 0;
  int64_t order = mx__parse_int(pc, "storage_order");
  if (order != 0 && order != 1)
    return mx__parse_fail(pc, "attribute 'storage_order' is %lld; it must be 0 or 1", (long long)order);
  p->storage_order = (int32_t)order;
  p->p = 2.0f;
  if (op == MX_CONVOP_LP_POOL || op == MX_CONVOP_GLOBAL_LP_POOL) {
    const mx_attr *pa = mx__parse_attr(pc, "p");
    if (pa && pa->type == MX_ATTR_INT) p->p = (float)pa->i;
    if (pa && pa->type == MX_ATTR_FLOAT) p->p = pa->f;
    if (!(p->p > 0.0f)) return mx__parse_fail(pc, "attribute 'p' is %g; it must be positive", (double)p->p);
  }
  return MX_OK;
}

mx_status mx__conv_check_spatial(mx_infer_ctx *ctx, const mx_conv_params *p, int32_t spatial) {
  if (spatial < 1 || spatial > MX_CONV_MAX_SPATIAL)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input has %d spatial dims; 1 to %d are supported", (int)spatial,
                          MX_CONV_MAX_SPATIAL);
  struct {
    const char *name;
    int32_t n, want;
  } lists[] = {{"kernel_shape", p->n_kernel, spatial},
               {"strides", p->n_strides, spatial},
               {"dilations", p->n_dilations, spatial},
               {"pads", p->n_pads, 2 * spatial},
               {"output_padding", p->n_output_padding, spatial}};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    if (lists[i].n != 0 && lists[i].n != lists[i].want)
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "attribute '%s' has %d entries; the input's %d spatial dims need %d",
                            lists[i].name, (int)lists[i].n, (int)spatial, (int)lists[i].want);
  if (p->n_output_shape != 0 && p->n_output_shape != spatial && p->n_output_shape != spatial + 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute 'output_shape' has %d entries for %d spatial dims",
                          (int)p->n_output_shape, (int)spatial);
  return MX_OK;
}

static int64_t stride_of(const mx_conv_params *p, int32_t i) { return p->n_strides ? p->strides[i] : 1; }
static int64_t dilation_of(const mx_conv_params *p, int32_t i) {
  return p->n_dilations ? p->dilations[i] : 1;
}
static int64_t pad_begin(const mx_conv_params *p, int32_t i) { return p->n_pads ? p->pads[i] : 0; }
static int64_t pad_end(const mx_conv_params *p, int32_t i) {
  return p->n_pads ? p->pads[p->n_pads / 2 + i] : 0;
}

mx_dim mx__conv_out_dim(mx_infer_ctx *ctx, const mx_conv_params *p, int32_t i, mx_dim in, mx_dim k) {
  mx_symtab *t = ctx->syms;
  if (mx_dim_is_unknown(in) || mx_dim_is_unknown(k)) return MX_DIM_UNKNOWN;
  mx_dim s = mx_sym_const(t, stride_of(p, i));
  /* The window's extent: dilation*(k-1) + 1. */
  mx_dim extent = mx_sym_add(t, mx_sym_mul(t, mx_sym_const(t, dilation_of(p, i)), mx_sym_sub(t, k, 1)), 1);
  switch (p->auto_pad) {
    case MX_AUTO_PAD_SAME_UPPER:
    case MX_AUTO_PAD_SAME_LOWER: return mx_sym_ceildiv(t, in, s);
    case MX_AUTO_PAD_VALID: return mx_sym_add(t, mx_sym_floordiv(t, mx_sym_sub(t, in, extent), s), 1);
    default: break;
  }
  mx_dim span = mx_sym_sub(t, mx_sym_add(t, in, mx_sym_const(t, pad_begin(p, i) + pad_end(p, i))), extent);
  if (!p->ceil_mode) return mx_sym_add(t, mx_sym_floordiv(t, span, s), 1);
  /* ceil_mode: the last window must still start inside the input or its leading pad. The
   * rounded-up window starts before in + pad_begin + stride - extent + pad_end, so only an end
   * pad of at least extent - stride + 1 can push it out: otherwise the size needs no clamp. */
  mx_dim out = mx_sym_add(t, mx_sym_ceildiv(t, span, s), 1);
  int64_t ext;
  if (mx_dim_is_concrete(k) && mx_sym_const_value(t, extent, &ext) && pad_end(p, i) + stride_of(p, i) <= ext)
    return out;
  mx_dim starts = mx_sym_ceildiv(t, mx_sym_add(t, in, mx_sym_const(t, pad_begin(p, i))), s);
  return mx_sym_min(t, out, starts);
}

/* Fails when a concrete output size came out negative (the window is larger than the padded input). */
static mx_status check_out_dim(mx_infer_ctx *ctx, int32_t i, mx_dim in, mx_dim out) {
  int64_t v;
  if (mx_dim_is_concrete(out) || !mx_sym_const_value(ctx->syms, out, &v) || v >= 0) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_SHAPE, "spatial dim %d of size %lld is smaller than the window", (int)i,
                        (long long)in);
}

static bool is_float(mx_dtype dt) { return mx_dtype_is_float(dt); }
static bool is_8bit(mx_dtype dt) { return dt == MX_INT8 || dt == MX_UINT8; }

static mx_status need_dtype(mx_infer_ctx *ctx, uint32_t i, bool ok, const char *what) {
  if (ok) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u has dtype %s; it must be %s", i,
                        mx_dtype_name(ctx->in[i].dtype), what);
}

/* The rank of the spatial input X (input 0), taking W's (input w) when X's is unknown; MX_RANK_UNKNOWN if neither. */
static int32_t conv_rank(const mx_infer_ctx *ctx, uint32_t w) {
  if (ctx->in[0].shape.rank != MX_RANK_UNKNOWN) return ctx->in[0].shape.rank;
  if (mx__in_present(ctx, w)) return ctx->in[w].shape.rank;
  return MX_RANK_UNKNOWN;
}

static mx_dim dim_or_unknown(const mx_shape *s, int32_t i) {
  return s->rank != MX_RANK_UNKNOWN && i < s->rank ? s->dims[i] : MX_DIM_UNKNOWN;
}

/* Checks W (input w, [M, C/group, k...] or for ConvTranspose [C, M/group, k...]) against X and
 * the attributes; *kernel gets the kernel size of each spatial dim. */
static mx_status check_weights(mx_infer_ctx *ctx, const mx_conv_params *p, uint32_t w, int32_t rank,
                               mx_dim *kernel) {
  const mx_shape *x = &ctx->in[0].shape, *ws = &ctx->in[w].shape;
  int32_t spatial = rank - 2;
  if (ws->rank != MX_RANK_UNKNOWN && ws->rank != rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "W has rank %d but X has rank %d", (int)ws->rank, (int)rank);
  for (int32_t i = 0; i < spatial; i++) {
    mx_dim wk = dim_or_unknown(ws, 2 + i);
    if (p->n_kernel) {
      if (mx_dim_is_concrete(wk) && wk != p->kernel_shape[i])
        return mx__infer_fail(ctx, MX_ERR_SHAPE,
                              "attribute 'kernel_shape' entry %d is %lld but W has %lld there", (int)i,
                              (long long)p->kernel_shape[i], (long long)wk);
      kernel[i] = p->kernel_shape[i];
    } else {
      kernel[i] = wk;
    }
  }
  mx_dim c = dim_or_unknown(x, 1);
  bool transpose = p->op == MX_CONVOP_CONV_TRANSPOSE;
  mx_dim wc = dim_or_unknown(ws, transpose ? 0 : 1);
  mx_dim wm = dim_or_unknown(ws, transpose ? 1 : 0);
  if (mx_dim_is_concrete(c) && c % p->group != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute 'group' %lld does not divide the %lld input channels",
                          (long long)p->group, (long long)c);
  if (transpose) {
    if (mx_dim_is_concrete(c) && mx_dim_is_concrete(wc) && wc != c)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "W has %lld input channels but X has %lld", (long long)wc,
                            (long long)c);
  } else {
    if (mx_dim_is_concrete(c) && mx_dim_is_concrete(wc) && wc * p->group != c)
      return mx__infer_fail(
          ctx, MX_ERR_SHAPE,
          "attribute 'group' %lld: X has %lld channels but W takes %lld per group (%lld in all)",
          (long long)p->group, (long long)c, (long long)wc, (long long)(wc * p->group));
    if (mx_dim_is_concrete(wm) && wm % p->group != 0)
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "attribute 'group' %lld does not divide W's %lld output channels",
                            (long long)p->group, (long long)wm);
  }
  return MX_OK;
}

/* Y = [N, M, out...] of a forward convolution over input 0 with weights input w. */
static mx_status conv_forward_shape(mx_infer_ctx *ctx, const mx_conv_params *p, uint32_t w, mx_dtype out_dt) {
  ctx->out[0].dtype = out_dt;
  int32_t rank = conv_rank(ctx, w);
  if (rank == MX_RANK_UNKNOWN) {
    ctx->out[0].shape.rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  mx_status st = mx__conv_check_spatial(ctx, p, rank - 2);
  if (st != MX_OK) return st;
  mx_dim kernel[MX_CONV_MAX_SPATIAL];
  if ((st = check_weights(ctx, p, w, rank, kernel)) != MX_OK) return st;
  const mx_shape *x = &ctx->in[0].shape;
  mx_shape *y = &ctx->out[0].shape;
  memset(y, 0, sizeof *y);
  y->rank = rank;
  y->dims[0] = dim_or_unknown(x, 0);
  y->dims[1] = dim_or_unknown(&ctx->in[w].shape, 0);
  for (int32_t i = 0; i < rank - 2; i++) {
    mx_dim in = dim_or_unknown(x, 2 + i);
    y->dims[2 + i] = mx__conv_out_dim(ctx, p, i, in, kernel[i]);
    if ((st = check_out_dim(ctx, i, in, y->dims[2 + i])) != MX_OK) return st;
  }
  return MX_OK;
}

/* Checks an optional per-output-channel vector (bias) at input i: rank 1 with M entries. */
static mx_status check_channel_vector(mx_infer_ctx *ctx, uint32_t i, mx_dim m, const char *what) {
  if (!mx__in_present(ctx, i)) return MX_OK;
  const mx_shape *s = &ctx->in[i].shape;
  if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (s->rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s has rank %d; it must be 1-D", what, (int)s->rank);
  return mx__check_same_dim(ctx, s->dims[0], m, what);
}

/* --- Conv --------------------------------------------------------------------------------------- */

static const mx_attr_spec conv_attrs[] = {
    {.name = "auto_pad", .type = MX_ATTR_STRING, .def_s = "NOTSET"},
    {.name = "dilations", .type = MX_ATTR_INTS},
    {.name = "group", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "kernel_shape", .type = MX_ATTR_INTS},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "strides", .type = MX_ATTR_INTS},
    /* mixrt-internal: an activation fused into the kernel by the fusion pass (graph/passes). */
    {.name = "mixrt_activation", .type = MX_ATTR_STRING, .def_s = ""},
    {.name = "mixrt_activation_alpha", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "mixrt_activation_beta", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {0},
};

static mx_status conv_parse(const mx_parse_ctx *pc, void *params) {
  mx_conv_params *p = params;
  mx_status st = mx__conv_parse_window(pc, p, MX_CONVOP_CONV);
  if (st != MX_OK) return st;
  static const char *const acts[] = {"", "Relu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "SiLU", NULL};
  char act[16];
  if ((st = mx__parse_string(pc, "mixrt_activation", act, sizeof act)) != MX_OK) return st;
  int32_t k = 0;
  while (acts[k] && strcmp(acts[k], act) != 0) k++;
  if (!acts[k])
    return mx__parse_fail(pc, "attribute 'mixrt_activation' is '%s', not a fused activation", act);
  p->fused_act = k;
  p->act_alpha = mx__parse_float(pc, "mixrt_activation_alpha");
  p->act_beta = mx__parse_float(pc, "mixrt_activation_beta");
  return MX_OK;
}

static mx_status conv_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  mx_status st = need_dtype(ctx, 0, is_float(ctx->in[0].dtype), "float16, bfloat16, float32 or float64");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK && mx__in_present(ctx, 2)) st = mx__infer_same_dtype(ctx, 2, 0);
  /* a fourth input, the residual the conv_residual rule (graph/passes/fuse_residual.c) moves
   * in, has Y's shape; the kernel checks it */
  if (st == MX_OK && mx__in_present(ctx, 3)) st = mx__infer_same_dtype(ctx, 3, 0);
  if (st == MX_OK) st = conv_forward_shape(ctx, p, 1, ctx->in[0].dtype);
  if (st == MX_OK) st = check_channel_vector(ctx, 2, dim_or_unknown(&ctx->in[1].shape, 0), "bias B");
  return st;
}

static const mx_op_def op_conv = {
    .name = "Conv",
    .min_inputs = 2,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = conv_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = conv_parse,
    .infer = conv_infer,
};

/* --- ConvTranspose ------------------------------------------------------------------------------ */

static const mx_attr_spec conv_transpose_attrs[] = {
    {.name = "auto_pad", .type = MX_ATTR_STRING, .def_s = "NOTSET"},
    {.name = "dilations", .type = MX_ATTR_INTS},
    {.name = "group", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "kernel_shape", .type = MX_ATTR_INTS},
    {.name = "output_padding", .type = MX_ATTR_INTS},
    {.name = "output_shape", .type = MX_ATTR_INTS},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "strides", .type = MX_ATTR_INTS},
    {0},
};

static mx_status conv_transpose_parse(const mx_parse_ctx *pc, void *params) {
  mx_conv_params *p = params;
  mx_status st = mx__conv_parse_window(pc, p, MX_CONVOP_CONV_TRANSPOSE);
  if (st != MX_OK) return st;
  for (int32_t i = 0; i < p->n_output_padding; i++) {
    int64_t s = p->n_strides ? p->strides[i] : 1, d = p->n_dilations ? p->dilations[i] : 1;
    if (p->output_padding[i] >= s && p->output_padding[i] >= d)
      return mx__parse_fail(
          pc, "attribute 'output_padding' entry %d is %lld; it must be below the stride or the dilation",
          (int)i, (long long)p->output_padding[i]);
  }
  return MX_OK;
}

static mx_status conv_transpose_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  mx_status st = need_dtype(ctx, 0, is_float(ctx->in[0].dtype), "float16, bfloat16, float32 or float64");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK && mx__in_present(ctx, 2)) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  int32_t rank = conv_rank(ctx, 1);
  if (rank == MX_RANK_UNKNOWN) {
    ctx->out[0].shape.rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  int32_t spatial = rank - 2;
  if ((st = mx__conv_check_spatial(ctx, p, spatial)) != MX_OK) return st;
  mx_dim kernel[MX_CONV_MAX_SPATIAL];
  if ((st = check_weights(ctx, p, 1, rank, kernel)) != MX_OK) return st;
  mx_symtab *t = ctx->syms;
  const mx_shape *x = &ctx->in[0].shape, *w = &ctx->in[1].shape;
  mx_shape *y = &ctx->out[0].shape;
  memset(y, 0, sizeof *y);
  y->rank = rank;
  y->dims[0] = dim_or_unknown(x, 0);
  y->dims[1] = mx_sym_mul(t, dim_or_unknown(w, 1), mx_sym_const(t, p->group));
  for (int32_t i = 0; i < spatial; i++) {
    mx_dim in = dim_or_unknown(x, 2 + i);
    if (p->n_output_shape) {
      y->dims[2 + i] = p->output_shape[p->n_output_shape - spatial + i];
    } else if ((p->auto_pad == MX_AUTO_PAD_SAME_UPPER || p->auto_pad == MX_AUTO_PAD_SAME_LOWER) &&
               !p->n_pads) {
      y->dims[2 + i] = mx_sym_mul(t, in, mx_sym_const(t, stride_of(p, i)));
    } else {
      /* stride*(in-1) + output_padding + dilation*(k-1) + 1 - pads */
      int64_t opad = p->n_output_padding ? p->output_padding[i] : 0;
      mx_dim extent =
          mx_sym_add(t, mx_sym_mul(t, mx_sym_const(t, dilation_of(p, i)), mx_sym_sub(t, kernel[i], 1)), 1);
      mx_dim o = mx_sym_mul(t, mx_sym_const(t, stride_of(p, i)), mx_sym_sub(t, in, 1));
      o = mx_sym_add(t, o, extent);
      o = mx_sym_add(t, o, mx_sym_const(t, opad - pad_begin(p, i) - pad_end(p, i)));
      if (mx_dim_is_unknown(in) || mx_dim_is_unknown(kernel[i])) o = MX_DIM_UNKNOWN;
      y->dims[2 + i] = o;
      if ((st = check_out_dim(ctx, i, in, o)) != MX_OK) return st;
    }
  }
  return check_channel_vector(ctx, 2, y->dims[1], "bias B");
}

static const mx_op_def op_conv_transpose = {
    .name = "ConvTranspose",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = conv_transpose_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = conv_transpose_parse,
    .infer = conv_transpose_infer,
};

/* --- ConvInteger -------------------------------------------------------------------------------- */

static mx_status conv_integer_parse(const mx_parse_ctx *pc, void *params) {
  return mx__conv_parse_window(pc, params, MX_CONVOP_CONV_INTEGER);
}

static mx_status conv_integer_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  mx_status st = need_dtype(ctx, 0, is_8bit(ctx->in[0].dtype), "int8 or uint8");
  if (st == MX_OK) st = need_dtype(ctx, 1, is_8bit(ctx->in[1].dtype), "int8 or uint8");
  if (st == MX_OK && mx__in_present(ctx, 2)) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st == MX_OK && mx__in_present(ctx, 3)) st = mx__infer_same_dtype(ctx, 3, 1);
  if (st == MX_OK) st = conv_forward_shape(ctx, p, 1, MX_INT32);
  return st;
}

static const mx_op_def op_conv_integer = {
    .name = "ConvInteger",
    .min_inputs = 2,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = conv_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = conv_integer_parse,
    .infer = conv_integer_infer,
};

/* --- QLinearConv -------------------------------------------------------------------------------- */

static mx_status qlinear_conv_parse(const mx_parse_ctx *pc, void *params) {
  return mx__conv_parse_window(pc, params, MX_CONVOP_QLINEAR_CONV);
}

/* Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B. */
static mx_status qlinear_conv_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  mx_status st = need_dtype(ctx, 0, is_8bit(ctx->in[0].dtype), "int8 or uint8");
  if (st == MX_OK) st = need_dtype(ctx, 3, is_8bit(ctx->in[3].dtype), "int8 or uint8");
  if (st == MX_OK) st = need_dtype(ctx, 7, is_8bit(ctx->in[7].dtype), "int8 or uint8");
  if (st == MX_OK) st = need_dtype(ctx, 1, ctx->in[1].dtype == MX_FLOAT32, "float32");
  if (st == MX_OK) st = need_dtype(ctx, 4, ctx->in[4].dtype == MX_FLOAT32, "float32");
  if (st == MX_OK) st = need_dtype(ctx, 6, ctx->in[6].dtype == MX_FLOAT32, "float32");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 5, 3);
  if (st == MX_OK && mx__in_present(ctx, 8)) st = need_dtype(ctx, 8, ctx->in[8].dtype == MX_INT32, "int32");
  if (st != MX_OK) return st;
  /* conv_forward_shape reads X at input 0 and W at input w. */
  if ((st = conv_forward_shape(ctx, p, 3, ctx->in[7].dtype)) != MX_OK) return st;
  return check_channel_vector(ctx, 8, dim_or_unknown(&ctx->in[3].shape, 0), "bias B");
}

static const mx_op_def op_qlinear_conv = {
    .name = "QLinearConv",
    .min_inputs = 8,
    .max_inputs = 9,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = conv_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = qlinear_conv_parse,
    .infer = qlinear_conv_infer,
};

/* --- DeformConv --------------------------------------------------------------------------------- */

static const mx_attr_spec deform_conv_attrs[] = {
    {.name = "dilations", .type = MX_ATTR_INTS},
    {.name = "group", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "kernel_shape", .type = MX_ATTR_INTS},
    {.name = "offset_group", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "strides", .type = MX_ATTR_INTS},
    {0},
};

static mx_status deform_conv_parse(const mx_parse_ctx *pc, void *params) {
  return mx__conv_parse_window(pc, params, MX_CONVOP_DEFORM_CONV);
}

/* Inputs: X, W, offset, B, mask. */
static mx_status deform_conv_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  mx_status st = need_dtype(ctx, 0, is_float(ctx->in[0].dtype), "float16, bfloat16, float32 or float64");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st == MX_OK && mx__in_present(ctx, 3)) st = mx__infer_same_dtype(ctx, 3, 0);
  if (st == MX_OK && mx__in_present(ctx, 4)) st = mx__infer_same_dtype(ctx, 4, 0);
  if (st == MX_OK) st = conv_forward_shape(ctx, p, 1, ctx->in[0].dtype);
  if (st == MX_OK) st = check_channel_vector(ctx, 3, dim_or_unknown(&ctx->in[1].shape, 0), "bias B");
  if (st != MX_OK) return st;
  int32_t rank = ctx->out[0].shape.rank;
  if (rank != MX_RANK_UNKNOWN && rank != 4)
    return mx__infer_fail(ctx, MX_ERR_UNSUPPORTED, "DeformConv over %d spatial dims; mixrt supports 2-D",
                          (int)(rank - 2));
  const mx_dim *c = &ctx->in[0].shape.dims[1];
  if (rank == 4 && mx_dim_is_concrete(*c) && *c % p->offset_group != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "attribute 'offset_group' %lld does not divide the %lld input channels",
                          (long long)p->offset_group, (long long)*c);
  const mx_shape *off = &ctx->in[2].shape;
  if (rank == 4 && off->rank != MX_RANK_UNKNOWN) {
    if (off->rank != 4)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "offset has rank %d; it must be 4-D", (int)off->rank);
    for (int32_t i = 0; i < 2; i++)
      if ((st = mx__check_same_dim(ctx, off->dims[2 + i], ctx->out[0].shape.dims[2 + i],
                                   "offset spatial size")) != MX_OK)
        return st;
  }
  /* offset holds a (y, x) pair per kernel tap and offset group; mask one weight per tap and group. */
  const mx_shape *ws = &ctx->in[1].shape;
  if (rank == 4 && ws->rank == 4 && mx_dim_is_concrete(ws->dims[2]) && mx_dim_is_concrete(ws->dims[3])) {
    mx_dim taps = p->offset_group * ws->dims[2] * ws->dims[3];
    if (off->rank == 4 && (st = mx__check_same_dim(ctx, off->dims[1], 2 * taps, "offset channels")) != MX_OK)
      return st;
    const mx_shape *mask = mx__in_present(ctx, 4) ? &ctx->in[4].shape : NULL;
    if (mask && mask->rank == 4 &&
        (st = mx__check_same_dim(ctx, mask->dims[1], taps, "mask channels")) != MX_OK)
      return st;
  }
  return MX_OK;
}

static const mx_op_def op_deform_conv = {
    .name = "DeformConv",
    .min_inputs = 3,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = deform_conv_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = deform_conv_parse,
    .infer = deform_conv_infer,
};

/* --- Col2Im ------------------------------------------------------------------------------------- */

static const mx_attr_spec col2im_attrs[] = {
    {.name = "dilations", .type = MX_ATTR_INTS},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "strides", .type = MX_ATTR_INTS},
    {0},
};

static mx_status col2im_parse(const mx_parse_ctx *pc, void *params) {
  return mx__conv_parse_window(pc, params, MX_CONVOP_COL2IM);
}

/* Inputs: input [N, C*prod(block_shape), L], image_shape, block_shape. */
static mx_status col2im_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  for (uint32_t i = 1; i < 3; i++)
    if (ctx->in[i].dtype != MX_INT64)
      return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u has dtype %s; it must be int64", i,
                            mx_dtype_name(ctx->in[i].dtype));
  const mx_shape *x = &ctx->in[0].shape;
  if (x->rank != MX_RANK_UNKNOWN && x->rank != 3)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input has rank %d; it must be [N, C*prod(block_shape), L]",
                          (int)x->rank);
  ctx->out[0].dtype = ctx->in[0].dtype;
  int32_t n_img = -1, n_blk = -1;
  const mx_dim *img = mx__in_values(ctx, 1, &n_img);
  int64_t blk[MX_CONV_MAX_SPATIAL];
  bool blk_known = mx__in_const_ints(ctx, 2, blk, MX_CONV_MAX_SPATIAL, &n_blk);
  int32_t spatial = img ? n_img : blk_known ? n_blk : -1;
  for (uint32_t i = 1; i < 3; i++) {
    const mx_shape *s = &ctx->in[i].shape;
    if (s->rank == 1 && mx_dim_is_concrete(s->dims[0])) spatial = (int32_t)s->dims[0];
  }
  if (spatial < 0) {
    ctx->out[0].shape.rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  mx_status st = mx__conv_check_spatial(ctx, p, spatial);
  if (st != MX_OK) return st;
  if ((img && n_img != spatial) || (blk_known && n_blk != spatial))
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "image_shape and block_shape must have one entry per spatial dim");
  mx_symtab *t = ctx->syms;
  mx_shape *y = &ctx->out[0].shape;
  memset(y, 0, sizeof *y);
  y->rank = 2 + spatial;
  y->dims[0] = dim_or_unknown(x, 0);
  y->dims[1] = MX_DIM_UNKNOWN;
  if (blk_known) {
    int64_t k = 1;
    for (int32_t i = 0; i < spatial; i++) {
      if (blk[i] < 1)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "block_shape entry %d is %lld", (int)i, (long long)blk[i]);
      k *= blk[i];
    }
    mx_dim ck = dim_or_unknown(x, 1);
    if (mx_dim_is_concrete(ck) && ck % k != 0)
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "input dim 1 (%lld) is not a multiple of prod(block_shape) = %lld", (long long)ck,
                            (long long)k);
    y->dims[1] = mx_sym_div(t, ck, mx_sym_const(t, k));
    if (img) {
      /* L must be the number of block positions in the padded image. */
      mx_dim blocks = 1;
      for (int32_t i = 0; i < spatial; i++) {
        mx_dim o = mx__conv_out_dim(ctx, p, i, img[i], blk[i]);
        blocks = mx_sym_mul(t, blocks, o);
      }
      if ((st = mx__check_same_dim(ctx, dim_or_unknown(x, 2), blocks, "Col2Im block count L")) != MX_OK)
        return st;
    }
  }
  for (int32_t i = 0; i < spatial; i++) y->dims[2 + i] = img ? img[i] : mx__infer_fresh(ctx, "image");
  return MX_OK;
}

static const mx_op_def op_col2im = {
    .name = "Col2Im",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 2),
    .attrs = col2im_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = col2im_parse,
    .infer = col2im_infer,
};

const mx_op_def *const mx__ops_conv[] = {
    &op_conv, &op_conv_transpose, &op_conv_integer, &op_qlinear_conv, &op_deform_conv, &op_col2im, NULL,
};
