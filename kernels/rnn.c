/* CPU kernels of the recurrent layers group: RNN, GRU and LSTM.
 *
 * One kernel serves the three ops. Per direction, the input projection of every time step is
 * one GEMM (X * W^T over all seq_length * batch rows, biases folded in once); each step then
 * runs one GEMM of the hidden state against R^T for the whole batch and an elementwise pass
 * over the gates. sequence_lens is honoured per batch row: a row stops updating after its
 * length (its Y rows stay zero), and the reverse direction starts at the row's own last step.
 *
 * Everything computes in float32 through OpenBLAS: float16, bfloat16 and float64 inputs are
 * converted into the workspace and the outputs converted back once. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "graph/ops/rnn-params.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"
#include "kernels/kutil.h"
#include "kernels/linalg-impl.h"

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ, IN_H0, IN_C0, IN_P, IN_COUNT };

/* The sizes of one call. */
typedef struct rnn_dims {
  int64_t seq, batch, in, hidden, nd, gates;
} rnn_dims;

static bool has_in(const mx_kernel_call *call, uint32_t i) {
  return i < call->n_in && call->t[i].dtype != MX_DTYPE_UNDEFINED;
}
static bool has_out(const mx_kernel_call *call, uint32_t i) {
  return i < call->n_out && call->t[call->n_in + i].dtype != MX_DTYPE_UNDEFINED;
}

static mx_status rnn_make_dims(const mx_kernel_call *call, rnn_dims *d, const char **why) {
  const mx_rnn_params *p = call->params;
  const mx_ktensor *x = &call->t[IN_X], *w = &call->t[IN_W], *r = &call->t[IN_R];
  d->gates = p->kind == MX_RNN_SIMPLE ? 1 : p->kind == MX_RNN_GRU ? 3 : 4;
  d->nd = p->direction == MX_RNN_BIDIRECTIONAL ? 2 : 1;
  if (x->rank != 3 || w->rank != 3 || r->rank != 3) {
    *why = "recurrent layer: X, W and R must be 3-D";
    return MX_ERR_KERNEL;
  }
  d->seq = x->dims[p->layout ? 1 : 0];
  d->batch = x->dims[p->layout ? 0 : 1];
  d->in = x->dims[2];
  d->hidden = r->dims[2];
  if ((p->hidden_size > 0 && p->hidden_size != d->hidden) || w->dims[0] != d->nd || r->dims[0] != d->nd ||
      w->dims[1] != d->gates * d->hidden || r->dims[1] != d->gates * d->hidden || w->dims[2] != d->in) {
    *why = "recurrent layer: W or R does not match X, hidden_size and direction";
    return MX_ERR_KERNEL;
  }
  const mx_ktensor *b = &call->t[IN_B];
  if (has_in(call, IN_B) && mx__ktensor_numel(b) != d->nd * 2 * d->gates * d->hidden) {
    *why = "recurrent layer: B must be [num_directions, 2 * gates * hidden_size]";
    return MX_ERR_KERNEL;
  }
  if (has_in(call, IN_SEQ) && mx__ktensor_numel(&call->t[IN_SEQ]) != d->batch) {
    *why = "recurrent layer: sequence_lens must have one entry per batch row";
    return MX_ERR_KERNEL;
  }
  for (uint32_t i = IN_H0; i <= IN_C0; i++)
    if (has_in(call, i) && mx__ktensor_numel(&call->t[i]) != d->nd * d->batch * d->hidden) {
      *why = "recurrent layer: initial_h / initial_c must be [num_directions, batch, hidden_size]";
      return MX_ERR_KERNEL;
    }
  if (has_in(call, IN_P) && mx__ktensor_numel(&call->t[IN_P]) != d->nd * 3 * d->hidden) {
    *why = "LSTM: P must be [num_directions, 3 * hidden_size]";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

/* --- workspace ---------------------------------------------------------------------------------- */

/* Bytes of a float copy of input i when it is not float32 already. */
static size_t conv_bytes(const mx_kernel_call *call, uint32_t i) {
  if (!has_in(call, i) || call->t[i].dtype == MX_FLOAT32) return 0;
  return mx__kalign64((size_t)mx__ktensor_numel(&call->t[i]) * sizeof(float));
}
static size_t out_bytes(const mx_kernel_call *call, uint32_t i) {
  const mx_ktensor *t = &call->t[call->n_in + i];
  if (!has_out(call, i) || t->dtype == MX_FLOAT32) return 0;
  return mx__kalign64((size_t)mx__ktensor_numel(t) * sizeof(float));
}

/* Scratch of the recurrence itself: input projections, hidden projections, states. */
static size_t core_bytes(const rnn_dims *d) {
  size_t gh = (size_t)(d->gates * d->hidden);
  return mx__kalign64((size_t)(d->seq * d->batch) * gh * 4) + mx__kalign64((size_t)d->batch * gh * 4) +
         4 * mx__kalign64((size_t)(d->batch * d->hidden) * 4);
}

static size_t rnn_workspace(const mx_kernel_call *call) {
  rnn_dims d;
  const char *why;
  if (rnn_make_dims(call, &d, &why) != MX_OK) return 0;
  size_t n = core_bytes(&d);
  for (uint32_t i = 0; i < IN_COUNT; i++)
    if (i != IN_SEQ) n += conv_bytes(call, i);
  for (uint32_t i = 0; i < 3; i++) n += out_bytes(call, i);
  return n;
}

/* Carves n bytes off the workspace cursor. */
static void *carve(char **cur, size_t n) {
  void *p = *cur;
  *cur += n;
  return p;
}

/* Input i as float32: its own data, or a converted copy in the workspace. */
static const float *in_f32(mx_kernel_call *call, uint32_t i, char **cur) {
  if (!has_in(call, i)) return NULL;
  const mx_ktensor *t = &call->t[i];
  if (t->dtype == MX_FLOAT32) return t->data;
  int64_t n = mx__ktensor_numel(t);
  float *dst = carve(cur, conv_bytes(call, i));
  if (t->dtype == MX_FLOAT16 || t->dtype == MX_BFLOAT16)
    mx__khalf_to_f32(t->data, t->dtype, dst, n);
  else
    for (int64_t k = 0; k < n; k++) dst[k] = (float)mx__kget_f64(t->data, t->dtype, k);
  return dst;
}

/* Output i as a float32 buffer: its own data, or workspace to convert from at the end. */
static float *out_f32(mx_kernel_call *call, uint32_t i, char **cur) {
  if (!has_out(call, i)) return NULL;
  mx_ktensor *t = mx__kout(call, i);
  if (t->dtype == MX_FLOAT32) return t->data;
  return carve(cur, out_bytes(call, i));
}

static void out_store(mx_kernel_call *call, uint32_t i, const float *src) {
  if (!src) return;
  mx_ktensor *t = mx__kout(call, i);
  if (t->dtype == MX_FLOAT32) return;
  int64_t n = mx__ktensor_numel(t);
  if (t->dtype == MX_FLOAT16 || t->dtype == MX_BFLOAT16)
    mx__kf32_to_half(src, t->dtype, t->data, n);
  else
    for (int64_t k = 0; k < n; k++) mx__kset_f64(t->data, t->dtype, k, src[k]);
}

/* --- activations -------------------------------------------------------------------------------- */

static inline float act_apply(int32_t code, float alpha, float beta, float x) {
  switch (code) {
    case MX_RNN_ACT_SIGMOID: return mx__ksigmoidf(x);
    case MX_RNN_ACT_TANH: return mx__ktanhf(x);
    case MX_RNN_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case MX_RNN_ACT_AFFINE: return alpha * x + beta;
    case MX_RNN_ACT_LEAKY_RELU: return x >= 0.0f ? x : alpha * x;
    case MX_RNN_ACT_THRESHOLDED_RELU: return x > alpha ? x : 0.0f;
    case MX_RNN_ACT_SCALED_TANH: return alpha * mx__ktanhf(beta * x);
    case MX_RNN_ACT_HARD_SIGMOID: {
      float v = alpha * x + beta;
      return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    }
    case MX_RNN_ACT_ELU: return x >= 0.0f ? x : alpha * (expf(x) - 1.0f);
    case MX_RNN_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case MX_RNN_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    default: return x;
  }
}

/* One activation slot of a direction. */
typedef struct act_fn {
  int32_t code;
  float alpha, beta;
} act_fn;

/* --- the recurrence ----------------------------------------------------------------------------- */

typedef struct rnn_run {
  const mx_rnn_params *p;
  rnn_dims d;
  const float *x, *w, *r, *b, *h0, *c0, *peep;
  const int32_t *seq_lens;
  float *y, *yh, *yc;
  float *xw;      /* [seq * batch, gates * hidden] input projections plus biases */
  float *hr;      /* [batch, gates * hidden] hidden projections of one step */
  float *h, *c;   /* [batch, hidden] states */
  float *tmp;     /* [batch, hidden] GRU: r * H_prev, then its projection */
  float *tmp2;
} rnn_run;

static inline float clip_to(const mx_rnn_params *p, float v) {
  if (!p->has_clip) return v;
  return v < -p->clip ? -p->clip : v > p->clip ? p->clip : v;
}

/* Row of X (and of xw) holding time step t of batch row b. */
static inline int64_t x_row(const rnn_run *k, int64_t t, int64_t b) {
  return k->p->layout ? b * k->d.seq + t : t * k->d.batch + b;
}
/* Offset of Y's [t, dir, b] hidden vector. */
static inline int64_t y_off(const rnn_run *k, int64_t t, int64_t dir, int64_t b) {
  const rnn_dims *d = &k->d;
  return (k->p->layout ? (b * d->seq + t) * d->nd + dir : (t * d->nd + dir) * d->batch + b) * d->hidden;
}
/* Offset of the [dir, b] vector of initial_h / Y_h / Y_c. */
static inline int64_t state_off(const rnn_run *k, int64_t dir, int64_t b) {
  const rnn_dims *d = &k->d;
  return (k->p->layout ? b * d->nd + dir : dir * d->batch + b) * d->hidden;
}

/* The length of batch row b (clamped to seq_length). */
static inline int64_t row_len(const rnn_run *k, int64_t b) {
  if (!k->seq_lens) return k->d.seq;
  int64_t n = k->seq_lens[b];
  return n < 0 ? 0 : n > k->d.seq ? k->d.seq : n;
}

static void run_direction(rnn_run *k, int64_t dir, bool reverse) {
  const mx_rnn_params *p = k->p;
  const rnn_dims *d = &k->d;
  const int64_t H = d->hidden, GH = d->gates * H, B = d->batch;
  const float *w = k->w + dir * GH * d->in, *r = k->r + dir * GH * H;
  const float *wb = k->b ? k->b + dir * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
  const float *peep = k->peep ? k->peep + dir * 3 * H : NULL;
  act_fn f = {p->act[dir][0], p->alpha[dir][0], p->beta[dir][0]};
  act_fn g = {p->act[dir][1], p->alpha[dir][1], p->beta[dir][1]};
  act_fn hf = {p->act[dir][2], p->alpha[dir][2], p->beta[dir][2]};
  const bool gru = p->kind == MX_RNN_GRU, lstm = p->kind == MX_RNN_LSTM;
  const bool lbr = gru && p->linear_before_reset;

  /* Input projections of every step, biases folded in (except GRU's Rb_h under
   * linear_before_reset, which the reset gate scales). */
  int64_t rows = d->seq * B;
  if (rows > 0 && d->in > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)GH, (int)d->in, 1.0f, k->x, (int)d->in, w,
                (int)d->in, 0.0f, k->xw, (int)GH);
  else
    memset(k->xw, 0, (size_t)(rows * GH) * sizeof(float));
  if (wb) {
    for (int64_t i = 0; i < rows; i++) {
      float *row = k->xw + i * GH;
      for (int64_t j = 0; j < GH; j++) row[j] += wb[j] + (lbr && j >= 2 * H ? 0.0f : rb[j]);
    }
  }

  for (int64_t b = 0; b < B; b++) {
    int64_t so = state_off(k, dir, b);
    for (int64_t j = 0; j < H; j++) {
      k->h[b * H + j] = k->h0 ? k->h0[so + j] : 0.0f;
      k->c[b * H + j] = k->c0 ? k->c0[so + j] : 0.0f;
    }
  }

  /* GRU without linear_before_reset projects r * H_prev separately: only the z and r rows
   * of R go into the step's first GEMM. */
  const int64_t n_hr = gru && !lbr ? 2 * H : GH;
  for (int64_t s = 0; s < d->seq; s++) {
    if (H > 0 && B > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)n_hr, (int)H, 1.0f, k->h, (int)H, r, (int)H,
                  0.0f, k->hr, (int)GH);
    if (gru && !lbr) {
      /* Phase 1: z into hr's z slot, r * H_prev into tmp. */
      for (int64_t b = 0; b < B; b++) {
        int64_t len = row_len(k, b);
        if (s >= len) continue;
        int64_t t = reverse ? len - 1 - s : s;
        const float *xw = k->xw + x_row(k, t, b) * GH;
        float *hr = k->hr + b * GH;
        for (int64_t j = 0; j < H; j++) {
          hr[j] = act_apply(f.code, f.alpha, f.beta, clip_to(p, xw[j] + hr[j]));
          float rg = act_apply(f.code, f.alpha, f.beta, clip_to(p, xw[H + j] + hr[H + j]));
          k->tmp[b * H + j] = rg * k->h[b * H + j];
        }
      }
      if (H > 0 && B > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)H, (int)H, 1.0f, k->tmp, (int)H,
                    r + 2 * H * H, (int)H, 0.0f, k->tmp2, (int)H);
    }
    for (int64_t b = 0; b < B; b++) {
      int64_t len = row_len(k, b);
      if (s >= len) continue;
      int64_t t = reverse ? len - 1 - s : s;
      const float *xw = k->xw + x_row(k, t, b) * GH;
      float *hr = k->hr + b * GH;
      float *h = k->h + b * H, *c = k->c + b * H;
      if (p->kind == MX_RNN_SIMPLE) {
        for (int64_t j = 0; j < H; j++) h[j] = act_apply(f.code, f.alpha, f.beta, clip_to(p, xw[j] + hr[j]));
      } else if (gru) {
        for (int64_t j = 0; j < H; j++) {
          float z, hh;
          if (lbr) {
            z = act_apply(f.code, f.alpha, f.beta, clip_to(p, xw[j] + hr[j]));
            float rg = act_apply(f.code, f.alpha, f.beta, clip_to(p, xw[H + j] + hr[H + j]));
            float rec = hr[2 * H + j] + (rb ? rb[2 * H + j] : 0.0f);
            hh = act_apply(g.code, g.alpha, g.beta, clip_to(p, xw[2 * H + j] + rg * rec));
          } else {
            z = hr[j];
            hh = act_apply(g.code, g.alpha, g.beta, clip_to(p, xw[2 * H + j] + k->tmp2[b * H + j]));
          }
          h[j] = (1.0f - z) * hh + z * h[j];
        }
      } else if (lstm) {
        /* Gate order i, o, f, c; peepholes i, o, f. */
        for (int64_t j = 0; j < H; j++) {
          float cp = c[j];
          float gi = xw[j] + hr[j] + (peep ? peep[j] * cp : 0.0f);
          float gf = xw[2 * H + j] + hr[2 * H + j] + (peep ? peep[2 * H + j] * cp : 0.0f);
          float gc = xw[3 * H + j] + hr[3 * H + j];
          float it = act_apply(f.code, f.alpha, f.beta, clip_to(p, gi));
          float ft = p->input_forget ? 1.0f - it : act_apply(f.code, f.alpha, f.beta, clip_to(p, gf));
          float ct = act_apply(g.code, g.alpha, g.beta, clip_to(p, gc));
          float cn = ft * cp + it * ct;
          float go = xw[H + j] + hr[H + j] + (peep ? peep[H + j] * cn : 0.0f);
          float ot = act_apply(f.code, f.alpha, f.beta, clip_to(p, go));
          c[j] = cn;
          h[j] = ot * act_apply(hf.code, hf.alpha, hf.beta, cn);
        }
      }
      if (k->y) memcpy(k->y + y_off(k, t, dir, b), h, (size_t)H * sizeof(float));
    }
  }
  for (int64_t b = 0; b < B; b++) {
    int64_t so = state_off(k, dir, b);
    if (k->yh) memcpy(k->yh + so, k->h + b * H, (size_t)H * sizeof(float));
    if (k->yc) memcpy(k->yc + so, k->c + b * H, (size_t)H * sizeof(float));
  }
}

static mx_status rnn_exec(mx_kernel_call *call) {
  const mx_rnn_params *p = call->params;
  rnn_run k;
  memset(&k, 0, sizeof k);
  k.p = p;
  mx_status st = rnn_make_dims(call, &k.d, &call->why);
  if (st != MX_OK) return st;
  if (has_in(call, IN_SEQ) && call->t[IN_SEQ].dtype != MX_INT32) {
    call->why = "recurrent layer: sequence_lens must be int32";
    return MX_ERR_KERNEL;
  }
  mx__kblas_init();
  const rnn_dims *d = &k.d;
  char *cur = call->workspace;
  size_t gh = (size_t)(d->gates * d->hidden), bh = (size_t)(d->batch * d->hidden);
  k.xw = carve(&cur, mx__kalign64((size_t)(d->seq * d->batch) * gh * 4));
  k.hr = carve(&cur, mx__kalign64((size_t)d->batch * gh * 4));
  k.h = carve(&cur, mx__kalign64(bh * 4));
  k.c = carve(&cur, mx__kalign64(bh * 4));
  k.tmp = carve(&cur, mx__kalign64(bh * 4));
  k.tmp2 = carve(&cur, mx__kalign64(bh * 4));
  k.x = in_f32(call, IN_X, &cur);
  k.w = in_f32(call, IN_W, &cur);
  k.r = in_f32(call, IN_R, &cur);
  k.b = in_f32(call, IN_B, &cur);
  k.h0 = in_f32(call, IN_H0, &cur);
  k.c0 = p->kind == MX_RNN_LSTM ? in_f32(call, IN_C0, &cur) : NULL;
  k.peep = p->kind == MX_RNN_LSTM ? in_f32(call, IN_P, &cur) : NULL;
  k.seq_lens = has_in(call, IN_SEQ) ? call->t[IN_SEQ].data : NULL;
  k.y = out_f32(call, 0, &cur);
  k.yh = out_f32(call, 1, &cur);
  k.yc = p->kind == MX_RNN_LSTM ? out_f32(call, 2, &cur) : NULL;
  if (k.y) memset(k.y, 0, (size_t)(d->seq * d->nd * bh) * sizeof(float));
  run_direction(&k, 0, p->direction == MX_RNN_REVERSE);
  if (d->nd == 2) run_direction(&k, 1, true);
  out_store(call, 0, k.y);
  out_store(call, 1, k.yh);
  out_store(call, 2, k.yc);
  return MX_OK;
}

static const mx_kernel_def k_rnn = {
    .op = "RNN", .dtypes = MX_KDT_FLOATS, .key = 0, .run = rnn_exec, .workspace = rnn_workspace};
static const mx_kernel_def k_gru = {
    .op = "GRU", .dtypes = MX_KDT_FLOATS, .key = 0, .run = rnn_exec, .workspace = rnn_workspace};
static const mx_kernel_def k_lstm = {
    .op = "LSTM", .dtypes = MX_KDT_FLOATS, .key = 0, .run = rnn_exec, .workspace = rnn_workspace};

const mx_kernel_def *const mx__kernels_rnn[] = {
    &k_rnn, &k_gru, &k_lstm, NULL,
};
