/* The exported-transformer-style encoder generator (mx_model_encoder).
 *
 * With b = batch and s = seq, and every shape computed the way ONNX exporters write it (from
 * Shape arithmetic, never a constant), so only symbolic-value propagation gives the Reshapes
 * known ranks:
 *   h0 = x + Gather(pos_table, Range(0, Gather(Shape(x), 1), 1))
 *   heads = Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [nh, hd])
 *   per layer:
 *     q, k, v = Reshape(MatMul(h, W*), heads), transposed to [b, nh, s, hd] (k to [b, nh, hd, s])
 *     mask = Expand(ConstantOfShape(Concat(b, [1, 1], s)), Concat(b, [nh], s, s))
 *     ctx = MatMul(Softmax(MatMul(q, k) * 1/sqrt(hd) + mask), v), transposed to [b, s, nh, hd]
 *     h = h + MatMul(Reshape(ctx, Concat(Slice(Shape(ctx), 0, 2), [hidden])), Wo) */
#include <math.h>
#include <stdio.h>

#include "common/error.h"
#include "mixrt/models.h"
#include "models/builder.h"

void mx_encoder_config_default(mx_encoder_config *cfg) {
  cfg->hidden = 64;
  cfg->heads = 4;
  cfg->layers = 1;
  cfg->max_pos = 128;
  cfg->seed = 1;
}

/* MatMul(x, W) followed by Reshape to [b, s, heads, head_dim] and Transpose by perm. */
static mx_value_id project_heads(mx_mb *b, const char *tag, mx_value_id x, mx_value_id w, mx_value_id heads,
                                 const int64_t *perm) {
  char n1[64], n2[64], n3[64];
  snprintf(n1, sizeof n1, "%s/matmul", tag);
  snprintf(n2, sizeof n2, "%s/reshape", tag);
  snprintf(n3, sizeof n3, "%s/transpose", tag);
  mx_value_id p = mx__mb_node(b, "MatMul", n1, (mx_value_id[]){x, w}, 2, NULL, 0, NULL);
  mx_value_id r = mx__mb_node(b, "Reshape", n2, (mx_value_id[]){p, heads}, 2, NULL, 0, NULL);
  mx_attr a = mx_attr_ints("perm", perm, 4);
  return mx__mb_node(b, "Transpose", n3, &r, 1, &a, 1, NULL);
}

/* One encoder layer over h; returns the new h. */
static mx_value_id layer(mx_mb *b, const mx_encoder_config *cfg, int64_t li, mx_value_id h,
                         mx_value_id batch1, mx_value_id seq1, mx_value_id heads, bool last) {
  const int64_t H = cfg->hidden, NH = cfg->heads, HD = cfg->hidden / cfg->heads;
  char p[32], n[96];
  p[0] = '\0';
  if (cfg->layers > 1) snprintf(p, sizeof p, "l%lld/", (long long)li);
#define NAME(s) (snprintf(n, sizeof n, "%s%s", p, (s)), n)
  static const int64_t to_heads[] = {0, 2, 1, 3}, to_keys[] = {0, 2, 3, 1};
  const float ws = 1.0f / sqrtf((float)H);
  char tq[48], tk[48], tv[48];
  snprintf(tq, sizeof tq, "%sq", p);
  snprintf(tk, sizeof tk, "%sk", p);
  snprintf(tv, sizeof tv, "%sv", p);
  mx_value_id q =
      project_heads(b, tq, h, mx__mb_weights(b, NAME("wq"), 2, (int64_t[]){H, H}, ws), heads, to_heads);
  mx_value_id k =
      project_heads(b, tk, h, mx__mb_weights(b, NAME("wk"), 2, (int64_t[]){H, H}, ws), heads, to_keys);
  mx_value_id v =
      project_heads(b, tv, h, mx__mb_weights(b, NAME("wv"), 2, (int64_t[]){H, H}, ws), heads, to_heads);
  mx_value_id scores = mx__mb_node(b, "MatMul", NAME("scores"), (mx_value_id[]){q, k}, 2, NULL, 0, NULL);
  mx_value_id scale = mx__mb_scalar_f32(b, NAME("scale_value"), 1.0f / sqrtf((float)HD));
  mx_value_id scaled = mx__mb_node(b, "Mul", NAME("scale"), (mx_value_id[]){scores, scale}, 2, NULL, 0, NULL);

  /* Mask: zeros of [b, 1, 1, s] expanded to the score shape [b, heads, s, s]. */
  mx_attr cat0 = mx_attr_int("axis", 0);
  mx_value_id ones2 = mx__mb_ints(b, NAME("ones2"), (int64_t[]){1, 1}, 2);
  mx_value_id mask_shape =
      mx__mb_node(b, "Concat", NAME("mask_shape"), (mx_value_id[]){batch1, ones2, seq1}, 3, &cat0, 1, NULL);
  float zero = 0.0f;
  mx_tensor zt = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &zero};
  mx_attr zv = mx_attr_tensor("value", &zt);
  mx_value_id mask = mx__mb_node(b, "ConstantOfShape", NAME("mask"), &mask_shape, 1, &zv, 1, NULL);
  mx_value_id n_heads = mx__mb_ints(b, NAME("n_heads"), (int64_t[]){NH}, 1);
  mx_value_id score_shape = mx__mb_node(b, "Concat", NAME("score_shape"),
                                        (mx_value_id[]){batch1, n_heads, seq1, seq1}, 4, &cat0, 1, NULL);
  mx_value_id mask_full =
      mx__mb_node(b, "Expand", NAME("mask_expand"), (mx_value_id[]){mask, score_shape}, 2, NULL, 0, NULL);
  mx_value_id masked =
      mx__mb_node(b, "Add", NAME("mask_add"), (mx_value_id[]){scaled, mask_full}, 2, NULL, 0, NULL);
  mx_attr lastax = mx_attr_int("axis", -1);
  mx_value_id probs = mx__mb_node(b, "Softmax", NAME("softmax"), &masked, 1, &lastax, 1, NULL);
  mx_value_id ctx = mx__mb_node(b, "MatMul", NAME("context"), (mx_value_id[]){probs, v}, 2, NULL, 0, NULL);
  mx_attr back = mx_attr_ints("perm", to_heads, 4);
  mx_value_id ctx_t = mx__mb_node(b, "Transpose", NAME("context_transpose"), &ctx, 1, &back, 1, NULL);

  /* Back to [b, s, H] through a second shape path: Shape(ctx_t)[0:2] ++ [H]. */
  mx_value_id ctx_shape = mx__mb_node(b, "Shape", NAME("context_shape"), &ctx_t, 1, NULL, 0, NULL);
  mx_value_id s0 = mx__mb_ints(b, NAME("slice_start"), (int64_t[]){0}, 1);
  mx_value_id s1 = mx__mb_ints(b, NAME("slice_end"), (int64_t[]){2}, 1);
  mx_value_id bs =
      mx__mb_node(b, "Slice", NAME("batch_seq"), (mx_value_id[]){ctx_shape, s0, s1}, 3, NULL, 0, NULL);
  mx_value_id hid = mx__mb_ints(b, NAME("hidden"), (int64_t[]){H}, 1);
  mx_value_id merged_shape =
      mx__mb_node(b, "Concat", NAME("merged_shape"), (mx_value_id[]){bs, hid}, 2, &cat0, 1, NULL);
  mx_value_id merged =
      mx__mb_node(b, "Reshape", NAME("merge_heads"), (mx_value_id[]){ctx_t, merged_shape}, 2, NULL, 0, NULL);
  mx_value_id wo = mx__mb_weights(b, NAME("wo"), 2, (int64_t[]){H, H}, ws);
  mx_value_id proj =
      mx__mb_node(b, "MatMul", NAME("out_proj"), (mx_value_id[]){merged, wo}, 2, NULL, 0, NULL);
  return mx__mb_node(b, "Add", NAME("residual"), (mx_value_id[]){h, proj}, 2, NULL, 0, last ? "y" : NULL);
#undef NAME
}

mx_status mx_model_encoder(const mx_encoder_config *cfg_in, mx_graph **out, mx_error *err) {
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  mx_encoder_config cfg;
  if (cfg_in)
    cfg = *cfg_in;
  else
    mx_encoder_config_default(&cfg);
  if (cfg.hidden <= 0 || cfg.heads <= 0 || cfg.hidden % cfg.heads || cfg.layers <= 0 || cfg.max_pos <= 0 ||
      cfg.hidden > 65536 || cfg.layers > 1024 || cfg.max_pos > 1 << 20)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "encoder: hidden (%lld) must be a positive multiple of heads (%lld), layers (%lld) and "
                    "max_pos (%lld) positive and reasonable",
                    (long long)cfg.hidden, (long long)cfg.heads, (long long)cfg.layers,
                    (long long)cfg.max_pos);
  mx_mb b;
  mx__mb_begin(&b, cfg.layers > 1 ? "encoder" : "encoder_layer", cfg.seed);
  const int64_t H = cfg.hidden;
  mx_symtab *t = b.st == MX_OK ? mx_graph_symtab(b.g) : NULL;
  mx_dim dims[3] = {t ? mx_sym_named(t, "batch") : 0, t ? mx_sym_named(t, "seq") : 0, H};
  mx_value_id x = mx__mb_input(&b, "x", MX_FLOAT32, 3, dims);

  /* Shape arithmetic: batch and seq as 1-element tensors. */
  mx_value_id shape = mx__mb_node(&b, "Shape", "shape", &x, 1, NULL, 0, NULL);
  mx_value_id axis0 = mx__mb_ints(&b, "axes0", (int64_t[]){0}, 1);
  mx_value_id i0 = mx__mb_scalar_i64(&b, "idx0", 0), i1 = mx__mb_scalar_i64(&b, "idx1", 1);
  mx_value_id batch = mx__mb_node(&b, "Gather", "batch", (mx_value_id[]){shape, i0}, 2, NULL, 0, NULL);
  mx_value_id seq = mx__mb_node(&b, "Gather", "seq", (mx_value_id[]){shape, i1}, 2, NULL, 0, NULL);
  mx_value_id batch1 =
      mx__mb_node(&b, "Unsqueeze", "batch_1d", (mx_value_id[]){batch, axis0}, 2, NULL, 0, NULL);
  mx_value_id seq1 = mx__mb_node(&b, "Unsqueeze", "seq_1d", (mx_value_id[]){seq, axis0}, 2, NULL, 0, NULL);
  mx_attr cat0 = mx_attr_int("axis", 0);
  mx_value_id hd = mx__mb_ints(&b, "heads_dims", (int64_t[]){cfg.heads, H / cfg.heads}, 2);
  mx_value_id heads =
      mx__mb_node(&b, "Concat", "heads_shape", (mx_value_id[]){batch1, seq1, hd}, 3, &cat0, 1, NULL);

  /* Position ids Range(0, seq, 1) -> embedding rows, added to the input. */
  mx_value_id zero = mx__mb_scalar_i64(&b, "zero", 0), one = mx__mb_scalar_i64(&b, "one", 1);
  mx_value_id pos =
      mx__mb_node(&b, "Range", "position_ids", (mx_value_id[]){zero, seq, one}, 3, NULL, 0, NULL);
  mx_value_id table = mx__mb_weights(&b, "pos_table", 2, (int64_t[]){cfg.max_pos, H}, 0.125f);
  mx_value_id pos_emb = mx__mb_node(&b, "Gather", "pos_embed", (mx_value_id[]){table, pos}, 2, NULL, 0, NULL);
  mx_value_id h = mx__mb_node(&b, "Add", "embed_add", (mx_value_id[]){x, pos_emb}, 2, NULL, 0, NULL);
  for (int64_t li = 0; li < cfg.layers; li++)
    h = layer(&b, &cfg, li, h, batch1, seq1, heads, li + 1 == cfg.layers);
  mx__mb_output(&b, h);
  return mx__mb_end(&b, out, "the encoder", err);
}
