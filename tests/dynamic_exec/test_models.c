/* Dynamic execution of realistic unknown-shape blocks built with the builder API, each equal to
 * the reference interpreter with 1, 2 and 4 streams on the CPU device (and the inline device):
 *   - a decode attention block (ONNX Attention, opset 23, with past_key/past_value) over a KV
 *     cache of past length 0, 1, 7, 100 and 1000 in consecutive steps, and a decode loop that
 *     feeds each step's present cache back as the next step's device-resident past;
 *   - a mixture-of-experts block (router MatMul, TopK, per-expert Equal/NonZero/Gather, expert
 *     MLP, ScatterND combine) with experts that receive no token, down to zero tokens;
 *   - the exported-transformer encoder (Reshape targets from Shape arithmetic) at several
 *     batch/seq values, and the Llama decode step and MoE generators of mixrt/models.h;
 *   - the bodies of the UNKNOWN partition calls of the Llama decode step, run on their own. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/models.h"
#include "mixrt/partition.h"
#include "mixrt/reference.h"
#include "support_dyn.h"

static const uint32_t stream_counts[] = {1, 2, 4};

/* --- decode attention ------------------------------------------------------------------------- */

#define ATT_HIDDEN   32
#define ATT_HEADS    4
#define ATT_KV_HEADS 2
#define ATT_HEAD_DIM 8

/* x [batch, 1, HIDDEN], past_key/past_value [batch, KV_HEADS, past, HEAD_DIM] ->
 * y [batch, 1, HIDDEN], present_key/present_value [batch, KV_HEADS, past + 1, HEAD_DIM]. */
static mx_graph *attention_block(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("decode_attention", &g), MX_OK);
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim b = mx_sym_named(t, "batch"), past = mx_sym_named(t, "past");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 3, (mx_dim[]){b, 1, ATT_HIDDEN});
  mx_value_id pk = dyn_input(g, "past_key", MX_FLOAT32, 4, (mx_dim[]){b, ATT_KV_HEADS, past, ATT_HEAD_DIM});
  mx_value_id pv = dyn_input(g, "past_value", MX_FLOAT32, 4, (mx_dim[]){b, ATT_KV_HEADS, past, ATT_HEAD_DIM});
  const int64_t perm[] = {0, 2, 1, 3};
  mx_attr tr = mx_attr_ints("perm", perm, 4);
  mx_value_id heads[3];
  const int64_t nh[3] = {ATT_HEADS, ATT_KV_HEADS, ATT_KV_HEADS};
  const char *wn[3] = {"wq", "wk", "wv"};
  for (int i = 0; i < 3; i++) {
    mx_value_id w =
        dyn_weights(g, wn[i], 2, (int64_t[]){ATT_HIDDEN, nh[i] * ATT_HEAD_DIM}, 0.3f, 11 + (uint64_t)i);
    mx_value_id p = dyn_op(g, "MatMul", (mx_value_id[]){x, w}, 2, NULL, 0);
    char tn[32];
    snprintf(tn, sizeof tn, "%s_shape", wn[i]);
    mx_value_id shape = dyn_ints(g, tn, (int64_t[]){0, 1, nh[i], ATT_HEAD_DIM}, 4);
    mx_value_id r = dyn_op(g, "Reshape", (mx_value_id[]){p, shape}, 2, NULL, 0);
    heads[i] = dyn_op(g, "Transpose", &r, 1, &tr, 1);
  }
  mx_node_desc d = {.op_type = "Attention",
                    .name = "attention",
                    .inputs = (mx_value_id[]){heads[0], heads[1], heads[2], MX_NO_VALUE, pk, pv},
                    .n_inputs = 6,
                    .n_outputs = 3,
                    .output_names = (const char *const[]){"attn", "present_key", "present_value"}};
  mx_value_id outs[3];
  cr_assert_eq(mx_graph_add_node(g, &d, outs), MX_OK, "%s", mx_graph_last_error(g));
  mx_value_id yt = dyn_op(g, "Transpose", &outs[0], 1, &tr, 1);
  mx_value_id back = dyn_ints(g, "back_shape", (int64_t[]){0, 1, ATT_HIDDEN}, 3);
  mx_value_id y2 = dyn_op(g, "Reshape", (mx_value_id[]){yt, back}, 2, NULL, 0);
  mx_value_id wo = dyn_weights(g, "wo", 2, (int64_t[]){ATT_HIDDEN, ATT_HIDDEN}, 0.3f, 17);
  mx_value_id y = dyn_op(g, "MatMul", (mx_value_id[]){y2, wo}, 2, NULL, 0);
  mx_value_id res = dyn_op(g, "Add", (mx_value_id[]){y, x}, 2, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, res), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, outs[1]), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, outs[2]), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

Test(dyn_models, attention_past_lengths) {
  static const int64_t pasts[] = {0, 1, 7, 100, 1000};
  const size_t n = sizeof pasts / sizeof *pasts;
  mx_graph *g = attention_block();
  mx_tensor steps[5 * 3];
  for (size_t s = 0; s < n; s++) {
    int64_t batch = s == 2 ? 2 : 1;
    steps[s * 3 + 0] = dyn_random(MX_FLOAT32, 3, (int64_t[]){batch, 1, ATT_HIDDEN}, 100 + s);
    steps[s * 3 + 1] =
        dyn_random(MX_FLOAT32, 4, (int64_t[]){batch, ATT_KV_HEADS, pasts[s], ATT_HEAD_DIM}, 200 + s);
    steps[s * 3 + 2] =
        dyn_random(MX_FLOAT32, 4, (int64_t[]){batch, ATT_KV_HEADS, pasts[s], ATT_HEAD_DIM}, 300 + s);
  }
  const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (int k = 0; k < 2; k++) {
    mx_device *dev = dyn_device(kinds[k], true);
    for (size_t c = 0; c < 3; c++)
      cr_expect_eq(dyn_run_steps(g, dev, stream_counts[c], steps, 3, n, 1e-4, 1e-5, "attention"), 0);
    mx_device_destroy(dev);
  }
  for (size_t i = 0; i < n * 3; i++) mx_tensor_release(&steps[i]);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* A decode loop: each step's present cache is the next step's past, kept on the device and
 * handed from the executor's outputs to its inputs without copies. */
Test(dyn_models, attention_decode_loop_on_device) {
  mx_graph *g = attention_block();
  for (size_t c = 0; c < 3; c++) {
    mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
    mx_dyn_options o;
    mx__dyn_options_init(&o);
    o.max_streams = stream_counts[c];
    mx_dyn_plan *plan;
    mx_dyn_exec *e;
    mx_error err;
    cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, &err), MX_OK, "%s", err.message);
    cr_assert_eq(mx__dyn_exec_create(dev, plan, NULL, NULL, 0, &e, &err), MX_OK, "%s", err.message);
    mx_tensor empty = dyn_random(MX_FLOAT32, 4, (int64_t[]){1, ATT_KV_HEADS, 0, ATT_HEAD_DIM}, 1);
    mx_tensor pk = dyn_to_device(e, &empty), pv = dyn_to_device(e, &empty);
    mx_tensor_release(&empty);
    mx_stream *s0 = mx__dyn_exec_stream(e, 0);
    for (int step = 0; step < 12; step++) {
      mx_tensor x = dyn_random(MX_FLOAT32, 3, (int64_t[]){1, 1, ATT_HIDDEN}, 500 + (uint64_t)step);
      mx_tensor in[3] = {x, pk, pv};
      mx_tensor out[3] = {{.placement = MX_HOST}, {.placement = MX_DEVICE}, {.placement = MX_DEVICE}};
      cr_assert_eq(mx__dyn_exec_run(e, in, 3, out, 3, NULL), MX_OK, "step %d: %s", step,
                   mx__dyn_exec_last_error(e));
      cr_assert_eq(out[1].dims[2], step + 1);
      cr_assert_eq(mx_stream_synchronize(s0), MX_OK);
      /* The same step on the reference, with host copies of the cache. */
      mx_tensor hin[3] = {x, dyn_to_host(dev, &pk), dyn_to_host(dev, &pv)};
      mx_tensor hout[3] = {out[0], dyn_to_host(dev, &out[1]), dyn_to_host(dev, &out[2])};
      char tag[64];
      snprintf(tag, sizeof tag, "decode loop (%u streams) step %d", stream_counts[c], step);
      cr_expect_eq(dyn_compare_reference(g, hin, 3, hout, 3, 1e-4, 1e-5, tag), 0);
      for (int i = 0; i < 3; i++) mx_tensor_release(&hout[i]);
      mx_tensor_release(&hin[1]);
      mx_tensor_release(&hin[2]);
      mx_tensor_release(&x);
      cr_assert_eq(mx__caching_free(mx__dyn_exec_allocator(e), pk.data, s0, NULL), MX_OK);
      cr_assert_eq(mx__caching_free(mx__dyn_exec_allocator(e), pv.data, s0, NULL), MX_OK);
      pk = out[1];
      pv = out[2];
      pk.placement = pv.placement = MX_DEVICE;
      pk.name = pv.name = NULL;
    }
    mx__caching_free(mx__dyn_exec_allocator(e), pk.data, s0, NULL);
    mx__caching_free(mx__dyn_exec_allocator(e), pv.data, s0, NULL);
    mx_caching_stats cs;
    mx__caching_stats_get(mx__dyn_exec_allocator(e), &cs);
    cr_expect_eq(cs.bytes_in_use, 0);
    mx__dyn_exec_destroy(e);
    mx__dyn_plan_destroy(plan);
    mx_device_destroy(dev);
  }
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- mixture of experts ----------------------------------------------------------------------- */

#define MOE_HIDDEN  16
#define MOE_FFN     24
#define MOE_EXPERTS 4

/* x [tokens, HIDDEN] -> y [tokens, HIDDEN]. Expert 3's router column is strongly negative, so
 * with top-2 routing it never receives a token. */
static mx_graph *moe_block(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("moe", &g), MX_OK);
  mx_dim tokens = mx_sym_named(mx_graph_symtab(g), "tokens");
  mx_value_id x = dyn_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){tokens, MOE_HIDDEN});
  mx_tensor wr = dyn_random(MX_FLOAT32, 2, (int64_t[]){MOE_HIDDEN, MOE_EXPERTS}, 77);
  for (int h = 0; h < MOE_HIDDEN; h++) ((float *)wr.data)[h * MOE_EXPERTS + 3] = -50.0f;
  mx_value_id router;
  cr_assert_eq(mx_graph_add_constant(g, "router_w", &wr, &router), MX_OK);
  mx_tensor_release(&wr);
  mx_value_id logits = dyn_op(g, "MatMul", (mx_value_id[]){x, router}, 2, NULL, 0);
  mx_value_id k = dyn_ints(g, "top_k", (int64_t[]){2}, 1);
  mx_value_id topk[2];
  mx_attr ax = mx_attr_int("axis", -1);
  mx_node_desc td = {.op_type = "TopK",
                     .name = "topk",
                     .inputs = (mx_value_id[]){logits, k},
                     .n_inputs = 2,
                     .attrs = &ax,
                     .n_attrs = 1,
                     .n_outputs = 2};
  cr_assert_eq(mx_graph_add_node(g, &td, topk), MX_OK, "%s", mx_graph_last_error(g));
  mx_value_id probs = dyn_op(g, "Softmax", &topk[0], 1, &ax, 1);
  mx_value_id shape = dyn_op(g, "Shape", &x, 1, NULL, 0);
  float zero = 0.0f;
  mx_tensor zt = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &zero};
  mx_attr zv = mx_attr_tensor("value", &zt);
  mx_value_id acc = dyn_op(g, "ConstantOfShape", &shape, 1, &zv, 1);
  mx_value_id zero_idx = dyn_scalar_i64(g, "row0", 0);
  mx_value_id axes1 = dyn_ints(g, "axes1", (int64_t[]){1}, 1);
  mx_attr add = mx_attr_string("reduction", "add");
  mx_attr ax0 = mx_attr_int("axis", 0);
  const int64_t perm[] = {1, 0};
  mx_attr tr = mx_attr_ints("perm", perm, 2);
  for (int e = 0; e < MOE_EXPERTS; e++) {
    char name[32];
    snprintf(name, sizeof name, "expert%d", e);
    mx_value_id id = dyn_scalar_i64(g, name, e);
    mx_value_id hit = dyn_op(g, "Equal", (mx_value_id[]){topk[1], id}, 2, NULL, 0);
    mx_value_id nz = dyn_op(g, "NonZero", &hit, 1, NULL, 0);                          /* [2, n_e] */
    mx_value_id tok = dyn_op(g, "Gather", (mx_value_id[]){nz, zero_idx}, 2, &ax0, 1); /* [n_e] */
    mx_value_id xe = dyn_op(g, "Gather", (mx_value_id[]){x, tok}, 2, &ax0, 1);        /* [n_e, H] */
    snprintf(name, sizeof name, "w1_%d", e);
    mx_value_id w1 = dyn_weights(g, name, 2, (int64_t[]){MOE_HIDDEN, MOE_FFN}, 0.4f, 30 + (uint64_t)e);
    snprintf(name, sizeof name, "w2_%d", e);
    mx_value_id w2 = dyn_weights(g, name, 2, (int64_t[]){MOE_FFN, MOE_HIDDEN}, 0.4f, 40 + (uint64_t)e);
    mx_value_id h = dyn_op(g, "MatMul", (mx_value_id[]){xe, w1}, 2, NULL, 0);
    mx_value_id hr = dyn_op(g, "Relu", &h, 1, NULL, 0);
    mx_value_id ye = dyn_op(g, "MatMul", (mx_value_id[]){hr, w2}, 2, NULL, 0);
    mx_value_id nzt = dyn_op(g, "Transpose", &nz, 1, &tr, 1);                       /* [n_e, 2] */
    mx_value_id w = dyn_op(g, "GatherND", (mx_value_id[]){probs, nzt}, 2, NULL, 0); /* [n_e] */
    mx_value_id w2d = dyn_op(g, "Unsqueeze", (mx_value_id[]){w, axes1}, 2, NULL, 0);
    mx_value_id yw = dyn_op(g, "Mul", (mx_value_id[]){ye, w2d}, 2, NULL, 0);
    mx_value_id idx = dyn_op(g, "Unsqueeze", (mx_value_id[]){tok, axes1}, 2, NULL, 0);
    acc = dyn_op(g, "ScatterND", (mx_value_id[]){acc, idx, yw}, 3, &add, 1);
  }
  cr_assert_eq(mx_graph_add_output(g, acc), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

Test(dyn_models, moe_with_idle_experts) {
  static const int64_t tokens[] = {5, 1, 16, 0, 3, 16};
  const size_t n = sizeof tokens / sizeof *tokens;
  mx_graph *g = moe_block();
  mx_tensor steps[6];
  for (size_t s = 0; s < n; s++)
    steps[s] = dyn_random(MX_FLOAT32, 2, (int64_t[]){tokens[s], MOE_HIDDEN}, 900 + s);
  const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (int k = 0; k < 2; k++) {
    mx_device *dev = dyn_device(kinds[k], true);
    for (size_t c = 0; c < 3; c++)
      cr_expect_eq(dyn_run_steps(g, dev, stream_counts[c], steps, 1, n, 1e-4, 1e-5, "moe"), 0);
    mx_device_destroy(dev);
  }
  /* The plan has one data-dependent op per expert, and spreads the experts over the streams. */
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.max_streams = 4;
  mx_dyn_plan *plan;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, NULL), MX_OK);
  mx_dyn_plan_info info;
  mx__dyn_plan_info_get(plan, &info);
  cr_expect_eq(info.data_dependent_ops, MOE_EXPERTS);
  cr_expect_gt(info.streams, 1);
  cr_expect_leq(info.events, info.cross_edges);
  mx__dyn_plan_destroy(plan);
  for (size_t s = 0; s < n; s++) mx_tensor_release(&steps[s]);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- encoder ---------------------------------------------------------------------------------- */

Test(dyn_models, encoder_batch_seq) {
  static const int64_t bs[][2] = {{1, 1}, {2, 5}, {3, 17}, {1, 64}, {2, 5}, {4, 9}};
  const size_t n = sizeof bs / sizeof *bs;
  mx_encoder_config cfg;
  mx_encoder_config_default(&cfg);
  cfg.layers = 2;
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_encoder(&cfg, &g, &err), MX_OK, "%s", err.message);
  mx_tensor steps[6];
  for (size_t s = 0; s < n; s++)
    steps[s] = dyn_random(MX_FLOAT32, 3, (int64_t[]){bs[s][0], bs[s][1], cfg.hidden}, 40 + s);
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  for (size_t c = 0; c < 3; c++)
    cr_expect_eq(dyn_run_steps(g, dev, stream_counts[c], steps, 1, n, 1e-4, 1e-5, "encoder"), 0);
  mx_device_destroy(dev);
  /* Shape arithmetic never reaches the device: it is evaluated from the symbolic values, and the
   * Reshapes share their input's buffer. */
  mx_dyn_plan *plan;
  cr_assert_eq(mx__dyn_plan_create(g, NULL, &plan, NULL), MX_OK);
  mx_dyn_plan_info info;
  mx__dyn_plan_info_get(plan, &info);
  cr_expect_gt(info.alias_ops, 0);
  cr_expect_gt(info.eval_ops + info.skipped_ops, 0);
  cr_expect_eq(info.infer_ops, 0);
  mx__dyn_plan_destroy(plan);
  for (size_t s = 0; s < n; s++) mx_tensor_release(&steps[s]);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- generators ------------------------------------------------------------------------------- */

Test(dyn_models, llama_decode_generator) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  static const int64_t pasts[] = {0, 1, 7, 100};
  const size_t n = sizeof pasts / sizeof *pasts;
  const size_t n_in = 1 + 2 * (size_t)cfg.layers;
  const int64_t hd = cfg.head_dim ? cfg.head_dim : cfg.hidden / cfg.heads;
  mx_tensor *steps = calloc(n * n_in, sizeof *steps);
  cr_assert_not_null(steps);
  for (size_t s = 0; s < n; s++) {
    mx_tensor *in = steps + s * n_in;
    in[0] = dyn_random(MX_INT64, 2, (int64_t[]){1, 1}, 60 + s);
    for (size_t l = 0; l < 2 * (size_t)cfg.layers; l++)
      in[1 + l] = dyn_random(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, pasts[s], hd}, 70 + s * 10 + l);
  }
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  for (size_t c = 0; c < 3; c++)
    cr_expect_eq(dyn_run_steps(g, dev, stream_counts[c], steps, n_in, n, 1e-4, 1e-5, "llama"), 0);
  mx_device_destroy(dev);
  for (size_t i = 0; i < n * n_in; i++) mx_tensor_release(&steps[i]);
  free(steps);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

Test(dyn_models, moe_generator) {
  mx_moe_config cfg;
  mx_moe_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_moe(&cfg, &g, &err), MX_OK, "%s", err.message);
  static const int64_t tokens[] = {7, 1, 0, 32, 7};
  const size_t n = sizeof tokens / sizeof *tokens;
  mx_tensor steps[5];
  for (size_t s = 0; s < n; s++)
    steps[s] = dyn_random(MX_FLOAT32, 2, (int64_t[]){tokens[s], cfg.hidden}, 80 + s);
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  for (size_t c = 0; c < 3; c++)
    cr_expect_eq(dyn_run_steps(g, dev, stream_counts[c], steps, 1, n, 1e-4, 1e-5, "moe generator"), 0);
  mx_device_destroy(dev);
  for (size_t s = 0; s < n; s++) mx_tensor_release(&steps[s]);
  mx_graph_destroy(g);
  dyn_check_leaks();
}

/* --- partition bodies ------------------------------------------------------------------------- */

/* A concrete size for every dim of a declared shape: symbols get 3 + (index % 4), expressions
 * are evaluated from those. */
static void concrete_dims(mx_graph *g, mx_value_id v, mx_tensor *t) {
  mx_shape s;
  cr_assert(mx_graph_value_shape(g, v, &s));
  mx_symtab *syms = mx_graph_symtab(g);
  size_t n = mx_symtab_symbol_count(syms);
  int64_t *vals = malloc((n ? n : 1) * sizeof *vals);
  cr_assert_not_null(vals);
  for (size_t k = 0; k < n; k++) vals[k] = 3 + (int64_t)(k % 4);
  t->rank = s.rank;
  for (int32_t d = 0; d < s.rank; d++) {
    if (mx_dim_is_concrete(s.dims[d])) {
      t->dims[d] = s.dims[d];
    } else {
      cr_assert_eq(mx_sym_eval(syms, s.dims[d], vals, n, &t->dims[d]), MX_OK);
    }
  }
  free(vals);
}

/* The UNKNOWN partition calls of the Llama decode step, each body planned and run on its own
 * (random inputs of its declared shapes), equal the reference on the same body. */
Test(dyn_models, partition_call_bodies) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  cr_assert_eq(mx_model_llama(&cfg, &g, NULL), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_partition *part;
  mx_error err;
  cr_assert_eq(mx_partition_create(g, NULL, &part, &err), MX_OK, "%s", err.message);
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  size_t bodies = 0;
  for (size_t c = 0; c < mx_partition_cluster_count(part); c++) {
    mx_partition_cluster_info info;
    cr_assert(mx_partition_cluster(part, c, &info));
    if (info.type != MX_CLUSTER_UNKNOWN) continue;
    mx_graph *body = info.body;
    cr_assert_not_null(body);
    size_t n_in = mx_graph_input_count(body);
    mx_tensor *in = calloc(n_in ? n_in : 1, sizeof *in);
    cr_assert_not_null(in);
    for (size_t i = 0; i < n_in; i++) {
      mx_value_id v = mx_graph_input(body, i);
      mx_tensor shape = {0};
      concrete_dims(body, v, &shape);
      in[i] = dyn_random(mx_graph_value_dtype(body, v), shape.rank, shape.dims, 1000 + i + 10 * c);
    }
    char what[64];
    snprintf(what, sizeof what, "partition body %zu", c);
    for (uint32_t streams = 1; streams <= 2; streams++)
      cr_expect_eq(dyn_run_steps(body, dev, streams, in, n_in, 1, 1e-4, 1e-5, what), 0);
    for (size_t i = 0; i < n_in; i++) mx_tensor_release(&in[i]);
    free(in);
    bodies++;
  }
  cr_expect_gt(bodies, 0, "the decode step has unknown clusters");
  mx_device_destroy(dev);
  mx_partition_destroy(part);
  mx_graph_destroy(g);
  dyn_check_leaks();
}
