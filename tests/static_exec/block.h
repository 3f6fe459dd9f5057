/* A transformer block with fixed lengths, built with the public builder API: the graph the
 * static-executor tests and bench/static compile.
 *
 *   h   = x + Wo(attention(LayerNorm(x)))         attention: 4-D Q/K/V heads through Reshape and
 *   y   = h + W2(Gelu(W1(LayerNorm(h)) + b1)) + b2  Transpose, causal mask, Softmax
 *
 * Input "x" float32 [batch, seq, hidden], output "y" of the same shape; weights are seeded
 * uniform values. Header-only (static functions) so that tests and the benchmark share it. */
#ifndef MIXRT_TESTS_STATIC_EXEC_BLOCK_H
#define MIXRT_TESTS_STATIC_EXEC_BLOCK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mixrt/graph.h"

typedef struct mxt_block_config {
  int64_t batch, seq, hidden, heads, ffn;
  int64_t layers; /* blocks in sequence */
  uint64_t seed;
} mxt_block_config;

static inline mxt_block_config mxt_block_default(void) {
  mxt_block_config c = {.batch = 2, .seq = 32, .hidden = 64, .heads = 4, .ffn = 256, .layers = 1, .seed = 7};
  return c;
}

typedef struct mxt_block_builder {
  mx_graph *g;
  mx_status st;
  uint64_t rng;
} mxt_block_builder;

static inline float mxt_block_rand(mxt_block_builder *b) {
  b->rng ^= b->rng << 13;
  b->rng ^= b->rng >> 7;
  b->rng ^= b->rng << 17;
  return (float)((double)(b->rng >> 11) / (double)(1ull << 53)) * 2.0f - 1.0f;
}

static inline mx_value_id mxt_block_const(mxt_block_builder *b, const char *name, int32_t rank,
                                          const int64_t *dims, float scale, float center) {
  mx_value_id v = MX_NO_VALUE;
  if (b->st != MX_OK) return v;
  int64_t n = 1;
  for (int32_t k = 0; k < rank; k++) n *= dims[k];
  float *data = malloc((size_t)n * sizeof *data);
  if (!data) {
    b->st = MX_ERR_OUT_OF_MEMORY;
    return v;
  }
  for (int64_t i = 0; i < n; i++) data[i] = center + scale * mxt_block_rand(b);
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = rank, .data = data};
  for (int32_t k = 0; k < rank; k++) t.dims[k] = dims[k];
  b->st = mx_graph_add_constant(b->g, name, &t, &v);
  free(data);
  return v;
}

static inline mx_value_id mxt_block_ints(mxt_block_builder *b, const char *name, const int64_t *vals,
                                         int64_t n) {
  mx_value_id v = MX_NO_VALUE;
  if (b->st != MX_OK) return v;
  mx_tensor t = {.dtype = MX_INT64, .rank = 1, .dims = {n}, .data = (void *)vals};
  b->st = mx_graph_add_constant(b->g, name, &t, &v);
  return v;
}

static inline mx_value_id mxt_block_op(mxt_block_builder *b, const char *op, const mx_value_id *in, size_t n,
                                       const mx_attr *attrs, size_t na) {
  mx_value_id v = MX_NO_VALUE;
  if (b->st != MX_OK) return v;
  b->st = mx_graph_add_op(b->g, op, in, n, attrs, na, &v);
  return v;
}

static inline mx_value_id mxt_block_layer_norm(mxt_block_builder *b, const char *p, const char *what,
                                               mx_value_id x, int64_t hidden) {
  char n1[64], n2[64];
  snprintf(n1, sizeof n1, "%s%s_gamma", p, what);
  snprintf(n2, sizeof n2, "%s%s_beta", p, what);
  mx_value_id gamma = mxt_block_const(b, n1, 1, &hidden, 0.1f, 1.0f);
  mx_value_id beta = mxt_block_const(b, n2, 1, &hidden, 0.1f, 0.0f);
  mx_attr a[2] = {mx_attr_int("axis", -1), mx_attr_float("epsilon", 1e-5f)};
  return mxt_block_op(b, "LayerNormalization", (mx_value_id[]){x, gamma, beta}, 3, a, 2);
}

/* x @ W + bias with W [in, out]. */
static inline mx_value_id mxt_block_linear(mxt_block_builder *b, const char *p, const char *what,
                                           mx_value_id x, int64_t in, int64_t out) {
  char n1[64], n2[64];
  snprintf(n1, sizeof n1, "%s%s_w", p, what);
  snprintf(n2, sizeof n2, "%s%s_b", p, what);
  mx_value_id w = mxt_block_const(b, n1, 2, (int64_t[]){in, out}, 1.0f / sqrtf((float)in), 0.0f);
  mx_value_id bias = mxt_block_const(b, n2, 1, &out, 0.02f, 0.0f);
  mx_value_id mm = mxt_block_op(b, "MatMul", (mx_value_id[]){x, w}, 2, NULL, 0);
  return mxt_block_op(b, "Add", (mx_value_id[]){mm, bias}, 2, NULL, 0);
}

static inline mx_value_id mxt_block_layer(mxt_block_builder *b, const mxt_block_config *c, int64_t li,
                                          mx_value_id x) {
  const int64_t B = c->batch, S = c->seq, D = c->hidden, H = c->heads, HD = c->hidden / c->heads;
  char p[16], n[64];
  snprintf(p, sizeof p, "l%lld_", (long long)li);
  mx_value_id ln1 = mxt_block_layer_norm(b, p, "ln1", x, D);
  mx_value_id q = mxt_block_linear(b, p, "q", ln1, D, D);
  mx_value_id k = mxt_block_linear(b, p, "k", ln1, D, D);
  mx_value_id v = mxt_block_linear(b, p, "v", ln1, D, D);
  snprintf(n, sizeof n, "%sheads", p);
  mx_value_id heads = mxt_block_ints(b, n, (int64_t[]){B, S, H, HD}, 4);
  static const int64_t to_heads[] = {0, 2, 1, 3}, to_keys[] = {0, 2, 3, 1};
  mx_attr th = mx_attr_ints("perm", to_heads, 4), tk = mx_attr_ints("perm", to_keys, 4);
  mx_value_id q4 = mxt_block_op(
      b, "Transpose", (mx_value_id[]){mxt_block_op(b, "Reshape", (mx_value_id[]){q, heads}, 2, NULL, 0)}, 1,
      &th, 1);
  mx_value_id k4 = mxt_block_op(
      b, "Transpose", (mx_value_id[]){mxt_block_op(b, "Reshape", (mx_value_id[]){k, heads}, 2, NULL, 0)}, 1,
      &tk, 1);
  mx_value_id v4 = mxt_block_op(
      b, "Transpose", (mx_value_id[]){mxt_block_op(b, "Reshape", (mx_value_id[]){v, heads}, 2, NULL, 0)}, 1,
      &th, 1);
  mx_value_id scores = mxt_block_op(b, "MatMul", (mx_value_id[]){q4, k4}, 2, NULL, 0);
  snprintf(n, sizeof n, "%sscale", p);
  mx_value_id scale = mxt_block_const(b, n, 0, NULL, 0.0f, 1.0f / sqrtf((float)HD));
  mx_value_id scaled = mxt_block_op(b, "Mul", (mx_value_id[]){scores, scale}, 2, NULL, 0);
  /* Causal mask [S, S]: 0 on and below the diagonal, -1e9 above. */
  mx_value_id mask = MX_NO_VALUE;
  if (b->st == MX_OK) {
    float *m = malloc((size_t)(S * S) * sizeof *m);
    if (!m) {
      b->st = MX_ERR_OUT_OF_MEMORY;
    } else {
      for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) m[i * S + j] = j > i ? -1e9f : 0.0f;
      mx_tensor t = {.dtype = MX_FLOAT32, .rank = 2, .dims = {S, S}, .data = m};
      snprintf(n, sizeof n, "%smask", p);
      b->st = mx_graph_add_constant(b->g, n, &t, &mask);
      free(m);
    }
  }
  mx_value_id masked = mxt_block_op(b, "Add", (mx_value_id[]){scaled, mask}, 2, NULL, 0);
  mx_attr ax = mx_attr_int("axis", -1);
  mx_value_id probs = mxt_block_op(b, "Softmax", &masked, 1, &ax, 1);
  mx_value_id ctx = mxt_block_op(b, "MatMul", (mx_value_id[]){probs, v4}, 2, NULL, 0);
  mx_value_id ctx_t = mxt_block_op(b, "Transpose", &ctx, 1, &th, 1);
  snprintf(n, sizeof n, "%sflat", p);
  mx_value_id flat = mxt_block_ints(b, n, (int64_t[]){B, S, D}, 3);
  mx_value_id ctx3 = mxt_block_op(b, "Reshape", (mx_value_id[]){ctx_t, flat}, 2, NULL, 0);
  mx_value_id attn = mxt_block_linear(b, p, "o", ctx3, D, D);
  mx_value_id h = mxt_block_op(b, "Add", (mx_value_id[]){x, attn}, 2, NULL, 0);
  mx_value_id ln2 = mxt_block_layer_norm(b, p, "ln2", h, D);
  mx_value_id up = mxt_block_linear(b, p, "up", ln2, D, c->ffn);
  mx_value_id act = mxt_block_op(b, "Gelu", &up, 1, NULL, 0);
  mx_value_id down = mxt_block_linear(b, p, "down", act, c->ffn, D);
  return mxt_block_op(b, "Add", (mx_value_id[]){h, down}, 2, NULL, 0);
}

/* Builds and infers the block. *out receives the graph (mx_graph_destroy); NULL on failure. */
static inline mx_status mxt_block_build(const mxt_block_config *c, mx_graph **out) {
  *out = NULL;
  mxt_block_builder b = {.st = MX_OK, .rng = c->seed * 0x9e3779b97f4a7c15ull + 1};
  mx_status st = mx_graph_create("transformer_block", &b.g);
  if (st != MX_OK) return st;
  mx_shape s = {3, {c->batch, c->seq, c->hidden}};
  mx_value_id x = MX_NO_VALUE;
  b.st = mx_graph_add_input(b.g, "x", MX_FLOAT32, &s, &x);
  for (int64_t l = 0; l < c->layers; l++) x = mxt_block_layer(&b, c, l, x);
  if (b.st == MX_OK) b.st = mx_graph_add_output(b.g, x);
  if (b.st == MX_OK) b.st = mx_graph_infer(b.g);
  if (b.st != MX_OK) {
    fprintf(stderr, "transformer block: %s\n", mx_graph_last_error(b.g));
    mx_graph_destroy(b.g);
    return b.st;
  }
  *out = b.g;
  return MX_OK;
}

#endif /* MIXRT_TESTS_STATIC_EXEC_BLOCK_H */
