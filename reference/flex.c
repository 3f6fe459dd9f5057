/* The reference interpreter's FlexAttention with score_mod / prob_mod subgraphs (domain
 * ai.onnx.preview). CPU kernels run no subgraph, so a FlexAttention node carrying either
 * attribute runs here (reference/control.c sends it): scores = scale * Q K^T (grouped heads
 * share their K/V head), score_mod, softmax over the key axis, prob_mod, then probs V.
 *
 * Each mod is evaluated once over the whole [B, H, L, S] tensor, as the upstream reference
 * does: a one-input mod gets the tensor; a five-input mod (score, batch, head, q_idx, kv_idx)
 * also gets int64 index tensors shaped [B,1,1,1], [1,H,1,1], [1,1,L,1] and [1,1,1,S], which
 * broadcast against it. Its output must hold one value per score. The products and the softmax
 * run in double; scores and probabilities reach the mods in Q's element type. Graph inference
 * infers the mod bodies (mx__flex_infer_mods, graph/ops/llm.c); here each body node's shapes
 * come from the actual tensors, as everywhere in the interpreter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/llm_params.h"
#include "kernels/kutil.h"
#include "mixrt/sequence.h"
#include "reference/reference.h"

typedef struct flex_job {
  const mx__ref_frame *f;
  const mx_node *nd;
  mx_error *err;
  int64_t b, hq, hkv, l, s, e, ev;
} flex_job;

static mx_status new_host_tensor(flex_job *j, mx_dtype dt, int32_t rank, const int64_t *dims, mx_tensor *t) {
  return mx__reference_new_tensor(j->err, j->nd, dt, rank, dims, t);
}

static void free_tensors(mx_tensor *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    mx__host_free(t[i].data);
    t[i].data = NULL;
  }
}

/* Runs mod (score_mod or prob_mod) over x in place: x's elements become the mod's output. */
static mx_status run_mod(flex_job *j, const char *what, mx_graph *mod, mx_tensor *x) {
  if (mod->n_inputs != 1 && mod->n_inputs != 5)
    return mx__node_fail(j->err, j->nd, MX_ERR_INVALID_GRAPH,
                         "%s has %zu inputs; it takes 1 (the scores) or 5 (score, b, h, q_idx, kv_idx)", what,
                         mod->n_inputs);
  if (mod->n_outputs != 1)
    return mx__node_fail(j->err, j->nd, MX_ERR_INVALID_GRAPH, "%s has %zu outputs, not 1", what,
                         mod->n_outputs);
  mx_tensor ins[5];
  memset(ins, 0, sizeof ins);
  ins[0] = *x;
  mx_status st = MX_OK;
  const int64_t extent[4] = {j->b, j->hq, j->l, j->s};
  for (size_t i = 1; i < mod->n_inputs && st == MX_OK; i++) {
    int64_t dims[4] = {1, 1, 1, 1};
    dims[i - 1] = extent[i - 1];
    st = new_host_tensor(j, MX_INT64, 4, dims, &ins[i]);
    for (int64_t k = 0; st == MX_OK && k < extent[i - 1]; k++) ((int64_t *)ins[i].data)[k] = k;
  }
  mx_tensor out;
  memset(&out, 0, sizeof out);
  if (st == MX_OK) {
    st = mx__reference_run_graph(mod, j->f, ins, mod->n_inputs, &out, 1, j->err);
    if (st != MX_OK) mx__error_prefix(j->err, "node '%s' (%s): %s: ", j->nd->name, j->nd->op_type, what);
  }
  int64_t n_out = 0, n_x = 0;
  if (st == MX_OK && (!mx_tensor_numel(&out, &n_out) || !mx_tensor_numel(x, &n_x) || n_out != n_x ||
                      !mx_dtype_is_float(out.dtype) || mx_value_is_list(&out)))
    st = mx__node_fail(j->err, j->nd, MX_ERR_SHAPE, "%s must give one floating-point value per score", what);
  for (int64_t i = 0; st == MX_OK && i < n_x; i++)
    mx__kset_f64(x->data, x->dtype, i, mx__kget_f64(out.data, out.dtype, i));
  if (out.data) mx_tensor_release(&out);
  free_tensors(ins + 1, 4);
  return st;
}

/* scores[b, h, i, t] = scale * sum_k Q[b, h, i, k] K[b, h / group, t, k], in x's dtype. */
static void compute_scores(const flex_job *j, const mx_tensor *q, const mx_tensor *k, double scale,
                           mx_tensor *x) {
  const int64_t group = j->hq / j->hkv;
  for (int64_t b = 0; b < j->b; b++)
    for (int64_t h = 0; h < j->hq; h++) {
      const int64_t qo = (b * j->hq + h) * j->l * j->e, ko = (b * j->hkv + h / group) * j->s * j->e;
      const int64_t xo = (b * j->hq + h) * j->l * j->s;
      for (int64_t i = 0; i < j->l; i++)
        for (int64_t t = 0; t < j->s; t++) {
          double acc = 0.0;
          for (int64_t c = 0; c < j->e; c++)
            acc += mx__kget_f64(q->data, q->dtype, qo + i * j->e + c) *
                   mx__kget_f64(k->data, k->dtype, ko + t * j->e + c);
          mx__kset_f64(x->data, x->dtype, xo + i * j->s + t, acc * scale);
        }
    }
}

/* Softmax over the last axis of x, in place, computed in double. */
static void softmax_rows(const flex_job *j, mx_tensor *x) {
  const int64_t rows = j->b * j->hq * j->l;
  for (int64_t r = 0; r < rows; r++) {
    const int64_t o = r * j->s;
    double m = -INFINITY, sum = 0.0;
    for (int64_t t = 0; t < j->s; t++) {
      double v = mx__kget_f64(x->data, x->dtype, o + t);
      m = v > m ? v : m;
    }
    for (int64_t t = 0; t < j->s; t++) sum += exp(mx__kget_f64(x->data, x->dtype, o + t) - m);
    for (int64_t t = 0; t < j->s; t++)
      mx__kset_f64(x->data, x->dtype, o + t, exp(mx__kget_f64(x->data, x->dtype, o + t) - m) / sum);
  }
}

/* y[b, h, i, :] = sum_t probs[b, h, i, t] V[b, h / group, t, :]. */
static void apply_values(const flex_job *j, const mx_tensor *p, const mx_tensor *v, mx_tensor *y) {
  const int64_t group = j->hq / j->hkv;
  for (int64_t b = 0; b < j->b; b++)
    for (int64_t h = 0; h < j->hq; h++) {
      const int64_t po = (b * j->hq + h) * j->l * j->s, vo = (b * j->hkv + h / group) * j->s * j->ev;
      const int64_t yo = (b * j->hq + h) * j->l * j->ev;
      for (int64_t i = 0; i < j->l; i++)
        for (int64_t c = 0; c < j->ev; c++) {
          double acc = 0.0;
          for (int64_t t = 0; t < j->s; t++)
            acc += mx__kget_f64(p->data, p->dtype, po + i * j->s + t) *
                   mx__kget_f64(v->data, v->dtype, vo + t * j->ev + c);
          mx__kset_f64(y->data, y->dtype, yo + i * j->ev + c, acc);
        }
    }
}

mx_status mx__reference_flex_attention(const mx__ref_frame *f, mx_node_id nid, const mx_tensor *const *ins,
                                       mx_tensor *outs, mx_error *err) {
  const mx_node *nd = &f->g->nodes[nid];
  flex_job j = {.f = f, .nd = nd, .err = err};
  const mx_tensor *q = ins[0], *k = nd->n_inputs > 1 ? ins[1] : NULL, *v = nd->n_inputs > 2 ? ins[2] : NULL;
  if (!q || !k || !v || mx_value_is_list(q) || mx_value_is_list(k) || mx_value_is_list(v) || q->rank != 4 ||
      k->rank != 4 || v->rank != 4 || !mx_dtype_is_float(q->dtype) || k->dtype != q->dtype ||
      v->dtype != q->dtype || k->dims[0] != q->dims[0] || v->dims[0] != q->dims[0] ||
      k->dims[3] != q->dims[3] || v->dims[2] != k->dims[2] || v->dims[1] != k->dims[1] || k->dims[1] == 0 ||
      q->dims[1] % k->dims[1] != 0)
    return mx__node_fail(
        err, nd, MX_ERR_SHAPE,
        "Q, K, V must be 4-D floats of one dtype with matching batch, head size and grouped heads");
  j.b = q->dims[0], j.hq = q->dims[1], j.l = q->dims[2], j.e = q->dims[3];
  j.hkv = k->dims[1], j.s = k->dims[2], j.ev = v->dims[3];
  const mx_flex_attention_params *p = nd->params;
  const double scale = p && p->has_scale ? (double)p->scale : 1.0 / sqrt((double)j.e);
  const mx_attr *score_mod = mx__node_attr(nd, "score_mod"), *prob_mod = mx__node_attr(nd, "prob_mod");

  mx_tensor x;
  const int64_t xdims[4] = {j.b, j.hq, j.l, j.s}, ydims[4] = {j.b, j.hq, j.l, j.ev};
  mx_status st = new_host_tensor(&j, q->dtype, 4, xdims, &x);
  if (st != MX_OK) return st;
  compute_scores(&j, q, k, scale, &x);
  if (score_mod && score_mod->type == MX_ATTR_GRAPH && score_mod->graph)
    st = run_mod(&j, "score_mod", score_mod->graph, &x);
  if (st == MX_OK) softmax_rows(&j, &x);
  if (st == MX_OK && prob_mod && prob_mod->type == MX_ATTR_GRAPH && prob_mod->graph)
    st = run_mod(&j, "prob_mod", prob_mod->graph, &x);
  if (st == MX_OK) st = new_host_tensor(&j, q->dtype, 4, ydims, &outs[0]);
  if (st == MX_OK) apply_values(&j, &x, v, &outs[0]);
  free_tensors(&x, 1);
  return st;
}
