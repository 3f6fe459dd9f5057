/* The per-(batch, head) Attention computation, written once for a compute type and included by
 * nn_attention.c twice: ATT_T float (float32, and float16/bfloat16 widened in the workspace)
 * and ATT_T double (float64). The includer defines ATT_T, ATT_SUF (function-name suffix),
 * ATT_IS_FLOAT, ATT_GEMM / ATT_GEMV (the CBLAS routines of the type), ATT_TANH, and the
 * att_plan struct; this file undefines those parameters at its end, so the next inclusion can
 * define them afresh.
 *
 * For each (b, h): scores = scale * Q_h K_g^T over the past rows then the new rows (two GEMMs
 * writing the two column ranges, no concatenation), softcap, mask / causal / padding bias,
 * a stable softmax whose fully-masked rows become zeros, then Y_h = P V_g (two GEMMs again).
 * A single query row (a decode step) uses GEMV instead, or for a short cache plain dot products
 * and row updates (see att_dots). Query head h reads key/value head g = h / (q_heads /
 * kv_heads). */

#define ATT_CAT2(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT2(a, b)
#define ATT_FN(name) ATT_CAT(name, ATT_SUF)

/* Stores n values of the compute type as elements [off, off+n) of tensor t (any float type). */
static void ATT_FN(att_store_row)(mx_ktensor *t, int64_t off, const ATT_T *src, int64_t n) {
  if (t->dtype == MX_FLOAT32 && sizeof(ATT_T) == 4) {
    memcpy((float *)t->data + off, src, (size_t)n * 4);
  } else if (t->dtype == MX_FLOAT64 && sizeof(ATT_T) == 8) {
    memcpy((double *)t->data + off, src, (size_t)n * 8);
  } else if (t->dtype == MX_FLOAT16 || t->dtype == MX_BFLOAT16) {
    uint16_t *d = (uint16_t *)t->data + off;
    for (int64_t i = 0; i < n; i++)
      d[i] = t->dtype == MX_FLOAT16 ? mx__f32_to_f16((float)src[i]) : mx__f32_to_bf16((float)src[i]);
  } else {
    for (int64_t i = 0; i < n; i++) mx__kset_f64(t->data, t->dtype, off + i, (double)src[i]);
  }
}

/* A row whose maximum is -inf: all zeros when every score is -inf (everything masked), so its
 * output row is zero rather than NaN; all NaN when a score is NaN (the maximum passes NaNs
 * over), as the softmax of such a row is. */
static void ATT_FN(att_softmax_empty_row)(ATT_T *s, int64_t n) {
  ATT_T fill = 0;
  for (int64_t j = 0; j < n; j++)
    if (s[j] != s[j]) fill = s[j];
  for (int64_t j = 0; j < n; j++) s[j] = fill;
}

/* Softmax of one score row in place (see att_softmax_empty_row for rows without a finite
 * maximum). */
MX_KHOT static void ATT_FN(att_softmax_row)(ATT_T *s, int64_t n) {
#if ATT_IS_FLOAT
  float m = mx__kmax_f32(s, n);
  if (m == -INFINITY) {
    ATT_FN(att_softmax_empty_row)(s, n);
    return;
  }
  float inv = (float)(1.0 / mx__kexp_sum_f32(s, s, n, m));
  for (int64_t j = 0; j < n; j++) s[j] *= inv;
#else
  double m = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
  if (m == -INFINITY) {
    ATT_FN(att_softmax_empty_row)(s, n);
    return;
  }
  for (int64_t j = 0; j < n; j++) {
    s[j] = exp(s[j] - m);
    sum += s[j];
  }
  for (int64_t j = 0; j < n; j++) s[j] /= sum;
#endif
}

/* Adds the mask, causal and padding biases to row i of head (b, h). */
static void ATT_FN(att_bias_row)(const att_plan *p, const void *mask, int64_t b, int64_t h, int64_t i, ATT_T *s) {
  int64_t T = p->T;
  if (mask) {
    int64_t mo = b * p->m_str[0] + h * p->m_str[1] + i * p->m_str[2];
    int64_t lim = p->Tm < T ? p->Tm : T;
    if (p->mask_bool) {
      const uint8_t *mb = (const uint8_t *)mask + mo;
      for (int64_t j = 0; j < lim; j++)
        if (!mb[j * p->m_str[3]]) s[j] = -INFINITY;
    } else {
      const ATT_T *mf = (const ATT_T *)mask + mo;
      for (int64_t j = 0; j < lim; j++) s[j] += mf[j * p->m_str[3]];
    }
    /* A mask shorter than the key length leaves the remaining keys out. */
    for (int64_t j = lim; j < T; j++) s[j] = -INFINITY;
  }
  if (p->causal) {
    int64_t off = p->P;
    if (p->P == 0 && p->nonpad) off = p->nonpad[b] - p->Sq;
    /* Key j is visible to query i when j <= i + off. */
    int64_t first = i + off + 1;
    if (first < 0) first = 0;
    for (int64_t j = first; j < T; j++) s[j] = -INFINITY;
  }
  if (p->nonpad) {
    int64_t first = p->nonpad[b];
    if (first < 0) first = 0;
    for (int64_t j = first; j < T; j++) s[j] = -INFINITY;
  }
}

/* Turns row i of head (b, h)'s scores into weights: the qk output of the chosen mode, softcap,
 * mask / causal / padding biases, softmax. */
static void ATT_FN(att_finish_row)(const att_plan *p, const void *mask, int64_t b, int64_t h, int64_t i, ATT_T *s,
                                   mx_ktensor *qk_out) {
  int64_t T = p->T, qk_row = ((b * p->Hq + h) * p->Sq + i) * T;
  if (qk_out && p->mode == 0) ATT_FN(att_store_row)(qk_out, qk_row, s, T);
  if (p->softcap > 0.0f) {
    ATT_T c = (ATT_T)p->softcap;
    for (int64_t j = 0; j < T; j++) s[j] = c * ATT_TANH(s[j] / c);
  }
  if (qk_out && p->mode == 1) ATT_FN(att_store_row)(qk_out, qk_row, s, T);
  ATT_FN(att_bias_row)(p, mask, b, h, i, s);
  if (qk_out && p->mode == 2) ATT_FN(att_store_row)(qk_out, qk_row, s, T);
  ATT_FN(att_softmax_row)(s, T);
  if (qk_out && p->mode == 3) ATT_FN(att_store_row)(qk_out, qk_row, s, T);
}

/* Decode-step products without BLAS. A BLAS gemv call costs ~400-800 instructions before any
 * arithmetic (argument checks, blocking, scaling y by beta), more than a small product itself:
 * for one query over a short cache these loops are cheaper, for long caches BLAS's kernels win
 * (measured crossover: about 60 keys at head size 16, 30 at 64). ATT_SMALL is the bound on
 * keys * (head size + 16) below which att_core uses them. */
#ifndef ATT_SMALL
#define ATT_SMALL 2048
#endif

/* out[j] = scale * (q . k_j) for n key rows of D elements (row stride ks). Four rows at a time
 * share the loads of q; each dot runs in MX_KLANES lanes (plus a scalar sum of the D % 8 tail)
 * folded pairwise at the end, so it vectorizes without reassociating anything. */
static inline void ATT_FN(att_dots)(const ATT_T *restrict q, const ATT_T *restrict k, int64_t ks, int64_t n,
                                    int64_t D, ATT_T scale, ATT_T *restrict out) {
  const int64_t D8 = D - D % MX_KLANES;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const ATT_T *restrict kr = k + j * ks;
    ATT_T a[4][MX_KLANES] = {{0}}, t[4] = {0};
    for (int64_t d = 0; d < D8; d += MX_KLANES)
      for (int r = 0; r < 4; r++)
        for (int l = 0; l < MX_KLANES; l++) a[r][l] += q[d + l] * kr[r * ks + d + l];
    for (int64_t d = D8; d < D; d++)
      for (int r = 0; r < 4; r++) t[r] += q[d] * kr[r * ks + d];
    for (int r = 0; r < 4; r++) {
      ATT_T b0 = (a[r][0] + a[r][4]) + (a[r][2] + a[r][6]), b1 = (a[r][1] + a[r][5]) + (a[r][3] + a[r][7]);
      out[j + r] = scale * ((b0 + b1) + t[r]);
    }
  }
  for (; j < n; j++) {
    const ATT_T *restrict kr = k + j * ks;
    ATT_T a[MX_KLANES] = {0}, t = 0;
    for (int64_t d = 0; d < D8; d += MX_KLANES)
      for (int l = 0; l < MX_KLANES; l++) a[l] += q[d + l] * kr[d + l];
    for (int64_t d = D8; d < D; d++) t += q[d] * kr[d];
    ATT_T b0 = (a[0] + a[4]) + (a[2] + a[6]), b1 = (a[1] + a[5]) + (a[3] + a[7]);
    out[j] = scale * ((b0 + b1) + t);
  }
}

/* y[0..D) += sum over the n rows j of w[j] * v_j (row stride vs), rows in order, two rows per
 * pass over y. */
static inline void ATT_FN(att_axpys)(const ATT_T *restrict w, const ATT_T *restrict v, int64_t vs, int64_t n,
                                     int64_t D, ATT_T *restrict y) {
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const ATT_T w0 = w[j], w1 = w[j + 1];
    const ATT_T *restrict v0 = v + j * vs, *restrict v1 = v0 + vs;
    for (int64_t d = 0; d < D; d++) y[d] = (y[d] + w0 * v0[d]) + w1 * v1[d];
  }
  for (; j < n; j++) {
    const ATT_T wj = w[j];
    const ATT_T *restrict vr = v + j * vs;
    for (int64_t d = 0; d < D; d++) y[d] += wj * vr[d];
  }
}

MX_KHOT static void ATT_FN(att_core)(const att_plan *p, const ATT_T *q, const ATT_T *k, const ATT_T *v, const ATT_T *pk,
                              const ATT_T *pv, const void *mask, ATT_T *y, mx_ktensor *qk_out, ATT_T *scores) {
  int64_t Sq = p->Sq, T = p->T, P = p->P, Skv = p->Skv, Dk = p->Dk, Dv = p->Dv;
  int64_t group = p->Hq / p->Hkv;
  ATT_T scale = (ATT_T)p->scale;
  int64_t Dmax = Dk > Dv ? Dk : Dv;
  bool small = T * (Dmax + 16) <= ATT_SMALL; /* decode products without BLAS (see att_dots) */
  for (int64_t b = 0; b < p->B; b++) {
    for (int64_t h = 0; h < p->Hq; h++) {
      int64_t g = h / group;
      ATT_T *yh = Dv > 0 ? y + b * p->y_batch + h * p->y_head : NULL;
      if (T == 0) {
        /* No keys at all: every row is empty, Y is zero. */
        for (int64_t i = 0; yh && i < Sq; i++) memset(yh + i * p->y_row, 0, (size_t)Dv * sizeof *yh);
        continue;
      }
      /* Pointers into possibly empty (NULL) tensors are formed only when they are used. */
      const ATT_T *qh = Dk > 0 ? q + b * p->q_batch + h * p->q_head : NULL;
      const ATT_T *kh = Skv > 0 && Dk > 0 ? k + b * p->k_batch + g * p->k_head : NULL;
      const ATT_T *vh = Skv > 0 && Dv > 0 ? v + b * p->v_batch + g * p->v_head : NULL;
      /* scores = scale * Q K^T, past columns first. */
      if (Dk == 0) {
        memset(scores, 0, (size_t)(Sq * T) * sizeof *scores);
      } else {
        const ATT_T *pkh = pk ? pk + (b * p->Hkv + g) * P * Dk : NULL;
        if (Sq == 1 && small) {
          /* Decode step, short cache: dot products with the past rows then the new ones. */
          if (P > 0) ATT_FN(att_dots)(qh, pkh, Dk, P, Dk, scale, scores);
          if (Skv > 0) ATT_FN(att_dots)(qh, kh, p->k_row, Skv, Dk, scale, scores + P);
        } else if (Sq == 1) {
          /* Decode step: one query row, matrix-vector products. y is cleared first and then
           * accumulated into (beta = 1): gemv would scale old contents by beta = 0, keeping NaN
           * garbage, and skipping that scaling also saves a call. */
          memset(scores, 0, (size_t)T * sizeof *scores);
          if (P > 0)
            ATT_GEMV(CblasRowMajor, CblasNoTrans, (blasint)P, (blasint)Dk, scale, pkh, (blasint)Dk, qh, 1, (ATT_T)1,
                     scores, 1);
          if (Skv > 0)
            ATT_GEMV(CblasRowMajor, CblasNoTrans, (blasint)Skv, (blasint)Dk, scale, kh, (blasint)p->k_row, qh, 1,
                     (ATT_T)1, scores + P, 1);
        } else {
          if (P > 0)
            ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)Sq, (blasint)P, (blasint)Dk, scale, qh,
                     (blasint)p->q_row, pkh, (blasint)Dk, (ATT_T)0, scores, (blasint)T);
          if (Skv > 0)
            ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)Sq, (blasint)Skv, (blasint)Dk, scale, qh,
                     (blasint)p->q_row, kh, (blasint)p->k_row, (ATT_T)0, scores + P, (blasint)T);
        }
      }
      for (int64_t i = 0; i < Sq; i++) ATT_FN(att_finish_row)(p, mask, b, h, i, scores + i * T, qk_out);
      /* Y_h = P V, past rows first. */
      if (Dv == 0) continue;
      const ATT_T *pvh = pv ? pv + (b * p->Hkv + g) * P * Dv : NULL;
      ATT_T beta = (ATT_T)(P > 0 ? 1 : 0);
      if (Sq == 1) {
        memset(yh, 0, (size_t)Dv * sizeof *yh);
        if (small) {
          if (P > 0) ATT_FN(att_axpys)(scores, pvh, Dv, P, Dv, yh);
          if (Skv > 0) ATT_FN(att_axpys)(scores + P, vh, p->v_row, Skv, Dv, yh);
        } else {
          if (P > 0)
            ATT_GEMV(CblasRowMajor, CblasTrans, (blasint)P, (blasint)Dv, (ATT_T)1, pvh, (blasint)Dv, scores, 1,
                     (ATT_T)1, yh, 1);
          if (Skv > 0)
            ATT_GEMV(CblasRowMajor, CblasTrans, (blasint)Skv, (blasint)Dv, (ATT_T)1, vh, (blasint)p->v_row,
                     scores + P, 1, (ATT_T)1, yh, 1);
        }
      } else {
        if (P > 0)
          ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)Sq, (blasint)Dv, (blasint)P, (ATT_T)1, scores,
                   (blasint)T, pvh, (blasint)Dv, (ATT_T)0, yh, (blasint)p->y_row);
        if (Skv > 0)
          ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)Sq, (blasint)Dv, (blasint)Skv, (ATT_T)1,
                   scores + P, (blasint)T, vh, (blasint)p->v_row, beta, yh, (blasint)p->y_row);
      }
    }
  }
}

#undef ATT_FN
#undef ATT_CAT
#undef ATT_CAT2
#undef ATT_T
#undef ATT_SUF
#undef ATT_IS_FLOAT
#undef ATT_GEMM
#undef ATT_GEMV
#undef ATT_TANH
