/* The mixture-of-experts generator (mx_model_moe): inferred shapes for the default and other
 * configs (y [tokens, hidden], expert rows sized by NonZero), config errors, and numerics
 * through the reference interpreter against a hand-computed expectation, including routings
 * where an expert receives no token and an input with no token at all. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/models.h"
#include "models/models_support.h"

static mx_graph *build(const mx_moe_config *cfg) {
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_moe(cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

static void check_shapes(const mx_moe_config *cfg) {
  mx_graph *g = build(cfg);
  char buf[256], want[256];
  snprintf(want, sizeof want, "[tokens, %lld]", (long long)cfg->hidden);
  cr_assert_str_eq(mxt_shape_of(g, "x", buf, sizeof buf), want);
  cr_assert_str_eq(mxt_shape_of(g, "y", buf, sizeof buf), want);
  cr_assert_eq(mx_graph_output(g, 0), mx_graph_find_value(g, "y"));
  snprintf(want, sizeof want, "[tokens, %lld]", (long long)cfg->top_k);
  cr_assert_str_eq(mxt_shape_of(g, "topk_indices", buf, sizeof buf), want);
  /* Each expert's MLP runs on a data-dependent row count: one fresh symbol per expert. */
  for (int64_t e = 0; e < cfg->experts; e++) {
    char name[64];
    snprintf(name, sizeof name, "e%lld/down:0", (long long)e);
    mx_shape s;
    cr_assert(mx_graph_value_shape(g, mx_graph_find_value(g, name), &s), "%s", name);
    cr_assert_eq(s.rank, 2);
    cr_assert(mx_dim_is_expr(s.dims[0]), "%s rows should be symbolic", name);
    cr_assert_eq(s.dims[1], cfg->hidden);
  }
  const mx_node_id *order;
  size_t n, scatter = 0, nonzero = 0;
  cr_assert_eq(mx__graph_topo_order(g, &order, &n), MX_OK);
  for (size_t i = 0; i < n; i++) {
    scatter += strcmp(g->nodes[order[i]].op_type, "ScatterND") == 0;
    nonzero += strcmp(g->nodes[order[i]].op_type, "NonZero") == 0;
  }
  cr_assert_eq(scatter, (size_t)cfg->experts);
  cr_assert_eq(nonzero, (size_t)cfg->experts);
  cr_assert_eq(n, (size_t)(5 + 15 * cfg->experts));
  mx_graph_destroy(g);
}

Test(moe, default_and_other_shapes) {
  mx_moe_config c;
  mx_moe_config_default(&c);
  check_shapes(&c);
  c.experts = 1, c.top_k = 1;
  check_shapes(&c);
  mx_moe_config_default(&c);
  c.hidden = 8, c.ffn = 3, c.experts = 8, c.top_k = 8;
  check_shapes(&c);
  mx_moe_config_default(&c);
  c.experts = 16, c.top_k = 3, c.seed = 99;
  check_shapes(&c);
}

static void expect_bad(const mx_moe_config *cfg, const char *word) {
  mx_graph *g = (mx_graph *)1;
  mx_error err;
  mx_status st = mx_model_moe(cfg, &g, &err);
  mxt_expect_bad_config(st, g, &err, word);
}

Test(moe, bad_configs) {
  mx_moe_config c;
  mx_moe_config_default(&c);
  c.top_k = 0;
  expect_bad(&c, "top_k");
  c.top_k = 5; /* more than the 4 experts */
  expect_bad(&c, "top_k");
  mx_moe_config_default(&c);
  c.hidden = 0;
  expect_bad(&c, "hidden");
  mx_moe_config_default(&c);
  c.experts = 0;
  expect_bad(&c, "experts");
  mx_moe_config_default(&c);
  c.ffn = -1;
  expect_bad(&c, "ffn");
}

/* The generated weight called name, as float32 data of the given element count. */
static const float *weight(mx_graph *g, const char *name, int64_t numel) {
  const mx_tensor *t = mx_graph_value_constant(g, mx_graph_find_value(g, name));
  cr_assert_not_null(t, "no constant %s", name);
  int64_t n;
  cr_assert(mx_tensor_numel(t, &n) && n == numel && t->dtype == MX_FLOAT32, "%s", name);
  return t->data;
}

/* The block computed by hand in double: router logits, the top_k largest (ties to the lower
 * index), their softmax, and the weighted sum of the chosen experts' Relu MLPs. */
static void expected(mx_graph *g, const mx_moe_config *c, const float *x, int64_t T, double *y) {
  const int64_t H = c->hidden, F = c->ffn, E = c->experts;
  const float *wr = weight(g, "router", H * E);
  cr_assert(E <= 64 && F <= 256, "the hand computation handles up to 64 experts of width 256");
  for (int64_t t = 0; t < T; t++) {
    double logit[64];
    bool taken[64] = {false};
    int64_t pick[64];
    for (int64_t e = 0; e < E; e++) {
      logit[e] = 0.0;
      for (int64_t i = 0; i < H; i++) logit[e] += (double)x[t * H + i] * wr[i * E + e];
    }
    double denom = 0.0;
    for (int64_t k = 0; k < c->top_k; k++) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; e++)
        if (!taken[e] && (best < 0 || logit[e] > logit[best])) best = e;
      taken[best] = true;
      pick[k] = best;
      denom += exp(logit[best] - logit[pick[0]]);
    }
    for (int64_t i = 0; i < H; i++) y[t * H + i] = 0.0;
    for (int64_t k = 0; k < c->top_k; k++) {
      char n1[32], n2[32];
      snprintf(n1, sizeof n1, "e%lld/w1", (long long)pick[k]);
      snprintf(n2, sizeof n2, "e%lld/w2", (long long)pick[k]);
      const float *w1 = weight(g, n1, H * F), *w2 = weight(g, n2, F * H);
      double p = exp(logit[pick[k]] - logit[pick[0]]) / denom, a[256];
      for (int64_t f = 0; f < F; f++) {
        a[f] = 0.0;
        for (int64_t i = 0; i < H; i++) a[f] += (double)x[t * H + i] * w1[i * F + f];
        if (a[f] < 0.0) a[f] = 0.0;
      }
      for (int64_t i = 0; i < H; i++) {
        double s = 0.0;
        for (int64_t f = 0; f < F; f++) s += a[f] * w2[f * H + i];
        y[t * H + i] += p * s;
      }
    }
  }
}

/* Runs the block on x [T, hidden] and compares with the hand computation; counts[e] receives
 * how many tokens have expert e as their first choice. */
static void run_and_compare(mx_graph *g, const mx_moe_config *c, const float *x, int64_t T, int64_t *counts) {
  const int64_t H = c->hidden;
  mx_tensor in, out;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 2, (int64_t[]){T, H}, &in), MX_OK);
  if (T) memcpy(in.data, x, (size_t)(T * H) * sizeof(float));
  mxt_run(g, &in, 1, &out, 1);
  cr_assert(out.rank == 2 && out.dims[0] == T && out.dims[1] == H);
  double *want = malloc((size_t)(T * H + 1) * sizeof *want);
  cr_assert_not_null(want);
  expected(g, c, x, T, want);
  for (int64_t i = 0; i < T * H; i++) {
    double got = ((const float *)out.data)[i];
    cr_assert(fabs(got - want[i]) <= 1e-5 + 1e-5 * fabs(want[i]), "y[%lld] = %.9g, expected %.9g",
              (long long)i, got, want[i]);
  }
  /* Count the routing from the TopK indices the same way the graph does. */
  const float *wr = weight(g, "router", H * c->experts);
  for (int64_t e = 0; e < c->experts; e++) counts[e] = 0;
  for (int64_t t = 0; t < T; t++) {
    int64_t best = 0;
    double lb = -INFINITY;
    for (int64_t e = 0; e < c->experts; e++) {
      double l = 0.0;
      for (int64_t i = 0; i < H; i++) l += (double)x[t * H + i] * wr[i * c->experts + e];
      if (l > lb) lb = l, best = e;
    }
    counts[best]++;
  }
  free(want);
  mx_tensor_release(&in);
  mx_tensor_release(&out);
}

Test(moe, tiny_top1_with_an_idle_expert) {
  mx_moe_config c = {.hidden = 4, .ffn = 3, .experts = 2, .top_k = 1, .seed = 5};
  mx_graph *g = build(&c);
  /* Rows along d = router[:, 0] - router[:, 1] have logit0 - logit1 = s * |d|^2: s > 0 routes
   * the token to expert 0. All three tokens go to expert 0; expert 1 gets none. */
  const float *wr = weight(g, "router", 8);
  float d[4], x[12];
  for (int i = 0; i < 4; i++) d[i] = wr[i * 2] - wr[i * 2 + 1];
  const float s[3] = {1.0f, 0.5f, 2.0f};
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < 4; i++) x[t * 4 + i] = s[t] * d[i];
  int64_t counts[2];
  run_and_compare(g, &c, x, 3, counts);
  cr_assert_eq(counts[0], 3);
  cr_assert_eq(counts[1], 0);
  /* Mixed routing: token 1 now goes to expert 1. */
  for (int i = 0; i < 4; i++) x[4 + i] = -d[i];
  run_and_compare(g, &c, x, 3, counts);
  cr_assert_eq(counts[0], 2);
  cr_assert_eq(counts[1], 1);
  /* Every token to expert 1: expert 0 idle. */
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < 4; i++) x[t * 4 + i] = -s[t] * d[i];
  run_and_compare(g, &c, x, 3, counts);
  cr_assert_eq(counts[1], 3);
  mx_graph_destroy(g);
}

Test(moe, top2_of_4_and_no_tokens) {
  mx_moe_config c = {.hidden = 6, .ffn = 5, .experts = 4, .top_k = 2, .seed = 11};
  mx_graph *g = build(&c);
  uint64_t rng = 3;
  mx_tensor x = mxt_random_f32(2, (int64_t[]){9, 6}, &rng);
  int64_t counts[4];
  run_and_compare(g, &c, x.data, 9, counts);
  run_and_compare(g, &c, x.data, 1, counts); /* one token: two experts idle */
  run_and_compare(g, &c, NULL, 0, counts);   /* no token: every tensor of every expert empty */
  mx_tensor_release(&x);
  mx_graph_destroy(g);
}

Test(moe, default_config_runs) {
  mx_moe_config c;
  mx_moe_config_default(&c);
  mx_graph *g = build(&c);
  uint64_t rng = 8;
  mx_tensor x = mxt_random_f32(2, (int64_t[]){16, c.hidden}, &rng);
  int64_t counts[4];
  run_and_compare(g, &c, x.data, 16, counts);
  mx_tensor_release(&x);
  mx_graph_destroy(g);
}
