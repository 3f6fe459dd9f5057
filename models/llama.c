/* The Llama-style decode-step generator (mx_model_llama).
 *
 * One step of autoregressive decoding for batch 1: the new token's id goes in, the logits for
 * the next token and the grown key/value cache come out. With H = hidden, NH = heads,
 * KV = kv_heads, D = head_dim and p = past_len:
 *   h = Gather(embed_tokens, input_ids)                                   [1, 1, H]
 *   position_ids = Reshape(Gather(Shape(past_key_0), 2), [1, 1])          value [[p]]
 *   per layer i:
 *     x = RMSNormalization(h, attn_norm)
 *     q = Transpose(Reshape(MatMul(x, wq), [1, 1, NH, D]))                [1, NH, 1, D]
 *     k, v likewise with KV heads; q and k go through RotaryEmbedding(position_ids)
 *     y, present_key_i, present_value_i = Attention(q, k, v, -, past_key_i, past_value_i)
 *     h = h + MatMul(Reshape(Transpose(y), [1, 1, NH * D]), wo)
 *     x = RMSNormalization(h, mlp_norm)
 *     g = MatMul(x, w_gate);  h = h + MatMul(g * Sigmoid(g) * MatMul(x, w_up), w_down)
 *   logits = MatMul(RMSNormalization(h, final_norm), lm_head)             [1, 1, vocab]
 *
 * Attention gets is_causal = 0: the single query row may see every cached key and itself, which
 * is also what a causal mask aligned to the end of the cache (ONNX's rule when past_key is
 * given) allows, so the result is the same without relying on how a runtime aligns the mask.
 * The rotary tables use the halves (non-interleaved) rotation with base 10000. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "mixrt/models.h"
#include "models/builder.h"

#define ROPE_BASE    10000.0
#define NORM_EPSILON 1e-5f

void mx_llama_config_default(mx_llama_config *cfg) {
  cfg->layers = 2;
  cfg->hidden = 64;
  cfg->heads = 4;
  cfg->kv_heads = 2;
  cfg->head_dim = 0;
  cfg->ffn = 172;
  cfg->vocab = 128;
  cfg->max_pos = 2048;
  cfg->seed = 1;
}

bool mx_llama_config_preset(mx_llama_config *cfg, const char *name) {
  mx_llama_config_default(cfg);
  if (name && strcmp(name, "tiny") == 0) return true;
  if (name && strcmp(name, "small") == 0) {
    cfg->layers = 4;
    cfg->hidden = 256;
    cfg->heads = 4;
    cfg->kv_heads = 4;
    cfg->head_dim = 64;
    cfg->ffn = 688;
    cfg->vocab = 1000;
    return true;
  }
  return false;
}

/* Checks one size field: 1 .. max. */
static mx_status check_size(const char *field, int64_t v, int64_t max, mx_error *err) {
  if (v >= 1 && v <= max) return MX_OK;
  return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "llama: %s is %lld; it must be between 1 and %lld", field,
                  (long long)v, (long long)max);
}

/* Validates cfg and resolves head_dim 0 to hidden / heads. */
static mx_status check_config(mx_llama_config *cfg, mx_error *err) {
  mx_status st;
  if ((st = check_size("layers", cfg->layers, 1024, err)) != MX_OK) return st;
  if ((st = check_size("hidden", cfg->hidden, 65536, err)) != MX_OK) return st;
  if ((st = check_size("heads", cfg->heads, 1024, err)) != MX_OK) return st;
  if ((st = check_size("kv_heads", cfg->kv_heads, 1024, err)) != MX_OK) return st;
  if ((st = check_size("ffn", cfg->ffn, 1 << 20, err)) != MX_OK) return st;
  if ((st = check_size("vocab", cfg->vocab, 1 << 22, err)) != MX_OK) return st;
  if ((st = check_size("max_pos", cfg->max_pos, 1 << 20, err)) != MX_OK) return st;
  if (cfg->heads % cfg->kv_heads != 0)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "llama: heads (%lld) is not a multiple of kv_heads (%lld)",
                    (long long)cfg->heads, (long long)cfg->kv_heads);
  if (cfg->head_dim == 0) {
    if (cfg->hidden % cfg->heads != 0)
      return mx__fail(
          err, MX_ERR_INVALID_ARGUMENT,
          "llama: head_dim 0 means hidden / heads, but hidden (%lld) is not a multiple of heads (%lld)",
          (long long)cfg->hidden, (long long)cfg->heads);
    cfg->head_dim = cfg->hidden / cfg->heads;
  }
  if ((st = check_size("head_dim", cfg->head_dim, 4096, err)) != MX_OK) return st;
  if (cfg->head_dim % 2 != 0)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "llama: head_dim (%lld) must be even for the rotary embedding", (long long)cfg->head_dim);
  /* Every weight matrix stays below 2^30 elements (4 GiB of float32). */
  const int64_t lim = (int64_t)1 << 30;
  if (cfg->vocab * cfg->hidden > lim || cfg->hidden * cfg->ffn > lim ||
      cfg->heads * cfg->head_dim * cfg->hidden > lim || cfg->max_pos * cfg->head_dim > lim)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "llama: a weight matrix would exceed 2^30 elements (vocab %lld, hidden %lld, ffn %lld, "
                    "heads %lld x head_dim %lld, max_pos %lld)",
                    (long long)cfg->vocab, (long long)cfg->hidden, (long long)cfg->ffn, (long long)cfg->heads,
                    (long long)cfg->head_dim, (long long)cfg->max_pos);
  return MX_OK;
}

/* The rotary cos and sin tables [max_pos, head_dim / 2]. */
static void rope_tables(mx_mb *b, int64_t max_pos, int64_t head_dim, mx_value_id *cos_v, mx_value_id *sin_v) {
  const int64_t half = head_dim / 2, dims[2] = {max_pos, half};
  size_t n;
  for (int which = 0; which < 2; which++) {
    float *t = mx__mb_scratch(b, 2, dims, &n);
    if (!t) return;
    for (int64_t p = 0; p < max_pos; p++) {
      for (int64_t i = 0; i < half; i++) {
        double angle = (double)p * pow(ROPE_BASE, -2.0 * (double)i / (double)head_dim);
        t[p * half + i] = (float)(which == 0 ? cos(angle) : sin(angle));
      }
    }
    if (which == 0)
      *cos_v = mx__mb_const(b, "rope_cos", MX_FLOAT32, 2, dims, t);
    else
      *sin_v = mx__mb_const(b, "rope_sin", MX_FLOAT32, 2, dims, t);
  }
}

/* Values shared by every layer. */
typedef struct llama_ctx {
  const mx_llama_config *cfg;
  mx_value_id q_shape, kv_shape;  /* Reshape targets [1, 1, heads, D] and [1, 1, kv_heads, D] */
  mx_value_id merged_shape;       /* Reshape target [1, 1, heads * D] */
  mx_value_id pos;                /* position_ids [1, 1] (value past_len) */
  mx_value_id rope_cos, rope_sin; /* rotary tables [max_pos, D / 2] */
} llama_ctx;

static mx_value_id rmsnorm(mx_mb *b, const char *name, mx_value_id x, mx_value_id scale) {
  mx_attr a[2] = {mx_attr_int("axis", -1), mx_attr_float("epsilon", NORM_EPSILON)};
  return mx__mb_node(b, "RMSNormalization", name, (mx_value_id[]){x, scale}, 2, a, 2, NULL);
}

/* MatMul(x, w) -> Reshape to [1, 1, n_heads, D] -> Transpose to [1, n_heads, 1, D]. */
static mx_value_id project_heads(mx_mb *b, const char *prefix, const char *tag, mx_value_id x, mx_value_id w,
                                 mx_value_id shape) {
  static const int64_t perm[4] = {0, 2, 1, 3};
  char n[96], what[32];
  snprintf(what, sizeof what, "%s_proj", tag);
  mx_value_id p = mx__mb_node(b, "MatMul", mx__mb_name(n, sizeof n, prefix, what), (mx_value_id[]){x, w}, 2,
                              NULL, 0, NULL);
  snprintf(what, sizeof what, "%s_reshape", tag);
  mx_value_id r = mx__mb_node(b, "Reshape", mx__mb_name(n, sizeof n, prefix, what), (mx_value_id[]){p, shape},
                              2, NULL, 0, NULL);
  mx_attr a = mx_attr_ints("perm", perm, 4);
  snprintf(what, sizeof what, "%s_transpose", tag);
  return mx__mb_node(b, "Transpose", mx__mb_name(n, sizeof n, prefix, what), &r, 1, &a, 1, NULL);
}

static mx_value_id rotary(mx_mb *b, const llama_ctx *c, const char *name, mx_value_id x) {
  mx_attr a = mx_attr_int("interleaved", 0);
  return mx__mb_node(b, "RotaryEmbedding", name, (mx_value_id[]){x, c->rope_cos, c->rope_sin, c->pos}, 4, &a,
                     1, NULL);
}

/* One decoder layer over h; returns the new h. */
static mx_value_id layer(mx_mb *b, const llama_ctx *c, int64_t li, mx_value_id h, mx_value_id past_k,
                         mx_value_id past_v) {
  const mx_llama_config *cfg = c->cfg;
  const int64_t H = cfg->hidden, D = cfg->head_dim, QD = cfg->heads * D, KD = cfg->kv_heads * D, F = cfg->ffn;
  char p[32], n[96], ok[48], ov[48];
  snprintf(p, sizeof p, "l%lld/", (long long)li);
#define NAME(s) mx__mb_name(n, sizeof n, p, (s))
  const float s_in = 1.0f / sqrtf((float)H), s_attn = 1.0f / sqrtf((float)QD), s_ffn = 1.0f / sqrtf((float)F);

  mx_value_id x =
      rmsnorm(b, NAME("attn_norm"), h, mx__mb_weights_around(b, NAME("attn_norm_scale"), 1, &H, 1.0f, 0.1f));
  mx_value_id wq = mx__mb_weights(b, NAME("wq"), 2, (int64_t[]){H, QD}, s_in);
  mx_value_id wk = mx__mb_weights(b, NAME("wk"), 2, (int64_t[]){H, KD}, s_in);
  mx_value_id wv = mx__mb_weights(b, NAME("wv"), 2, (int64_t[]){H, KD}, s_in);
  mx_value_id q = project_heads(b, p, "q", x, wq, c->q_shape);
  mx_value_id k = project_heads(b, p, "k", x, wk, c->kv_shape);
  mx_value_id v = project_heads(b, p, "v", x, wv, c->kv_shape);
  q = rotary(b, c, NAME("q_rotary"), q);
  k = rotary(b, c, NAME("k_rotary"), k);

  snprintf(ok, sizeof ok, "present_key_%lld", (long long)li);
  snprintf(ov, sizeof ov, "present_value_%lld", (long long)li);
  const char *const att_names[3] = {NULL, ok, ov};
  mx_value_id att[3];
  mx_attr aa = mx_attr_int("is_causal", 0);
  mx__mb_node_n(b, "Attention", NAME("attention"), (mx_value_id[]){q, k, v, MX_NO_VALUE, past_k, past_v}, 6,
                &aa, 1, att_names, 3, att);
  static const int64_t perm[4] = {0, 2, 1, 3};
  mx_attr tp = mx_attr_ints("perm", perm, 4);
  mx_value_id yt = mx__mb_node(b, "Transpose", NAME("attn_transpose"), &att[0], 1, &tp, 1, NULL);
  mx_value_id ym =
      mx__mb_node(b, "Reshape", NAME("attn_merge"), (mx_value_id[]){yt, c->merged_shape}, 2, NULL, 0, NULL);
  mx_value_id wo = mx__mb_weights(b, NAME("wo"), 2, (int64_t[]){QD, H}, s_attn);
  mx_value_id o = mx__mb_node(b, "MatMul", NAME("o_proj"), (mx_value_id[]){ym, wo}, 2, NULL, 0, NULL);
  h = mx__mb_node(b, "Add", NAME("attn_residual"), (mx_value_id[]){h, o}, 2, NULL, 0, NULL);

  x = rmsnorm(b, NAME("mlp_norm"), h, mx__mb_weights_around(b, NAME("mlp_norm_scale"), 1, &H, 1.0f, 0.1f));
  mx_value_id wg = mx__mb_weights(b, NAME("w_gate"), 2, (int64_t[]){H, F}, s_in);
  mx_value_id wu = mx__mb_weights(b, NAME("w_up"), 2, (int64_t[]){H, F}, s_in);
  mx_value_id wd = mx__mb_weights(b, NAME("w_down"), 2, (int64_t[]){F, H}, s_ffn);
  mx_value_id g = mx__mb_node(b, "MatMul", NAME("gate_proj"), (mx_value_id[]){x, wg}, 2, NULL, 0, NULL);
  mx_value_id sg = mx__mb_node(b, "Sigmoid", NAME("gate_sigmoid"), &g, 1, NULL, 0, NULL);
  mx_value_id silu = mx__mb_node(b, "Mul", NAME("gate_silu"), (mx_value_id[]){g, sg}, 2, NULL, 0, NULL);
  mx_value_id u = mx__mb_node(b, "MatMul", NAME("up_proj"), (mx_value_id[]){x, wu}, 2, NULL, 0, NULL);
  mx_value_id gu = mx__mb_node(b, "Mul", NAME("gate_up"), (mx_value_id[]){silu, u}, 2, NULL, 0, NULL);
  mx_value_id d = mx__mb_node(b, "MatMul", NAME("down_proj"), (mx_value_id[]){gu, wd}, 2, NULL, 0, NULL);
  return mx__mb_node(b, "Add", NAME("mlp_residual"), (mx_value_id[]){h, d}, 2, NULL, 0, NULL);
#undef NAME
}

mx_status mx_model_llama(const mx_llama_config *cfg_in, mx_graph **out, mx_error *err) {
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  mx_llama_config cfg;
  if (cfg_in)
    cfg = *cfg_in;
  else
    mx_llama_config_default(&cfg);
  mx_status st = check_config(&cfg, err);
  if (st != MX_OK) return st;
  const int64_t H = cfg.hidden, D = cfg.head_dim, L = cfg.layers;
  mx_mb b;
  mx__mb_begin(&b, "llama_decode_step", cfg.seed);
  mx_symtab *t = b.st == MX_OK ? mx_graph_symtab(b.g) : NULL;
  mx_dim past_len = t ? mx_sym_named(t, "past_len") : 0;

  /* Inputs: the token, then the cache of every layer. */
  mx_value_id ids = mx__mb_input(&b, "input_ids", MX_INT64, 2, (mx_dim[]){1, 1});
  mx_value_id past_k[1024], past_v[1024];
  for (int64_t i = 0; i < L; i++) {
    char nk[48], nv[48];
    snprintf(nk, sizeof nk, "past_key_%lld", (long long)i);
    snprintf(nv, sizeof nv, "past_value_%lld", (long long)i);
    const mx_dim dims[4] = {1, cfg.kv_heads, past_len, D};
    past_k[i] = mx__mb_input(&b, nk, MX_FLOAT32, 4, dims);
    past_v[i] = mx__mb_input(&b, nv, MX_FLOAT32, 4, dims);
  }

  llama_ctx c = {.cfg = &cfg};
  c.q_shape = mx__mb_ints(&b, "q_heads_shape", (int64_t[]){1, 1, cfg.heads, D}, 4);
  c.kv_shape = mx__mb_ints(&b, "kv_heads_shape", (int64_t[]){1, 1, cfg.kv_heads, D}, 4);
  c.merged_shape = mx__mb_ints(&b, "merged_heads_shape", (int64_t[]){1, 1, cfg.heads * D}, 3);
  rope_tables(&b, cfg.max_pos, D, &c.rope_cos, &c.rope_sin);

  /* The new token's position: the cache length, read off past_key_0's shape. */
  mx_value_id past_shape = mx__mb_node(&b, "Shape", "past_shape", &past_k[0], 1, NULL, 0, NULL);
  mx_value_id two = mx__mb_scalar_i64(&b, "seq_axis", 2);
  mx_value_id plen =
      mx__mb_node(&b, "Gather", "past_len", (mx_value_id[]){past_shape, two}, 2, NULL, 0, NULL);
  mx_value_id pos_shape = mx__mb_ints(&b, "position_ids_shape", (int64_t[]){1, 1}, 2);
  c.pos = mx__mb_node(&b, "Reshape", "position_ids", (mx_value_id[]){plen, pos_shape}, 2, NULL, 0, NULL);

  mx_value_id embed = mx__mb_weights(&b, "embed_tokens", 2, (int64_t[]){cfg.vocab, H}, 1.0f);
  mx_value_id h = mx__mb_node(&b, "Gather", "embed", (mx_value_id[]){embed, ids}, 2, NULL, 0, NULL);
  for (int64_t i = 0; i < L; i++) h = layer(&b, &c, i, h, past_k[i], past_v[i]);
  h = rmsnorm(&b, "final_norm", h, mx__mb_weights_around(&b, "final_norm_scale", 1, &H, 1.0f, 0.1f));
  mx_value_id head = mx__mb_weights(&b, "lm_head", 2, (int64_t[]){H, cfg.vocab}, 1.0f / sqrtf((float)H));
  mx_value_id logits =
      mx__mb_node(&b, "MatMul", "lm_head_proj", (mx_value_id[]){h, head}, 2, NULL, 0, "logits");

  /* Outputs: logits, then every layer's grown cache in input order. */
  mx__mb_output(&b, logits);
  for (int64_t i = 0; i < L && b.st == MX_OK; i++) {
    char nk[48], nv[48];
    snprintf(nk, sizeof nk, "present_key_%lld", (long long)i);
    snprintf(nv, sizeof nv, "present_value_%lld", (long long)i);
    mx__mb_output(&b, mx_graph_find_value(b.g, nk));
    mx__mb_output(&b, mx_graph_find_value(b.g, nv));
  }
  return mx__mb_end(&b, out, "the llama decode step", err);
}
