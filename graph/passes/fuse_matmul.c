/* MatMul rules: a Transpose of an operand's last two axes folded into the MatMul kernel's
 * transpose flags (matmul_transpose), and an Add of a bias along the last axis followed by an
 * activation (Relu, Gelu, SiLU, Sigmoid, Tanh) folded into the kernel's epilogue
 * (matmul_bias_act); the same activations after a Gemm (gemm_act). They set the mixrt-internal
 * attributes that mx_matmul_params and mx_gemm_params (graph/ops/linalg_params.h) describe.
 *
 * Both run late (after every other rule stops hitting): the attention rule reads the plain
 * MatMul(Q, Transpose(K)) form, which matmul_transpose would otherwise take first. */
#include <string.h>

#include "graph/ops/elementwise_params.h"
#include "graph/ops/linalg_params.h"
#include "graph/ops/shape_params.h"
#include "graph/passes/rewrite.h"

static bool is_op(const mx_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

static bool is_float(mx_dtype dt) {
  return dt == MX_FLOAT32 || dt == MX_FLOAT64 || dt == MX_FLOAT16 || dt == MX_BFLOAT16;
}

/* Activation names as the MatMul attribute mixrt_activation spells them. */
static const char *const act_names[] = {"", "Relu", "Gelu", "GeluTanh", "SiLU", "Sigmoid", "Tanh"};

/* Rebuilds MatMul node `mm` with inputs ins[0..n_ins) and params p, as the producer of `out`
 * (the MatMul's own output, or the last node of a pattern that ends after it). Attributes other
 * than the mixrt_* ones are none for an ONNX MatMul, so the new node carries exactly p. */
static mx_status rebuild(mx_graph *g, mx_value_id out, const mx_value_id *ins, size_t n_ins,
                         const mx_matmul_params *p) {
  mx_attr attrs[4];
  size_t na = 0;
  if (p->trans_a) attrs[na++] = mx_attr_int("mixrt_trans_a", 1);
  if (p->trans_b) attrs[na++] = mx_attr_int("mixrt_trans_b", 1);
  if (p->has_bias) attrs[na++] = mx_attr_int("mixrt_bias", 1);
  if (p->fused_act) attrs[na++] = mx_attr_string("mixrt_activation", act_names[p->fused_act]);
  return mx__rw_replace(g, out, "MatMul", ins, n_ins, attrs, na, NULL);
}

/* --- matmul_transpose --------------------------------------------------------------------------- */

/* Whether Transpose node t only swaps the last two axes of its input (rank >= 2). */
static bool swaps_last_two(const mx_graph *g, const mx_node *t) {
  const mx_transpose_params *p = t->params;
  int32_t r = g->values[t->inputs[0]].shape.rank;
  if (!p || r < 2 || r == MX_RANK_UNKNOWN) return false;
  if (!p->has_perm) return r == 2; /* the default reversal */
  if (p->n_perm != r) return false;
  for (int32_t i = 0; i < r - 2; i++)
    if (p->perm[i] != i) return false;
  return p->perm[r - 2] == r - 1 && p->perm[r - 1] == r - 2;
}

static mx_status run_matmul_transpose(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || !is_op(nd, "MatMul") || !nd->params) continue;
    mx_matmul_params p = *(const mx_matmul_params *)nd->params;
    mx_value_id ins[3];
    size_t n_ins = nd->n_inputs;
    bool changed = false;
    for (size_t k = 0; k < n_ins; k++) ins[k] = nd->inputs[k];
    for (int k = 0; k < 2; k++) {
      mx_node_id t = mx__rw_producer(g, ins[k], "Transpose");
      if (t == MX_NO_NODE || !swaps_last_two(g, &g->nodes[t])) continue;
      /* A flag already set and a Transpose cancel: the flag goes back to 0. */
      ins[k] = g->nodes[t].inputs[0];
      if (k == 0)
        p.trans_a ^= 1;
      else
        p.trans_b ^= 1;
      changed = true;
    }
    if (!changed) continue;
    mx_status st = rebuild(g, nd->outputs[0], ins, n_ins, &p);
    if (st != MX_OK) return st;
    (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_matmul_transpose = {
    .name = "matmul_transpose",
    .what = "Transpose of a MatMul operand's last two axes folded into the kernel's transpose flags",
    .by_default = true,
    .late = true,
    .run = run_matmul_transpose,
};

/* --- matmul_bias_act ---------------------------------------------------------------------------- */

/* Whether `b` can be the fused bias of product y: same dtype, a vector along y's last axis (every
 * other dim 1, its last N or 1, no more dims than y), and y + b has y's shape. */
static bool bias_along_last(const mx_graph *g, mx_value_id y, mx_value_id b, mx_value_id sum) {
  const mx_value *vy = &g->values[y], *vb = &g->values[b];
  if (b == y || vb->kind != MX_KIND_TENSOR || vb->dtype != vy->dtype) return false;
  int32_t ry = vy->shape.rank, rb = vb->shape.rank;
  if (ry == MX_RANK_UNKNOWN || rb == MX_RANK_UNKNOWN || rb > ry) return false;
  if (!mx__rw_same_shape(&g->values[sum].shape, &vy->shape)) return false;
  for (int32_t i = 0; i + 1 < rb; i++)
    if (vb->shape.dims[i] != 1) return false;
  if (rb == 0) return true;
  mx_dim last = vb->shape.dims[rb - 1];
  return last == 1 || (last == vy->shape.dims[ry - 1] && !mx_dim_is_unknown(last));
}

/* The activation node n as an MX_MATMUL_ACT_* value reading `x`; 0 when it is none. */
static int32_t activation_of(const mx_node *n, mx_value_id x) {
  if (n->n_inputs < 1 || n->inputs[0] != x || n->n_outputs != 1) return MX_MATMUL_ACT_NONE;
  if (is_op(n, "Relu")) return MX_MATMUL_ACT_RELU;
  if (is_op(n, "Sigmoid")) return MX_MATMUL_ACT_SIGMOID;
  if (is_op(n, "Tanh")) return MX_MATMUL_ACT_TANH;
  if (is_op(n, "Gelu")) {
    const mx_gelu_params *p = n->params;
    if (!p) return MX_MATMUL_ACT_NONE;
    return p->tanh_approx ? MX_MATMUL_ACT_GELU_TANH : MX_MATMUL_ACT_GELU;
  }
  if (is_op(n, "Swish")) {
    const mx_attr *a = mx__node_attr(n, "alpha");
    return !a || a->f == 1.0f ? MX_MATMUL_ACT_SILU : MX_MATMUL_ACT_NONE;
  }
  return MX_MATMUL_ACT_NONE;
}

static mx_status fuse_epilogue(mx_graph *g, mx_node_id mid, bool *hit) {
  *hit = false;
  const mx_node *mm = &g->nodes[mid];
  mx_matmul_params p = *(const mx_matmul_params *)mm->params;
  mx_value_id last = mm->outputs[0];
  if (p.fused_act || !is_float(g->values[last].dtype)) return MX_OK;
  mx_value_id ins[3] = {mm->inputs[0], mm->inputs[1], p.has_bias ? mm->inputs[2] : MX_NO_VALUE};
  bool changed = false;
  if (!p.has_bias && mx__rw_single_use(g, last)) {
    const mx_node *add = &g->nodes[g->values[last].consumers[0]];
    mx_value_id b = is_op(add, "Add") ? mx__rw_other_input(add, last) : MX_NO_VALUE;
    /* With a 1-D B, Y's last axis is A's rows, which the kernel's epilogue does not walk. */
    bool rows_last = g->values[mm->inputs[1]].shape.rank < 2;
    if (b != MX_NO_VALUE && !rows_last && bias_along_last(g, last, b, add->outputs[0])) {
      ins[2] = b;
      p.has_bias = 1;
      last = add->outputs[0];
      changed = true;
    }
  }
  if (mx__rw_single_use(g, last)) {
    int32_t act = activation_of(&g->nodes[g->values[last].consumers[0]], last);
    if (act != MX_MATMUL_ACT_NONE) {
      p.fused_act = act;
      last = g->nodes[g->values[last].consumers[0]].outputs[0];
      changed = true;
    }
  }
  if (!changed) return MX_OK;
  mx_status st = rebuild(g, last, ins, p.has_bias ? 3 : 2, &p);
  if (st == MX_OK) *hit = true;
  return st;
}

static mx_status run_matmul_bias_act(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || !is_op(nd, "MatMul") || !nd->params) continue;
    bool hit;
    mx_status st = fuse_epilogue(g, (mx_node_id)i, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

/* Gemm [-> activation]: Gemm already adds its bias (C); the activation joins its kernel. */
static mx_status fuse_gemm_act(mx_graph *g, mx_node_id gid, bool *hit) {
  *hit = false;
  const mx_node *gm = &g->nodes[gid];
  const mx_gemm_params *p = gm->params;
  mx_value_id y = gm->outputs[0];
  if (p->fused_act || gm->n_outputs != 1 || !is_float(g->values[y].dtype) || !mx__rw_single_use(g, y))
    return MX_OK;
  const mx_node *next = &g->nodes[g->values[y].consumers[0]];
  int32_t act = activation_of(next, y);
  if (act == MX_MATMUL_ACT_NONE || gm->n_attrs >= 15) return MX_OK;
  mx_attr attrs[16];
  uint32_t na = 0;
  for (uint32_t k = 0; k < gm->n_attrs; k++) attrs[na++] = gm->attrs[k];
  attrs[na++] = mx_attr_string("mixrt_activation", act_names[act]);
  mx_value_id ins[3];
  uint32_t n_ins = gm->n_inputs;
  for (uint32_t k = 0; k < n_ins; k++) ins[k] = gm->inputs[k];
  mx_status st = mx__rw_replace(g, next->outputs[0], "Gemm", ins, n_ins, attrs, na, NULL);
  if (st == MX_OK) *hit = true;
  return st;
}

static mx_status run_gemm_act(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || !is_op(nd, "Gemm") || !nd->params || nd->n_inputs > 3) continue;
    bool hit;
    mx_status st = fuse_gemm_act(g, (mx_node_id)i, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_gemm_act = {
    .name = "gemm_act",
    .what = "Gemm + Relu / Gelu / SiLU / Sigmoid / Tanh into one Gemm kernel",
    .by_default = true,
    .late = true,
    .run = run_gemm_act,
};

const mx__rw_rule mx__rule_matmul_bias_act = {
    .name = "matmul_bias_act",
    .what =
        "MatMul + Add(bias along the last axis) + Relu / Gelu / SiLU / Sigmoid / Tanh into one MatMul kernel",
    .by_default = true,
    .late = true,
    .run = run_matmul_bias_act,
};
