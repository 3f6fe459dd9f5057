/* The Llama decode step written the way torch.onnx.export writes a Hugging Face Llama
 * (mx_model_llama_exported): the same inputs, outputs, weights (same seed, drawn in the same
 * order) and arithmetic as mx_model_llama, but with primitive ops only:
 *   RMSNorm    Pow(x, 2) -> ReduceMean(-1) -> Add(eps) -> Sqrt -> Reciprocal -> Mul(x) -> Mul(scale)
 *   rotary     cos = Unsqueeze(Gather(cos_table, position_ids), 1) (tables of full head width),
 *              x * cos + Concat(Neg(Slice(x, D/2:)), Slice(x, :D/2)) * sin
 *   attention  present = Concat(past, new, axis 2); grouped-query heads repeated with
 *              Unsqueeze -> Expand -> Reshape; Softmax(MatMul(q, Transpose(k)) * scale) -> MatMul(v)
 *   MLP        g * Sigmoid(g) * up
 * mixrt's rewrite rules turn it back into the fused form (RMSNormalization, RotaryEmbedding,
 * Attention, Swish). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "mixrt/models.h"
#include "models/builder.h"

#define ROPE_BASE    10000.0
#define NORM_EPSILON 1e-5f

typedef struct xctx {
  const mx_llama_config *cfg;
  mx_value_id q_shape, kv_shape, merged_shape, rep_shape, rep_expand; /* Reshape / Expand targets */
  mx_value_id pos;                                                    /* position_ids [1, 1] */
  mx_value_id cos, sin;                                               /* [1, 1, 1, D] at pos */
  mx_value_id two, eps, half_start, half_end, zero, last_axis, big;   /* small constants */
  mx_value_id axes_last, scale;
} xctx;

static mx_value_id node(mx_mb *b, const char *op, const char *prefix, const char *what, const mx_value_id *in,
                        size_t n, const mx_attr *a, size_t na) {
  char name[96];
  return mx__mb_node(b, op, mx__mb_name(name, sizeof name, prefix, what), in, n, a, na, NULL);
}

static mx_value_id rmsnorm(mx_mb *b, const xctx *c, const char *p, const char *tag, mx_value_id x,
                           mx_value_id scale) {
  char w[48];
#define STEP(op, suffix, ...)                      \
  (snprintf(w, sizeof w, "%s_%s", tag, suffix),    \
   node(b, op, p, w, (mx_value_id[]){__VA_ARGS__}, \
        sizeof((mx_value_id[]){__VA_ARGS__}) / sizeof(mx_value_id), NULL, 0))
  mx_value_id sq = STEP("Pow", "pow", x, c->two);
  mx_value_id var = STEP("ReduceMean", "mean", sq, c->axes_last);
  mx_value_id ve = STEP("Add", "add_eps", var, c->eps);
  mx_value_id sd = STEP("Sqrt", "sqrt", ve);
  mx_value_id r = STEP("Reciprocal", "rsqrt", sd);
  mx_value_id xn = STEP("Mul", "normed", x, r);
  return STEP("Mul", "scale", scale, xn);
#undef STEP
}

static mx_value_id project_heads(mx_mb *b, const char *p, const char *tag, mx_value_id x, mx_value_id w,
                                 mx_value_id shape) {
  static const int64_t perm[4] = {0, 2, 1, 3};
  char what[32];
  snprintf(what, sizeof what, "%s_proj", tag);
  mx_value_id m = node(b, "MatMul", p, what, (mx_value_id[]){x, w}, 2, NULL, 0);
  snprintf(what, sizeof what, "%s_reshape", tag);
  mx_value_id r = node(b, "Reshape", p, what, (mx_value_id[]){m, shape}, 2, NULL, 0);
  mx_attr a = mx_attr_ints("perm", perm, 4);
  snprintf(what, sizeof what, "%s_transpose", tag);
  return node(b, "Transpose", p, what, &r, 1, &a, 1);
}

/* x * cos + rotate_half(x) * sin, rotate_half(x) = Concat(-x[..., D/2:], x[..., :D/2]). */
static mx_value_id rotary(mx_mb *b, const xctx *c, const char *p, const char *tag, mx_value_id x) {
  char w[48];
  mx_attr ax = mx_attr_int("axis", -1);
#define NAME(s) (snprintf(w, sizeof w, "%s_%s", tag, s), w)
  mx_value_id hi = node(b, "Slice", p, NAME("slice_hi"),
                        (mx_value_id[]){x, c->half_end, c->big, c->last_axis}, 4, NULL, 0);
  mx_value_id lo = node(b, "Slice", p, NAME("slice_lo"),
                        (mx_value_id[]){x, c->zero, c->half_end, c->last_axis}, 4, NULL, 0);
  mx_value_id neg = node(b, "Neg", p, NAME("neg"), &hi, 1, NULL, 0);
  mx_value_id rot = node(b, "Concat", p, NAME("rotate_half"), (mx_value_id[]){neg, lo}, 2, &ax, 1);
  mx_value_id xc = node(b, "Mul", p, NAME("mul_cos"), (mx_value_id[]){x, c->cos}, 2, NULL, 0);
  mx_value_id rs = node(b, "Mul", p, NAME("mul_sin"), (mx_value_id[]){rot, c->sin}, 2, NULL, 0);
  return node(b, "Add", p, NAME("rotary"), (mx_value_id[]){xc, rs}, 2, NULL, 0);
#undef NAME
}

/* Grouped-query heads: [1, KV, T, D] -> [1, NH, T, D] (each kv head repeated NH / KV times). */
static mx_value_id repeat_kv(mx_mb *b, const xctx *c, const char *p, const char *tag, mx_value_id x) {
  if (c->cfg->kv_heads == c->cfg->heads) return x;
  char w[48];
  static const int64_t ax2[1] = {2};
  mx_value_id axes = mx__mb_ints(b, NULL, ax2, 1);
  snprintf(w, sizeof w, "%s_unsqueeze", tag);
  mx_value_id u = node(b, "Unsqueeze", p, w, (mx_value_id[]){x, axes}, 2, NULL, 0);
  snprintf(w, sizeof w, "%s_expand", tag);
  mx_value_id e = node(b, "Expand", p, w, (mx_value_id[]){u, c->rep_expand}, 2, NULL, 0);
  snprintf(w, sizeof w, "%s_repeat", tag);
  return node(b, "Reshape", p, w, (mx_value_id[]){e, c->rep_shape}, 2, NULL, 0);
}

static mx_value_id layer(mx_mb *b, const xctx *c, int64_t li, mx_value_id h, mx_value_id past_k,
                         mx_value_id past_v) {
  const mx_llama_config *cfg = c->cfg;
  const int64_t H = cfg->hidden, D = cfg->head_dim, QD = cfg->heads * D, KD = cfg->kv_heads * D, F = cfg->ffn;
  char p[32], n[96], nk[48], nv[48];
  snprintf(p, sizeof p, "l%lld/", (long long)li);
#define NAME(s) mx__mb_name(n, sizeof n, p, (s))
  const float s_in = 1.0f / sqrtf((float)H), s_attn = 1.0f / sqrtf((float)QD), s_ffn = 1.0f / sqrtf((float)F);
  /* Weights in mx_model_llama's order, so both forms hold the same values. */
  mx_value_id an = mx__mb_weights_around(b, NAME("attn_norm_scale"), 1, &H, 1.0f, 0.1f);
  mx_value_id x = rmsnorm(b, c, p, "attn_norm", h, an);
  mx_value_id wq = mx__mb_weights(b, NAME("wq"), 2, (int64_t[]){H, QD}, s_in);
  mx_value_id wk = mx__mb_weights(b, NAME("wk"), 2, (int64_t[]){H, KD}, s_in);
  mx_value_id wv = mx__mb_weights(b, NAME("wv"), 2, (int64_t[]){H, KD}, s_in);
  mx_value_id q = project_heads(b, p, "q", x, wq, c->q_shape);
  mx_value_id k = project_heads(b, p, "k", x, wk, c->kv_shape);
  mx_value_id v = project_heads(b, p, "v", x, wv, c->kv_shape);
  q = rotary(b, c, p, "q", q);
  k = rotary(b, c, p, "k", k);

  snprintf(nk, sizeof nk, "present_key_%lld", (long long)li);
  snprintf(nv, sizeof nv, "present_value_%lld", (long long)li);
  mx_attr cat = mx_attr_int("axis", 2);
  mx_value_id pk = mx__mb_node(b, "Concat", NAME("key_cache"), (mx_value_id[]){past_k, k}, 2, &cat, 1, nk);
  mx_value_id pv = mx__mb_node(b, "Concat", NAME("value_cache"), (mx_value_id[]){past_v, v}, 2, &cat, 1, nv);
  mx_value_id kr = repeat_kv(b, c, p, "k", pk), vr = repeat_kv(b, c, p, "v", pv);
  static const int64_t kt_perm[4] = {0, 1, 3, 2};
  mx_attr kt = mx_attr_ints("perm", kt_perm, 4);
  mx_value_id kT = node(b, "Transpose", p, "k_transpose_scores", &kr, 1, &kt, 1);
  mx_value_id s = node(b, "MatMul", p, "scores", (mx_value_id[]){q, kT}, 2, NULL, 0);
  s = node(b, "Mul", p, "scores_scaled", (mx_value_id[]){s, c->scale}, 2, NULL, 0);
  mx_attr sm = mx_attr_int("axis", -1);
  mx_value_id pr = node(b, "Softmax", p, "probs", &s, 1, &sm, 1);
  mx_value_id y = node(b, "MatMul", p, "attn_out", (mx_value_id[]){pr, vr}, 2, NULL, 0);

  static const int64_t perm[4] = {0, 2, 1, 3};
  mx_attr tp = mx_attr_ints("perm", perm, 4);
  mx_value_id yt = node(b, "Transpose", p, "attn_transpose", &y, 1, &tp, 1);
  mx_value_id ym = node(b, "Reshape", p, "attn_merge", (mx_value_id[]){yt, c->merged_shape}, 2, NULL, 0);
  mx_value_id wo = mx__mb_weights(b, NAME("wo"), 2, (int64_t[]){QD, H}, s_attn);
  mx_value_id o = node(b, "MatMul", p, "o_proj", (mx_value_id[]){ym, wo}, 2, NULL, 0);
  h = node(b, "Add", p, "attn_residual", (mx_value_id[]){h, o}, 2, NULL, 0);

  mx_value_id mn = mx__mb_weights_around(b, NAME("mlp_norm_scale"), 1, &H, 1.0f, 0.1f);
  x = rmsnorm(b, c, p, "mlp_norm", h, mn);
  mx_value_id wg = mx__mb_weights(b, NAME("w_gate"), 2, (int64_t[]){H, F}, s_in);
  mx_value_id wu = mx__mb_weights(b, NAME("w_up"), 2, (int64_t[]){H, F}, s_in);
  mx_value_id wd = mx__mb_weights(b, NAME("w_down"), 2, (int64_t[]){F, H}, s_ffn);
  mx_value_id g = node(b, "MatMul", p, "gate_proj", (mx_value_id[]){x, wg}, 2, NULL, 0);
  mx_value_id sg = node(b, "Sigmoid", p, "gate_sigmoid", &g, 1, NULL, 0);
  mx_value_id silu = node(b, "Mul", p, "gate_silu", (mx_value_id[]){g, sg}, 2, NULL, 0);
  mx_value_id u = node(b, "MatMul", p, "up_proj", (mx_value_id[]){x, wu}, 2, NULL, 0);
  mx_value_id gu = node(b, "Mul", p, "gate_up", (mx_value_id[]){silu, u}, 2, NULL, 0);
  mx_value_id d = node(b, "MatMul", p, "down_proj", (mx_value_id[]){gu, wd}, 2, NULL, 0);
  return node(b, "Add", p, "mlp_residual", (mx_value_id[]){h, d}, 2, NULL, 0);
#undef NAME
}

/* Rotary tables of full head width [max_pos, D] (both halves hold the same angles, as
 * Hugging Face builds them), gathered at position_ids and unsqueezed to [1, 1, 1, D]. */
static void rope(mx_mb *b, xctx *c) {
  const int64_t D = c->cfg->head_dim, half = D / 2, dims[2] = {c->cfg->max_pos, D};
  size_t n;
  static const int64_t one[1] = {1};
  mx_value_id axes = mx__mb_ints(b, "rope_unsqueeze_axes", one, 1);
  for (int which = 0; which < 2; which++) {
    float *t = mx__mb_scratch(b, 2, dims, &n);
    if (!t) return;
    for (int64_t p = 0; p < c->cfg->max_pos; p++) {
      for (int64_t i = 0; i < half; i++) {
        double angle = (double)p * pow(ROPE_BASE, -2.0 * (double)i / (double)D);
        float v = (float)(which == 0 ? cos(angle) : sin(angle));
        t[p * D + i] = t[p * D + half + i] = v;
      }
    }
    mx_value_id table = mx__mb_const(b, which ? "rope_sin_full" : "rope_cos_full", MX_FLOAT32, 2, dims, t);
    mx_value_id gth = mx__mb_node(b, "Gather", which ? "rope_sin_at" : "rope_cos_at",
                                  (mx_value_id[]){table, c->pos}, 2, NULL, 0, NULL);
    mx_value_id u = mx__mb_node(b, "Unsqueeze", which ? "rope_sin" : "rope_cos", (mx_value_id[]){gth, axes},
                                2, NULL, 0, NULL);
    if (which)
      c->sin = u;
    else
      c->cos = u;
  }
}

mx_status mx_model_llama_exported(const mx_llama_config *cfg_in, mx_graph **out, mx_error *err) {
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  mx_llama_config cfg;
  if (cfg_in)
    cfg = *cfg_in;
  else
    mx_llama_config_default(&cfg);
  /* The built-in generator checks the config (and resolves head_dim 0) the same way. */
  mx_graph *probe = NULL;
  mx_llama_config small = cfg;
  small.vocab = 1;
  small.max_pos = 2;
  small.ffn = 1;
  small.layers = 1;
  mx_status st = mx_model_llama(&small, &probe, err);
  mx_graph_destroy(probe);
  if (st != MX_OK) return st;
  if (cfg.head_dim == 0) cfg.head_dim = cfg.hidden / cfg.heads;
  if (cfg.layers < 1 || cfg.layers > 1024 || cfg.ffn < 1 || cfg.vocab < 1 || cfg.max_pos < 1)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "llama: layers, ffn, vocab and max_pos must be positive");
  const int64_t H = cfg.hidden, D = cfg.head_dim, L = cfg.layers, NH = cfg.heads, KV = cfg.kv_heads;
  mx_mb b;
  mx__mb_begin(&b, "llama_decode_step", cfg.seed);
  mx_symtab *t = b.st == MX_OK ? mx_graph_symtab(b.g) : NULL;
  mx_dim past_len = t ? mx_sym_named(t, "past_len") : 0;
  mx_value_id ids = mx__mb_input(&b, "input_ids", MX_INT64, 2, (mx_dim[]){1, 1});
  mx_value_id past_k[1024], past_v[1024];
  for (int64_t i = 0; i < L; i++) {
    char nk[48], nv[48];
    snprintf(nk, sizeof nk, "past_key_%lld", (long long)i);
    snprintf(nv, sizeof nv, "past_value_%lld", (long long)i);
    const mx_dim dims[4] = {1, KV, past_len, D};
    past_k[i] = mx__mb_input(&b, nk, MX_FLOAT32, 4, dims);
    past_v[i] = mx__mb_input(&b, nv, MX_FLOAT32, 4, dims);
  }
  xctx c = {.cfg = &cfg};
  c.q_shape = mx__mb_ints(&b, "q_heads_shape", (int64_t[]){1, 1, NH, D}, 4);
  c.kv_shape = mx__mb_ints(&b, "kv_heads_shape", (int64_t[]){1, 1, KV, D}, 4);
  c.merged_shape = mx__mb_ints(&b, "merged_heads_shape", (int64_t[]){1, 1, NH * D}, 3);
  c.rep_expand = mx__mb_ints(&b, "repeat_kv_expand", (int64_t[]){1, KV, NH / KV, 1, D}, 5);
  c.rep_shape = mx__mb_ints(&b, "repeat_kv_shape", (int64_t[]){1, NH, -1, D}, 4);
  c.two = mx__mb_scalar_f32(&b, "pow_two", 2.0f);
  c.eps = mx__mb_scalar_f32(&b, "norm_eps", NORM_EPSILON);
  c.axes_last = mx__mb_ints(&b, "norm_axes", (int64_t[]){-1}, 1);
  c.half_end = mx__mb_ints(&b, "rope_half", (int64_t[]){D / 2}, 1);
  c.zero = mx__mb_ints(&b, "rope_zero", (int64_t[]){0}, 1);
  c.big = mx__mb_ints(&b, "rope_end", (int64_t[]){INT64_MAX}, 1);
  c.last_axis = mx__mb_ints(&b, "rope_axis", (int64_t[]){-1}, 1);
  c.scale = mx__mb_scalar_f32(&b, "attn_scale", 1.0f / sqrtf((float)D));

  mx_value_id past_shape = mx__mb_node(&b, "Shape", "past_shape", &past_k[0], 1, NULL, 0, NULL);
  mx_value_id two = mx__mb_scalar_i64(&b, "seq_axis", 2);
  mx_value_id plen =
      mx__mb_node(&b, "Gather", "past_len", (mx_value_id[]){past_shape, two}, 2, NULL, 0, NULL);
  mx_value_id pos_shape = mx__mb_ints(&b, "position_ids_shape", (int64_t[]){1, 1}, 2);
  c.pos = mx__mb_node(&b, "Reshape", "position_ids", (mx_value_id[]){plen, pos_shape}, 2, NULL, 0, NULL);
  rope(&b, &c);

  mx_value_id embed = mx__mb_weights(&b, "embed_tokens", 2, (int64_t[]){cfg.vocab, H}, 1.0f);
  mx_value_id h = mx__mb_node(&b, "Gather", "embed", (mx_value_id[]){embed, ids}, 2, NULL, 0, NULL);
  for (int64_t i = 0; i < L; i++) h = layer(&b, &c, i, h, past_k[i], past_v[i]);
  mx_value_id fn = mx__mb_weights_around(&b, "final_norm_scale", 1, &H, 1.0f, 0.1f);
  h = rmsnorm(&b, &c, "", "final_norm", h, fn);
  mx_value_id head = mx__mb_weights(&b, "lm_head", 2, (int64_t[]){H, cfg.vocab}, 1.0f / sqrtf((float)H));
  mx_value_id logits =
      mx__mb_node(&b, "MatMul", "lm_head_proj", (mx_value_id[]){h, head}, 2, NULL, 0, "logits");
  mx__mb_output(&b, logits);
  for (int64_t i = 0; i < L && b.st == MX_OK; i++) {
    char nk[48], nv[48];
    snprintf(nk, sizeof nk, "present_key_%lld", (long long)i);
    snprintf(nv, sizeof nv, "present_value_%lld", (long long)i);
    mx__mb_output(&b, mx_graph_find_value(b.g, nk));
    mx__mb_output(&b, mx_graph_find_value(b.g, nv));
  }
  return mx__mb_end(&b, out, "the exported-style llama decode step", err);
}
