/* The tensor-parallel sharding pass (graph/passes/shard.h): the rank graphs of the llama decode
 * step (collectives, weight slices, cache shapes), refusals naming the node, and N ranks
 * simulated in one process against the unsharded model over greedy decode steps. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/ir.h"
#include "support_shard.h"

static mx_llama_config tiny(int64_t kv_heads) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.kv_heads = kv_heads;
  return cfg;
}

static const mx_tensor *constant(const mx_graph *g, const char *name) {
  mx_value_id v = mx_graph_find_value(g, name);
  return v == MX_NO_VALUE ? NULL : mx_graph_value_constant(g, v);
}

Test(shard, llama_collectives_and_states) {
  mx_llama_config cfg = tiny(2);
  mx__shard_report rep;
  mx_error err = {0};
  mx_graph *g = shard_test_rank(&cfg, 2, 1, &rep, &err);
  cr_assert(g, "%s", err.message);
  /* One AllReduce after o_proj and one after down_proj per layer, one for the embedding; the
   * logits gathered once. */
  cr_expect_eq(shard_test_count(g, "AllReduce"), 2 * (size_t)cfg.layers + 1);
  cr_expect_eq(shard_test_count(g, "AllGather"), 1);
  cr_expect_eq(rep.n_collectives, 2 * (size_t)cfg.layers + 2);
  cr_expect_eq(rep.n_attention, (size_t)cfg.layers);
  cr_expect_eq(rep.n_mlp, (size_t)cfg.layers);
  cr_expect_eq(rep.n_vocab, 2);
  for (size_t i = 0; i < rep.n_collectives; i++) cr_expect(rep.collectives[i].why[0]);
  mx_shape s;
  cr_assert(mx_graph_value_shape(g, mx_graph_find_value(g, "past_key_0"), &s));
  cr_expect_eq(s.dims[1], 1, "rank's kv heads: %lld", (long long)s.dims[1]);
  cr_assert(mx_graph_value_shape(g, mx_graph_find_value(g, "present_value_1"), &s));
  cr_expect_eq(s.dims[1], 1);
  cr_assert(mx_graph_value_shape(g, mx_graph_output(g, 0), &s));
  cr_expect_eq(s.rank, 3);
  cr_expect_eq(s.dims[2], cfg.vocab, "logits gathered whole");
  mx__shard_report_free(&rep);
  mx_graph_destroy(g);
}

Test(shard, llama_weight_slices) {
  mx_llama_config cfg = tiny(2);
  mx_graph *full = shard_test_llama(&cfg);
  cr_assert(full);
  mx_error err = {0};
  mx_graph *g = shard_test_rank(&cfg, 2, 1, NULL, &err);
  cr_assert(g, "%s", err.message);
  /* Column split: rank 1 holds the second half of wq's columns; row split: of wo's rows. */
  const mx_tensor *wq = constant(full, "l0/wq"), *wq1 = constant(g, "l0/wq.tp1");
  const mx_tensor *wo = constant(full, "l0/wo"), *wo1 = constant(g, "l0/wo.tp1");
  cr_assert(wq && wq1 && wo && wo1);
  cr_assert_eq(wq1->dims[0], wq->dims[0]);
  cr_assert_eq(wq1->dims[1] * 2, wq->dims[1]);
  int64_t cols = wq->dims[1], half = cols / 2;
  for (int64_t i = 0; i < wq->dims[0]; i++)
    for (int64_t j = 0; j < half; j++)
      cr_assert_eq(((const float *)wq1->data)[i * half + j], ((const float *)wq->data)[i * cols + half + j]);
  cr_assert_eq(wo1->dims[0] * 2, wo->dims[0]);
  int64_t rows = wo1->dims[0], h = wo->dims[1];
  cr_assert(!memcmp(wo1->data, (const float *)wo->data + rows * h, (size_t)(rows * h) * sizeof(float)));
  mx_graph_destroy(g);
  mx_graph_destroy(full);
}

Test(shard, refuses_heads_not_divisible) {
  mx_llama_config cfg = tiny(2);
  mx_error err = {0};
  cr_assert_null(shard_test_rank(&cfg, 3, 0, NULL, &err));
  cr_expect(strstr(err.message, "l0/attention") && strstr(err.message, "tp 3"), "%s", err.message);
}

/* x -> MatMul(w1) -> Relu -> MatMul(w2) -> y, and extra readers of the inner value or weight. */
static mx_graph *mlp_graph(bool reduce_inner, bool read_weight) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("mlp", &g), MX_OK);
  mx_shape xs = {2, {1, 4}};
  mx_value_id x, w1, w2, h, r, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &xs, &x), MX_OK);
  float d1[32], d2[32];
  for (int i = 0; i < 32; i++) d1[i] = d2[i] = (float)i / 32.0f;
  mx_tensor t1 = {.dtype = MX_FLOAT32, .rank = 2, .dims = {4, 8}, .data = d1};
  mx_tensor t2 = {.dtype = MX_FLOAT32, .rank = 2, .dims = {8, 4}, .data = d2};
  cr_assert_eq(mx_graph_add_constant(g, "w1", &t1, &w1), MX_OK);
  cr_assert_eq(mx_graph_add_constant(g, "w2", &t2, &w2), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "MatMul", (mx_value_id[]){x, w1}, 2, NULL, 0, &h), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &h, 1, NULL, 0, &r), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "MatMul", (mx_value_id[]){r, w2}, 2, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  if (reduce_inner) {
    mx_value_id m;
    mx_node_desc d = {
        .op_type = "Softmax", .name = "inner_softmax", .inputs = &r, .n_inputs = 1, .n_outputs = 1};
    cr_assert_eq(mx_graph_add_node(g, &d, &m), MX_OK);
    cr_assert_eq(mx_graph_add_output(g, m), MX_OK);
  }
  if (read_weight) {
    mx_value_id m;
    mx_node_desc d = {
        .op_type = "Neg", .name = "weight_reader", .inputs = &w1, .n_inputs = 1, .n_outputs = 1};
    cr_assert_eq(mx_graph_add_node(g, &d, &m), MX_OK);
    cr_assert_eq(mx_graph_add_output(g, m), MX_OK);
  }
  return g;
}

Test(shard, mlp_splits_and_reduces_once) {
  mx_graph *g = mlp_graph(false, false);
  mx__shard_report rep;
  mx_error err = {0};
  cr_assert_eq(mx__shard_graph(g, 2, 0, &rep, &err), MX_OK, "%s", err.message);
  cr_expect_eq(rep.n_mlp, 1);
  cr_expect_eq(shard_test_count(g, "AllReduce"), 1);
  cr_expect_eq(shard_test_count(g, "AllGather"), 0, "the MLP output is whole after its AllReduce");
  mx__shard_report_free(&rep);
  mx_graph_destroy(g);
}

Test(shard, refuses_unknown_op_on_split_value) {
  mx_graph *g = mlp_graph(true, false);
  mx_error err = {0};
  cr_assert_eq(mx__shard_graph(g, 2, 0, NULL, &err), MX_ERR_UNSUPPORTED);
  cr_expect(strstr(err.message, "inner_softmax") && strstr(err.message, "Softmax"), "%s", err.message);
  mx_graph_destroy(g);
}

Test(shard, refuses_weight_used_twice) {
  mx_graph *g = mlp_graph(false, true);
  mx_error err = {0};
  cr_assert_eq(mx__shard_graph(g, 2, 0, NULL, &err), MX_ERR_UNSUPPORTED);
  cr_expect(strstr(err.message, "'w1'") && strstr(err.message, "weight_reader"), "%s", err.message);
  mx_graph_destroy(g);
}

/* --- numerics: N ranks simulated against the unsharded model ------------------------------------ */

/* A decoder taking input_ids [1, 1] and per layer past key/value [1, kv_heads, past_len, d],
 * giving logits and the grown caches in the same order. */
typedef struct decoder_src {
  const char *path;    /* an ONNX file, or NULL for the llama of cfg */
  bool exported;       /* the llama as exporters write it (unfused ops), fused by the rules */
  int64_t first_token; /* 0: token 1 */
  mx_llama_config cfg;
  int64_t layers, kv_heads, head_dim;
} decoder_src;

static mx_graph *fused(const decoder_src *m) {
  if (!m->path && !m->exported) return shard_test_llama(&m->cfg);
  mx_graph *g = NULL;
  mx_error err = {0};
  if (m->exported) {
    cr_assert_eq(mx_model_llama_exported(&m->cfg, &g, &err), MX_OK, "%s", err.message);
  } else {
    cr_assert_eq(mx_onnx_load_file(m->path, &g, &err), MX_OK, "%s", err.message);
    /* One new token per step: the simulation's collective values need concrete shapes. */
    cr_assert_eq(mx_graph_bind_symbol(g, "seq", 1), MX_OK, "%s", mx_graph_last_error(g));
  }
  mx_fuse_report fuse;
  cr_assert(mx_graph_optimize(g, NULL) == MX_OK && mx_graph_fuse(g, NULL, &fuse) == MX_OK &&
                mx_graph_optimize(g, NULL) == MX_OK,
            "%s", mx_graph_last_error(g));
  return g;
}

/* Greedy decode for `steps` steps unsharded and on tp simulated ranks; logits must agree within
 * the conformance tolerances and the tokens exactly. */
static void check_greedy(const decoder_src *m, int tp, int steps) {
  mx_graph *full = fused(m);
  cr_assert(full);
  mx_graph *ranks[8];
  mx_error err = {0};
  for (int r = 0; r < tp; r++) {
    ranks[r] = fused(m);
    cr_assert_eq(mx__shard_graph(ranks[r], tp, r, NULL, &err), MX_OK, "%s", err.message);
  }
  shard_decode_shape shape = {.layers = m->layers,
                              .kv_heads = m->kv_heads,
                              .rank_kv_heads = m->kv_heads / tp,
                              .head_dim = m->head_dim,
                              .first_token = m->first_token ? m->first_token : 1};
  shard_check_greedy(full, ranks, tp, &shape, steps, m->path ? m->path : "llama");
}

static decoder_src llama_src(int64_t kv_heads) {
  decoder_src m = {.cfg = tiny(kv_heads), .kv_heads = kv_heads};
  m.layers = m.cfg.layers;
  m.head_dim = m.cfg.hidden / m.cfg.heads;
  return m;
}

Test(shard, llama_greedy_tp2) {
  decoder_src m = llama_src(2);
  check_greedy(&m, 2, 64);
}

Test(shard, llama_greedy_tp4) {
  decoder_src m = llama_src(4);
  check_greedy(&m, 4, 64);
}

/* The zoo's torch-exported GPT (fused QKV projection split into sections, LayerNorm, biases,
 * learned positions): bench/zoo/export.py writes it into the build directory. */
static bool zoo_gpt(char *path, size_t cap) {
  const char *env = getenv("MIXRT_ZOO_DIR");
  const char *dirs[] = {env, "zoo", "../zoo", "../../zoo", MIXRT_BINARY_DIR "/zoo"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    if (!dirs[i]) continue;
    snprintf(path, cap, "%s/gpt_kv.onnx", dirs[i]);
    if (access(path, R_OK) == 0) return true;
  }
  return false;
}

static void check_gpt(int tp) {
  char path[512];
  if (!zoo_gpt(path, sizeof path))
    cr_skip_test(
        "zoo/gpt_kv.onnx not found (bench/zoo/export.py writes it; MIXRT_ZOO_DIR names its directory)");
  decoder_src m = {.path = path, .layers = 3, .kv_heads = 4, .head_dim = 16};
  check_greedy(&m, tp, 64);
}

Test(shard, torch_gpt_greedy_tp2) { check_gpt(2); }

Test(shard, torch_gpt_greedy_tp4) { check_gpt(4); }

/* tp 1: the collectives are identities and the weights whole. */
Test(shard, llama_tp1_is_the_model) {
  decoder_src m = llama_src(2);
  mx_error err = {0};
  mx__shard_report rep;
  mx_graph *g = shard_test_rank(&m.cfg, 1, 0, &rep, &err);
  cr_assert(g, "%s", err.message);
  cr_expect_eq(rep.n_collectives, 2 * (size_t)m.layers + 2);
  mx__shard_report_free(&rep);
  mx_graph_destroy(g);
  check_greedy(&m, 1, 8);
}

/* The llama in the unfused form exporters write (Pow/ReduceMean RMSNorm, rotary by Slice/Concat,
 * Softmax attention with repeated kv heads): the rewrite rules fuse it, then it shards. */
Test(shard, exported_llama_greedy_tp2) {
  decoder_src m = llama_src(2);
  m.exported = true;
  check_greedy(&m, 2, 16);
}

/* The encoder (post-norm BERT layer, padding mask expanded over the heads, every Reshape target
 * from Shape arithmetic) at batch 2, seq 8: one run on 2 ranks equals the unsharded one. */
Test(shard, encoder_tp2) {
  mx_encoder_config cfg;
  mx_encoder_config_default(&cfg);
  mx_graph *gs[3];
  mx_error err = {0};
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(mx_model_encoder(&cfg, &gs[i], &err), MX_OK, "%s", err.message);
    cr_assert_eq(mx_graph_bind_symbol(gs[i], "batch", 2), MX_OK, "%s", mx_graph_last_error(gs[i]));
    cr_assert_eq(mx_graph_bind_symbol(gs[i], "seq", 8), MX_OK, "%s", mx_graph_last_error(gs[i]));
    mx_fuse_report fuse;
    cr_assert(mx_graph_optimize(gs[i], NULL) == MX_OK && mx_graph_fuse(gs[i], NULL, &fuse) == MX_OK &&
              mx_graph_optimize(gs[i], NULL) == MX_OK);
    if (i) cr_assert_eq(mx__shard_graph(gs[i], 2, i - 1, NULL, &err), MX_OK, "%s", err.message);
  }
  cr_assert_eq(mx_graph_input_count(gs[0]), 1);
  mx_tensor x;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 3, (int64_t[]){2, 8, cfg.hidden}, &x), MX_OK);
  float *xd = x.data;
  uint32_t seed = 7;
  for (int64_t i = 0; i < 2 * 8 * cfg.hidden; i++) {
    seed = seed * 1664525u + 1013904223u;
    xd[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
  }
  mx_tensor want, got[2][1], *in[2] = {&x, &x}, *out[2] = {got[0], got[1]};
  cr_assert_eq(mx_reference_run(gs[0], &x, 1, &want, 1, &err), MX_OK, "%s", err.message);
  shard_sim *sim = shard_sim_create(&gs[1], 2);
  cr_assert(sim);
  cr_assert_eq(shard_sim_run(sim, in, 1, out, 1, &err), MX_OK, "%s", err.message);
  for (int r = 0; r < 2; r++) {
    char why[256];
    cr_expect(mx_tensor_allclose(&got[r][0], &want, 1e-3, 1e-4, why, sizeof why), "rank %d: %s", r, why);
    mx_tensor_release(&got[r][0]);
  }
  mx_tensor_release(&want);
  mx_tensor_release(&x);
  shard_sim_destroy(sim);
  mx_graph_destroy(gs[0]);
}

/* One square weight as both the up (columns cut) and the down (rows cut) projection. */
Test(shard, refuses_weight_cut_two_ways) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("tied_mlp", &g), MX_OK);
  mx_shape xs = {2, {1, 8}};
  mx_value_id x, w, h, r, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &xs, &x), MX_OK);
  float d[64];
  for (int i = 0; i < 64; i++) d[i] = (float)i / 64.0f;
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = 2, .dims = {8, 8}, .data = d};
  cr_assert_eq(mx_graph_add_constant(g, "w_square", &t, &w), MX_OK);
  mx_node_desc up = {
      .op_type = "MatMul", .name = "up", .inputs = (mx_value_id[]){x, w}, .n_inputs = 2, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &up, &h), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &h, 1, NULL, 0, &r), MX_OK);
  mx_node_desc down = {
      .op_type = "MatMul", .name = "down", .inputs = (mx_value_id[]){r, w}, .n_inputs = 2, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &down, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  mx_error err = {0};
  cr_assert_eq(mx__shard_graph(g, 2, 1, NULL, &err), MX_ERR_UNSUPPORTED);
  cr_expect(strstr(err.message, "'w_square'") && strstr(err.message, "'up'") && strstr(err.message, "'down'"),
            "%s", err.message);
  mx_graph_destroy(g);
}

/* A negative id counts from the end of the embedding table (Gather's rule) on every rank too. */
Test(shard, llama_negative_token_id) {
  decoder_src m = llama_src(2);
  m.first_token = -3;
  check_greedy(&m, 2, 2);
}
