/* The square Conv runner and double reference of the thread-split kernel tests
 * (conv_square_support.h). */
#include "kernels/conv_square_support.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

int64_t cs_in_width(const cs_case *t) { return t->w ? t->w : t->h; }
static int64_t dilation_of(const cs_case *t) { return t->d ? t->d : 1; }

int64_t cs_out_size(const cs_case *t) {
  return (t->h + 2 * t->pad - dilation_of(t) * (t->k - 1) - 1) / t->s + 1;
}
int64_t cs_out_width(const cs_case *t) {
  return (cs_in_width(t) + 2 * t->pad - dilation_of(t) * (t->k - 1) - 1) / t->s + 1;
}

void cs_run(const cs_case *t, int32_t threads, bool tight, int32_t act, const float *x, const float *w,
            const float *b, const float *z, float *y) {
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = 1;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = t->s;
  p.dilations[0] = p.dilations[1] = dilation_of(t);
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = t->pad;
  const int64_t o = cs_out_size(t), ow = cs_out_width(t);
  mx_kwin win;
  cr_assert(mx__kwin_forward(&p, 2, DIMS(t->h, cs_in_width(t)), DIMS(o, ow), DIMS(t->k, t->k), &win));
  mx__kthreads_set(threads);
  const size_t slot = mx__kconv_f32_slot_floats(&win, t->n, t->c, t->m, 1, threads);
  const size_t floats = tight ? slot : slot * (size_t)threads;
  float *scratch = aligned_alloc(64, (floats * 4 + 63) / 64 * 64);
  cr_assert(scratch);
  for (int64_t i = 0; i < t->n * t->m * o * ow; i++) y[i] = NAN; /* every output must be written */
  mx_kconv_f32 j;
  memset(&j, 0, sizeof j);
  j.w = &win;
  j.n = t->n;
  j.c = t->c;
  j.m = t->m;
  j.group = 1;
  j.x = x;
  j.wt = w;
  j.b = b;
  j.z = z;
  j.y = y;
  j.act = act;
  cr_assert(mx__kconv_f32_run(&j, scratch, floats));
  free(scratch);
  mx__kthreads_set(1);
}

double cs_reference_at(const cs_case *t, int32_t act, const float *x, const float *w, const float *b,
                       const float *z, int64_t in, int64_t m, int64_t i, int64_t jj) {
  const int64_t o = cs_out_size(t), ow = cs_out_width(t), wd = cs_in_width(t), d = dilation_of(t);
  double acc = b[m];
  for (int64_t c = 0; c < t->c; c++)
    for (int64_t a = 0; a < t->k; a++)
      for (int64_t e = 0; e < t->k; e++) {
        const int64_t ih = i * t->s - t->pad + a * d, iw = jj * t->s - t->pad + e * d;
        if (ih < 0 || ih >= t->h || iw < 0 || iw >= wd) continue;
        acc += (double)x[((in * t->c + c) * t->h + ih) * wd + iw] * w[((m * t->c + c) * t->k + a) * t->k + e];
      }
  acc += z[((in * t->m + m) * o + i) * ow + jj];
  if (act == MX_CONV_ACT_SIGMOID) return 1.0 / (1.0 + exp(-acc));
  return acc > 0.0 ? acc : 0.0;
}
