/* The mixture-of-experts generator (mx_model_moe).
 *
 * Routing is data-dependent: which tokens an expert sees is only known when the router has run,
 * so every expert's MLP runs on a NonZero-sized number of rows. With T = tokens, E = experts,
 * K = top_k and H = hidden:
 *   scores, experts_idx = TopK(MatMul(x, router), K)                  [T, K] each
 *   probs = Softmax(scores)                                            [T, K]
 *   y = ConstantOfShape(Shape(x), 0)                                   [T, H]
 *   per expert e:
 *     hit = Cast(Equal(experts_idx, e), float)                         [T, K]
 *     nz = NonZero(ReduceMax(hit, axis 1))                             [1, n_e]
 *     rows = Squeeze(nz, 0) [n_e];  at = Transpose(nz) [n_e, 1]
 *     out = MatMul(Relu(MatMul(Gather(x, rows), w1_e)), w2_e)          [n_e, H]
 *     gate = Gather(ReduceSum(hit * probs, axis 1, keepdims), rows)    [n_e, 1]
 *     y = ScatterND(y, at, out * gate, reduction "add")
 * A row's TopK indices are distinct, so each ScatterND writes a row at most once; an expert no
 * token picked has n_e = 0 and contributes empty tensors. */
#include <math.h>
#include <stdio.h>

#include "common/error.h"
#include "mixrt/models.h"
#include "models/builder.h"

void mx_moe_config_default(mx_moe_config *cfg) {
  cfg->hidden = 64;
  cfg->ffn = 128;
  cfg->experts = 4;
  cfg->top_k = 2;
  cfg->seed = 1;
}

static mx_status check_size(const char *field, int64_t v, int64_t max, mx_error *err) {
  if (v >= 1 && v <= max) return MX_OK;
  return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "moe: %s is %lld; it must be between 1 and %lld", field,
                  (long long)v, (long long)max);
}

static mx_status check_config(const mx_moe_config *cfg, mx_error *err) {
  mx_status st;
  if ((st = check_size("hidden", cfg->hidden, 65536, err)) != MX_OK) return st;
  if ((st = check_size("ffn", cfg->ffn, 1 << 20, err)) != MX_OK) return st;
  if ((st = check_size("experts", cfg->experts, 1024, err)) != MX_OK) return st;
  if (cfg->top_k < 1 || cfg->top_k > cfg->experts)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "moe: top_k is %lld; it must be between 1 and experts (%lld)", (long long)cfg->top_k,
                    (long long)cfg->experts);
  if (cfg->hidden * cfg->ffn > (int64_t)1 << 30)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "moe: an expert matrix would exceed 2^30 elements (hidden %lld x ffn %lld)",
                    (long long)cfg->hidden, (long long)cfg->ffn);
  return MX_OK;
}

/* Values shared by every expert. */
typedef struct moe_ctx {
  mx_value_id x;     /* the input [tokens, hidden] */
  mx_value_id idx;   /* TopK indices [tokens, top_k] */
  mx_value_id probs; /* Softmax of the TopK values [tokens, top_k] */
  mx_value_id axis1; /* int64 [1] = {1}: the reduction axes */
  mx_value_id axis0; /* int64 [1] = {0}: the Squeeze axes */
} moe_ctx;

/* Routes the rows picked for expert e through its MLP and adds them into y; returns the new y. */
static mx_value_id expert(mx_mb *b, const mx_moe_config *cfg, const moe_ctx *c, int64_t e, mx_value_id y,
                          bool last) {
  const int64_t H = cfg->hidden, F = cfg->ffn;
  char p[32], n[96];
  snprintf(p, sizeof p, "e%lld/", (long long)e);
#define NAME(s) mx__mb_name(n, sizeof n, p, (s))
  mx_value_id id = mx__mb_scalar_i64(b, NAME("id"), e);
  mx_value_id eq = mx__mb_node(b, "Equal", NAME("is_routed"), (mx_value_id[]){c->idx, id}, 2, NULL, 0, NULL);
  mx_attr to = mx_attr_int("to", MX_FLOAT32);
  mx_value_id hit = mx__mb_node(b, "Cast", NAME("hit"), &eq, 1, &to, 1, NULL);
  mx_attr keep0 = mx_attr_int("keepdims", 0), keep1 = mx_attr_int("keepdims", 1);
  mx_value_id any =
      mx__mb_node(b, "ReduceMax", NAME("any_hit"), (mx_value_id[]){hit, c->axis1}, 2, &keep0, 1, NULL);
  mx_value_id nz = mx__mb_node(b, "NonZero", NAME("nonzero"), &any, 1, NULL, 0, NULL);
  mx_value_id rows = mx__mb_node(b, "Squeeze", NAME("rows"), (mx_value_id[]){nz, c->axis0}, 2, NULL, 0, NULL);
  static const int64_t perm[2] = {1, 0};
  mx_attr tp = mx_attr_ints("perm", perm, 2);
  mx_value_id at = mx__mb_node(b, "Transpose", NAME("scatter_indices"), &nz, 1, &tp, 1, NULL);

  mx_value_id xe =
      mx__mb_node(b, "Gather", NAME("gather_rows"), (mx_value_id[]){c->x, rows}, 2, NULL, 0, NULL);
  mx_value_id w1 = mx__mb_weights(b, NAME("w1"), 2, (int64_t[]){H, F}, 1.0f / sqrtf((float)H));
  mx_value_id w2 = mx__mb_weights(b, NAME("w2"), 2, (int64_t[]){F, H}, 1.0f / sqrtf((float)F));
  mx_value_id h1 = mx__mb_node(b, "MatMul", NAME("up"), (mx_value_id[]){xe, w1}, 2, NULL, 0, NULL);
  mx_value_id act = mx__mb_node(b, "Relu", NAME("relu"), &h1, 1, NULL, 0, NULL);
  mx_value_id h2 = mx__mb_node(b, "MatMul", NAME("down"), (mx_value_id[]){act, w2}, 2, NULL, 0, NULL);

  mx_value_id hp = mx__mb_node(b, "Mul", NAME("hit_probs"), (mx_value_id[]){hit, c->probs}, 2, NULL, 0, NULL);
  mx_value_id gate_all =
      mx__mb_node(b, "ReduceSum", NAME("gate_all"), (mx_value_id[]){hp, c->axis1}, 2, &keep1, 1, NULL);
  mx_value_id gate =
      mx__mb_node(b, "Gather", NAME("gate"), (mx_value_id[]){gate_all, rows}, 2, NULL, 0, NULL);
  mx_value_id weighted = mx__mb_node(b, "Mul", NAME("weighted"), (mx_value_id[]){h2, gate}, 2, NULL, 0, NULL);
  mx_attr red = mx_attr_string("reduction", "add");
  return mx__mb_node(b, "ScatterND", NAME("combine"), (mx_value_id[]){y, at, weighted}, 3, &red, 1,
                     last ? "y" : NULL);
#undef NAME
}

mx_status mx_model_moe(const mx_moe_config *cfg_in, mx_graph **out, mx_error *err) {
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  mx_moe_config cfg;
  if (cfg_in)
    cfg = *cfg_in;
  else
    mx_moe_config_default(&cfg);
  mx_status st = check_config(&cfg, err);
  if (st != MX_OK) return st;
  const int64_t H = cfg.hidden;
  mx_mb b;
  mx__mb_begin(&b, "moe_block", cfg.seed);
  mx_symtab *t = b.st == MX_OK ? mx_graph_symtab(b.g) : NULL;
  moe_ctx c;
  c.x = mx__mb_input(&b, "x", MX_FLOAT32, 2, (mx_dim[]){t ? mx_sym_named(t, "tokens") : 0, H});
  c.axis0 = mx__mb_ints(&b, "axes0", (int64_t[]){0}, 1);
  c.axis1 = mx__mb_ints(&b, "axes1", (int64_t[]){1}, 1);

  mx_value_id wr = mx__mb_weights(&b, "router", 2, (int64_t[]){H, cfg.experts}, 1.0f / sqrtf((float)H));
  mx_value_id logits = mx__mb_node(&b, "MatMul", "router_logits", (mx_value_id[]){c.x, wr}, 2, NULL, 0, NULL);
  mx_value_id k = mx__mb_ints(&b, "top_k", (int64_t[]){cfg.top_k}, 1);
  mx_attr ax = mx_attr_int("axis", -1);
  mx_value_id tk[2];
  mx__mb_node_n(&b, "TopK", "route", (mx_value_id[]){logits, k}, 2, &ax, 1,
                (const char *const[]){"topk_values", "topk_indices"}, 2, tk);
  c.idx = tk[1];
  c.probs = mx__mb_node(&b, "Softmax", "route_probs", &tk[0], 1, &ax, 1, NULL);

  mx_value_id shape = mx__mb_node(&b, "Shape", "x_shape", &c.x, 1, NULL, 0, NULL);
  float zero = 0.0f;
  mx_tensor zt = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &zero};
  mx_attr zv = mx_attr_tensor("value", &zt);
  mx_value_id y = mx__mb_node(&b, "ConstantOfShape", "zeros", &shape, 1, &zv, 1, NULL);
  for (int64_t e = 0; e < cfg.experts; e++) y = expert(&b, &cfg, &c, e, y, e + 1 == cfg.experts);
  mx__mb_output(&b, y);
  return mx__mb_end(&b, out, "the mixture-of-experts block", err);
}
