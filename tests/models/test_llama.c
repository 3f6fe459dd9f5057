/* The Llama-style decode-step generator (mx_model_llama): inferred shapes for the default and
 * other configs (logits [1, 1, vocab], present dims `past_len + 1`, every value outside the
 * attention over the cache concrete), config errors, and numerics through the reference
 * interpreter at cache lengths 0, 1 and 5 (finite logits, present = past followed by the new
 * row, the new row independent of the cache's contents, a rotated key's norm kept). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/models.h"
#include "models/models_support.h"

static mx_graph *build(const mx_llama_config *cfg) {
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

/* Checks the inferred shapes a decode step promises. */
static void check_shapes(const mx_llama_config *cfg_in) {
  mx_llama_config cfg;
  if (cfg_in)
    cfg = *cfg_in;
  else
    mx_llama_config_default(&cfg);
  int64_t D = cfg.head_dim ? cfg.head_dim : cfg.hidden / cfg.heads;
  mx_graph *g = build(&cfg);
  char buf[256], want[256];
  cr_assert_eq(mx_graph_input_count(g), (size_t)(1 + 2 * cfg.layers));
  cr_assert_eq(mx_graph_output_count(g), (size_t)(1 + 2 * cfg.layers));
  snprintf(want, sizeof want, "[1, 1, %lld]", (long long)cfg.vocab);
  cr_assert_str_eq(mxt_shape_of(g, "logits", buf, sizeof buf), want);
  cr_assert_str_eq(mxt_shape_of(g, "input_ids", buf, sizeof buf), "[1, 1]");
  for (int64_t i = 0; i < cfg.layers; i++) {
    char name[64];
    const char *kinds[4] = {"past_key", "past_value", "present_key", "present_value"};
    for (int k = 0; k < 4; k++) {
      snprintf(name, sizeof name, "%s_%lld", kinds[k], (long long)i);
      snprintf(want, sizeof want, "[1, %lld, %s, %lld]", (long long)cfg.kv_heads,
               k < 2 ? "past_len" : "past_len + 1", (long long)D);
      cr_assert_str_eq(mxt_shape_of(g, name, buf, sizeof buf), want, "%s", name);
      mx_value_id v = mx_graph_find_value(g, name);
      cr_assert_eq(mx_graph_value_dtype(g, v), MX_FLOAT32);
      if (k >= 2) {
        mx_shape s;
        mx_graph_value_shape(g, v, &s);
        mx_sym_format(mx_graph_symtab(g), s.dims[2], buf, sizeof buf);
        cr_assert_str_eq(buf, "past_len + 1");
      }
    }
  }
  /* Every node output outside the attention over the cache has a concrete shape. */
  const mx_node_id *order;
  size_t n;
  cr_assert_eq(mx__graph_topo_order(g, &order, &n), MX_OK);
  size_t attention = 0, rotary = 0, rmsnorm = 0;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[order[i]];
    attention += strcmp(nd->op_type, "Attention") == 0;
    rotary += strcmp(nd->op_type, "RotaryEmbedding") == 0;
    rmsnorm += strcmp(nd->op_type, "RMSNormalization") == 0;
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      const mx_value *v = &g->values[nd->outputs[k]];
      bool concrete = v->shape.rank >= 0;
      for (int32_t d = 0; concrete && d < v->shape.rank; d++) concrete = mx_dim_is_concrete(v->shape.dims[d]);
      if (strcmp(nd->op_type, "Attention") == 0 && k > 0) {
        cr_assert_not(concrete, "%s should depend on past_len", v->name);
        continue;
      }
      mx_shape_format(g->syms, &v->shape, buf, sizeof buf);
      cr_assert(concrete, "%s (%s) has shape %s", v->name, nd->op_type, buf);
    }
  }
  cr_assert_eq(attention, (size_t)cfg.layers);
  cr_assert_eq(rotary, (size_t)(2 * cfg.layers));
  cr_assert_eq(rmsnorm, (size_t)(2 * cfg.layers + 1));
  cr_assert_eq(mx_graph_opset(g, ""), 23);
  mx_graph_destroy(g);
}

Test(llama, default_shapes) {
  check_shapes(NULL);
  mx_graph *g = build(NULL);
  cr_assert_eq(mx_graph_node_count(g), 56, "2 layers of 25 nodes + 6");
  mx_graph_destroy(g);
}

Test(llama, other_config_shapes) {
  mx_llama_config c;
  mx_llama_config_default(&c);
  c.layers = 1, c.hidden = 32, c.heads = 2, c.kv_heads = 1; /* multi-query */
  check_shapes(&c);
  mx_llama_config_default(&c);
  c.layers = 3, c.hidden = 48, c.heads = 6, c.kv_heads = 3, c.head_dim = 10, c.ffn = 64, c.vocab = 50,
  c.max_pos = 16;
  check_shapes(&c);
  cr_assert(mx_llama_config_preset(&c, "small"));
  check_shapes(&c);
  cr_assert(mx_llama_config_preset(&c, "tiny"));
  check_shapes(&c);
  cr_assert_not(mx_llama_config_preset(&c, "huge"));
}

/* Expects cfg to be refused with MX_ERR_INVALID_ARGUMENT and a message naming `word`. */
static void expect_bad(const mx_llama_config *cfg, const char *word) {
  mx_graph *g = (mx_graph *)1;
  mx_error err;
  mx_status st = mx_model_llama(cfg, &g, &err);
  mxt_expect_bad_config(st, g, &err, word);
}

Test(llama, bad_configs) {
  mx_llama_config c;
  mx_llama_config_default(&c);
  c.heads = 4, c.kv_heads = 3;
  expect_bad(&c, "kv_heads");
  mx_llama_config_default(&c);
  c.hidden = 0;
  expect_bad(&c, "hidden");
  mx_llama_config_default(&c);
  c.layers = 0;
  expect_bad(&c, "layers");
  mx_llama_config_default(&c);
  c.vocab = -3;
  expect_bad(&c, "vocab");
  mx_llama_config_default(&c);
  c.ffn = 0;
  expect_bad(&c, "ffn");
  mx_llama_config_default(&c);
  c.max_pos = 0;
  expect_bad(&c, "max_pos");
  mx_llama_config_default(&c);
  c.kv_heads = 0;
  expect_bad(&c, "kv_heads");
  mx_llama_config_default(&c);
  c.head_dim = 7;
  expect_bad(&c, "head_dim");
  mx_llama_config_default(&c);
  c.hidden = 66, c.heads = 4; /* head_dim 0 needs heads to divide hidden */
  expect_bad(&c, "hidden");
  mx_llama_config_default(&c);
  c.vocab = 1 << 22, c.hidden = 4096;
  expect_bad(&c, "2^30");
  mx_error err;
  cr_assert_eq(mx_model_llama(NULL, NULL, &err), MX_ERR_INVALID_ARGUMENT);
}

/* One decode step of the default model at cache length P: inputs (token, random caches drawn
 * from *rng), outputs (logits, presents). `in` holds 1 + 2 * layers tensors, `out` as many. */
static void step(mx_graph *g, const mx_llama_config *cfg, int64_t token, int64_t P, uint64_t *rng,
                 mx_tensor *in, mx_tensor *out) {
  const int64_t D = cfg->hidden / cfg->heads;
  int64_t one[2] = {1, 1};
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, one, &in[0]), MX_OK);
  *(int64_t *)in[0].data = token;
  for (int64_t i = 0; i < 2 * cfg->layers; i++)
    in[1 + i] = mxt_random_f32(4, (int64_t[]){1, cfg->kv_heads, P, D}, rng);
  mxt_run(g, in, (size_t)(1 + 2 * cfg->layers), out, (size_t)(1 + 2 * cfg->layers));
}

/* Row r of head h of a present/past tensor [1, KV, rows, D]. */
static const float *row(const mx_tensor *t, int64_t h, int64_t r) {
  return (const float *)t->data + (h * t->dims[2] + r) * t->dims[3];
}

Test(llama, reference_numerics_at_past_0_1_5) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g = build(&cfg);
  const int64_t KV = cfg.kv_heads, D = cfg.hidden / cfg.heads, N = 1 + 2 * cfg.layers;
  const int64_t lens[3] = {0, 1, 5};
  mx_tensor in[3][5], out[3][5];
  uint64_t rng = 42;
  for (int c = 0; c < 3; c++) {
    const int64_t P = lens[c];
    step(g, &cfg, 17, P, &rng, in[c], out[c]);
    const mx_tensor *logits = &out[c][0];
    cr_assert_eq(logits->rank, 3);
    cr_assert(logits->dims[0] == 1 && logits->dims[1] == 1 && logits->dims[2] == cfg.vocab);
    float amax = 0.0f;
    for (int64_t i = 0; i < cfg.vocab; i++) {
      float v = ((const float *)logits->data)[i];
      cr_assert(isfinite(v), "logit %lld is %g at past_len %lld", (long long)i, (double)v, (long long)P);
      amax = fmaxf(amax, fabsf(v));
    }
    cr_assert_gt(amax, 0.0f);
    for (int64_t k = 1; k < N; k++) {
      const mx_tensor *pres = &out[c][k], *past = &in[c][k];
      cr_assert(pres->rank == 4 && pres->dims[0] == 1 && pres->dims[1] == KV && pres->dims[2] == P + 1 &&
                pres->dims[3] == D);
      for (int64_t h = 0; h < KV; h++) {
        if (P)
          cr_assert(memcmp(row(pres, h, 0), row(past, h, 0), (size_t)(P * D) * sizeof(float)) == 0,
                    "present %lld head %lld: the first %lld rows are not the past", (long long)k,
                    (long long)h, (long long)P);
        for (int64_t d = 0; d < D; d++) cr_assert(isfinite(row(pres, h, P)[d]));
      }
    }
  }
  /* Layer 0's new value row depends only on the token (no rotary on V): the same at every P.
   * Its new key row is the same vector rotated to position P: same norm per rotated pair,
   * different values once P > 0. */
  for (int64_t h = 0; h < KV; h++) {
    const float *v0 = row(&out[0][2], h, 0), *k0 = row(&out[0][1], h, 0);
    for (int c = 1; c < 3; c++) {
      const int64_t P = lens[c];
      cr_assert(memcmp(row(&out[c][2], h, P), v0, (size_t)D * sizeof(float)) == 0,
                "value row at past_len %lld", (long long)P);
      const float *kp = row(&out[c][1], h, P);
      bool differs = false;
      for (int64_t i = 0; i < D / 2; i++) {
        double n0 = (double)k0[i] * k0[i] + (double)k0[i + D / 2] * k0[i + D / 2];
        double np = (double)kp[i] * kp[i] + (double)kp[i + D / 2] * kp[i + D / 2];
        cr_assert(fabs(n0 - np) <= 1e-5 * (1.0 + n0), "pair %lld norm %g vs %g", (long long)i, n0, np);
        differs = differs || kp[i] != k0[i];
      }
      cr_assert(differs, "key row at past_len %lld is not rotated", (long long)P);
    }
  }
  for (int c = 0; c < 3; c++) {
    mxt_release_all(in[c], (size_t)N);
    mxt_release_all(out[c], (size_t)N);
  }
  mx_graph_destroy(g);
}

Test(llama, new_rows_do_not_depend_on_cache_contents) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.layers = 1;
  mx_graph *g = build(&cfg);
  mx_tensor in[2][3], out[2][3];
  uint64_t rng = 7;
  step(g, &cfg, 3, 4, &rng, in[0], out[0]);
  step(g, &cfg, 3, 4, &rng, in[1], out[1]); /* same token and length, other cache contents */
  const int64_t D = cfg.hidden / cfg.heads;
  for (int k = 1; k < 3; k++)
    for (int64_t h = 0; h < cfg.kv_heads; h++)
      cr_assert(memcmp(row(&out[0][k], h, 4), row(&out[1][k], h, 4), (size_t)D * sizeof(float)) == 0);
  /* ... while the logits do depend on them (attention reads the cache). */
  cr_assert(memcmp(out[0][0].data, out[1][0].data, (size_t)cfg.vocab * sizeof(float)) != 0);
  for (int c = 0; c < 2; c++) {
    mxt_release_all(in[c], 3);
    mxt_release_all(out[c], 3);
  }
  mx_graph_destroy(g);
}

Test(llama, greedy_decode_feeds_present_back_as_past) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g = build(&cfg);
  const size_t N = (size_t)(1 + 2 * cfg.layers);
  const int64_t D = cfg.hidden / cfg.heads;
  mx_tensor in[5], out[5];
  int64_t one[2] = {1, 1};
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, one, &in[0]), MX_OK);
  *(int64_t *)in[0].data = 1;
  for (size_t i = 1; i < N; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, 0, D}, &in[i]), MX_OK);
  for (int s = 0; s < 4; s++) {
    mxt_run(g, in, N, out, N);
    const float *l = out[0].data;
    int64_t best = 0;
    for (int64_t i = 1; i < cfg.vocab; i++)
      if (l[i] > l[best]) best = i;
    *(int64_t *)in[0].data = best;
    for (size_t i = 1; i < N; i++) {
      cr_assert_eq(out[i].dims[2], s + 1);
      mx_tensor_release(&in[i]);
      in[i] = out[i];
    }
    mx_tensor_release(&out[0]);
  }
  mxt_release_all(in, N);
  mx_graph_destroy(g);
}
