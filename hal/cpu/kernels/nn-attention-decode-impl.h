/* The float32 decode step of Attention (one query row), included once by nn_attention.c after
 * the float instance of nn-attention-impl.h (it uses att_finish_row_f32).
 *
 * One pass over each cache per key/value head: the first query head of the group reads a chunk
 * of past rows for its products and writes them into present_key / present_value from the same
 * loads; the group's other heads read the chunk again while it is in L1. The products are written with 8-lane vectors (gcc/clang vector
 * extensions, so the AVX2 copy of the function gets ymm registers and the baseline one pairs of
 * xmm): a dot product of one query with eight key rows sums the rows' lane vectors with a
 * transpose-and-add tree (14 shuffles for 8 rows) instead of folding each row on its own, and
 * the weighted sum of value rows keeps four independent accumulators per 8 columns so the adds
 * do not wait on each other. Head sizes must be multiples of 8 (att_decode_fits); other shapes
 * take att_core. */

/* The 32-byte vectors never cross a call: every helper below is always inlined into
 * att_decode_f32, whose AVX2 and baseline copies then each use their own registers. (A call
 * between a baseline helper and the AVX2 copy would pass vectors by two different conventions:
 * what gcc's -Wpsabi note is about.) */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float att_v8 __attribute__((vector_size(32)));

__attribute__((always_inline)) static inline att_v8 att_ld8(const float *p) {
  att_v8 v;
  memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((always_inline)) static inline void att_st8(float *p, att_v8 v) { memcpy(p, &v, sizeof v); }

/* Lane r of the result is the sum of a[r]'s eight lanes. Each step is one shuffle instruction
 * on AVX (unpack, shufps, vperm2f128). */
__attribute__((always_inline)) static inline att_v8 att_hsum8(const att_v8 a[8]) {
  att_v8 s[4];
  for (int i = 0; i < 4; i++)
    s[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  att_v8 t0 = __builtin_shufflevector(s[0], s[1], 0, 1, 8, 9, 4, 5, 12, 13) +
              __builtin_shufflevector(s[0], s[1], 2, 3, 10, 11, 6, 7, 14, 15);
  att_v8 t1 = __builtin_shufflevector(s[2], s[3], 0, 1, 8, 9, 4, 5, 12, 13) +
              __builtin_shufflevector(s[2], s[3], 2, 3, 10, 11, 6, 7, 14, 15);
  return __builtin_shufflevector(t0, t1, 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(t0, t1, 4, 5, 6, 7, 12, 13, 14, 15);
}

/* out[j] = scale * (q . k_j) for n key rows of D elements (row stride ks; D % 8 == 0). When copy
 * is not NULL, the rows also go there (contiguous, D apart) from the same loads. */
__attribute__((always_inline)) static inline void att_dots8(const float *restrict q, const float *restrict k,
                                                            int64_t ks, int64_t n, int64_t D, float scale,
                                                            float *restrict out, float *restrict copy) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    att_v8 a[8] = {{0}};
    for (int64_t d = 0; d < D; d += 8) {
      att_v8 qv = att_ld8(q + d);
      for (int r = 0; r < 8; r++) {
        att_v8 kv = att_ld8(k + (j + r) * ks + d);
        if (copy) att_st8(copy + (j + r) * D + d, kv);
        a[r] += qv * kv;
      }
    }
    att_st8(out + j, att_hsum8(a) * scale);
  }
  for (; j < n; j++) {
    att_v8 a[8] = {{0}};
    for (int64_t d = 0; d < D; d += 8) {
      att_v8 kv = att_ld8(k + j * ks + d);
      if (copy) att_st8(copy + j * D + d, kv);
      a[0] += att_ld8(q + d) * kv;
    }
    out[j] = att_hsum8(a)[0] * scale;
  }
}

/* y[0..D) += sum over the n rows j of w[j] * v_j (row stride vs; D % 8 == 0). When copy is not
 * NULL, the rows also go there (contiguous, D apart) from the same loads. */
__attribute__((always_inline)) static inline void att_axpys8(const float *restrict w, const float *restrict v,
                                                             int64_t vs, int64_t n, int64_t D, float *restrict y,
                                                             float *restrict copy) {
  for (int64_t d = 0; d < D; d += 8) {
    att_v8 a[4] = {att_ld8(y + d), {0}, {0}, {0}};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int r = 0; r < 4; r++) {
        att_v8 vv = att_ld8(v + (j + r) * vs + d);
        if (copy) att_st8(copy + (j + r) * D + d, vv);
        a[r] += w[j + r] * vv;
      }
    for (; j < n; j++) {
      att_v8 vv = att_ld8(v + j * vs + d);
      if (copy) att_st8(copy + j * D + d, vv);
      a[0] += w[j] * vv;
    }
    att_st8(y + d, (a[0] + a[1]) + (a[2] + a[3]));
  }
}

/* True when att_decode_f32 handles the call. */
static bool att_decode_fits(const att_plan *p) {
  return p->Sq == 1 && p->B > 0 && p->Hq > 0 && p->Dk > 0 && p->Dv > 0 && p->Dk % 8 == 0 && p->Dv % 8 == 0;
}

/* Rows of the cache per chunk: about 8 KB of one head's rows, a multiple of 8. */
static int64_t att_chunk_rows(int64_t D) {
  int64_t c = (8192 / (D * (int64_t)sizeof(float))) & ~(int64_t)7;
  return c < 8 ? 8 : c;
}

/* The decode step for every batch entry and key/value head g: scores of the group's query heads
 * (scores holds group * T floats), their weights, and Y, with the presents written on the way
 * when present_k / present_v are not NULL. */
MX_KHOT static void att_decode_f32(const att_plan *p, const float *q, const float *k, const float *v, const float *pk,
                                   const float *pv, const void *mask, float *y, mx_ktensor *qk_out, float *scores,
                                   float *present_k, float *present_v) {
  const int64_t T = p->T, P = p->P, Skv = p->Skv, Dk = p->Dk, Dv = p->Dv, group = p->Hq / p->Hkv;
  const float scale = p->scale;
  const int64_t ck = att_chunk_rows(Dk), cv = att_chunk_rows(Dv);
  for (int64_t b = 0; b < p->B; b++) {
    for (int64_t g = 0; g < p->Hkv; g++) {
      const int64_t h0 = g * group, slab = b * p->Hkv + g; /* slab: (b, g) in past and present */
      const float *qb = q + b * p->q_batch + h0 * p->q_head;
      float *yb = y + b * p->y_batch + h0 * p->y_head;
      /* Keys: the past rows chunk by chunk, then the new rows; the first head's pass copies
       * them into present_key. */
      const float *pkh = P > 0 ? pk + slab * P * Dk : NULL;
      float *okh = present_k ? present_k + slab * T * Dk : NULL;
      for (int64_t j0 = 0; j0 < P; j0 += ck) {
        int64_t c = P - j0 < ck ? P - j0 : ck;
        for (int64_t r = 0; r < group; r++)
          att_dots8(qb + r * p->q_head, pkh + j0 * Dk, Dk, c, Dk, scale, scores + r * T + j0,
                    r == 0 && okh ? okh + j0 * Dk : NULL);
      }
      if (Skv > 0) {
        const float *kh = k + b * p->k_batch + g * p->k_head;
        for (int64_t r = 0; r < group; r++)
          att_dots8(qb + r * p->q_head, kh, p->k_row, Skv, Dk, scale, scores + r * T + P,
                    r == 0 && okh ? okh + P * Dk : NULL);
      }
      for (int64_t r = 0; r < group; r++) {
        if (T > 0) att_finish_row_f32(p, mask, b, h0 + r, 0, scores + r * T, qk_out);
        memset(yb + r * p->y_head, 0, (size_t)Dv * sizeof(float));
      }
      /* Values: the same walk, accumulating every head's weighted sum. */
      const float *pvh = P > 0 ? pv + slab * P * Dv : NULL;
      float *ovh = present_v ? present_v + slab * T * Dv : NULL;
      for (int64_t j0 = 0; j0 < P; j0 += cv) {
        int64_t c = P - j0 < cv ? P - j0 : cv;
        for (int64_t r = 0; r < group; r++)
          att_axpys8(scores + r * T + j0, pvh + j0 * Dv, Dv, c, Dv, yb + r * p->y_head,
                     r == 0 && ovh ? ovh + j0 * Dv : NULL);
      }
      if (Skv > 0) {
        const float *vh = v + b * p->v_batch + g * p->v_head;
        for (int64_t r = 0; r < group; r++)
          att_axpys8(scores + r * T + P, vh, p->v_row, Skv, Dv, yb + r * p->y_head,
                     r == 0 && ovh ? ovh + P * Dv : NULL);
      }
    }
  }
}
