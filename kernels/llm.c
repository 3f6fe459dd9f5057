/* CPU kernels of the LLM building blocks group: SwiGLU, LinearAttention, FlexAttention
 * (ai.onnx.preview) and CausalConvWithState.
 *
 * SwiGLU has a float32 fast path over equal shapes and a generic broadcasting path. The other
 * three read their (small, per-step) operands through the generic double accessors of kutil.h:
 * LinearAttention runs its recurrence token by token over a float32 state in the workspace (as
 * the ONNX function body does), FlexAttention computes each head's two products with
 * cblas_dgemm in double, and CausalConvWithState is a direct depthwise sum per channel. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "graph/ops/llm_params.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

static bool has_in(const mx_kernel_call *call, uint32_t i) {
  return i < call->n_in && call->t[i].dtype != MX_DTYPE_UNDEFINED;
}
static bool has_out(const mx_kernel_call *call, uint32_t i) {
  return i < call->n_out && call->t[call->n_in + i].dtype != MX_DTYPE_UNDEFINED;
}

static inline double silu(double x) { return x / (1.0 + exp(-x)); }

/* --- SwiGLU ------------------------------------------------------------------------------------- */

static mx_status swiglu_run(mx_kernel_call *call) {
  const mx_swiglu_params *p = call->params;
  const mx_ktensor *a = &call->t[0], *b = &call->t[1];
  mx_ktensor *y = mx__kout(call, 0);
  const float alpha = p->alpha;
  int64_t n = mx__ktensor_numel(y);
  bool same = mx__ktensor_numel(a) == n && mx__ktensor_numel(b) == n;
  if (same && y->dtype == MX_FLOAT32) {
    const float *pa = a->data, *pb = b->data;
    float *py = y->data;
    for (int64_t i = 0; i < n; i++) py[i] = pa[i] * mx__ksigmoidf(alpha * pa[i]) * pb[i];
    return MX_OK;
  }
  if (a->rank > y->rank || b->rank > y->rank) {
    call->why = "SwiGLU: the inputs do not broadcast to the output";
    return MX_ERR_KERNEL;
  }
  int64_t sa[MX_MAX_RANK], sb[MX_MAX_RANK], idx[MX_MAX_RANK] = {0};
  mx__kbroadcast_strides(a, y->rank, sa);
  mx__kbroadcast_strides(b, y->rank, sb);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; i++) {
    double va = mx__kget_f64(a->data, a->dtype, ia), vb = mx__kget_f64(b->data, b->dtype, ib);
    mx__kset_f64(y->data, y->dtype, i, va / (1.0 + exp(-(double)alpha * va)) * vb);
    /* Odometer over the output's dims, moving the input offsets along. */
    for (int32_t d = y->rank - 1; d >= 0; d--) {
      ia += sa[d], ib += sb[d];
      if (++idx[d] < y->dims[d]) break;
      ia -= sa[d] * y->dims[d], ib -= sb[d] * y->dims[d];
      idx[d] = 0;
    }
  }
  return MX_OK;
}

/* --- LinearAttention ---------------------------------------------------------------------------- */

enum { LA_Q, LA_K, LA_V, LA_PAST, LA_DECAY, LA_BETA };

typedef struct la_dims {
  int64_t b, t, hq, hkv, dk, dv, decay_per_head, beta_per_head;
} la_dims;

static mx_status la_make_dims(const mx_kernel_call *call, la_dims *d, const char **why) {
  const mx_linear_attention_params *p = call->params;
  const mx_ktensor *q = &call->t[LA_Q], *k = &call->t[LA_K], *v = &call->t[LA_V];
  *why = "LinearAttention: query, key and value must be [batch, seq, heads * size] of matching sizes";
  if (q->rank != 3 || k->rank != 3 || v->rank != 3) return MX_ERR_KERNEL;
  d->b = q->dims[0], d->t = q->dims[1], d->hq = p->q_num_heads, d->hkv = p->kv_num_heads;
  if (q->dims[2] % d->hq || v->dims[2] % d->hkv) return MX_ERR_KERNEL;
  d->dk = q->dims[2] / d->hq, d->dv = v->dims[2] / d->hkv;
  if (k->dims[2] != d->hkv * d->dk || k->dims[0] != d->b || v->dims[0] != d->b || k->dims[1] != d->t ||
      v->dims[1] != d->t)
    return MX_ERR_KERNEL;
  d->decay_per_head = d->beta_per_head = 0;
  if (has_in(call, LA_DECAY)) {
    int64_t last = call->t[LA_DECAY].dims[2];
    if (call->t[LA_DECAY].rank != 3 || (last != d->hkv && last != d->hkv * d->dk)) {
      *why = "LinearAttention: decay must be [batch, seq, kv_heads] or [batch, seq, kv_heads * d_k]";
      return MX_ERR_KERNEL;
    }
    d->decay_per_head = last == d->hkv && d->dk != 1;
  }
  if (has_in(call, LA_BETA)) {
    int64_t last = call->t[LA_BETA].dims[2];
    if (call->t[LA_BETA].rank != 3 || (last != 1 && last != d->hkv)) {
      *why = "LinearAttention: beta must be [batch, seq, kv_heads] or [batch, seq, 1]";
      return MX_ERR_KERNEL;
    }
    d->beta_per_head = last != 1;
  }
  if (has_in(call, LA_PAST) && mx__ktensor_numel(&call->t[LA_PAST]) != d->b * d->hkv * d->dk * d->dv) {
    *why = "LinearAttention: past_state must be [batch, kv_heads, d_k, d_v]";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

static size_t la_workspace(const mx_kernel_call *call) {
  la_dims d;
  const char *why;
  if (la_make_dims(call, &d, &why) != MX_OK) return 0;
  return mx__kalign64((size_t)(d.b * d.hkv * d.dk * d.dv) * sizeof(float)) +
         3 * mx__kalign64((size_t)(d.dk + d.dv + 1) * sizeof(float));
}

static mx_status la_run(mx_kernel_call *call) {
  const mx_linear_attention_params *p = call->params;
  la_dims d;
  mx_status st = la_make_dims(call, &d, &call->why);
  if (st != MX_OK) return st;
  const bool gated = p->update_rule == MX_LINATT_GATED || p->update_rule == MX_LINATT_GATED_DELTA;
  const bool delta = p->update_rule == MX_LINATT_DELTA || p->update_rule == MX_LINATT_GATED_DELTA;
  if ((gated && !has_in(call, LA_DECAY)) || (delta && !has_in(call, LA_BETA))) {
    call->why = "LinearAttention: the update rule needs decay and/or beta";
    return MX_ERR_KERNEL;
  }
  /* decay, beta and the past state are read by index below: they must hold every value the
   * heads and steps read (a malformed model can give them any shape). */
  const int64_t rows_heads = d.b * d.t * d.hkv;
  if ((gated && mx__ktensor_numel(&call->t[LA_DECAY]) < rows_heads * (d.decay_per_head ? 1 : d.dk)) ||
      (delta && mx__ktensor_numel(&call->t[LA_BETA]) < d.b * d.t * (d.beta_per_head ? d.hkv : 1)) ||
      (has_in(call, LA_PAST) && mx__ktensor_numel(&call->t[LA_PAST]) < d.b * d.hkv * d.dk * d.dv)) {
    call->why =
        "LinearAttention: decay, beta or the past state holds fewer values than the heads and steps need";
    return MX_ERR_KERNEL;
  }
  const float scale = p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)d.dk));
  const mx_ktensor *q = &call->t[LA_Q], *k = &call->t[LA_K], *v = &call->t[LA_V];
  const mx_ktensor *decay = &call->t[LA_DECAY], *beta = &call->t[LA_BETA];
  mx_ktensor *y = mx__kout(call, 0);
  const int64_t dk = d.dk, dv = d.dv, group = d.hq / d.hkv, state_n = d.b * d.hkv * dk * dv;
  char *cur = call->workspace;
  float *state = (float *)cur;
  cur += mx__kalign64((size_t)state_n * sizeof(float));
  float *kt = (float *)cur, *vt = kt + dk;
  cur += mx__kalign64((size_t)(dk + dv + 1) * sizeof(float));
  float *diff = (float *)cur;
  cur += mx__kalign64((size_t)(dk + dv + 1) * sizeof(float));
  float *qt = (float *)cur;
  if (has_in(call, LA_PAST)) {
    const mx_ktensor *past = &call->t[LA_PAST];
    for (int64_t i = 0; i < state_n; i++) state[i] = (float)mx__kget_f64(past->data, past->dtype, i);
  } else {
    memset(state, 0, (size_t)state_n * sizeof(float));
  }
  for (int64_t t = 0; t < d.t; t++)
    for (int64_t b = 0; b < d.b; b++) {
      const int64_t row = b * d.t + t;
      for (int64_t h = 0; h < d.hkv; h++) {
        float *s = state + (b * d.hkv + h) * dk * dv;
        for (int64_t i = 0; i < dk; i++)
          kt[i] = (float)mx__kget_f64(k->data, k->dtype, (row * d.hkv + h) * dk + i);
        for (int64_t j = 0; j < dv; j++)
          vt[j] = (float)mx__kget_f64(v->data, v->dtype, (row * d.hkv + h) * dv + j);
        if (gated) {
          /* Decay in log space, per d_k row of the state (or one value per head). */
          for (int64_t i = 0; i < dk; i++) {
            int64_t at = d.decay_per_head ? row * d.hkv + h : (row * d.hkv + h) * dk + i;
            float e = expf((float)mx__kget_f64(decay->data, decay->dtype, at));
            for (int64_t j = 0; j < dv; j++) s[i * dv + j] *= e;
          }
        }
        if (delta) {
          float bt = (float)mx__kget_f64(beta->data, beta->dtype, d.beta_per_head ? row * d.hkv + h : row);
          /* What the state recalls for this key, and the correction toward v. */
          for (int64_t j = 0; j < dv; j++) diff[j] = 0.0f;
          for (int64_t i = 0; i < dk; i++)
            for (int64_t j = 0; j < dv; j++) diff[j] += s[i * dv + j] * kt[i];
          for (int64_t j = 0; j < dv; j++) diff[j] = bt * (vt[j] - diff[j]);
          for (int64_t i = 0; i < dk; i++)
            for (int64_t j = 0; j < dv; j++) s[i * dv + j] += kt[i] * diff[j];
        } else {
          for (int64_t i = 0; i < dk; i++)
            for (int64_t j = 0; j < dv; j++) s[i * dv + j] += kt[i] * vt[j];
        }
        /* The query heads of this group read the updated state. */
        for (int64_t gq = 0; gq < group; gq++) {
          int64_t hq = h * group + gq;
          for (int64_t i = 0; i < dk; i++)
            qt[i] = (float)mx__kget_f64(q->data, q->dtype, (row * d.hq + hq) * dk + i);
          for (int64_t j = 0; j < dv; j++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < dk; i++) acc += qt[i] * s[i * dv + j];
            mx__kset_f64(y->data, y->dtype, (row * d.hq + hq) * dv + j, scale * acc);
          }
        }
      }
    }
  if (has_out(call, 1)) {
    mx_ktensor *present = mx__kout(call, 1);
    for (int64_t i = 0; i < state_n; i++) mx__kset_f64(present->data, present->dtype, i, state[i]);
  }
  return MX_OK;
}

/* --- FlexAttention ------------------------------------------------------------------------------ */

typedef struct flex_dims {
  int64_t b, hq, hkv, l, s, e, ev;
} flex_dims;

static mx_status flex_make_dims(const mx_kernel_call *call, flex_dims *d, const char **why) {
  const mx_ktensor *q = &call->t[0], *k = &call->t[1], *v = &call->t[2];
  if (q->rank != 4 || k->rank != 4 || v->rank != 4 || k->dims[0] != q->dims[0] || v->dims[0] != q->dims[0] ||
      k->dims[3] != q->dims[3] || v->dims[2] != k->dims[2] || v->dims[1] != k->dims[1] || k->dims[1] == 0 ||
      q->dims[1] % k->dims[1] != 0) {
    *why = "FlexAttention: Q, K, V must be 4-D with matching batch, head size and grouped heads";
    return MX_ERR_KERNEL;
  }
  d->b = q->dims[0], d->hq = q->dims[1], d->l = q->dims[2], d->e = q->dims[3];
  d->hkv = k->dims[1], d->s = k->dims[2], d->ev = v->dims[3];
  return MX_OK;
}

static size_t flex_workspace(const mx_kernel_call *call) {
  flex_dims d;
  const char *why;
  if (flex_make_dims(call, &d, &why) != MX_OK) return 0;
  size_t n = (size_t)(d.l * d.e + d.s * d.e + d.s * d.ev + d.l * d.s + d.l * d.ev);
  return mx__kalign64((n + 1) * sizeof(double));
}

static mx_status flex_run(mx_kernel_call *call) {
  const mx_flex_attention_params *p = call->params;
  flex_dims d;
  mx_status st = flex_make_dims(call, &d, &call->why);
  if (st != MX_OK) return st;
  if (p->mods) {
    call->why = "FlexAttention: the score_mod / prob_mod subgraphs run in the reference interpreter only";
    return MX_ERR_KERNEL;
  }
  mx__kblas_init();
  const mx_ktensor *q = &call->t[0], *k = &call->t[1], *v = &call->t[2];
  mx_ktensor *y = mx__kout(call, 0);
  const double scale = p->has_scale ? (double)p->scale : 1.0 / sqrt((double)d.e);
  double *qb = call->workspace, *kb = qb + d.l * d.e, *vb = kb + d.s * d.e, *sc = vb + d.s * d.ev,
         *yb = sc + d.l * d.s;
  const int64_t group = d.hq / d.hkv;
  for (int64_t b = 0; b < d.b; b++)
    for (int64_t h = 0; h < d.hq; h++) {
      int64_t kvh = h / group;
      int64_t qo = (b * d.hq + h) * d.l * d.e, ko = (b * d.hkv + kvh) * d.s * d.e,
              vo = (b * d.hkv + kvh) * d.s * d.ev;
      for (int64_t i = 0; i < d.l * d.e; i++) qb[i] = mx__kget_f64(q->data, q->dtype, qo + i);
      for (int64_t i = 0; i < d.s * d.e; i++) kb[i] = mx__kget_f64(k->data, k->dtype, ko + i);
      for (int64_t i = 0; i < d.s * d.ev; i++) vb[i] = mx__kget_f64(v->data, v->dtype, vo + i);
      if (d.l > 0 && d.s > 0 && d.e > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d.l, (int)d.s, (int)d.e, scale, qb,
                    (int)d.e, kb, (int)d.e, 0.0, sc, (int)d.s);
      else
        memset(sc, 0, (size_t)(d.l * d.s) * sizeof(double));
      for (int64_t i = 0; i < d.l; i++) {
        double *row = sc + i * d.s, m = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < d.s; j++) m = row[j] > m ? row[j] : m;
        for (int64_t j = 0; j < d.s; j++) sum += row[j] = exp(row[j] - m);
        for (int64_t j = 0; j < d.s; j++) row[j] /= sum;
      }
      if (d.l > 0 && d.ev > 0 && d.s > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d.l, (int)d.ev, (int)d.s, 1.0, sc,
                    (int)d.s, vb, (int)d.ev, 0.0, yb, (int)d.ev);
      else
        memset(yb, 0, (size_t)(d.l * d.ev) * sizeof(double));
      int64_t yo = (b * d.hq + h) * d.l * d.ev;
      for (int64_t i = 0; i < d.l * d.ev; i++) mx__kset_f64(y->data, y->dtype, yo + i, yb[i]);
    }
  return MX_OK;
}

/* --- CausalConvWithState ------------------------------------------------------------------------ */

static mx_status causal_conv_run(mx_kernel_call *call) {
  const mx_causal_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *w = &call->t[1];
  const mx_ktensor *bias = has_in(call, 2) ? &call->t[2] : NULL, *past = has_in(call, 3) ? &call->t[3] : NULL;
  mx_ktensor *y = mx__kout(call, 0);
  mx_ktensor *present = has_out(call, 1) ? mx__kout(call, 1) : NULL;
  if (x->rank != 3 || w->rank != 3) {
    call->why = "CausalConvWithState: input and weight must be 3-D";
    return MX_ERR_KERNEL;
  }
  const int64_t nb = x->dims[0], nc = x->dims[1], len = x->dims[2], kk = w->dims[2], keep = kk - 1;
  if (w->dims[0] != nc || w->dims[1] != 1 || kk < 1 || (bias && mx__ktensor_numel(bias) != nc) ||
      (past && mx__ktensor_numel(past) != nb * nc * keep) ||
      (present && mx__ktensor_numel(present) != nb * nc * keep)) {
    call->why = "CausalConvWithState: weight, bias or state do not match the input";
    return MX_ERR_KERNEL;
  }
  for (int64_t b = 0; b < nb; b++)
    for (int64_t c = 0; c < nc; c++) {
      const int64_t xo = (b * nc + c) * len, so = (b * nc + c) * keep;
      /* Position p of the virtual input: the carried state, then this call's input. */
#define PADDED(pos)                                                                \
  ((pos) < keep ? (past ? mx__kget_f64(past->data, past->dtype, so + (pos)) : 0.0) \
                : mx__kget_f64(x->data, x->dtype, xo + (pos)-keep))
      double bc = bias ? mx__kget_f64(bias->data, bias->dtype, c) : 0.0;
      for (int64_t t = 0; t < len; t++) {
        double acc = bc;
        for (int64_t j = 0; j < kk; j++) acc += mx__kget_f64(w->data, w->dtype, c * kk + j) * PADDED(t + j);
        mx__kset_f64(y->data, y->dtype, xo + t, p->silu ? silu(acc) : acc);
      }
      if (present)
        for (int64_t j = 0; j < keep; j++)
          mx__kset_f64(present->data, present->dtype, so + j, PADDED(len + j));
#undef PADDED
    }
  return MX_OK;
}

static const mx_kernel_def k_swiglu = {.op = "SwiGLU", .dtypes = MX_KDT_FLOATS, .key = 0, .run = swiglu_run};
static const mx_kernel_def k_linatt = {
    .op = "LinearAttention", .dtypes = MX_KDT_FLOATS, .key = 0, .run = la_run, .workspace = la_workspace};
static const mx_kernel_def k_flex = {.op = "FlexAttention",
                                     .domain = "ai.onnx.preview",
                                     .dtypes = MX_KDT_FLOATS,
                                     .key = 0,
                                     .run = flex_run,
                                     .workspace = flex_workspace};
static const mx_kernel_def k_causal_conv = {
    .op = "CausalConvWithState", .dtypes = MX_KDT_FLOATS, .key = 0, .run = causal_conv_run};

const mx_kernel_def *const mx__kernels_llm[] = {
    &k_swiglu, &k_linatt, &k_flex, &k_causal_conv, NULL,
};
