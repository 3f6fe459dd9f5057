/* Attention with its past and presents in buffers padded along the sequence (a session state
 * kept with room to grow, v2runtime/state.c): the past read through its strides, and a present
 * sharing its past's buffer appended in place (only the new rows written). Every result must be
 * bit for bit the contiguous call's: Y, and the present's rows in the buffer; the rows past the
 * present stay untouched. Covers the float32 decode step, the general walk (several query rows,
 * or a head size the decode step does not take), float64 and float16, appended and copied into
 * a padded present of its own. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/nn_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

enum { B = 2, HQ = 4, HKV = 2, P = 5, CAP = 11 };

typedef struct shape {
  mx_dtype dt;
  int sq, skv, d;
} shape;

static size_t esize(mx_dtype dt) { return dt == MX_FLOAT64 ? 8 : dt == MX_FLOAT32 ? 4 : 2; }

/* n values of a seeded sequence in dtype dt. */
static void *filled(mx_dtype dt, size_t n, unsigned seed) {
  void *p = malloc(n * esize(dt) + 1);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    float f = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    if (dt == MX_FLOAT64)
      ((double *)p)[i] = f;
    else if (dt == MX_FLOAT32)
      ((float *)p)[i] = f;
    else
      ((uint16_t *)p)[i] = mx__f32_to_f16(f);
  }
  return p;
}

/* Copies rows [0, rows) of each (batch, head) slab between layouts of `from` and `to` rows. */
static void copy_slabs(void *dst, int64_t to, const void *src, int64_t from, int64_t rows, int d, size_t es) {
  for (int s = 0; s < B * HKV; s++)
    memcpy((char *)dst + (size_t)s * (size_t)to * (size_t)d * es,
           (const char *)src + (size_t)s * (size_t)from * (size_t)d * es, (size_t)rows * (size_t)d * es);
}

static void set_padded(mx_kernel_call *c, uint32_t i, mx_dtype dt, int64_t rows, int d, void *data) {
  kc_set(c, i, dt, 4, DIMS(B, HKV, rows, d), data);
  c->t[i].strides[0] = (int64_t)HKV * CAP * d;
  c->t[i].strides[1] = (int64_t)CAP * d;
}

static void check(shape sh, bool in_place) {
  const mx_dtype dt = sh.dt;
  const size_t es = esize(dt);
  const int d = sh.d, T = P + sh.skv;
  void *q = filled(dt, (size_t)B * HQ * sh.sq * d, 1), *k = filled(dt, (size_t)B * HKV * sh.skv * d, 2);
  void *v = filled(dt, (size_t)B * HKV * sh.skv * d, 3);
  void *pk = filled(dt, (size_t)B * HKV * P * d, 4), *pv = filled(dt, (size_t)B * HKV * P * d, 5);
  size_t y_n = (size_t)B * HQ * sh.sq * d, pres_n = (size_t)B * HKV * T * d,
         pad_n = (size_t)B * HKV * CAP * d;
  void *y0 = calloc(y_n, es), *ok0 = calloc(pres_n, es), *ov0 = calloc(pres_n, es), *y1 = calloc(y_n, es);
  mx_attention_params prm = {0};
  /* The contiguous call. */
  mx_kernel_call *c = kc_new(6, 3, &prm);
  kc_set(c, 0, dt, 4, DIMS(B, HQ, sh.sq, d), q);
  kc_set(c, 1, dt, 4, DIMS(B, HKV, sh.skv, d), k);
  kc_set(c, 2, dt, 4, DIMS(B, HKV, sh.skv, d), v);
  kc_set(c, 4, dt, 4, DIMS(B, HKV, P, d), pk);
  kc_set(c, 5, dt, 4, DIMS(B, HKV, P, d), pv);
  kc_set(c, 6, dt, 4, DIMS(B, HQ, sh.sq, d), y0);
  kc_set(c, 7, dt, 4, DIMS(B, HKV, T, d), ok0);
  kc_set(c, 8, dt, 4, DIMS(B, HKV, T, d), ov0);
  cr_assert_eq(kc_run("Attention", c), MX_OK, "%s", c->why ? c->why : "");
  free(c);
  /* The padded one: the past's rows in buffers of CAP rows, the rest holding a marker byte. */
  void *kbuf = malloc(pad_n * es), *vbuf = malloc(pad_n * es);
  void *okb = in_place ? kbuf : malloc(pad_n * es), *ovb = in_place ? vbuf : malloc(pad_n * es);
  memset(kbuf, 0x7f, pad_n * es), memset(vbuf, 0x7f, pad_n * es);
  if (!in_place) memset(okb, 0x7f, pad_n * es), memset(ovb, 0x7f, pad_n * es);
  copy_slabs(kbuf, CAP, pk, P, P, d, es);
  copy_slabs(vbuf, CAP, pv, P, P, d, es);
  c = kc_new(6, 3, &prm);
  kc_set(c, 0, dt, 4, DIMS(B, HQ, sh.sq, d), q);
  kc_set(c, 1, dt, 4, DIMS(B, HKV, sh.skv, d), k);
  kc_set(c, 2, dt, 4, DIMS(B, HKV, sh.skv, d), v);
  set_padded(c, 4, dt, P, d, kbuf);
  set_padded(c, 5, dt, P, d, vbuf);
  kc_set(c, 6, dt, 4, DIMS(B, HQ, sh.sq, d), y1);
  set_padded(c, 7, dt, T, d, okb);
  set_padded(c, 8, dt, T, d, ovb);
  cr_assert_eq(kc_run("Attention", c), MX_OK, "%s", c->why ? c->why : "");
  free(c);
  cr_assert_eq(memcmp(y0, y1, y_n * es), 0, "Y differs from the contiguous call's");
  void *packed = malloc(pres_n * es);
  copy_slabs(packed, T, okb, CAP, T, d, es);
  cr_assert_eq(memcmp(packed, ok0, pres_n * es), 0, "present_key rows differ");
  copy_slabs(packed, T, ovb, CAP, T, d, es);
  cr_assert_eq(memcmp(packed, ov0, pres_n * es), 0, "present_value rows differ");
  /* Rows past the present: untouched. */
  for (int s = 0; s < B * HKV; s++)
    for (size_t b = (size_t)T * (size_t)d * es; b < (size_t)CAP * (size_t)d * es; b++) {
      cr_assert_eq(((unsigned char *)okb)[(size_t)s * CAP * (size_t)d * es + b], 0x7f);
      cr_assert_eq(((unsigned char *)ovb)[(size_t)s * CAP * (size_t)d * es + b], 0x7f);
    }
  free(packed);
  if (!in_place) free(okb), free(ovb);
  free(kbuf), free(vbuf), free(q), free(k), free(v), free(pk), free(pv), free(y0), free(y1), free(ok0),
      free(ov0);
}

Test(attention_padded, f32_decode_step) {
  check((shape){MX_FLOAT32, 1, 1, 16}, true);
  check((shape){MX_FLOAT32, 1, 1, 16}, false);
  check((shape){MX_FLOAT32, 1, 1, 32}, true);
}

Test(attention_padded, f32_walk) {
  check((shape){MX_FLOAT32, 3, 3, 16}, true); /* several query rows */
  check((shape){MX_FLOAT32, 1, 1, 12}, true); /* a head size the decode step does not take */
  check((shape){MX_FLOAT32, 2, 2, 12}, false);
}

Test(attention_padded, f64_and_f16) {
  check((shape){MX_FLOAT64, 1, 1, 16}, true);
  check((shape){MX_FLOAT64, 2, 2, 8}, false);
  check((shape){MX_FLOAT16, 1, 1, 16}, true);
  check((shape){MX_FLOAT16, 2, 2, 8}, false);
}

/* A present sharing its past's buffer with other strides than the past's is refused. */
Test(attention_padded, shared_buffer_needs_the_same_strides) {
  mx_attention_params prm = {0};
  float *q = filled(MX_FLOAT32, (size_t)B * HQ * 16, 1), *kv = filled(MX_FLOAT32, (size_t)B * HKV * 16, 2);
  float *buf = calloc((size_t)B * HKV * CAP * 16, sizeof(float)), *y = calloc((size_t)B * HQ * 16, 4);
  float *vbuf = calloc((size_t)B * HKV * CAP * 16, sizeof(float));
  mx_kernel_call *c = kc_new(6, 3, &prm);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(B, HQ, 1, 16), q);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(B, HKV, 1, 16), kv);
  kc_set(c, 2, MX_FLOAT32, 4, DIMS(B, HKV, 1, 16), kv);
  set_padded(c, 4, MX_FLOAT32, P, 16, buf);
  set_padded(c, 5, MX_FLOAT32, P, 16, vbuf);
  kc_set(c, 6, MX_FLOAT32, 4, DIMS(B, HQ, 1, 16), y);
  kc_set(c, 7, MX_FLOAT32, 4, DIMS(B, HKV, P + 1, 16), buf); /* contiguous strides, same buffer */
  set_padded(c, 8, MX_FLOAT32, P + 1, 16, vbuf);
  cr_assert_eq(kc_run("Attention", c), MX_ERR_KERNEL);
  cr_assert(c->why && strstr(c->why, "strides"), "%s", c->why ? c->why : "(none)");
  free(c), free(q), free(kv), free(buf), free(vbuf), free(y);
}
