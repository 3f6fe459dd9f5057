/* The float32 decode step of Attention (one query row) for one vector width, included by
 * nn_attention.c twice: ATTV 8 (head sizes a multiple of 8) and ATTV 16 (a multiple of 16). The
 * includer defines ATTV and provides att_finish_row_f32 and att_chunk_rows; this file undefines
 * ATTV at its end.
 *
 * One pass over each cache per key/value head: the group's query heads go two at a time, the
 * first pair loading a chunk of past rows once for both heads' products and writing them into
 * present_key / present_value from the same loads; further pairs read the chunk again while it
 * is in L1. The products use
 * ATTV-lane vectors (gcc/clang vector extensions: the AVX-512 copy of the function gets one
 * register per vector, the AVX2 and baseline copies split them): a dot product of one query with
 * ATTV key rows sums the rows' lane vectors with a transpose-and-add tree (unpack, shufps and
 * lane permutes: 14 shuffles for 8 rows, 30 for 16) instead of folding each row on its own, and
 * the weighted sum of value rows keeps four independent accumulators per ATTV columns so the adds
 * do not wait on each other.
 *
 * The vectors never cross a call: every helper is always inlined into att_decode_f32_<ATTV>, so
 * each of its target copies keeps them in its own registers. */

#define ATTV_CAT2(a, b) a##_##b
#define ATTV_CAT(a, b) ATTV_CAT2(a, b)
#define ATTV_FN(name) ATTV_CAT(name, ATTV)
#define ATTV_T ATTV_FN(att_vf)
#define ATTV_I ATTV_FN(att_vi)
#define ATTV_INLINE __attribute__((always_inline)) static inline

typedef float ATTV_T __attribute__((vector_size(ATTV * 4)));
typedef int32_t ATTV_I __attribute__((vector_size(ATTV * 4)));

ATTV_INLINE ATTV_T ATTV_FN(att_ld)(const float *p) {
  ATTV_T v;
  memcpy(&v, p, sizeof v);
  return v;
}

ATTV_INLINE void ATTV_FN(att_st)(float *p, ATTV_T v) { memcpy(p, &v, sizeof v); }

/* A row of a present copy: a plain store, or with stream set (p 16-byte aligned) a streaming
 * store that goes to memory without reading the line into the caches first (att_stream_fits). */
ATTV_INLINE void ATTV_FN(att_st_copy)(float *p, ATTV_T v, bool stream) {
#if defined(__SSE__)
  if (stream) {
    /* 16-byte streaming stores exist at every x86-64 level the kernels are built for. */
    for (int i = 0; i < ATTV / 4; i++) {
      __m128 x;
      memcpy(&x, (const float *)&v + 4 * i, sizeof x);
      _mm_stream_ps(p + 4 * i, x);
    }
    return;
  }
#else
  (void)stream;
#endif
  memcpy(p, &v, sizeof v);
}

ATTV_INLINE ATTV_T ATTV_FN(att_splat)(float x) { return (ATTV_T){0} + x; }

/* Lane-wise a where pick is all ones, else b. */
ATTV_INLINE ATTV_T ATTV_FN(att_sel)(ATTV_I pick, ATTV_T a, ATTV_T b) {
  return (ATTV_T)((pick & (ATTV_I)a) | (~pick & (ATTV_I)b));
}

/* Lane-wise maximum of the running maximum m and s; a NaN in s is passed over (the softmax then
 * meets it again through exp(NaN - max)). */
ATTV_INLINE ATTV_T ATTV_FN(att_max)(ATTV_T m, ATTV_T s) { return ATTV_FN(att_sel)(s > m, s, m); }

/* exp(x) lane by lane for softmax arguments (x <= 0 or NaN): mx__kexpf_ftz's steps, so the
 * results are the same bits (below -87 they flush to 0). Its clamp of large arguments has
 * nothing to do here, and a NaN argument gives a NaN without keeping its payload. */
ATTV_INLINE ATTV_T ATTV_FN(att_exp_neg)(ATTV_T x) {
  const ATTV_I flush = x < -87.0f;
  const ATTV_T xc = ATTV_FN(att_sel)(flush, ATTV_FN(att_splat)(-87.0f), x);
  const ATTV_T t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds n into the low bits */
  const ATTV_T n = t - 12582912.0f;
  const ATTV_I e = (ATTV_I)t - 0x4B400000; /* n as an integer */
  ATTV_T r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  ATTV_T p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const ATTV_T res = p * (ATTV_T)((e + 127) << 23);
  return (ATTV_T)((ATTV_I)res & ~flush);
}

/* s[j] = exp(s[j] - m) for n scores, returning their sum (two vector accumulators, then the
 * lanes in double, then the last n % ATTV scores). */
ATTV_INLINE double ATTV_FN(att_exp_sum)(float *s, int64_t n, float m) {
  const ATTV_T mv = ATTV_FN(att_splat)(m);
  ATTV_T a[2] = {{0}};
  int64_t j = 0;
  for (; j + 2 * ATTV <= n; j += 2 * ATTV)
    for (int u = 0; u < 2; u++) {
      ATTV_T e = ATTV_FN(att_exp_neg)(ATTV_FN(att_ld)(s + j + u * ATTV) - mv);
      ATTV_FN(att_st)(s + j + u * ATTV, e);
      a[u] += e;
    }
  for (; j + ATTV <= n; j += ATTV) {
    ATTV_T e = ATTV_FN(att_exp_neg)(ATTV_FN(att_ld)(s + j) - mv);
    ATTV_FN(att_st)(s + j, e);
    a[0] += e;
  }
  float lanes[ATTV];
  ATTV_FN(att_st)(lanes, a[0] + a[1]);
  double sum = 0.0;
  for (int l = 0; l < ATTV; l++) sum += lanes[l];
  for (; j < n; j++) {
    s[j] = mx__kexpf_ftz(s[j] - m);
    sum += s[j];
  }
  return sum;
}

/* Lane r of the result is the sum of a[r]'s lanes. */
ATTV_INLINE ATTV_T ATTV_FN(att_hsum)(const ATTV_T a[ATTV]) {
#if ATTV == 8
  /* Pairs of rows: per 128-bit block, [r0 x, r1 x, r0 y, r1 y]. */
  ATTV_T s[4];
  for (int i = 0; i < 4; i++)
    s[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  /* Quads: per block, [r0, r1, r2, r3] partial sums. */
  ATTV_T t0 = __builtin_shufflevector(s[0], s[1], 0, 1, 8, 9, 4, 5, 12, 13) +
              __builtin_shufflevector(s[0], s[1], 2, 3, 10, 11, 6, 7, 14, 15);
  ATTV_T t1 = __builtin_shufflevector(s[2], s[3], 0, 1, 8, 9, 4, 5, 12, 13) +
              __builtin_shufflevector(s[2], s[3], 2, 3, 10, 11, 6, 7, 14, 15);
  /* The two blocks added: rows 0-3, then rows 4-7. */
  return __builtin_shufflevector(t0, t1, 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(t0, t1, 4, 5, 6, 7, 12, 13, 14, 15);
#else
  /* The same tree over four 128-bit blocks, then two more levels across blocks. */
  ATTV_T s[8];
  for (int i = 0; i < 8; i++)
    s[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13,
                                   29) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15,
                                   31);
  ATTV_T t[4];
  for (int i = 0; i < 4; i++)
    t[i] = __builtin_shufflevector(s[2 * i], s[2 * i + 1], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28,
                                   29) +
           __builtin_shufflevector(s[2 * i], s[2 * i + 1], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30,
                                   31);
  /* t[i]: block k holds the block-k partial sums of rows 4i..4i+3. Blocks 0+1 and 2+3 next. */
  ATTV_T u[2];
  for (int i = 0; i < 2; i++)
    u[i] = __builtin_shufflevector(t[2 * i], t[2 * i + 1], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26,
                                   27) +
           __builtin_shufflevector(t[2 * i], t[2 * i + 1], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30,
                                   31);
  /* u[i]: [rows 8i..8i+3 (blocks 0+1), rows 8i+4.. (0+1), rows 8i..8i+3 (2+3), rows 8i+4.. (2+3)]. */
  return __builtin_shufflevector(u[0], u[1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
         __builtin_shufflevector(u[0], u[1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
#endif
}

/* Columns [d, d + ATTV) of a block of ATTV / nh key rows at kb (row stride ks) into the block's
 * products a (lane vector h * R + r: head h, row r), which column 0 starts and later columns
 * add to; the rows also go to cb (D apart) when it is not NULL, by streaming stores when stream
 * is set. One running pointer into the rows (and one into the copy) rather than one per row:
 * with a run-time stride, one address per row would be more than the registers hold. */
ATTV_INLINE void ATTV_FN(att_dots_cols)(const int nh, const float *const q[2], const float *restrict kb, int64_t ks,
                                        float *restrict cb, bool stream, int64_t D, int64_t d, ATTV_T a[ATTV]) {
  const int R = ATTV / nh;
  ATTV_T qv[2];
  for (int h = 0; h < nh; h++) qv[h] = ATTV_FN(att_ld)(q[h] + d);
  const float *kr = kb + d;
  float *cr = cb ? cb + d : NULL;
  for (int r = 0; r < R; r++, kr += ks) {
    ATTV_T kv = ATTV_FN(att_ld)(kr);
    if (cr) {
      ATTV_FN(att_st_copy)(cr, kv, stream);
      cr += D;
    }
    for (int h = 0; h < nh; h++) a[h * R + r] = d == 0 ? qv[h] * kv : a[h * R + r] + qv[h] * kv;
  }
}

/* out[h][j] = scale * (q[h] . k_j) for nh (1 or 2, a constant) query heads of a key/value group
 * over n key rows of D elements (row stride ks; D % ATTV == 0), in one walk: each row is loaded
 * once for every head, and when copy is not NULL it also goes there (contiguous, D apart) from
 * the same load (streaming stores when stream is set). Blocks of R = ATTV / nh rows: the
 * block's nh * R dot products (lane h * R + r: head h, row r) go through one att_hsum tree,
 * which sums every lane vector in the same order, so a head's scores are the same bits whether
 * it walks alone or with another. *vmax takes the scores lane by lane in that layout (a head's
 * largest lane is its maximum).
 * A row's D elements are summed in order, ATTV at a time. */
ATTV_INLINE void ATTV_FN(att_dots)(const int nh, const float *const q[2], const float *restrict k, int64_t ks,
                                   int64_t n, int64_t D, float scale, float *const out[2], float *restrict copy,
                                   bool stream, ATTV_T *vmax) {
  const int R = ATTV / nh;
  ATTV_T mx = *vmax;
  int64_t j = 0;
  for (; j + R <= n; j += R) {
    const float *restrict kb = k + j * ks;
    float *restrict cb = copy ? copy + j * D : NULL;
    ATTV_T a[ATTV];
    ATTV_FN(att_dots_cols)(nh, q, kb, ks, cb, stream, D, 0, a);
    for (int64_t d = ATTV; d < D; d += ATTV) ATTV_FN(att_dots_cols)(nh, q, kb, ks, cb, stream, D, d, a);
    const ATTV_T sv = ATTV_FN(att_hsum)(a) * scale;
    if (nh == 1) {
      ATTV_FN(att_st)(out[0] + j, sv);
    } else {
      /* Each head's half straight from the register: a round trip through a stack array costs
       * a store the narrower reloads then wait for. */
      typedef float att_half __attribute__((vector_size(ATTV * sizeof(float) / 2)));
#if ATTV == 8
      const att_half lo = __builtin_shufflevector(sv, sv, 0, 1, 2, 3);
      const att_half hi = __builtin_shufflevector(sv, sv, 4, 5, 6, 7);
#else
      const att_half lo = __builtin_shufflevector(sv, sv, 0, 1, 2, 3, 4, 5, 6, 7);
      const att_half hi = __builtin_shufflevector(sv, sv, 8, 9, 10, 11, 12, 13, 14, 15);
#endif
      memcpy(out[0] + j, &lo, sizeof lo);
      memcpy(out[1] + j, &hi, sizeof hi);
    }
    mx = ATTV_FN(att_max)(mx, sv);
  }
  for (; j < n; j++) {
    /* Row by row, each head through the block's tree with one row, so a row's score does not
     * depend on where it falls. */
    float lanes[ATTV];
    for (int h = 0; h < nh; h++) {
      ATTV_T a[ATTV] = {{0}};
      for (int64_t d = 0; d < D; d += ATTV) {
        ATTV_T kv = ATTV_FN(att_ld)(k + j * ks + d);
        if (copy && h == 0) ATTV_FN(att_st_copy)(copy + j * D + d, kv, stream);
        a[0] = d == 0 ? ATTV_FN(att_ld)(q[h]) * kv : a[0] + ATTV_FN(att_ld)(q[h] + d) * kv;
      }
      out[h][j] = ATTV_FN(att_hsum)(a)[0] * scale;
      for (int r = 0; r < R; r++) lanes[h * R + r] = out[h][j];
    }
    mx = ATTV_FN(att_max)(mx, ATTV_FN(att_ld)(lanes));
  }
  *vmax = mx;
}

/* y[h][0..D) += sum over the n rows j of w[h][j] * v_j for nh (1 or 2, a constant) query heads
 * (row stride vs; D % ATTV == 0), in one walk: each row is loaded once for every head, and when
 * copy is not NULL it also goes there (contiguous, D apart) from the same load (streaming stores
 * when stream is set). Each head keeps four independent accumulators per ATTV columns, rows j
 * taking accumulator j % 4, so a head's sums are in the same order whether it walks alone or
 * with another. */
ATTV_INLINE void ATTV_FN(att_axpys)(const int nh, const float *const w[2], const float *restrict v, int64_t vs,
                                    int64_t n, int64_t D, float *const y[2], float *restrict copy, bool stream) {
  for (int64_t d = 0; d < D; d += ATTV) {
    ATTV_T a[2][4];
    for (int h = 0; h < nh; h++) {
      a[h][0] = ATTV_FN(att_ld)(y[h] + d);
      a[h][1] = a[h][2] = a[h][3] = ATTV_FN(att_splat)(0.0f);
    }
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int r = 0; r < 4; r++) {
        ATTV_T vv = ATTV_FN(att_ld)(v + (j + r) * vs + d);
        if (copy) ATTV_FN(att_st_copy)(copy + (j + r) * D + d, vv, stream);
        for (int h = 0; h < nh; h++) a[h][r] += w[h][j + r] * vv;
      }
    for (; j < n; j++) {
      ATTV_T vv = ATTV_FN(att_ld)(v + j * vs + d);
      if (copy) ATTV_FN(att_st_copy)(copy + j * D + d, vv, stream);
      for (int h = 0; h < nh; h++) a[h][0] += w[h][j] * vv;
    }
    for (int h = 0; h < nh; h++) ATTV_FN(att_st)(y[h] + d, (a[h][0] + a[h][1]) + (a[h][2] + a[h][3]));
  }
}

/* The weights of chunk [j0, j0 + n) of a head's scores ready for the weighted sum: exp(s - max)
 * added into the head's sum on a plain step, already final otherwise. */
ATTV_INLINE void ATTV_FN(att_weights)(att_head *h, float *s, int64_t n) {
  if (!h->ready) h->sum += ATTV_FN(att_exp_sum)(s, n, h->max);
}

/* The scores of query head r of a group, and of head r + 1 with it when the group has one, over
 * n key rows (att_dots); s points at head 0's scores of the first row (heads are T apart). */
ATTV_INLINE void ATTV_FN(att_dots_heads)(const att_plan *p, const float *qg, int64_t r, int64_t group,
                                         const float *k, int64_t ks, int64_t n, int64_t D, float *s, float *copy,
                                         att_head *heads) {
  const bool pair = r + 1 < group;
  const float *const q[2] = {qg + r * p->q_head, pair ? qg + (r + 1) * p->q_head : NULL};
  float *const out[2] = {s + r * p->T, pair ? s + (r + 1) * p->T : NULL};
  ATTV_T m = ATTV_FN(att_ld)(heads[r].lanes);
  if (pair)
    ATTV_FN(att_dots)(2, q, k, ks, n, D, p->scale, out, copy, p->stream_presents, &m);
  else
    ATTV_FN(att_dots)(1, q, k, ks, n, D, p->scale, out, copy, p->stream_presents, &m);
  ATTV_FN(att_st)(heads[r].lanes, m);
}

/* The weighted sums of query head r of a group, and of head r + 1 with it when the group has one,
 * over n value rows (att_axpys), after making the rows' weights (att_weights); w points at head
 * 0's weights of the first row, yg at head 0's output. */
ATTV_INLINE void ATTV_FN(att_axpys_heads)(const att_plan *p, int64_t r, int64_t group, float *w, const float *v,
                                          int64_t vs, int64_t n, int64_t D, float *yg, float *copy,
                                          att_head *heads) {
  const bool pair = r + 1 < group;
  const float *const wh[2] = {w + r * p->T, pair ? w + (r + 1) * p->T : NULL};
  float *const y[2] = {yg + r * p->y_head, pair ? yg + (r + 1) * p->y_head : NULL};
  ATTV_FN(att_weights)(&heads[r], w + r * p->T, n);
  if (pair) {
    ATTV_FN(att_weights)(&heads[r + 1], w + (r + 1) * p->T, n);
    ATTV_FN(att_axpys)(2, wh, v, vs, n, D, y, copy, p->stream_presents);
  } else {
    ATTV_FN(att_axpys)(1, wh, v, vs, n, D, y, copy, p->stream_presents);
  }
}

/* The decode step for every batch entry and key/value head g: scores of the group's query heads
 * (scores holds group * T floats), their weights, and Y, with the presents written on the way
 * when present_k / present_v are not NULL. heads holds one att_head per query head of a group.
 *
 * A plain step (no mask, causal or padding bias, softcap or qk output) takes each head's
 * maximum with the products, turns each chunk of scores into unnormalized weights exp(s - max)
 * just before the chunk's weighted sum and scales Y by 1 / sum once at the end. Otherwise
 * att_finish_row_f32 makes the final weights between the two walks. */
MX_KHOT static void ATTV_FN(att_decode_f32)(const att_plan *p, const float *q, const float *k, const float *v,
                                            const float *pk, const float *pv, const void *mask, float *y,
                                            mx_ktensor *qk_out, float *scores, att_head *heads, float *present_k,
                                            float *present_v) {
  const int64_t Dk = p->Dk, Dv = p->Dv;
  const int64_t T = p->T, P = p->P, Skv = p->Skv, group = p->Hq / p->Hkv;
  const int64_t ck = att_chunk_rows(Dk), cv = att_chunk_rows(Dv);
  const bool plain = !mask && !p->causal && !p->nonpad && !(p->softcap > 0.0f) && !qk_out;
  for (int64_t b = 0; b < p->B; b++) {
    for (int64_t g = 0; g < p->Hkv; g++) {
      const int64_t h0 = g * group, slab = b * p->Hkv + g; /* slab: (b, g) in past and present */
      const float *qb = q + b * p->q_batch + h0 * p->q_head;
      float *yb = y + b * p->y_batch + h0 * p->y_head;
      /* Keys: the past rows chunk by chunk, then the new rows; the first pair's walk copies
       * them into present_key. */
      const float *pkh = P > 0 ? pk + slab * P * Dk : NULL;
      float *okh = present_k ? present_k + slab * T * Dk : NULL;
      const float *kh = Skv > 0 ? k + b * p->k_batch + g * p->k_head : NULL;
      for (int64_t r = 0; r < group; r++) ATTV_FN(att_st)(heads[r].lanes, ATTV_FN(att_splat)(-INFINITY));
      /* One call site for both kinds of rows keeps the inlined walks few. */
      for (int64_t j0 = 0; j0 < T;) {
        const bool past = j0 < P;
        const int64_t c = past ? (P - j0 < ck ? P - j0 : ck) : Skv;
        const float *rows = past ? pkh + j0 * Dk : kh;
        for (int64_t r = 0; r < group; r += 2)
          ATTV_FN(att_dots_heads)(p, qb, r, group, rows, past ? Dk : p->k_row, c, Dk, scores + j0,
                                  r == 0 && okh ? okh + j0 * Dk : NULL, heads);
        j0 += c;
      }
      /* A pair's running maxima: head r's in the low half of heads[r], head r + 1's in the high. */
      for (int64_t r = 0; r + 1 < group; r += 2)
        for (int l = 0; l < ATTV / 2; l++) {
          heads[r + 1].lanes[l] = heads[r].lanes[ATTV / 2 + l];
          heads[r].lanes[ATTV / 2 + l] = -INFINITY;
        }
      for (int64_t r = 0; r < group; r++) {
        att_head *h = &heads[r];
        float *s = scores + r * T;
        h->ready = true;
        h->sum = 0.0;
        if (!plain) {
          if (T > 0) att_finish_row_f32(p, mask, b, h0 + r, 0, s, qk_out);
        } else if (T > 0) {
          float m = h->lanes[0];
          for (int l = 1; l < ATTV; l++) m = h->lanes[l] > m ? h->lanes[l] : m;
          if (m == -INFINITY) {
            att_softmax_row_f32(s, T); /* no finite score: zeros, or NaN if there is one */
          } else {
            h->max = m;
            h->ready = false;
          }
        }
        memset(yb + r * p->y_head, 0, (size_t)Dv * sizeof(float));
      }
      /* Values: the same walk, accumulating every head's weighted sum. */
      const float *pvh = P > 0 ? pv + slab * P * Dv : NULL;
      float *ovh = present_v ? present_v + slab * T * Dv : NULL;
      const float *vh = Skv > 0 ? v + b * p->v_batch + g * p->v_head : NULL;
      for (int64_t j0 = 0; j0 < T;) {
        const bool past = j0 < P;
        const int64_t c = past ? (P - j0 < cv ? P - j0 : cv) : Skv;
        const float *rows = past ? pvh + j0 * Dv : vh;
        for (int64_t r = 0; r < group; r += 2)
          ATTV_FN(att_axpys_heads)(p, r, group, scores + j0, rows, past ? Dv : p->v_row, c, Dv, yb,
                                   r == 0 && ovh ? ovh + j0 * Dv : NULL, heads);
        j0 += c;
      }
      for (int64_t r = 0; r < group; r++) {
        if (heads[r].ready) continue;
        const float inv = (float)(1.0 / heads[r].sum);
        float *yr = yb + r * p->y_head;
        for (int64_t d = 0; d < Dv; d++) yr[d] *= inv;
      }
    }
  }
#if defined(__SSE__)
  /* Streaming stores are weakly ordered: make them visible before the launch reports done. */
  if (p->stream_presents) _mm_sfence();
#endif
}

#undef ATTV_INLINE
#undef ATTV_T
#undef ATTV_I
#undef ATTV_FN
#undef ATTV_CAT
#undef ATTV_CAT2
#undef ATTV
