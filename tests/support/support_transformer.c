/* Test fixture: an exported-transformer-style encoder layer (see transformer_fixture.h).
 *
 * The graph, with b = batch and s = seq:
 *   x [b, s, 64] + Gather(pos_table, Range(0, Gather(Shape(x), 1), 1))        -> h
 *   heads = Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [4, 16])
 *   q, k, v = Reshape(MatMul(h, W*), heads), transposed to [b, 4, s, 16] (k to [b, 4, 16, s])
 *   mask = Expand(ConstantOfShape(Concat(b, [1, 1], s)), Concat(b, [4], s, s))
 *   ctx = MatMul(Softmax(MatMul(q, k) * 0.25 + mask), v), transposed to [b, s, 4, 16]
 *   y = h + MatMul(Reshape(ctx, Concat(Slice(Shape(ctx), 0, 2), [64])), Wo)
 * Built as the ONNX exporters write it: every shape comes from Shape arithmetic, none is a
 * constant, so only symbolic-value propagation gives the Reshapes known ranks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/transformer_fixture.h"

/* Accumulates the first failure so the graph reads as a straight list of nodes. */
typedef struct builder {
  mx_graph *g;
  mx_status st;
} builder;

static mx_value_id node(builder *b, const char *op, const char *name, const mx_value_id *in, size_t n,
                        const mx_attr *attrs, size_t n_attrs, const char *out_name) {
  if (b->st != MX_OK) return MX_NO_VALUE;
  const char *names[1] = {out_name};
  mx_node_desc d = {.op_type = op, .name = name, .inputs = in, .n_inputs = n, .attrs = attrs,
                    .n_attrs = n_attrs, .output_names = out_name ? names : NULL, .n_outputs = 1};
  mx_value_id out = MX_NO_VALUE;
  b->st = mx_graph_add_node(b->g, &d, &out);
  return b->st == MX_OK ? out : MX_NO_VALUE;
}

static mx_value_id constant(builder *b, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                            const void *data) {
  if (b->st != MX_OK) return MX_NO_VALUE;
  mx_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v = MX_NO_VALUE;
  b->st = mx_graph_add_constant(b->g, name, &t, &v);
  return v;
}

static mx_value_id ints(builder *b, const char *name, const int64_t *vals, int64_t n) {
  return constant(b, name, MX_INT64, 1, &n, vals);
}

static mx_value_id scalar_i64(builder *b, const char *name, int64_t v) {
  return constant(b, name, MX_INT64, 0, NULL, &v);
}

/* A [rows, cols] float32 constant with small deterministic values (seeded by `seed`). */
static mx_value_id weights(builder *b, const char *name, int64_t rows, int64_t cols, uint32_t seed, float *buf) {
  uint32_t s = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < rows * cols; i++) {
    s = s * 1664525u + 1013904223u;
    buf[i] = ((float)(s >> 9) / (float)(1u << 23) - 0.5f) * 0.25f;
  }
  return constant(b, name, MX_FLOAT32, 2, (int64_t[]){rows, cols}, buf);
}

/* MatMul(x, W) followed by Reshape to [b, s, heads, head_dim] and Transpose by perm. */
static mx_value_id project_heads(builder *b, const char *tag, mx_value_id x, mx_value_id w, mx_value_id heads,
                                 const int64_t *perm) {
  char n1[32], n2[32], n3[32];
  snprintf(n1, sizeof n1, "%s/matmul", tag);
  snprintf(n2, sizeof n2, "%s/reshape", tag);
  snprintf(n3, sizeof n3, "%s/transpose", tag);
  mx_value_id p = node(b, "MatMul", n1, (mx_value_id[]){x, w}, 2, NULL, 0, NULL);
  mx_value_id r = node(b, "Reshape", n2, (mx_value_id[]){p, heads}, 2, NULL, 0, NULL);
  mx_attr a = mx_attr_ints("perm", perm, 4);
  return node(b, "Transpose", n3, &r, 1, &a, 1, NULL);
}

mx_status mxt_transformer_build(mx_graph **out) {
  enum { H = MXT_TRANSFORMER_HIDDEN, NH = MXT_TRANSFORMER_HEADS, HD = MXT_TRANSFORMER_HEAD_DIM };
  *out = NULL;
  builder b = {NULL, MX_OK};
  float *buf = malloc(sizeof(float) * (size_t)MXT_TRANSFORMER_MAX_POS * H);
  if (!buf) return MX_ERR_OUT_OF_MEMORY;
  b.st = mx_graph_create("encoder_layer", &b.g);
  if (b.st != MX_OK) goto done;

  mx_symtab *t = mx_graph_symtab(b.g);
  mx_shape xs = {3, {mx_sym_named(t, MXT_TRANSFORMER_BATCH), mx_sym_named(t, MXT_TRANSFORMER_SEQ), H}};
  mx_value_id x = MX_NO_VALUE;
  b.st = mx_graph_add_input(b.g, MXT_TRANSFORMER_INPUT, MX_FLOAT32, &xs, &x);

  /* Shape arithmetic: batch and seq as 1-element tensors. */
  mx_value_id shape = node(&b, "Shape", "shape", &x, 1, NULL, 0, NULL);
  mx_value_id axis0 = ints(&b, "axes0", (int64_t[]){0}, 1);
  mx_value_id batch = node(&b, "Gather", "batch", (mx_value_id[]){shape, scalar_i64(&b, "idx0", 0)}, 2, NULL, 0, NULL);
  mx_value_id seq = node(&b, "Gather", "seq", (mx_value_id[]){shape, scalar_i64(&b, "idx1", 1)}, 2, NULL, 0, NULL);
  mx_value_id batch1 = node(&b, "Unsqueeze", "batch_1d", (mx_value_id[]){batch, axis0}, 2, NULL, 0, NULL);
  mx_value_id seq1 = node(&b, "Unsqueeze", "seq_1d", (mx_value_id[]){seq, axis0}, 2, NULL, 0, NULL);
  mx_attr cat0 = mx_attr_int("axis", 0);
  mx_value_id heads = node(&b, "Concat", "heads_shape",
                           (mx_value_id[]){batch1, seq1, ints(&b, "heads_dims", (int64_t[]){NH, HD}, 2)}, 3, &cat0,
                           1, NULL);

  /* Position ids Range(0, seq, 1) -> embedding rows, added to the input. */
  mx_value_id pos = node(&b, "Range", "position_ids",
                         (mx_value_id[]){scalar_i64(&b, "zero", 0), seq, scalar_i64(&b, "one", 1)}, 3, NULL, 0,
                         NULL);
  mx_value_id table = weights(&b, "pos_table", MXT_TRANSFORMER_MAX_POS, H, 1, buf);
  mx_value_id pos_emb = node(&b, "Gather", "pos_embed", (mx_value_id[]){table, pos}, 2, NULL, 0, NULL);
  mx_value_id h = node(&b, "Add", "embed_add", (mx_value_id[]){x, pos_emb}, 2, NULL, 0, NULL);

  /* Attention heads. */
  static const int64_t to_heads[] = {0, 2, 1, 3}, to_keys[] = {0, 2, 3, 1};
  mx_value_id q = project_heads(&b, "q", h, weights(&b, "wq", H, H, 2, buf), heads, to_heads);
  mx_value_id k = project_heads(&b, "k", h, weights(&b, "wk", H, H, 3, buf), heads, to_keys);
  mx_value_id v = project_heads(&b, "v", h, weights(&b, "wv", H, H, 4, buf), heads, to_heads);
  mx_value_id scores = node(&b, "MatMul", "scores", (mx_value_id[]){q, k}, 2, NULL, 0, NULL);
  float scale = 0.25f; /* 1 / sqrt(HD) */
  mx_value_id scaled = node(&b, "Mul", "scale",
                            (mx_value_id[]){scores, constant(&b, "scale_value", MX_FLOAT32, 0, NULL, &scale)}, 2,
                            NULL, 0, NULL);

  /* Mask: zeros of [b, 1, 1, s] expanded to the score shape [b, heads, s, s]. */
  mx_value_id mask_shape = node(&b, "Concat", "mask_shape",
                                (mx_value_id[]){batch1, ints(&b, "ones2", (int64_t[]){1, 1}, 2), seq1}, 3, &cat0,
                                1, NULL);
  float zero = 0.0f;
  mx_tensor zt = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &zero};
  mx_attr zv = mx_attr_tensor("value", &zt);
  mx_value_id mask = node(&b, "ConstantOfShape", "mask", &mask_shape, 1, &zv, 1, NULL);
  mx_value_id score_shape =
      node(&b, "Concat", "score_shape",
           (mx_value_id[]){batch1, ints(&b, "n_heads", (int64_t[]){NH}, 1), seq1, seq1}, 4, &cat0, 1, NULL);
  mx_value_id mask_full = node(&b, "Expand", "mask_expand", (mx_value_id[]){mask, score_shape}, 2, NULL, 0, NULL);
  mx_value_id masked = node(&b, "Add", "mask_add", (mx_value_id[]){scaled, mask_full}, 2, NULL, 0, NULL);
  mx_attr last = mx_attr_int("axis", -1);
  mx_value_id probs = node(&b, "Softmax", "softmax", &masked, 1, &last, 1, NULL);
  mx_value_id ctx = node(&b, "MatMul", "context", (mx_value_id[]){probs, v}, 2, NULL, 0, NULL);
  mx_attr back = mx_attr_ints("perm", to_heads, 4);
  mx_value_id ctx_t = node(&b, "Transpose", "context_transpose", &ctx, 1, &back, 1, NULL);

  /* Back to [b, s, H] through a second shape path: Shape(ctx_t)[0:2] ++ [H]. */
  mx_value_id ctx_shape = node(&b, "Shape", "context_shape", &ctx_t, 1, NULL, 0, NULL);
  mx_value_id bs = node(&b, "Slice", "batch_seq",
                        (mx_value_id[]){ctx_shape, ints(&b, "slice_start", (int64_t[]){0}, 1),
                                        ints(&b, "slice_end", (int64_t[]){2}, 1)},
                        3, NULL, 0, NULL);
  mx_value_id merged_shape = node(&b, "Concat", "merged_shape",
                                  (mx_value_id[]){bs, ints(&b, "hidden", (int64_t[]){H}, 1)}, 2, &cat0, 1, NULL);
  mx_value_id merged = node(&b, "Reshape", "merge_heads", (mx_value_id[]){ctx_t, merged_shape}, 2, NULL, 0, NULL);
  mx_value_id proj = node(&b, "MatMul", "out_proj", (mx_value_id[]){merged, weights(&b, "wo", H, H, 5, buf)}, 2, NULL,
                          0, NULL);
  mx_value_id y = node(&b, "Add", "residual", (mx_value_id[]){h, proj}, 2, NULL, 0, MXT_TRANSFORMER_OUTPUT);
  if (b.st == MX_OK) b.st = mx_graph_add_output(b.g, y);

done:
  free(buf);
  if (b.st != MX_OK) {
    mx_graph_destroy(b.g);
    return b.st;
  }
  *out = b.g;
  return MX_OK;
}
