/* Broadcast walking for the elementwise kernels, the float16/bfloat16 row adapter and the
 * saturating store with its correctly rounded double -> float16/bfloat16 conversion (see
 * elementwise_impl.h for the model).
 *
 * Planning right-aligns every input against the output (numpy rules), gives broadcast dims a
 * stride of 0, drops size-1 dims and merges neighbouring dims that every operand walks in
 * step. What remains is usually one or two dims, so the walk's bookkeeping is paid per row,
 * not per element. The common shapes (same shape, a scalar, a bias row over the trailing dims)
 * are recognized first and planned directly, since the kernels run per call and plan anew. */
#include <math.h>
#include <string.h>

#include "kernels/elementwise_impl.h"

/* How an input meets the output, when that is one of the common cases. */
typedef enum ew_kind {
  EW_FULL,   /* as many elements as the output, in its order (same shape up to leading 1s) */
  EW_SCALAR, /* one element */
  EW_SUFFIX, /* the output's trailing dims (leading dims 1 or missing): repeats every m elements */
  EW_OTHER   /* anything else, including shapes that do not broadcast: the general planner */
} ew_kind;

/* Classifies input t against out (numel n): t's dims, from the innermost, equal out's until
 * the first mismatch, and every dim of t before it must be 1. *m is the number of elements of
 * t (its repeat length along the output). */
static ew_kind ew_classify(const mx_ktensor *t, const mx_ktensor *out, int64_t n, int64_t *m) {
  if (t->rank > out->rank) return EW_OTHER;
  int32_t off = out->rank - t->rank, k = t->rank - 1;
  int64_t c = 1;
  for (; k >= 0 && t->dims[k] == out->dims[k + off]; k--) c *= t->dims[k];
  for (; k >= 0; k--)
    if (t->dims[k] != 1) return EW_OTHER;
  *m = c;
  return c == n ? EW_FULL : c == 1 ? EW_SCALAR : EW_SUFFIX;
}

/* The common cases without the general planner: every input is the output's shape, a single
 * element, or one shared suffix of the output's dims (a bias row). Fills only the fields
 * mx__ew_run reads (rank 1, or rank 2 as [n / m, m]); false when some input needs more. These
 * are the plans the general path would merge the same shapes into, so rows are the same. */
static bool ew_plan_fast(const mx_ktensor *out, const mx_ktensor *const *ins, int n_in, mx__ew_plan *plan) {
  int64_t n = mx__ktensor_numel(out), row = n;
  if (n == 0) return false; /* callers skip empty outputs; the general path stays the one for them */
  ew_kind kind[MX__EW_MAX_OPS - 1];
  for (int j = 0; j < n_in; j++) {
    int64_t m;
    kind[j] = ew_classify(ins[j], out, n, &m);
    if (kind[j] == EW_OTHER) return false;
    if (kind[j] == EW_SUFFIX) {
      if (row != n && row != m) return false; /* two different suffixes */
      row = m;
    }
  }
  plan->n_ops = n_in + 1;
  plan->esize[0] = (int64_t)mx_dtype_size(out->dtype);
  for (int j = 0; j < n_in; j++) plan->esize[j + 1] = (int64_t)mx_dtype_size(ins[j]->dtype);
  if (row == n) {
    plan->rank = 1;
    plan->dims[0] = n;
    plan->strides[0][0] = 1;
    for (int j = 0; j < n_in; j++) plan->strides[j + 1][0] = kind[j] == EW_SCALAR ? 0 : 1;
    return true;
  }
  plan->rank = 2;
  plan->dims[0] = n / row;
  plan->dims[1] = row;
  plan->strides[0][0] = row;
  plan->strides[0][1] = 1;
  for (int j = 0; j < n_in; j++) {
    plan->strides[j + 1][0] = kind[j] == EW_FULL ? row : 0;
    plan->strides[j + 1][1] = kind[j] == EW_SCALAR ? 0 : 1;
  }
  return true;
}

mx_status mx__ew_plan_make(mx_kernel_call *call, const mx_ktensor *out, const mx_ktensor *const *ins,
                           int n_in, mx__ew_plan *plan) {
  if (ew_plan_fast(out, ins, n_in, plan)) return MX_OK;
  memset(plan, 0, sizeof *plan);
  int32_t r = out->rank;
  int n_ops = n_in + 1;
  int64_t st[MX__EW_MAX_OPS][MX_MAX_RANK];
  int64_t s = 1;
  for (int32_t k = r - 1; k >= 0; k--) {
    st[0][k] = s;
    s *= out->dims[k];
  }
  plan->esize[0] = (int64_t)mx_dtype_size(out->dtype);
  for (int j = 0; j < n_in; j++) {
    const mx_ktensor *in = ins[j];
    plan->esize[j + 1] = (int64_t)mx_dtype_size(in->dtype);
    if (in->rank > r) {
      call->why = "an input has a higher rank than the output";
      return MX_ERR_KERNEL;
    }
    int32_t off = r - in->rank;
    s = 1;
    for (int32_t k = r - 1; k >= 0; k--) {
      int64_t d = k >= off ? in->dims[k - off] : 1;
      if (d != out->dims[k] && d != 1) {
        call->why = "an input does not broadcast to the output shape";
        return MX_ERR_KERNEL;
      }
      st[j + 1][k] = d == 1 ? 0 : s;
      s *= d;
    }
  }
  /* Merge from the innermost dim outwards, skipping size-1 dims. */
  int64_t md[MX_MAX_RANK], ms[MX__EW_MAX_OPS][MX_MAX_RANK];
  int32_t m = 0;
  for (int32_t k = r - 1; k >= 0; k--) {
    if (out->dims[k] == 1) continue;
    bool merge = m > 0;
    for (int op = 0; op < n_ops && merge; op++) merge = ms[op][m - 1] * md[m - 1] == st[op][k];
    if (merge) {
      md[m - 1] *= out->dims[k];
      continue;
    }
    md[m] = out->dims[k];
    for (int op = 0; op < n_ops; op++) ms[op][m] = st[op][k];
    m++;
  }
  if (m == 0) { /* a single element */
    md[0] = 1;
    for (int op = 0; op < n_ops; op++) ms[op][0] = 0;
    m = 1;
  }
  plan->rank = m;
  plan->n_ops = n_ops;
  for (int32_t k = 0; k < m; k++) {
    plan->dims[k] = md[m - 1 - k];
    for (int op = 0; op < n_ops; op++) plan->strides[op][k] = ms[op][m - 1 - k];
  }
  return MX_OK;
}

bool mx__ew_run(const mx__ew_plan *plan, void *const *base, mx__ew_row_fn fn, void *ctx) {
  int32_t r = plan->rank;
  int n_ops = plan->n_ops;
  int64_t n = plan->dims[r - 1];
  char *ptr[MX__EW_MAX_OPS];
  int64_t inner[MX__EW_MAX_OPS], step[MX__EW_MAX_OPS][MX_MAX_RANK];
  for (int op = 0; op < n_ops; op++) {
    ptr[op] = base[op];
    inner[op] = plan->strides[op][r - 1];
    for (int32_t k = 0; k < r; k++) step[op][k] = plan->strides[op][k] * plan->esize[op];
  }
  int64_t idx[MX_MAX_RANK] = {0};
  for (;;) {
    if (!fn(ctx, n, ptr, inner)) return false;
    int32_t k = r - 2;
    for (; k >= 0; k--) {
      for (int op = 0; op < n_ops; op++) ptr[op] += step[op][k];
      if (++idx[k] < plan->dims[k]) break;
      for (int op = 0; op < n_ops; op++) ptr[op] -= step[op][k] * plan->dims[k];
      idx[k] = 0;
    }
    if (k < 0) return true;
  }
}

bool mx__ew_bin_row(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const mx__ew_bin_ctx *c = ctx;
  return c->fn(n, p[1], s[1], p[2], s[2], p[0]);
}

/* Loads m elements (stride 0 or more) of a 16-bit operand as float32; returns the stride the
 * row function should use (0 when the operand is broadcast along the row). */
static int64_t load_half(const char *p, int64_t s, mx_dtype dt, int64_t off, int64_t m, float *buf) {
  const uint16_t *h = (const uint16_t *)p;
  if (s == 0) {
    mx__khalf_to_f32(h, dt, buf, 1);
    return 0;
  }
  if (s == 1) {
    mx__khalf_to_f32(h + off, dt, buf, m);
  } else {
    for (int64_t i = 0; i < m; i++) mx__khalf_to_f32(h + (off + i) * s, dt, buf + i, 1);
  }
  return 1;
}

bool mx__ew_half_row(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const mx__ew_bin_ctx *c = ctx;
  float ba[MX__EW_CHUNK], bb[MX__EW_CHUNK], bo[MX__EW_CHUNK];
  int64_t ea = (int64_t)mx_dtype_size(c->dt[1]), eb = (int64_t)mx_dtype_size(c->dt[2]);
  int64_t eo = (int64_t)mx_dtype_size(c->dt[0]);
  for (int64_t off = 0; off < n; off += MX__EW_CHUNK) {
    int64_t m = n - off < MX__EW_CHUNK ? n - off : MX__EW_CHUNK;
    const void *a = ba, *b = bb;
    int64_t sa, sb;
    if (mx__ew_is_half(c->dt[1]))
      sa = load_half(p[1], s[1], c->dt[1], off, m, ba);
    else
      a = p[1] + off * s[1] * ea, sa = s[1];
    if (mx__ew_is_half(c->dt[2]))
      sb = load_half(p[2], s[2], c->dt[2], off, m, bb);
    else
      b = p[2] + off * s[2] * eb, sb = s[2];
    bool half_out = mx__ew_is_half(c->dt[0]);
    void *o = half_out ? (void *)bo : (void *)(p[0] + off * eo);
    if (!c->fn(m, a, sa, b, sb, o)) return false;
    if (half_out) mx__kf32_to_half(bo, c->dt[0], (uint16_t *)p[0] + off, m);
  }
  return true;
}

mx_status mx__ew_binary_apply(mx_kernel_call *call, mx__ew_bin_fn fn, const mx_ktensor *out,
                              const mx_ktensor *a, const mx_ktensor *b) {
  if (mx__ktensor_numel(out) == 0) return MX_OK;
  const mx_ktensor *ins[2] = {a, b};
  mx__ew_plan plan;
  mx_status st = mx__ew_plan_make(call, out, ins, 2, &plan);
  if (st != MX_OK) return st;
  mx__ew_bin_ctx ctx = {fn, {out->dtype, a->dtype, b->dtype}};
  bool half = mx__ew_is_half(out->dtype) || mx__ew_is_half(a->dtype) || mx__ew_is_half(b->dtype);
  bool ok;
  if (!half && plan.rank == 1) {
    /* One row (same shapes or a scalar operand): the row function directly, no walk. */
    ok = fn(plan.dims[0], a->data, plan.strides[1][0], b->data, plan.strides[2][0], out->data);
  } else {
    void *base[3] = {out->data, a->data, b->data};
    ok = mx__ew_run(&plan, base, half ? mx__ew_half_row : mx__ew_bin_row, &ctx);
  }
  if (!ok) {
    call->why = "integer division or modulo by zero";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

/* double -> float rounded to odd: inexact results are truncated toward zero with the last bit
 * set, so a later rounding to a format with at least two fewer bits rounds correctly. */
static float f64_to_f32_odd(double d) {
  float f = (float)d;
  if (d != d || (double)f == d) return f;
  if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
  return mx__bits_f32(mx__f32_bits(f) | 1u);
}

uint16_t mx__ew_f64_to_half(double v, mx_dtype dt) {
  float f = f64_to_f32_odd(v);
  return dt == MX_FLOAT16 ? mx__f32_to_f16(f) : mx__f32_to_bf16(f);
}

void mx__ew_store_sat(void *p, mx_dtype dt, int64_t i, double v) {
  switch (dt) {
    case MX_FLOAT16:
    case MX_BFLOAT16: ((uint16_t *)p)[i] = mx__ew_f64_to_half(v, dt); break;
    case MX_INT8: ((int8_t *)p)[i] = (int8_t)mx__ew_sat_i64(v, INT8_MIN, INT8_MAX); break;
    case MX_UINT8: ((uint8_t *)p)[i] = (uint8_t)mx__ew_sat_i64(v, 0, UINT8_MAX); break;
    case MX_INT16: ((int16_t *)p)[i] = (int16_t)mx__ew_sat_i64(v, INT16_MIN, INT16_MAX); break;
    case MX_INT32: ((int32_t *)p)[i] = (int32_t)mx__ew_sat_i64(v, INT32_MIN, INT32_MAX); break;
    case MX_INT64:
      ((int64_t *)p)[i] = mx__ew_sat_i64(v, -9223372036854775808.0, 9223372036854775807.0);
      break;
    case MX_UINT16: ((uint16_t *)p)[i] = (uint16_t)mx__ew_sat_i64(v, 0, UINT16_MAX); break;
    case MX_UINT32: ((uint32_t *)p)[i] = (uint32_t)mx__ew_sat_i64(v, 0, UINT32_MAX); break;
    case MX_UINT64:
      ((uint64_t *)p)[i] = !(v > 0.0) ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
      break;
    case MX_INT4:
    case MX_UINT4:
    case MX_INT2:
    case MX_UINT2: /* ONNX Cast truncates, then keeps the low bits (numpy's astype) */
      mx__kset_sub_byte(p, dt, i, mx__ew_sat_i64(v, -9223372036854775808.0, 9223372036854775807.0));
      break;
    default: mx__kset_f64(p, dt, i, v); break;
  }
}
