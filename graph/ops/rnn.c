/* Op definitions of the recurrent layers group: RNN, GRU and LSTM (opsets 1 to 22: every
 * direction, sequence_lens, initial states, LSTM peepholes and input_forget, GRU's
 * linear_before_reset, clip, the activations / activation_alpha / activation_beta attributes
 * and, from opset 14, layout 1 with the batch first).
 *
 * Y is [seq_length, num_directions, batch, hidden] (layout 1: [batch, seq_length,
 * num_directions, hidden]) and Y_h / Y_c are [num_directions, batch, hidden] (layout 1: [batch,
 * num_directions, hidden]); seq_length and batch come from X and stay symbolic. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "graph/ops/groups.h"
#include "graph/ops/op.h"
#include "graph/ops/rnn_params.h"

static const mx_attr_spec rnn_attrs[] = {
    {.name = "activation_alpha", .type = MX_ATTR_FLOATS},
    {.name = "activation_beta", .type = MX_ATTR_FLOATS},
    {.name = "activations", .type = MX_ATTR_STRINGS},
    {.name = "clip", .type = MX_ATTR_FLOAT},
    {.name = "direction", .type = MX_ATTR_STRING, .def_s = "forward"},
    {.name = "hidden_size", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "layout", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "input_forget", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "linear_before_reset", .type = MX_ATTR_INT, .def_i = 0},
    /* Opset 1 only; Y is produced whenever the node asks for it, so it changes nothing. */
    {.name = "output_sequence", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

typedef struct act_name {
  const char *name;
  int32_t code;
  int uses_alpha, uses_beta;
  float def_alpha, def_beta;
} act_name;

static const act_name act_names[] = {
    {"Sigmoid", MX_RNN_ACT_SIGMOID, 0, 0, 0.0f, 0.0f},
    {"Tanh", MX_RNN_ACT_TANH, 0, 0, 0.0f, 0.0f},
    {"Relu", MX_RNN_ACT_RELU, 0, 0, 0.0f, 0.0f},
    {"Affine", MX_RNN_ACT_AFFINE, 1, 1, 1.0f, 0.0f},
    {"LeakyRelu", MX_RNN_ACT_LEAKY_RELU, 1, 0, 0.01f, 0.0f},
    {"ThresholdedRelu", MX_RNN_ACT_THRESHOLDED_RELU, 1, 0, 1.0f, 0.0f},
    {"ScaledTanh", MX_RNN_ACT_SCALED_TANH, 1, 1, 1.0f, 1.0f},
    {"HardSigmoid", MX_RNN_ACT_HARD_SIGMOID, 1, 1, 0.2f, 0.5f},
    {"Elu", MX_RNN_ACT_ELU, 1, 0, 1.0f, 0.0f},
    {"Softsign", MX_RNN_ACT_SOFTSIGN, 0, 0, 0.0f, 0.0f},
    {"Softplus", MX_RNN_ACT_SOFTPLUS, 0, 0, 0.0f, 0.0f},
};

static const act_name *find_act(const char *s) {
  for (size_t i = 0; i < sizeof act_names / sizeof act_names[0]; i++)
    if (strcasecmp(act_names[i].name, s) == 0) return &act_names[i];
  return NULL;
}

static mx_status rnn_parse(const mx_parse_ctx *pc, void *params, int32_t kind) {
  mx_rnn_params *p = params;
  memset(p, 0, sizeof *p);
  p->kind = kind;
  char dir[32];
  mx_status st = mx__parse_string(pc, "direction", dir, sizeof dir);
  if (st != MX_OK) return st;
  if (strcmp(dir, "forward") == 0)
    p->direction = MX_RNN_FORWARD;
  else if (strcmp(dir, "reverse") == 0)
    p->direction = MX_RNN_REVERSE;
  else if (strcmp(dir, "bidirectional") == 0)
    p->direction = MX_RNN_BIDIRECTIONAL;
  else
    return mx__parse_fail(pc, "direction '%s' is not forward, reverse or bidirectional", dir);
  p->hidden_size = mx__parse_int(pc, "hidden_size");
  if (p->hidden_size < 0)
    return mx__parse_fail(pc, "hidden_size %lld is negative", (long long)p->hidden_size);
  int64_t layout = mx__parse_int(pc, "layout");
  if (layout != 0 && layout != 1) return mx__parse_fail(pc, "layout %lld is not 0 or 1", (long long)layout);
  p->layout = (int32_t)layout;
  if (mx__parse_attr(pc, "clip")) {
    p->has_clip = 1;
    p->clip = mx__parse_float(pc, "clip");
    if (!(p->clip > 0.0f)) return mx__parse_fail(pc, "clip %g is not positive", (double)p->clip);
  }
  p->input_forget = mx__parse_int(pc, "input_forget") != 0;
  p->linear_before_reset = mx__parse_int(pc, "linear_before_reset") != 0;
  if (kind != MX_RNN_LSTM && p->input_forget) return mx__parse_fail(pc, "input_forget is an LSTM attribute");
  if (kind != MX_RNN_GRU && p->linear_before_reset)
    return mx__parse_fail(pc, "linear_before_reset is a GRU attribute");

  /* Default activations: RNN f=Tanh; GRU f=Sigmoid g=Tanh; LSTM f=Sigmoid g=Tanh h=Tanh. */
  static const int32_t defaults[3][3] = {{MX_RNN_ACT_TANH},
                                         {MX_RNN_ACT_SIGMOID, MX_RNN_ACT_TANH},
                                         {MX_RNN_ACT_SIGMOID, MX_RNN_ACT_TANH, MX_RNN_ACT_TANH}};
  int32_t n_acts = kind + 1;
  p->n_acts = n_acts;
  int32_t n_dirs = p->direction == MX_RNN_BIDIRECTIONAL ? 2 : 1;
  for (int32_t d = 0; d < 2; d++)
    for (int32_t k = 0; k < n_acts; k++) p->act[d][k] = defaults[kind][k];
  const mx_attr *acts = mx__parse_attr(pc, "activations");
  if (acts && acts->type == MX_ATTR_STRINGS && acts->count > 0) {
    if (acts->count != (size_t)(n_acts * n_dirs) && acts->count != (size_t)n_acts)
      return mx__parse_fail(pc, "activations has %zu entries; %d per direction are needed", acts->count,
                            (int)n_acts);
    float alphas[2 * MX_RNN_MAX_ACTS], betas[2 * MX_RNN_MAX_ACTS];
    size_t n_alpha = 0, n_beta = 0;
    if ((st = mx__parse_floats(pc, "activation_alpha", alphas, 2 * MX_RNN_MAX_ACTS, &n_alpha)) != MX_OK)
      return st;
    if ((st = mx__parse_floats(pc, "activation_beta", betas, 2 * MX_RNN_MAX_ACTS, &n_beta)) != MX_OK)
      return st;
    /* activation_alpha / activation_beta list one value per activation that takes it, in order. */
    size_t ia = 0, ib = 0;
    for (size_t i = 0; i < acts->count; i++) {
      const act_name *a = find_act(acts->strings[i]);
      if (!a) return mx__parse_fail(pc, "activation '%s' is not one mixrt knows", acts->strings[i]);
      int32_t d = (int32_t)(i / (size_t)n_acts), k = (int32_t)(i % (size_t)n_acts);
      p->act[d][k] = a->code;
      p->alpha[d][k] = a->def_alpha;
      p->beta[d][k] = a->def_beta;
      if (a->uses_alpha && ia < n_alpha) p->alpha[d][k] = alphas[ia++];
      if (a->uses_beta && ib < n_beta) p->beta[d][k] = betas[ib++];
    }
    if (acts->count == (size_t)n_acts)
      for (int32_t k = 0; k < n_acts; k++) {
        p->act[1][k] = p->act[0][k];
        p->alpha[1][k] = p->alpha[0][k];
        p->beta[1][k] = p->beta[0][k];
      }
  }
  return MX_OK;
}

static mx_status rnn_parse_simple(const mx_parse_ctx *pc, void *params) {
  return rnn_parse(pc, params, MX_RNN_SIMPLE);
}
static mx_status rnn_parse_gru(const mx_parse_ctx *pc, void *params) {
  return rnn_parse(pc, params, MX_RNN_GRU);
}
static mx_status rnn_parse_lstm(const mx_parse_ctx *pc, void *params) {
  return rnn_parse(pc, params, MX_RNN_LSTM);
}

/* Checks that input i (when present and ranked) has rank `rank` and dims want[] (MX_DIM_UNKNOWN
 * entries unchecked). */
static mx_status check_input(mx_infer_ctx *ctx, uint32_t i, const char *what, int32_t rank,
                             const mx_dim *want) {
  if (!mx__in_present(ctx, i)) return MX_OK;
  const mx_shape *s = &ctx->in[i].shape;
  if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (s->rank != rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u (%s) has rank %d, not %d", i, what, (int)s->rank,
                          (int)rank);
  for (int32_t d = 0; d < rank; d++) {
    char msg[64];
    snprintf(msg, sizeof msg, "dim %d of %s", (int)d, what);
    mx_status st = mx__check_same_dim(ctx, s->dims[d], want[d], msg);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

static mx_status rnn_infer(mx_infer_ctx *ctx) {
  const mx_rnn_params *p = ctx->params;
  mx_dtype dt = ctx->in[0].dtype;
  if (!mx_dtype_is_float(dt))
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 (X) has dtype %s; recurrent layers take floating-point input",
                          mx_dtype_name(dt));
  mx_status st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  static const uint32_t same[] = {3, 5, 6, 7};
  for (size_t k = 0; k < 4 && st == MX_OK; k++)
    if (mx__in_present(ctx, same[k])) st = mx__infer_same_dtype(ctx, same[k], 0);
  if (st != MX_OK) return st;
  if (mx__in_present(ctx, 4) && ctx->in[4].dtype != MX_INT32)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 4 (sequence_lens) has dtype %s, not int32",
                          mx_dtype_name(ctx->in[4].dtype));
  int64_t gates = p->kind == MX_RNN_SIMPLE ? 1 : p->kind == MX_RNN_GRU ? 3 : 4;
  mx_dim nd = p->direction == MX_RNN_BIDIRECTIONAL ? 2 : 1;
  mx_dim seq = MX_DIM_UNKNOWN, batch = MX_DIM_UNKNOWN, in_size = MX_DIM_UNKNOWN;
  const mx_shape *x = &ctx->in[0].shape;
  if (x->rank != MX_RANK_UNKNOWN) {
    if (x->rank != 3)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 (X) has rank %d, not 3", (int)x->rank);
    seq = x->dims[p->layout ? 1 : 0];
    batch = x->dims[p->layout ? 0 : 1];
    in_size = x->dims[2];
  }
  /* The hidden size: the attribute, else R's last dim, else W's rows / gates. */
  mx_dim hidden = p->hidden_size > 0 ? (mx_dim)p->hidden_size : MX_DIM_UNKNOWN;
  const mx_shape *r = &ctx->in[2].shape, *w = &ctx->in[1].shape;
  if (mx_dim_is_unknown(hidden) && r->rank == 3) hidden = r->dims[2];
  if (mx_dim_is_unknown(hidden) && w->rank == 3 && mx_dim_is_concrete(w->dims[1]))
    hidden = w->dims[1] / gates;
  mx_dim gh = mx_dim_is_unknown(hidden) ? MX_DIM_UNKNOWN
                                        : mx_sym_mul(ctx->syms, hidden, mx_sym_const(ctx->syms, gates));
  mx_dim want_w[3] = {nd, gh, in_size}, want_r[3] = {nd, gh, hidden};
  mx_dim want_b[2] = {nd, mx_dim_is_unknown(gh) ? MX_DIM_UNKNOWN : mx_sym_mul(ctx->syms, gh, 2)};
  mx_dim want_seq[1] = {batch};
  mx_dim want_h[3] = {nd, batch, hidden};
  if (p->layout) want_h[0] = batch, want_h[1] = nd;
  mx_dim want_p[2] = {nd, mx_dim_is_unknown(hidden) ? MX_DIM_UNKNOWN : mx_sym_mul(ctx->syms, hidden, 3)};
  if ((st = check_input(ctx, 1, "W", 3, want_w)) != MX_OK) return st;
  if ((st = check_input(ctx, 2, "R", 3, want_r)) != MX_OK) return st;
  if ((st = check_input(ctx, 3, "B", 2, want_b)) != MX_OK) return st;
  if ((st = check_input(ctx, 4, "sequence_lens", 1, want_seq)) != MX_OK) return st;
  if ((st = check_input(ctx, 5, "initial_h", 3, want_h)) != MX_OK) return st;
  if (p->kind == MX_RNN_LSTM) {
    if ((st = check_input(ctx, 6, "initial_c", 3, want_h)) != MX_OK) return st;
    if ((st = check_input(ctx, 7, "P", 2, want_p)) != MX_OK) return st;
  }
  for (uint32_t i = 0; i < ctx->n_out; i++) ctx->out[i].dtype = dt;
  mx_shape *y = &ctx->out[0].shape;
  y->rank = 4;
  if (p->layout)
    y->dims[0] = batch, y->dims[1] = seq, y->dims[2] = nd, y->dims[3] = hidden;
  else
    y->dims[0] = seq, y->dims[1] = nd, y->dims[2] = batch, y->dims[3] = hidden;
  for (uint32_t i = 1; i < ctx->n_out; i++) {
    ctx->out[i].shape.rank = 3;
    for (int d = 0; d < 3; d++) ctx->out[i].shape.dims[d] = want_h[d];
  }
  return MX_OK;
}

static const mx_op_def op_rnn = {
    .name = "RNN",
    .min_inputs = 3,
    .max_inputs = 6,
    .min_outputs = 0,
    .max_outputs = 2,
    .attrs = rnn_attrs,
    .params_size = sizeof(mx_rnn_params),
    .parse = rnn_parse_simple,
    .infer = rnn_infer,
};

static const mx_op_def op_gru = {
    .name = "GRU",
    .min_inputs = 3,
    .max_inputs = 6,
    .min_outputs = 0,
    .max_outputs = 2,
    .attrs = rnn_attrs,
    .params_size = sizeof(mx_rnn_params),
    .parse = rnn_parse_gru,
    .infer = rnn_infer,
};

static const mx_op_def op_lstm = {
    .name = "LSTM",
    .min_inputs = 3,
    .max_inputs = 8,
    .min_outputs = 0,
    .max_outputs = 3,
    .attrs = rnn_attrs,
    .params_size = sizeof(mx_rnn_params),
    .parse = rnn_parse_lstm,
    .infer = rnn_infer,
};

const mx_op_def *const mx__ops_rnn[] = {
    &op_rnn,
    &op_gru,
    &op_lstm,
    NULL,
};
