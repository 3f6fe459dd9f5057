/* CPU kernels of the recurrent layers group: RNN, GRU and LSTM.
 *
 * One kernel serves the three ops. Per direction, the input projection of every time step is
 * one GEMM (X * W^T over all seq_length * batch rows, biases folded in once); each step then
 * runs one GEMM of the hidden state against R^T for the whole batch and an elementwise pass
 * over the gates. sequence_lens is honoured per batch row: a row stops updating after its
 * length (its Y rows stay zero), and the reverse direction starts at the row's own last step.
 *
 * float32 layers compute in float32 and float64 layers in double (sgemm / dgemm); float16 and
 * bfloat16 inputs are converted to float32 in the workspace and the outputs rounded once. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "graph/ops/rnn_params.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

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

/* The compute type: double for float64 layers, float32 for the others. */
static bool compute_f64(const mx_kernel_call *call) { return call->t[IN_X].dtype == MX_FLOAT64; }
static size_t elem_size(const mx_kernel_call *call) {
  return compute_f64(call) ? sizeof(double) : sizeof(float);
}

/* Bytes of a compute-type copy of tensor t when its own data cannot be used as it is. */
static size_t copy_bytes(const mx_kernel_call *call, const mx_ktensor *t) {
  if (t->dtype == (compute_f64(call) ? MX_FLOAT64 : MX_FLOAT32)) return 0;
  return mx__kalign64((size_t)mx__ktensor_numel(t) * elem_size(call));
}
static size_t conv_bytes(const mx_kernel_call *call, uint32_t i) {
  return has_in(call, i) ? copy_bytes(call, &call->t[i]) : 0;
}
static size_t out_bytes(const mx_kernel_call *call, uint32_t i) {
  return has_out(call, i) ? copy_bytes(call, &call->t[call->n_in + i]) : 0;
}

/* Scratch of the recurrence itself: input projections, hidden projections, states. */
static size_t core_bytes(const mx_kernel_call *call, const rnn_dims *d) {
  size_t gh = (size_t)(d->gates * d->hidden), es = elem_size(call);
  return mx__kalign64((size_t)(d->seq * d->batch) * gh * es) + mx__kalign64((size_t)d->batch * gh * es) +
         4 * mx__kalign64((size_t)(d->batch * d->hidden) * es);
}

static size_t rnn_workspace(const mx_kernel_call *call) {
  rnn_dims d;
  const char *why;
  if (rnn_make_dims(call, &d, &why) != MX_OK) return 0;
  size_t n = core_bytes(call, &d);
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

/* Input i in the compute type: its own data, or a converted copy in the workspace. */
static const void *in_real(mx_kernel_call *call, uint32_t i, char **cur) {
  if (!has_in(call, i)) return NULL;
  const mx_ktensor *t = &call->t[i];
  size_t bytes = copy_bytes(call, t);
  if (bytes == 0) return t->data;
  int64_t n = mx__ktensor_numel(t);
  void *dst = carve(cur, bytes);
  if (!compute_f64(call) && (t->dtype == MX_FLOAT16 || t->dtype == MX_BFLOAT16))
    mx__khalf_to_f32(t->data, t->dtype, dst, n);
  else
    for (int64_t k = 0; k < n; k++)
      mx__kset_f64(dst, compute_f64(call) ? MX_FLOAT64 : MX_FLOAT32, k, mx__kget_f64(t->data, t->dtype, k));
  return dst;
}

/* Output i as a compute-type buffer: its own data, or workspace to convert from at the end. */
static void *out_real(mx_kernel_call *call, uint32_t i, char **cur) {
  if (!has_out(call, i)) return NULL;
  mx_ktensor *t = mx__kout(call, i);
  size_t bytes = copy_bytes(call, t);
  return bytes == 0 ? t->data : carve(cur, bytes);
}

static void out_store(mx_kernel_call *call, uint32_t i, const void *src) {
  if (!src) return;
  mx_ktensor *t = mx__kout(call, i);
  if (src == t->data) return;
  int64_t n = mx__ktensor_numel(t);
  mx_dtype cdt = compute_f64(call) ? MX_FLOAT64 : MX_FLOAT32;
  if (cdt == MX_FLOAT32 && (t->dtype == MX_FLOAT16 || t->dtype == MX_BFLOAT16))
    mx__kf32_to_half(src, t->dtype, t->data, n);
  else
    for (int64_t k = 0; k < n; k++) mx__kset_f64(t->data, t->dtype, k, mx__kget_f64(src, cdt, k));
}

/* --- activations -------------------------------------------------------------------------------- */

static inline float act_f32(int32_t code, float alpha, float beta, float x) {
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

static inline double act_f64(int32_t code, double alpha, double beta, double x) {
  switch (code) {
    case MX_RNN_ACT_SIGMOID: return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case MX_RNN_ACT_TANH: return tanh(x);
    case MX_RNN_ACT_RELU: return x > 0.0 ? x : 0.0;
    case MX_RNN_ACT_AFFINE: return alpha * x + beta;
    case MX_RNN_ACT_LEAKY_RELU: return x >= 0.0 ? x : alpha * x;
    case MX_RNN_ACT_THRESHOLDED_RELU: return x > alpha ? x : 0.0;
    case MX_RNN_ACT_SCALED_TANH: return alpha * tanh(beta * x);
    case MX_RNN_ACT_HARD_SIGMOID: {
      double v = alpha * x + beta;
      return v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v;
    }
    case MX_RNN_ACT_ELU: return x >= 0.0 ? x : alpha * expm1(x);
    case MX_RNN_ACT_SOFTSIGN: return x / (1.0 + fabs(x));
    case MX_RNN_ACT_SOFTPLUS: return x > 40.0 ? x : log1p(exp(x));
    default: return x;
  }
}

/* One activation slot of a direction. */
typedef struct act_fn {
  int32_t code;
  float alpha, beta;
} act_fn;

/* --- the recurrence ----------------------------------------------------------------------------- */

/* Buffers are in the compute type (float or double, f64 says which); the elementwise code
 * reads and writes them through ld / st, whose branch is the same for a whole call. */
typedef struct rnn_run {
  const mx_rnn_params *p;
  rnn_dims d;
  bool f64;
  const void *x, *w, *r, *b, *h0, *c0, *peep;
  const int32_t *seq_lens;
  void *y, *yh, *yc;
  void *xw;    /* [seq * batch, gates * hidden] input projections plus biases */
  void *hr;    /* [batch, gates * hidden] hidden projections of one step */
  void *h, *c; /* [batch, hidden] states */
  void *tmp;   /* [batch, hidden] GRU: r * H_prev */
  void *tmp2;  /* [batch, hidden] GRU: its projection */
} rnn_run;

static inline double ld(const rnn_run *k, const void *p, int64_t i) {
  return k->f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}
static inline void st(const rnn_run *k, void *p, int64_t i, double v) {
  if (k->f64)
    ((double *)p)[i] = v;
  else
    ((float *)p)[i] = (float)v;
}
static inline void *at(const rnn_run *k, const void *p, int64_t i) {
  return (char *)p + (size_t)i * (k->f64 ? sizeof(double) : sizeof(float));
}
static inline double act(const rnn_run *k, const act_fn *a, double x) {
  if (k->p->has_clip) x = x < -k->p->clip ? -k->p->clip : x > k->p->clip ? k->p->clip : x;
  return k->f64 ? act_f64(a->code, a->alpha, a->beta, x)
                : (double)act_f32(a->code, a->alpha, a->beta, (float)x);
}

/* C[M, N] = A[M, K] * B[N, K]^T (row-major, leading dims given). */
static void gemm_nt(const rnn_run *k, int64_t m, int64_t n, int64_t kk, const void *a, int64_t lda,
                    const void *b, int64_t ldb, void *c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (kk <= 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) st(k, c, i * ldc + j, 0.0);
    return;
  }
  if (k->f64)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)kk, 1.0, a, (int)lda, b,
                (int)ldb, 0.0, c, (int)ldc);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)kk, 1.0f, a, (int)lda, b,
                (int)ldb, 0.0f, c, (int)ldc);
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
  const void *w = at(k, k->w, dir * GH * d->in), *r = at(k, k->r, dir * GH * H);
  const void *wb = k->b ? at(k, k->b, dir * 2 * GH) : NULL, *rb = wb ? at(k, wb, GH) : NULL;
  const void *peep = k->peep ? at(k, k->peep, dir * 3 * H) : NULL;
  const act_fn f = {p->act[dir][0], p->alpha[dir][0], p->beta[dir][0]};
  const act_fn g = {p->act[dir][1], p->alpha[dir][1], p->beta[dir][1]};
  const act_fn hf = {p->act[dir][2], p->alpha[dir][2], p->beta[dir][2]};
  const bool gru = p->kind == MX_RNN_GRU, lstm = p->kind == MX_RNN_LSTM;
  const bool lbr = gru && p->linear_before_reset;

  /* Input projections of every step, biases folded in (except GRU's Rb_h under
   * linear_before_reset, which the reset gate scales). */
  const int64_t rows = d->seq * B;
  gemm_nt(k, rows, GH, d->in, k->x, d->in, w, d->in, k->xw, GH);
  if (wb)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < GH; j++)
        st(k, k->xw, i * GH + j,
           ld(k, k->xw, i * GH + j) + ld(k, wb, j) + (lbr && j >= 2 * H ? 0.0 : ld(k, rb, j)));

  for (int64_t b = 0; b < B; b++) {
    int64_t so = state_off(k, dir, b);
    for (int64_t j = 0; j < H; j++) {
      st(k, k->h, b * H + j, k->h0 ? ld(k, k->h0, so + j) : 0.0);
      st(k, k->c, b * H + j, k->c0 ? ld(k, k->c0, so + j) : 0.0);
    }
  }

  /* GRU without linear_before_reset projects r * H_prev separately: only the z and r rows
   * of R go into the step's first GEMM. */
  const int64_t n_hr = gru && !lbr ? 2 * H : GH;
  for (int64_t s = 0; s < d->seq; s++) {
    gemm_nt(k, B, n_hr, H, k->h, H, r, H, k->hr, GH);
    if (gru && !lbr) {
      /* Phase 1: z into hr's z slot, r * H_prev into tmp. */
      for (int64_t b = 0; b < B; b++) {
        int64_t len = row_len(k, b);
        if (s >= len) continue;
        int64_t t = reverse ? len - 1 - s : s, xo = x_row(k, t, b) * GH, ho = b * GH;
        for (int64_t j = 0; j < H; j++) {
          st(k, k->hr, ho + j, act(k, &f, ld(k, k->xw, xo + j) + ld(k, k->hr, ho + j)));
          double rg = act(k, &f, ld(k, k->xw, xo + H + j) + ld(k, k->hr, ho + H + j));
          st(k, k->tmp, b * H + j, rg * ld(k, k->h, b * H + j));
        }
      }
      gemm_nt(k, B, H, H, k->tmp, H, at(k, r, 2 * H * H), H, k->tmp2, H);
    }
    for (int64_t b = 0; b < B; b++) {
      int64_t len = row_len(k, b);
      if (s >= len) continue;
      const int64_t t = reverse ? len - 1 - s : s, xo = x_row(k, t, b) * GH, ho = b * GH, so = b * H;
#define XW(j) ld(k, k->xw, xo + (j))
#define HR(j) ld(k, k->hr, ho + (j))
      if (p->kind == MX_RNN_SIMPLE) {
        for (int64_t j = 0; j < H; j++) st(k, k->h, so + j, act(k, &f, XW(j) + HR(j)));
      } else if (gru) {
        for (int64_t j = 0; j < H; j++) {
          double z, hh;
          if (lbr) {
            z = act(k, &f, XW(j) + HR(j));
            double rg = act(k, &f, XW(H + j) + HR(H + j));
            double rec = HR(2 * H + j) + (rb ? ld(k, rb, 2 * H + j) : 0.0);
            hh = act(k, &g, XW(2 * H + j) + rg * rec);
          } else {
            z = HR(j);
            hh = act(k, &g, XW(2 * H + j) + ld(k, k->tmp2, so + j));
          }
          st(k, k->h, so + j, (1.0 - z) * hh + z * ld(k, k->h, so + j));
        }
      } else if (lstm) {
        /* Gate order i, o, f, c; peepholes i, o, f. */
        for (int64_t j = 0; j < H; j++) {
          double cp = ld(k, k->c, so + j);
          double it = act(k, &f, XW(j) + HR(j) + (peep ? ld(k, peep, j) * cp : 0.0));
          double ft =
              p->input_forget
                  ? 1.0 - it
                  : act(k, &f, XW(2 * H + j) + HR(2 * H + j) + (peep ? ld(k, peep, 2 * H + j) * cp : 0.0));
          double ct = act(k, &g, XW(3 * H + j) + HR(3 * H + j));
          double cn = ft * cp + it * ct;
          double ot = act(k, &f, XW(H + j) + HR(H + j) + (peep ? ld(k, peep, H + j) * cn : 0.0));
          st(k, k->c, so + j, cn);
          /* h() sees the stored cell state (rounded to the compute type), not clipped. */
          double cs = ld(k, k->c, so + j);
          st(k, k->h, so + j,
             ot * (k->f64 ? act_f64(hf.code, hf.alpha, hf.beta, cs)
                          : (double)act_f32(hf.code, hf.alpha, hf.beta, (float)cs)));
        }
      }
#undef XW
#undef HR
      if (k->y) memcpy(at(k, k->y, y_off(k, t, dir, b)), at(k, k->h, so), (size_t)H * (k->f64 ? 8 : 4));
    }
  }
  for (int64_t b = 0; b < B; b++) {
    int64_t so = state_off(k, dir, b);
    if (k->yh) memcpy(at(k, k->yh, so), at(k, k->h, b * H), (size_t)H * (k->f64 ? 8 : 4));
    if (k->yc) memcpy(at(k, k->yc, so), at(k, k->c, b * H), (size_t)H * (k->f64 ? 8 : 4));
  }
}

static mx_status rnn_exec(mx_kernel_call *call) {
  const mx_rnn_params *p = call->params;
  rnn_run k;
  memset(&k, 0, sizeof k);
  k.p = p;
  k.f64 = compute_f64(call);
  mx_status st = rnn_make_dims(call, &k.d, &call->why);
  if (st != MX_OK) return st;
  if (has_in(call, IN_SEQ) && call->t[IN_SEQ].dtype != MX_INT32) {
    call->why = "recurrent layer: sequence_lens must be int32";
    return MX_ERR_KERNEL;
  }
  mx__kblas_init();
  const rnn_dims *d = &k.d;
  const size_t es = elem_size(call);
  char *cur = call->workspace;
  size_t gh = (size_t)(d->gates * d->hidden), bh = (size_t)(d->batch * d->hidden);
  k.xw = carve(&cur, mx__kalign64((size_t)(d->seq * d->batch) * gh * es));
  k.hr = carve(&cur, mx__kalign64((size_t)d->batch * gh * es));
  k.h = carve(&cur, mx__kalign64(bh * es));
  k.c = carve(&cur, mx__kalign64(bh * es));
  k.tmp = carve(&cur, mx__kalign64(bh * es));
  k.tmp2 = carve(&cur, mx__kalign64(bh * es));
  k.x = in_real(call, IN_X, &cur);
  k.w = in_real(call, IN_W, &cur);
  k.r = in_real(call, IN_R, &cur);
  k.b = in_real(call, IN_B, &cur);
  k.h0 = in_real(call, IN_H0, &cur);
  k.c0 = p->kind == MX_RNN_LSTM ? in_real(call, IN_C0, &cur) : NULL;
  k.peep = p->kind == MX_RNN_LSTM ? in_real(call, IN_P, &cur) : NULL;
  k.seq_lens = has_in(call, IN_SEQ) ? call->t[IN_SEQ].data : NULL;
  k.y = out_real(call, 0, &cur);
  k.yh = out_real(call, 1, &cur);
  k.yc = p->kind == MX_RNN_LSTM ? out_real(call, 2, &cur) : NULL;
  if (k.y) memset(k.y, 0, (size_t)(d->seq * d->nd) * bh * es);
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
    &k_rnn,
    &k_gru,
    &k_lstm,
    NULL,
};
