/* Op definitions of the signal processing group: DFT (opset 17 with the axis attribute, opset
 * 20 with the axis as input 2), STFT, HannWindow, HammingWindow, BlackmanWindow and
 * MelWeightMatrix (opset 17).
 *
 * Several output sizes are input *values* (dft_length, the window size, frame_step,
 * frame_length, num_mel_bins): inference uses their symbolic values when known and a fresh
 * symbol otherwise, so a size computed from Shape stays symbolic. */
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/op.h"
#include "graph/ops/signal_params.h"

static bool is_int_index(mx_dtype dt) { return dt == MX_INT32 || dt == MX_INT64; }

/* The dim a scalar integer input stands for: its symbolic value, else a fresh symbol. */
static mx_dim scalar_dim(mx_infer_ctx *ctx, uint32_t i, const char *what) {
  int32_t n;
  const mx_dim *sv = mx__in_values(ctx, i, &n);
  if (sv && n == 1 && !mx_dim_is_unknown(sv[0])) return sv[0];
  return mx__infer_fresh(ctx, what);
}

static mx_status need_scalar_int(mx_infer_ctx *ctx, uint32_t i, const char *what) {
  if (!mx__in_present(ctx, i)) return MX_OK;
  if (!is_int_index(ctx->in[i].dtype))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u (%s) has dtype %s, not int32 or int64", i, what,
                          mx_dtype_name(ctx->in[i].dtype));
  const mx_shape *s = &ctx->in[i].shape;
  if (s->rank != MX_RANK_UNKNOWN && s->rank > 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u (%s) must be a scalar, it has rank %d", i, what,
                          (int)s->rank);
  return MX_OK;
}

/* Output dtypes the window and mel ops may produce. */
static bool numeric_output(int64_t code) {
  switch (code) {
    case MX_FLOAT32:
    case MX_FLOAT64:
    case MX_FLOAT16:
    case MX_BFLOAT16:
    case MX_INT8:
    case MX_UINT8:
    case MX_INT16:
    case MX_INT32:
    case MX_INT64: return true;
    default: return false;
  }
}

/* --- DFT ---------------------------------------------------------------------------------------- */

static const mx_attr_spec dft_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "inverse", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "onesided", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status dft_parse(const mx_parse_ctx *pc, void *params) {
  mx_dft_params *p = params;
  memset(p, 0, sizeof *p);
  p->inverse = mx__parse_int(pc, "inverse") != 0;
  p->onesided = mx__parse_int(pc, "onesided") != 0;
  if (pc->opset >= 20) {
    if (mx__parse_attr(pc, "axis"))
      return mx__parse_fail(pc, "from opset 20 the DFT axis is input 2, not an attribute");
    p->axis_input = 1;
    p->axis = -2;
  } else {
    if (pc->n_inputs > 2)
      return mx__parse_fail(pc, "input 2 (axis) needs opset 20 (the model imports %lld)",
                            (long long)pc->opset);
    p->axis = mx__parse_int(pc, "axis");
  }
  return MX_OK;
}

static mx_status dft_infer(mx_infer_ctx *ctx) {
  const mx_dft_params *p = ctx->params;
  mx_dtype dt = ctx->in[0].dtype;
  if (!mx_dtype_is_float(dt))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 has dtype %s; DFT takes floating-point input",
                          mx_dtype_name(dt));
  mx_status st = need_scalar_int(ctx, 1, "dft_length");
  if (st != MX_OK) return st;
  if (mx__in_present(ctx, 2) && ctx->in[2].dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 2 (axis) has dtype %s, not int64",
                          mx_dtype_name(ctx->in[2].dtype));
  ctx->out[0].dtype = dt;
  const mx_shape *x = &ctx->in[0].shape;
  mx_shape *y = &ctx->out[0].shape;
  *y = *x;
  if (x->rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t r = x->rank;
  if (r < 2) return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; DFT needs at least 2", (int)r);
  mx_dim last = x->dims[r - 1];
  if (mx_dim_is_concrete(last) && last != 1 && last != 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "the last dim of input 0 is %lld; it must be 1 (real) or 2 (complex)",
                          (long long)last);
  bool real_out = p->inverse && p->onesided;
  y->dims[r - 1] = real_out ? 1 : 2;
  bool known_axis = true;
  int64_t axis = p->axis;
  if (p->axis_input && mx__in_present(ctx, 2)) {
    int64_t v[1];
    int32_t n;
    if (mx__in_const_ints(ctx, 2, v, 1, &n) && n == 1)
      axis = v[0];
    else
      known_axis = false;
  }
  bool resized = p->onesided || mx__in_present(ctx, 1);
  if (!known_axis) {
    /* Which dim changes is only known at run time. */
    if (resized)
      for (int32_t d = 0; d < r - 1; d++) y->dims[d] = MX_DIM_UNKNOWN;
    return MX_OK;
  }
  if (axis < -r || axis > r - 2 || axis == -1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "axis %lld is out of range for rank %d (the last dim holds the complex parts)",
                          (long long)axis, (int)r);
  int32_t a = (int32_t)(axis < 0 ? axis + r : axis);
  mx_dim n = mx__in_present(ctx, 1) ? scalar_dim(ctx, 1, "dft_length") : x->dims[a];
  if (p->onesided && !p->inverse) {
    n = mx_dim_is_unknown(n) ? n : mx_sym_add(ctx->syms, mx_sym_floordiv(ctx->syms, n, 2), 1);
  } else if (real_out && !mx__in_present(ctx, 1)) {
    /* The full signal of a one-sided spectrum of m bins has 2 * (m - 1) points. */
    n = mx_dim_is_unknown(n) ? n : mx_sym_mul(ctx->syms, mx_sym_sub(ctx->syms, n, 1), 2);
  }
  y->dims[a] = n;
  return MX_OK;
}

static const mx_op_def op_dft = {
    .name = "DFT",
    .min_inputs = 1,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 2),
    .attrs = dft_attrs,
    .params_size = sizeof(mx_dft_params),
    .parse = dft_parse,
    .infer = dft_infer,
};

/* --- STFT --------------------------------------------------------------------------------------- */

static const mx_attr_spec stft_attrs[] = {
    {.name = "onesided", .type = MX_ATTR_INT, .def_i = 1},
    {0},
};

static mx_status stft_parse(const mx_parse_ctx *pc, void *params) {
  mx_stft_params *p = params;
  memset(p, 0, sizeof *p);
  p->onesided = mx__parse_int(pc, "onesided") != 0;
  return MX_OK;
}

static mx_status stft_infer(mx_infer_ctx *ctx) {
  const mx_stft_params *p = ctx->params;
  mx_dtype dt = ctx->in[0].dtype;
  if (!mx_dtype_is_float(dt))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 has dtype %s; STFT takes a floating-point signal",
                          mx_dtype_name(dt));
  mx_status st = need_scalar_int(ctx, 1, "frame_step");
  if (st == MX_OK) st = need_scalar_int(ctx, 3, "frame_length");
  if (st == MX_OK && mx__in_present(ctx, 2)) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st != MX_OK) return st;
  if (!mx__in_present(ctx, 2) && !mx__in_present(ctx, 3))
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "STFT needs a window or a frame_length");
  const mx_shape *x = &ctx->in[0].shape;
  if (x->rank != MX_RANK_UNKNOWN && x->rank != 3)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "the signal has rank %d; it must be [batch, length, 1 or 2]",
                          (int)x->rank);
  const mx_shape *w = mx__in_present(ctx, 2) ? &ctx->in[2].shape : NULL;
  if (w && w->rank != MX_RANK_UNKNOWN && w->rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "the window has rank %d; it must be 1-D", (int)w->rank);
  mx_dim n_fft = MX_DIM_UNKNOWN;
  if (mx__in_present(ctx, 3)) {
    n_fft = scalar_dim(ctx, 3, "frame_length");
    if (w && w->rank == 1 &&
        (st = mx__check_same_dim(ctx, w->dims[0], n_fft, "window length and frame_length")) != MX_OK)
      return st;
  } else if (w && w->rank == 1) {
    n_fft = w->dims[0];
  }
  bool complex_in = x->rank == 3 && x->dims[2] == 2;
  if (p->onesided && complex_in)
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH,
                          "onesided output needs a real signal (the last dim is 2)");
  mx_dim step = scalar_dim(ctx, 1, "frame_step");
  mx_dim frames = MX_DIM_UNKNOWN;
  if (x->rank == 3 && !mx_dim_is_unknown(n_fft) && !mx_dim_is_unknown(step)) {
    if (mx_dim_is_concrete(step) && step == 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "frame_step is 0");
    frames =
        mx_sym_add(ctx->syms, mx_sym_floordiv(ctx->syms, mx_sym_sub(ctx->syms, x->dims[1], n_fft), step), 1);
  }
  mx_dim bins = MX_DIM_UNKNOWN;
  if (!mx_dim_is_unknown(n_fft))
    bins = p->onesided ? mx_sym_add(ctx->syms, mx_sym_floordiv(ctx->syms, n_fft, 2), 1) : n_fft;
  ctx->out[0].dtype = dt;
  mx_shape *y = &ctx->out[0].shape;
  y->rank = 4;
  y->dims[0] = x->rank == 3 ? x->dims[0] : MX_DIM_UNKNOWN;
  y->dims[1] = frames;
  y->dims[2] = bins;
  y->dims[3] = 2;
  return MX_OK;
}

static const mx_op_def op_stft = {
    .name = "STFT",
    .min_inputs = 2,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 3),
    .attrs = stft_attrs,
    .params_size = sizeof(mx_stft_params),
    .parse = stft_parse,
    .infer = stft_infer,
};

/* --- windows ------------------------------------------------------------------------------------ */

static const mx_attr_spec window_attrs[] = {
    {.name = "output_datatype", .type = MX_ATTR_INT, .def_i = MX_FLOAT32},
    {.name = "periodic", .type = MX_ATTR_INT, .def_i = 1},
    {0},
};

static mx_status window_parse(const mx_parse_ctx *pc, void *params, int32_t kind) {
  mx_window_params *p = params;
  memset(p, 0, sizeof *p);
  p->kind = kind;
  p->periodic = mx__parse_int(pc, "periodic") != 0;
  int64_t dt = mx__parse_int(pc, "output_datatype");
  if (!numeric_output(dt))
    return mx__parse_fail(pc, "output_datatype %lld is not a numeric dtype mixrt supports", (long long)dt);
  p->output_datatype = (int32_t)dt;
  return MX_OK;
}
static mx_status hann_parse(const mx_parse_ctx *pc, void *params) {
  return window_parse(pc, params, MX_WINDOW_HANN);
}
static mx_status hamming_parse(const mx_parse_ctx *pc, void *params) {
  return window_parse(pc, params, MX_WINDOW_HAMMING);
}
static mx_status blackman_parse(const mx_parse_ctx *pc, void *params) {
  return window_parse(pc, params, MX_WINDOW_BLACKMAN);
}

static mx_status window_infer(mx_infer_ctx *ctx) {
  const mx_window_params *p = ctx->params;
  mx_status st = need_scalar_int(ctx, 0, "size");
  if (st != MX_OK) return st;
  ctx->out[0].dtype = (mx_dtype)p->output_datatype;
  ctx->out[0].shape.rank = 1;
  ctx->out[0].shape.dims[0] = scalar_dim(ctx, 0, "size");
  return MX_OK;
}

#define WINDOW_OP(VAR, NAME, PARSE)            \
  static const mx_op_def VAR = {               \
      .name = NAME,                            \
      .min_inputs = 1,                         \
      .max_inputs = 1,                         \
      .min_outputs = 1,                        \
      .max_outputs = 1,                        \
      .value_inputs = 1u << 0,                 \
      .attrs = window_attrs,                   \
      .params_size = sizeof(mx_window_params), \
      .parse = PARSE,                          \
      .infer = window_infer,                   \
  }
WINDOW_OP(op_hann, "HannWindow", hann_parse);
WINDOW_OP(op_hamming, "HammingWindow", hamming_parse);
WINDOW_OP(op_blackman, "BlackmanWindow", blackman_parse);

/* --- MelWeightMatrix ---------------------------------------------------------------------------- */

static const mx_attr_spec mel_attrs[] = {
    {.name = "output_datatype", .type = MX_ATTR_INT, .def_i = MX_FLOAT32},
    {0},
};

static mx_status mel_parse(const mx_parse_ctx *pc, void *params) {
  mx_mel_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t dt = mx__parse_int(pc, "output_datatype");
  if (!numeric_output(dt))
    return mx__parse_fail(pc, "output_datatype %lld is not a numeric dtype mixrt supports", (long long)dt);
  p->output_datatype = (int32_t)dt;
  return MX_OK;
}

static mx_status mel_infer(mx_infer_ctx *ctx) {
  const mx_mel_params *p = ctx->params;
  mx_status st = need_scalar_int(ctx, 0, "num_mel_bins");
  if (st == MX_OK) st = need_scalar_int(ctx, 1, "dft_length");
  if (st == MX_OK) st = need_scalar_int(ctx, 2, "sample_rate");
  if (st != MX_OK) return st;
  for (uint32_t i = 3; i < 5; i++)
    if (!mx_dtype_is_float(ctx->in[i].dtype))
      return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u (%s) has dtype %s, not a floating-point type", i,
                            i == 3 ? "lower_edge_hertz" : "upper_edge_hertz",
                            mx_dtype_name(ctx->in[i].dtype));
  mx_dim mel = scalar_dim(ctx, 0, "num_mel_bins");
  mx_dim n = scalar_dim(ctx, 1, "dft_length");
  ctx->out[0].dtype = (mx_dtype)p->output_datatype;
  ctx->out[0].shape.rank = 2;
  ctx->out[0].shape.dims[0] =
      mx_dim_is_unknown(n) ? n : mx_sym_add(ctx->syms, mx_sym_floordiv(ctx->syms, n, 2), 1);
  ctx->out[0].shape.dims[1] = mel;
  return MX_OK;
}

static const mx_op_def op_mel = {
    .name = "MelWeightMatrix",
    .min_inputs = 5,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 0x7,
    .attrs = mel_attrs,
    .params_size = sizeof(mx_mel_params),
    .parse = mel_parse,
    .infer = mel_infer,
};

const mx_op_def *const mx__ops_signal[] = {
    &op_dft, &op_stft, &op_hann, &op_hamming, &op_blackman, &op_mel, NULL,
};
