/* CPU kernels of the signal processing group: DFT, STFT, HannWindow, HammingWindow,
 * BlackmanWindow and MelWeightMatrix.
 *
 * Transforms run in double precision one line at a time: a radix-2 FFT for power-of-two
 * lengths, a direct sum over a twiddle table for short other lengths, and Bluestein's chirp
 * transform (power-of-two FFTs of a convolution) for long ones. Every element type is read
 * and written through the generic double accessors of kutil.h. */
#include <math.h>
#include <string.h>

#include "graph/ops/signal_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static bool has_in(const mx_kernel_call *call, uint32_t i) {
  return i < call->n_in && call->t[i].dtype != MX_DTYPE_UNDEFINED && call->t[i].data;
}

/* The first element of input i as an integer; false when the input is absent or empty. */
static bool scalar_i64(const mx_kernel_call *call, uint32_t i, int64_t *v) {
  if (!has_in(call, i) || mx__ktensor_numel(&call->t[i]) < 1) return false;
  *v = mx__kget_i64(call->t[i].data, call->t[i].dtype, 0);
  return true;
}

/* --- one complex transform ---------------------------------------------------------------------- */

/* Lengths up to this take the direct sum; longer non-power-of-two lengths go through
 * Bluestein's chirp transform (three power-of-two FFTs), e.g. the 400-point frames of speech
 * models. */
#define DIRECT_MAX 64

/* In-place radix-2 FFT of length m (a power of two) with twiddles tw (exp(-2 pi i k / m));
 * sgn -1 conjugates them (the inverse, unscaled). */
static void fft_pow2(double *re, double *im, int64_t m, const double *tw_re, const double *tw_im,
                     double sgn) {
  for (int64_t i = 1, j = 0; i < m; i++) {
    int64_t bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      double t = re[i];
      re[i] = re[j], re[j] = t;
      t = im[i];
      im[i] = im[j], im[j] = t;
    }
  }
  for (int64_t len = 2; len <= m; len <<= 1) {
    int64_t half = len >> 1, step = m / len;
    for (int64_t i = 0; i < m; i += len)
      for (int64_t j = 0; j < half; j++) {
        double wr = tw_re[j * step], wi = sgn * tw_im[j * step];
        double vr = re[i + j + half] * wr - im[i + j + half] * wi;
        double vi = re[i + j + half] * wi + im[i + j + half] * wr;
        re[i + j + half] = re[i + j] - vr;
        im[i + j + half] = im[i + j] - vi;
        re[i + j] += vr;
        im[i + j] += vi;
      }
  }
}

typedef enum { FFT_POW2, FFT_DIRECT, FFT_BLUESTEIN } fft_mode;

/* Scratch and tables for transforms of one length n in one direction. */
typedef struct fft_plan {
  int64_t n, m; /* m: the transform length actually run (n, or Bluestein's power of two) */
  fft_mode mode;
  bool inverse;
  double *re, *im;       /* input line (n); the pow2 result in place */
  double *ore, *oim;     /* result of the direct sum / Bluestein (n) */
  double *tw_re, *tw_im; /* exp(-2 pi i k / m) */
  double *ch_re, *ch_im; /* Bluestein: the chirp exp(-+ pi i k^2 / n), n entries */
  double *are, *aim;     /* Bluestein: the padded product (m) */
  double *bre, *bim;     /* Bluestein: the FFT of the conjugate chirp (m) */
} fft_plan;

static fft_mode fft_mode_of(int64_t n, int64_t *m) {
  *m = n;
  if (n > 0 && (n & (n - 1)) == 0) return FFT_POW2;
  if (n <= DIRECT_MAX) return FFT_DIRECT;
  int64_t p = 1;
  while (p < 2 * n - 1) p <<= 1;
  *m = p;
  return FFT_BLUESTEIN;
}

static size_t fft_bytes(int64_t n) {
  int64_t m;
  fft_mode mode = fft_mode_of(n, &m);
  size_t bn = mx__kalign64((size_t)(n > 0 ? n : 1) * sizeof(double));
  size_t bm = mx__kalign64((size_t)(m > 0 ? m : 1) * sizeof(double));
  return 4 * bn + 2 * bm + (mode == FFT_BLUESTEIN ? 2 * bn + 4 * bm : 0);
}

/* Scratch enough for any transform length up to n_max: workspaces are sized from shapes alone
 * (dft_length, axis and frame_length are values, not known then), and fft_bytes is not
 * monotonic in n. */
static size_t fft_bytes_bound(int64_t n_max) {
  int64_t m = 1;
  while (m < 2 * n_max - 1) m <<= 1;
  size_t bn = mx__kalign64((size_t)(n_max > 0 ? n_max : 1) * sizeof(double));
  size_t bm = mx__kalign64((size_t)m * sizeof(double));
  return 6 * bn + 6 * bm;
}

static void fft_plan_init(fft_plan *f, int64_t n, bool inverse, void *ws) {
  memset(f, 0, sizeof *f);
  f->n = n;
  f->inverse = inverse;
  f->mode = fft_mode_of(n, &f->m);
  const int64_t m = f->m;
  char *cur = ws;
  size_t bn = mx__kalign64((size_t)(n > 0 ? n : 1) * sizeof(double));
  size_t bm = mx__kalign64((size_t)(m > 0 ? m : 1) * sizeof(double));
  double **n_bufs[4] = {&f->re, &f->im, &f->ore, &f->oim};
  for (int i = 0; i < 4; i++, cur += bn) *n_bufs[i] = (double *)cur;
  f->tw_re = (double *)cur, cur += bm;
  f->tw_im = (double *)cur, cur += bm;
  for (int64_t k = 0; k < m; k++) {
    double ang = -2.0 * M_PI * (double)k / (double)m;
    f->tw_re[k] = cos(ang);
    f->tw_im[k] = sin(ang);
  }
  if (f->mode != FFT_BLUESTEIN) return;
  f->ch_re = (double *)cur, cur += bn;
  f->ch_im = (double *)cur, cur += bn;
  double **m_bufs[4] = {&f->are, &f->aim, &f->bre, &f->bim};
  for (int i = 0; i < 4; i++, cur += bm) *m_bufs[i] = (double *)cur;
  /* k j = (k^2 + j^2 - (k - j)^2) / 2: the transform is a convolution with the chirp.
   * k^2 is reduced mod 2n first so the angle stays exact for long signals. */
  const double sgn = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < n; k++) {
    double ang = sgn * M_PI * (double)((k * k) % (2 * n)) / (double)n;
    f->ch_re[k] = cos(ang);
    f->ch_im[k] = sin(ang);
  }
  for (int64_t k = 0; k < m; k++) f->bre[k] = f->bim[k] = 0.0;
  for (int64_t k = 0; k < n; k++) {
    f->bre[k] = f->ch_re[k], f->bim[k] = -f->ch_im[k];
    if (k > 0) f->bre[m - k] = f->ch_re[k], f->bim[m - k] = -f->ch_im[k];
  }
  fft_pow2(f->bre, f->bim, m, f->tw_re, f->tw_im, 1.0);
}

/* Transforms f->re/im (length n) in the plan's direction; the result is left in *out_re /
 * *out_im, scaled by 1/n for the inverse. */
static void fft_run(fft_plan *f, const double **out_re, const double **out_im) {
  const int64_t n = f->n, m = f->m;
  const double sgn = f->inverse ? -1.0 : 1.0;
  double *re = f->re, *im = f->im;
  if (f->mode == FFT_POW2) {
    fft_pow2(re, im, n, f->tw_re, f->tw_im, sgn);
    *out_re = re, *out_im = im;
  } else if (f->mode == FFT_DIRECT) {
    for (int64_t k = 0; k < n; k++) {
      double sr = 0.0, si = 0.0;
      int64_t idx = 0; /* k * j mod n, stepped without overflow */
      for (int64_t j = 0; j < n; j++) {
        double wr = f->tw_re[idx], wi = sgn * f->tw_im[idx];
        sr += re[j] * wr - im[j] * wi;
        si += re[j] * wi + im[j] * wr;
        idx += k;
        if (idx >= n) idx -= n;
      }
      f->ore[k] = sr;
      f->oim[k] = si;
    }
    *out_re = f->ore, *out_im = f->oim;
  } else {
    for (int64_t k = 0; k < m; k++) f->are[k] = f->aim[k] = 0.0;
    for (int64_t k = 0; k < n; k++) {
      f->are[k] = re[k] * f->ch_re[k] - im[k] * f->ch_im[k];
      f->aim[k] = re[k] * f->ch_im[k] + im[k] * f->ch_re[k];
    }
    fft_pow2(f->are, f->aim, m, f->tw_re, f->tw_im, 1.0);
    for (int64_t k = 0; k < m; k++) {
      double r = f->are[k] * f->bre[k] - f->aim[k] * f->bim[k];
      double i = f->are[k] * f->bim[k] + f->aim[k] * f->bre[k];
      f->are[k] = r, f->aim[k] = i;
    }
    fft_pow2(f->are, f->aim, m, f->tw_re, f->tw_im, -1.0);
    const double inv_m = 1.0 / (double)m;
    for (int64_t k = 0; k < n; k++) {
      double r = f->are[k] * inv_m, i = f->aim[k] * inv_m;
      f->ore[k] = r * f->ch_re[k] - i * f->ch_im[k];
      f->oim[k] = r * f->ch_im[k] + i * f->ch_re[k];
    }
    *out_re = f->ore, *out_im = f->oim;
  }
  if (f->inverse) {
    double s = 1.0 / (double)n;
    double *r = (double *)*out_re, *i = (double *)*out_im;
    for (int64_t k = 0; k < n; k++) r[k] *= s, i[k] *= s;
  }
}

/* --- DFT ---------------------------------------------------------------------------------------- */

/* Where a DFT call reads and writes. */
typedef struct dft_geom {
  int32_t axis;
  int64_t outer, inner, len_in, len_out, c_in, c_out, n;
  bool real_out; /* inverse of a one-sided spectrum */
} dft_geom;

static mx_status dft_make_geom(const mx_kernel_call *call, dft_geom *g, const char **why) {
  const mx_dft_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  int32_t r = x->rank;
  int64_t axis = p->axis;
  if (p->axis_input && has_in(call, 2)) axis = mx__kget_i64(call->t[2].data, call->t[2].dtype, 0);
  if (r < 2 || axis < -r || axis > r - 2 || axis == -1) {
    *why = "DFT: axis out of range (the last dim holds the complex parts)";
    return MX_ERR_KERNEL;
  }
  g->axis = (int32_t)(axis < 0 ? axis + r : axis);
  g->c_in = x->dims[r - 1];
  g->real_out = p->inverse && p->onesided;
  g->c_out = g->real_out ? 1 : 2;
  g->len_in = x->dims[g->axis];
  if (has_in(call, 1))
    g->n = mx__kget_i64(call->t[1].data, call->t[1].dtype, 0);
  else
    g->n = g->real_out ? 2 * (g->len_in - 1) : g->len_in;
  g->len_out = p->onesided && !p->inverse ? g->n / 2 + 1 : g->n;
  if (g->n <= 0 || (g->c_in != 1 && g->c_in != 2)) {
    *why = "DFT: dft_length must be positive and the last input dim 1 or 2";
    return MX_ERR_KERNEL;
  }
  if (p->onesided && !p->inverse && g->c_in == 2) {
    *why = "DFT: a one-sided transform needs a real input";
    return MX_ERR_KERNEL;
  }
  g->outer = g->inner = 1;
  for (int32_t d = 0; d < g->axis; d++) g->outer *= x->dims[d];
  for (int32_t d = g->axis + 1; d < r - 1; d++) g->inner *= x->dims[d];
  bool ok = y->rank == r && y->dims[r - 1] == g->c_out && y->dims[g->axis] == g->len_out;
  for (int32_t d = 0; ok && d < r - 1; d++) ok = d == g->axis || y->dims[d] == x->dims[d];
  if (!ok) {
    *why = "DFT: the output shape does not match the input, axis and dft_length";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

static size_t dft_workspace(const mx_kernel_call *call) {
  /* The transform length is at most the longer of an input dim and twice an output dim (a
   * one-sided output holds n / 2 + 1 bins), whichever axis the values pick. */
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  int64_t n_max = 1;
  for (int32_t d = 0; d + 1 < x->rank; d++) {
    int64_t a = x->dims[d], b = d < y->rank ? 2 * y->dims[d] : 0;
    n_max = a > n_max ? a : n_max;
    n_max = b > n_max ? b : n_max;
  }
  return fft_bytes_bound(n_max);
}

static mx_status dft_run(mx_kernel_call *call) {
  const mx_dft_params *p = call->params;
  dft_geom g;
  mx_status st = dft_make_geom(call, &g, &call->why);
  if (st != MX_OK) return st;
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = mx__kout(call, 0);
  if (fft_bytes(g.n) > call->workspace_size) {
    call->why = "DFT: dft_length is longer than the workspace sized from the shapes allows";
    return MX_ERR_KERNEL;
  }
  fft_plan f;
  fft_plan_init(&f, g.n, p->inverse != 0, call->workspace);
  const int64_t n = g.n;
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t i = 0; i < g.inner; i++) {
      /* Element k of the line along the axis, as a complex number. */
#define X_AT(k, part)                                                                                        \
  (g.c_in > (part) ? mx__kget_f64(x->data, x->dtype, ((o * g.len_in + (k)) * g.inner + i) * g.c_in + (part)) \
                   : 0.0)
      if (g.real_out) {
        /* Rebuild the full spectrum from its one-sided half: X[n - k] = conj(X[k]). */
        for (int64_t k = 0; k < n; k++) {
          int64_t src = k <= n / 2 ? k : n - k;
          bool have = src < g.len_in;
          f.re[k] = have ? X_AT(src, 0) : 0.0;
          f.im[k] = have ? (k <= n / 2 ? 1.0 : -1.0) * X_AT(src, 1) : 0.0;
        }
      } else {
        for (int64_t k = 0; k < n; k++) {
          bool have = k < g.len_in;
          f.re[k] = have ? X_AT(k, 0) : 0.0;
          f.im[k] = have ? X_AT(k, 1) : 0.0;
        }
      }
#undef X_AT
      const double *ore, *oim;
      fft_run(&f, &ore, &oim);
      for (int64_t m = 0; m < g.len_out; m++) {
        int64_t at = ((o * g.len_out + m) * g.inner + i) * g.c_out;
        mx__kset_f64(y->data, y->dtype, at, ore[m]);
        if (g.c_out == 2) mx__kset_f64(y->data, y->dtype, at + 1, oim[m]);
      }
    }
  return MX_OK;
}

/* --- STFT --------------------------------------------------------------------------------------- */

typedef struct stft_geom {
  int64_t batch, len, c, step, n_fft, frames, bins;
} stft_geom;

static mx_status stft_make_geom(const mx_kernel_call *call, stft_geom *g, const char **why) {
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  if (x->rank != 3 || y->rank != 4) {
    *why = "STFT: the signal must be [batch, length, 1 or 2]";
    return MX_ERR_KERNEL;
  }
  g->batch = x->dims[0], g->len = x->dims[1], g->c = x->dims[2];
  if (!scalar_i64(call, 1, &g->step)) {
    *why = "STFT: frame_step is empty";
    return MX_ERR_KERNEL;
  }
  const mx_ktensor *w = has_in(call, 2) ? &call->t[2] : NULL;
  if (has_in(call, 3))
    g->n_fft = mx__kget_i64(call->t[3].data, call->t[3].dtype, 0);
  else
    g->n_fft = w ? mx__ktensor_numel(w) : 0;
  if (g->step <= 0 || g->n_fft <= 0 || g->n_fft > g->len || (w && mx__ktensor_numel(w) != g->n_fft) ||
      (g->c != 1 && g->c != 2)) {
    *why = "STFT: frame_step, frame_length or the window do not fit the signal";
    return MX_ERR_KERNEL;
  }
  g->frames = (g->len - g->n_fft) / g->step + 1;
  g->bins = y->dims[2];
  if (y->dims[0] != g->batch || y->dims[1] != g->frames || y->dims[3] != 2 || g->bins > g->n_fft) {
    *why = "STFT: the output shape does not match the signal and frame sizes";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

static size_t stft_workspace(const mx_kernel_call *call) {
  /* frame_length is a value: bound it by the signal length (a frame fits in the signal). */
  const mx_ktensor *x = &call->t[0];
  return fft_bytes_bound(x->rank == 3 ? x->dims[1] : 1);
}

static mx_status stft_run(mx_kernel_call *call) {
  stft_geom g;
  mx_status st = stft_make_geom(call, &g, &call->why);
  if (st != MX_OK) return st;
  const mx_ktensor *x = &call->t[0], *w = has_in(call, 2) ? &call->t[2] : NULL;
  mx_ktensor *y = mx__kout(call, 0);
  if (fft_bytes(g.n_fft) > call->workspace_size) {
    call->why = "STFT: frame_length is longer than the workspace sized from the shapes allows";
    return MX_ERR_KERNEL;
  }
  fft_plan f;
  fft_plan_init(&f, g.n_fft, false, call->workspace);
  for (int64_t b = 0; b < g.batch; b++)
    for (int64_t fr = 0; fr < g.frames; fr++) {
      for (int64_t k = 0; k < g.n_fft; k++) {
        int64_t at = (b * g.len + fr * g.step + k) * g.c;
        double wk = w ? mx__kget_f64(w->data, w->dtype, k) : 1.0;
        f.re[k] = wk * mx__kget_f64(x->data, x->dtype, at);
        f.im[k] = g.c == 2 ? wk * mx__kget_f64(x->data, x->dtype, at + 1) : 0.0;
      }
      const double *ore, *oim;
      fft_run(&f, &ore, &oim);
      for (int64_t m = 0; m < g.bins; m++) {
        int64_t at = ((b * g.frames + fr) * g.bins + m) * 2;
        mx__kset_f64(y->data, y->dtype, at, ore[m]);
        mx__kset_f64(y->data, y->dtype, at + 1, oim[m]);
      }
    }
  return MX_OK;
}

/* --- windows ------------------------------------------------------------------------------------ */

static mx_status window_run(mx_kernel_call *call) {
  const mx_window_params *p = call->params;
  mx_ktensor *y = mx__kout(call, 0);
  int64_t size = -1;
  if (!scalar_i64(call, 0, &size) || y->rank != 1 || y->dims[0] != size) {
    call->why = "window: the output length differs from size";
    return MX_ERR_KERNEL;
  }
  /* A periodic window is the first `size` points of a symmetric one of size + 1. */
  double denom = (double)(p->periodic ? size : size - 1);
  for (int64_t k = 0; k < size; k++) {
    double a = denom > 0.0 ? 2.0 * M_PI * (double)k / denom : 0.0, v;
    switch (p->kind) {
      case MX_WINDOW_HANN: v = 0.5 - 0.5 * cos(a); break;
      case MX_WINDOW_HAMMING: v = 25.0 / 46.0 - (21.0 / 46.0) * cos(a); break;
      default: v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2.0 * a); break;
    }
    mx__kset_f64(y->data, y->dtype, k, v);
  }
  return MX_OK;
}

/* --- MelWeightMatrix ---------------------------------------------------------------------------- */

static mx_status mel_run(mx_kernel_call *call) {
  mx_ktensor *y = mx__kout(call, 0);
  int64_t mel_bins = -1, dft_len = 0, rate = 0;
  bool have = scalar_i64(call, 0, &mel_bins) && scalar_i64(call, 1, &dft_len) && scalar_i64(call, 2, &rate) &&
              has_in(call, 3) && has_in(call, 4);
  if (!have) {
    call->why = "MelWeightMatrix: an input is empty";
    return MX_ERR_KERNEL;
  }
  float lo = (float)mx__kget_f64(call->t[3].data, call->t[3].dtype, 0);
  float hi = (float)mx__kget_f64(call->t[4].data, call->t[4].dtype, 0);
  int64_t spec_bins = dft_len / 2 + 1;
  if (mel_bins < 0 || dft_len <= 0 || rate <= 0 || y->rank != 2 || y->dims[0] != spec_bins ||
      y->dims[1] != mel_bins) {
    call->why =
        "MelWeightMatrix: bad num_mel_bins, dft_length or sample_rate, or an output shape that differs";
    return MX_ERR_KERNEL;
  }
  int64_t total = spec_bins * mel_bins;
  for (int64_t k = 0; k < total; k++) mx__kset_f64(y->data, y->dtype, k, 0.0);
  /* Band edges: num_mel_bins + 2 points on the mel scale, spaced (high - low) / (num_mel_bins
   * + 2) apart from the low edge (as the ONNX reference does: the last point stays below the
   * high edge), mapped back to hertz and then to spectrogram bins (floor of (dft_length + 1) *
   * f / sample_rate). */
  float lo_mel = 2595.0f * log10f(1.0f + lo / 700.0f), hi_mel = 2595.0f * log10f(1.0f + hi / 700.0f);
  float mel_step = (hi_mel - lo_mel) / (float)(mel_bins + 2);
  int64_t prev2 = 0, prev1 = 0;
  for (int64_t i = 0; i < mel_bins + 2; i++) {
    double mel = (double)i * (double)mel_step + (double)lo_mel;
    double hz = 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
    int64_t edge = (int64_t)floor((double)(dft_len + 1) * hz / (double)rate);
    if (i >= 2) {
      int64_t lower = prev2, center = prev1, higher = edge, band = i - 2;
      int64_t rise = center - lower, fall = higher - center;
      if (rise == 0) {
        if (center >= 0 && center < spec_bins) mx__kset_f64(y->data, y->dtype, center * mel_bins + band, 1.0);
      } else {
        for (int64_t j = lower; j <= center; j++)
          if (j >= 0 && j < spec_bins)
            mx__kset_f64(y->data, y->dtype, j * mel_bins + band, (double)(j - lower) / (double)rise);
      }
      if (fall > 0)
        for (int64_t j = center; j < higher; j++)
          if (j >= 0 && j < spec_bins)
            mx__kset_f64(y->data, y->dtype, j * mel_bins + band, (double)(higher - j) / (double)fall);
    }
    prev2 = prev1;
    prev1 = edge;
  }
  return MX_OK;
}

#define OUT_NUMERIC (MX_KDT_FLOATS | MX_KDT_INTS)

static const mx_kernel_def k_dft = {
    .op = "DFT", .dtypes = MX_KDT_FLOATS, .key = 0, .run = dft_run, .workspace = dft_workspace};
static const mx_kernel_def k_stft = {
    .op = "STFT", .dtypes = MX_KDT_FLOATS, .key = 0, .run = stft_run, .workspace = stft_workspace};
static const mx_kernel_def k_hann = {.op = "HannWindow", .dtypes = OUT_NUMERIC, .key = -1, .run = window_run};
static const mx_kernel_def k_hamming = {
    .op = "HammingWindow", .dtypes = OUT_NUMERIC, .key = -1, .run = window_run};
static const mx_kernel_def k_blackman = {
    .op = "BlackmanWindow", .dtypes = OUT_NUMERIC, .key = -1, .run = window_run};
static const mx_kernel_def k_mel = {
    .op = "MelWeightMatrix", .dtypes = OUT_NUMERIC, .key = -1, .run = mel_run};

const mx_kernel_def *const mx__kernels_signal[] = {
    &k_dft, &k_stft, &k_hann, &k_hamming, &k_blackman, &k_mel, NULL,
};
