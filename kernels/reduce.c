/* CPU kernels of the Reduce* ops (Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSumExp) and
 * the reduce group's kernel list (ArgMax, ArgMin and CumSum live in reduce_arg.c).
 *
 * Model. The axes (attribute or input 1, per the params) split the input's dims into reduced
 * and kept ones; size-1 dims are dropped and neighbours of the same kind merged, so the input
 * is a walk over "groups" ending in an innermost group that is either reduced (each row folds
 * into one accumulator: a contiguous reduction with eight independent lanes, which gcc
 * vectorizes without reassociating a single sum) or kept (each row folds elementwise into a
 * row of accumulators: a contiguous, vectorizable loop). Accumulators live in the workspace in
 * one of three domains: float (float32, float16, bfloat16: 16-bit inputs are converted in
 * chunks), double (float64; also integer inputs of L2 and LogSumExp, which ONNX computes in
 * floating point) and int64 (integers and bool, wrapping like numpy). The result is finalized
 * (Mean divides, L2 takes the root, LogSumExp adds back its shift) and stored once.
 *
 * Empty reductions give the identity: 0 for sums, 1 for Prod, -inf for Max and LogSumExp
 * (integer Max: the type's minimum), +inf for Min, NaN for Mean of floats. LogSumExp runs two
 * passes (the maximum, then the sum of exp(x - max)) so it neither overflows nor underflows. */
#include <math.h>
#include <string.h>

#include "graph/ops/reduce_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/reduce_impl.h"

/* What one pass folds: a map of each element and a combine into the accumulator. */
typedef enum fold_kind {
  F_SUM,  /* x, + */
  F_SQ,   /* x*x, + */
  F_ABS,  /* |x|, + */
  F_PROD, /* x, * */
  F_MAX,  /* x, max (NaN wins) */
  F_MIN,  /* x, min (NaN wins) */
  F_EXP   /* exp(x - shift), + */
} fold_kind;

typedef enum red_op { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_SUMSQ, R_L1, R_L2, R_LSE, R_LOGSUM } red_op;

typedef enum domain { DOM_F, DOM_D, DOM_I } domain;

#define CHUNK 256

/* --- per-domain folds ----------------------------------------------------------------------- */

#define MAP_ID(v)   (v)
#define MAP_SQ(v)   ((v) * (v))
#define C_ADD(a, v) ((a) + (v))
#define C_MUL(a, v) ((a) * (v))
#define C_MAX(a, v) (((v) > (a) || (v) != (v)) ? (v) : (a))
#define C_MIN(a, v) (((v) < (a) || (v) != (v)) ? (v) : (a))
#define I_SQ(v)     (int64_t)((uint64_t)(v) * (uint64_t)(v))
#define I_ABS(v)    ((v) < 0 ? (int64_t)(0 - (uint64_t)(v)) : (v))
#define I_ADD(a, v) (int64_t)((uint64_t)(a) + (uint64_t)(v))
#define I_MUL(a, v) (int64_t)((uint64_t)(a) * (uint64_t)(v))
#define I_MAX(a, v) ((v) > (a) ? (v) : (a))
#define I_MIN(a, v) ((v) < (a) ? (v) : (a))

/* NAME(x, n, s): the fold of n contiguous elements, starting from INIT, in eight lanes. */
#define DEF_RED(NAME, A, MAP, COMB, INIT)              \
  static A NAME(const A *restrict x, int64_t n, A s) { \
    (void)s;                                           \
    A lane[8];                                         \
    for (int k = 0; k < 8; k++) lane[k] = INIT;        \
    int64_t i = 0;                                     \
    for (; i + 8 <= n; i += 8)                         \
      for (int k = 0; k < 8; k++) {                    \
        A v = MAP(x[i + k]);                           \
        lane[k] = COMB(lane[k], v);                    \
      }                                                \
    A r = INIT;                                        \
    for (int k = 0; k < 8; k++) r = COMB(r, lane[k]);  \
    for (; i < n; i++) {                               \
      A v = MAP(x[i]);                                 \
      r = COMB(r, v);                                  \
    }                                                  \
    return r;                                          \
  }
/* NAME(acc, x, n, s): acc[i] = COMB(acc[i], MAP(x[i])) for n contiguous elements. */
#define DEF_ROWS(NAME, A, MAP, COMB)                                              \
  static void NAME(A *restrict acc, const A *restrict x, int64_t n, const A *s) { \
    (void)s;                                                                      \
    for (int64_t i = 0; i < n; i++) {                                             \
      A v = MAP(x[i]);                                                            \
      acc[i] = COMB(acc[i], v);                                                   \
    }                                                                             \
  }

#define MAP_EXPF(v) expf((v)-s)
#define MAP_EXPD(v) exp((v)-s)
DEF_RED(red_f_sum, float, MAP_ID, C_ADD, 0.0f)
DEF_RED(red_f_sq, float, MAP_SQ, C_ADD, 0.0f)
DEF_RED(red_f_abs, float, fabsf, C_ADD, 0.0f)
DEF_RED(red_f_prod, float, MAP_ID, C_MUL, 1.0f)
DEF_RED(red_f_exp, float, MAP_EXPF, C_ADD, 0.0f)
DEF_RED(red_d_sum, double, MAP_ID, C_ADD, 0.0)
DEF_RED(red_d_sq, double, MAP_SQ, C_ADD, 0.0)
DEF_RED(red_d_abs, double, fabs, C_ADD, 0.0)
DEF_RED(red_d_prod, double, MAP_ID, C_MUL, 1.0)
DEF_RED(red_d_exp, double, MAP_EXPD, C_ADD, 0.0)
DEF_RED(red_i_sum, int64_t, MAP_ID, I_ADD, 0)
DEF_RED(red_i_sq, int64_t, I_SQ, I_ADD, 0)
DEF_RED(red_i_abs, int64_t, I_ABS, I_ADD, 0)
DEF_RED(red_i_prod, int64_t, MAP_ID, I_MUL, 1)
DEF_RED(red_i_max, int64_t, MAP_ID, I_MAX, INT64_MIN)
DEF_RED(red_i_min, int64_t, MAP_ID, I_MIN, INT64_MAX)

DEF_ROWS(rows_f_sum, float, MAP_ID, C_ADD)
DEF_ROWS(rows_f_sq, float, MAP_SQ, C_ADD)
DEF_ROWS(rows_f_abs, float, fabsf, C_ADD)
DEF_ROWS(rows_f_prod, float, MAP_ID, C_MUL)
DEF_ROWS(rows_f_max, float, MAP_ID, C_MAX)
DEF_ROWS(rows_f_min, float, MAP_ID, C_MIN)
DEF_ROWS(rows_d_sum, double, MAP_ID, C_ADD)
DEF_ROWS(rows_d_sq, double, MAP_SQ, C_ADD)
DEF_ROWS(rows_d_abs, double, fabs, C_ADD)
DEF_ROWS(rows_d_prod, double, MAP_ID, C_MUL)
DEF_ROWS(rows_d_max, double, MAP_ID, C_MAX)
DEF_ROWS(rows_d_min, double, MAP_ID, C_MIN)
DEF_ROWS(rows_i_sum, int64_t, MAP_ID, I_ADD)
DEF_ROWS(rows_i_sq, int64_t, I_SQ, I_ADD)
DEF_ROWS(rows_i_abs, int64_t, I_ABS, I_ADD)
DEF_ROWS(rows_i_prod, int64_t, MAP_ID, I_MUL)
DEF_ROWS(rows_i_max, int64_t, MAP_ID, I_MAX)
DEF_ROWS(rows_i_min, int64_t, MAP_ID, I_MIN)

/* Float max/min of a contiguous row: folded 64 lanes at a time with the (vectorized) row
 * combine, then the lanes and the tail; NaN wins as in the row combine. */
#define DEF_RED_EXTREME(NAME, A, ROWS, COMB, INIT)                    \
  static A NAME(const A *restrict x, int64_t n, A s) {                \
    (void)s;                                                          \
    A lane[64];                                                       \
    A r = INIT;                                                       \
    int64_t i = 0;                                                    \
    if (n >= 64) {                                                    \
      memcpy(lane, x, sizeof lane);                                   \
      for (i = 64; i + 64 <= n; i += 64) ROWS(lane, x + i, 64, NULL); \
      for (int k = 0; k < 64; k++) r = COMB(r, lane[k]);              \
    }                                                                 \
    for (; i < n; i++) r = COMB(r, x[i]);                             \
    return r;                                                         \
  }
DEF_RED_EXTREME(red_f_max, float, rows_f_max, C_MAX, -INFINITY)
DEF_RED_EXTREME(red_f_min, float, rows_f_min, C_MIN, INFINITY)
DEF_RED_EXTREME(red_d_max, double, rows_d_max, C_MAX, -INFINITY)
DEF_RED_EXTREME(red_d_min, double, rows_d_min, C_MIN, INFINITY)

static void rows_f_exp(float *restrict acc, const float *restrict x, int64_t n, const float *s) {
  for (int64_t i = 0; i < n; i++) acc[i] += expf(x[i] - s[i]);
}
static void rows_d_exp(double *restrict acc, const double *restrict x, int64_t n, const double *s) {
  for (int64_t i = 0; i < n; i++) acc[i] += exp(x[i] - s[i]);
}

typedef float (*red_f_fn)(const float *, int64_t, float);
typedef double (*red_d_fn)(const double *, int64_t, double);
typedef int64_t (*red_i_fn)(const int64_t *, int64_t, int64_t);
typedef void (*rows_f_fn)(float *, const float *, int64_t, const float *);
typedef void (*rows_d_fn)(double *, const double *, int64_t, const double *);
typedef void (*rows_i_fn)(int64_t *, const int64_t *, int64_t, const int64_t *);

static const red_f_fn RED_F[] = {red_f_sum, red_f_sq, red_f_abs, red_f_prod, red_f_max, red_f_min, red_f_exp};
static const red_d_fn RED_D[] = {red_d_sum, red_d_sq, red_d_abs, red_d_prod, red_d_max, red_d_min, red_d_exp};
static const red_i_fn RED_I[] = {red_i_sum, red_i_sq, red_i_abs, red_i_prod, red_i_max, red_i_min, NULL};
static const rows_f_fn ROWS_F[] = {rows_f_sum, rows_f_sq,  rows_f_abs, rows_f_prod,
                                   rows_f_max, rows_f_min, rows_f_exp};
static const rows_d_fn ROWS_D[] = {rows_d_sum, rows_d_sq,  rows_d_abs, rows_d_prod,
                                   rows_d_max, rows_d_min, rows_d_exp};
static const rows_i_fn ROWS_I[] = {rows_i_sum, rows_i_sq,  rows_i_abs, rows_i_prod,
                                   rows_i_max, rows_i_min, NULL};

/* Combines two partial results of a fold. */
static float comb_f(fold_kind k, float a, float v) {
  return k == F_PROD ? a * v : k == F_MAX ? C_MAX(a, v) : k == F_MIN ? C_MIN(a, v) : a + v;
}
static double comb_d(fold_kind k, double a, double v) {
  return k == F_PROD ? a * v : k == F_MAX ? C_MAX(a, v) : k == F_MIN ? C_MIN(a, v) : a + v;
}
static int64_t comb_i(fold_kind k, int64_t a, int64_t v) {
  return k == F_PROD ? I_MUL(a, v) : k == F_MAX ? I_MAX(a, v) : k == F_MIN ? I_MIN(a, v) : I_ADD(a, v);
}

/* --- the walk ------------------------------------------------------------------------------- */

typedef struct red_ctx {
  fold_kind kind;
  domain dom;
  mx_dtype src;      /* input dtype */
  void *acc;         /* accumulators (domain type), one per output element */
  const void *shift; /* F_EXP: per-output shift (domain type) */
} red_ctx;

/* Folds one input row of n elements into accumulator o (inner group reduced) or into the
 * accumulators o..o+n (inner group kept). Inputs not in the domain's type are converted in
 * chunks. */
static void fold_row(const red_ctx *c, const char *x, int64_t n, int64_t o, bool inner_red) {
  int64_t es = (int64_t)mx_dtype_size(c->src);
  if (c->dom == DOM_F) {
    float *acc = (float *)c->acc + o;
    const float *sh = c->shift ? (const float *)c->shift + o : NULL;
    float buf[CHUNK];
    for (int64_t off = 0; off < n; off += CHUNK) {
      int64_t m = n - off < CHUNK ? n - off : CHUNK;
      const float *v = (const float *)(x + off * es);
      if (c->src != MX_FLOAT32) {
        mx__khalf_to_f32((const uint16_t *)(x + off * es), c->src, buf, m);
        v = buf;
      }
      if (inner_red)
        *acc = comb_f(c->kind, *acc, RED_F[c->kind](v, m, sh ? *sh : 0.0f));
      else
        ROWS_F[c->kind](acc + off, v, m, sh ? sh + off : NULL);
    }
  } else if (c->dom == DOM_D) {
    double *acc = (double *)c->acc + o;
    const double *sh = c->shift ? (const double *)c->shift + o : NULL;
    double buf[CHUNK];
    for (int64_t off = 0; off < n; off += CHUNK) {
      int64_t m = n - off < CHUNK ? n - off : CHUNK;
      const double *v = (const double *)(x + off * es);
      if (c->src != MX_FLOAT64) {
        for (int64_t i = 0; i < m; i++) buf[i] = mx__kget_f64(x, c->src, off + i);
        v = buf;
      }
      if (inner_red)
        *acc = comb_d(c->kind, *acc, RED_D[c->kind](v, m, sh ? *sh : 0.0));
      else
        ROWS_D[c->kind](acc + off, v, m, sh ? sh + off : NULL);
    }
  } else {
    int64_t *acc = (int64_t *)c->acc + o;
    int64_t buf[CHUNK];
    for (int64_t off = 0; off < n; off += CHUNK) {
      int64_t m = n - off < CHUNK ? n - off : CHUNK;
      const int64_t *v = (const int64_t *)(x + off * es);
      if (c->src != MX_INT64) {
        for (int64_t i = 0; i < m; i++) buf[i] = mx__kget_i64(x, c->src, off + i);
        v = buf;
      }
      if (inner_red)
        *acc = comb_i(c->kind, *acc, RED_I[c->kind](v, m, 0));
      else
        ROWS_I[c->kind](acc + off, v, m, NULL);
    }
  }
}

/* The input as groups of merged dims (see the file comment). */
typedef struct red_plan {
  int32_t m;                    /* number of groups, >= 1 */
  int64_t d[MX_MAX_RANK];       /* group sizes */
  int64_t ostride[MX_MAX_RANK]; /* output stride of each group (0 for reduced groups) */
  bool inner_red;               /* the innermost group is reduced */
} red_plan;

static void make_plan(const mx_ktensor *x, const bool *reduced, red_plan *p) {
  memset(p, 0, sizeof *p);
  bool red[MX_MAX_RANK];
  int32_t m = 0;
  for (int32_t k = 0; k < x->rank; k++) {
    if (x->dims[k] == 1) continue;
    if (m > 0 && red[m - 1] == reduced[k]) {
      p->d[m - 1] *= x->dims[k];
      continue;
    }
    p->d[m] = x->dims[k];
    red[m++] = reduced[k];
  }
  if (m == 0) {
    p->d[0] = 1;
    red[0] = true;
    m = 1;
  }
  int64_t os = 1;
  for (int32_t k = m - 1; k >= 0; k--) {
    p->ostride[k] = red[k] ? 0 : os;
    if (!red[k]) os *= p->d[k];
  }
  p->m = m;
  p->inner_red = red[m - 1];
}

static void walk(const red_plan *p, const red_ctx *c, const char *x) {
  int64_t es = (int64_t)mx_dtype_size(c->src);
  int64_t inner = p->d[p->m - 1];
  int64_t idx[MX_MAX_RANK] = {0}, o = 0;
  for (;;) {
    fold_row(c, x, inner, o, p->inner_red);
    x += inner * es;
    int32_t k = p->m - 2;
    for (; k >= 0; k--) {
      o += p->ostride[k];
      if (++idx[k] < p->d[k]) break;
      o -= p->ostride[k] * p->d[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

/* --- the kernels ---------------------------------------------------------------------------- */

/* Which dims are reduced; *noop when the op copies its input (empty axes with
 * noop_with_empty_axes). */
static mx_status resolve_axes(mx_kernel_call *c, bool *reduced, bool *noop) {
  const mx_reduce_params *p = c->params;
  const mx_ktensor *x = mx__kin(c, 0);
  int64_t axes[MX_MAX_RANK];
  int64_t n = 0;
  *noop = false;
  if (p && p->axes_from_input) {
    if (c->n_in > 1 && mx__kin(c, 1)->dtype != MX_DTYPE_UNDEFINED) {
      const mx_ktensor *a = mx__kin(c, 1);
      n = mx__ktensor_numel(a);
      if (a->dtype != MX_INT64 || a->rank > 1 || n > MX_MAX_RANK || (n && !a->data)) {
        c->why = "Reduce: the axes input must be a 1-D int64 tensor of at most 8 axes";
        return MX_ERR_KERNEL;
      }
      if (n) memcpy(axes, a->data, (size_t)n * sizeof *axes);
    }
  } else if (p) {
    n = p->n_axes;
    memcpy(axes, p->axes, sizeof axes);
  }
  for (int32_t k = 0; k < MX_MAX_RANK; k++) reduced[k] = n == 0;
  if (n == 0) {
    *noop = p && p->noop_with_empty_axes;
    return MX_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
    if (a < 0 || a >= x->rank || reduced[a]) {
      c->why = "Reduce: an axis is out of range or repeated";
      return MX_ERR_KERNEL;
    }
    reduced[a] = true;
  }
  return MX_OK;
}

static size_t reduce_workspace(const mx_kernel_call *c) {
  return (size_t)mx__ktensor_numel(&c->t[c->n_in]) * 2 * sizeof(double);
}

/* Initial accumulator of a fold in a domain, as raw bytes written into acc[0..n). */
static void init_acc(void *acc, domain dom, fold_kind k, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    switch (dom) {
      case DOM_F:
        ((float *)acc)[i] = k == F_PROD ? 1.0f : k == F_MAX ? -INFINITY : k == F_MIN ? INFINITY : 0.0f;
        break;
      case DOM_D:
        ((double *)acc)[i] = k == F_PROD ? 1.0 : k == F_MAX ? -INFINITY : k == F_MIN ? INFINITY : 0.0;
        break;
      case DOM_I:
        ((int64_t *)acc)[i] = k == F_PROD ? 1 : k == F_MAX ? INT64_MIN : k == F_MIN ? INT64_MAX : 0;
        break;
    }
  }
}

/* Stores v into element i of an integer or bool buffer, clamped to the dtype's range. */
static void store_clamped(void *p, mx_dtype dt, int64_t i, int64_t v) {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  switch (dt) {
    case MX_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case MX_UINT8: lo = 0, hi = UINT8_MAX; break;
    case MX_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case MX_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case MX_UINT16: lo = 0, hi = UINT16_MAX; break;
    case MX_UINT32: lo = 0, hi = UINT32_MAX; break;
    case MX_BOOL: lo = 0, hi = 1; break;
    default: break;
  }
  mx__kset_i64(p, dt, i, v < lo ? lo : v > hi ? hi : v);
}

static mx_status run_reduce(mx_kernel_call *c, red_op op) {
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *out = mx__kout(c, 0);
  mx_dtype dt = x->dtype;
  bool is_bool = dt == MX_BOOL;
  if (out->dtype != dt || !mx_dtype_size(dt) || (is_bool && op != R_MAX && op != R_MIN)) {
    c->why = "Reduce: dtype not supported by this kernel";
    return MX_ERR_UNSUPPORTED;
  }
  bool reduced[MX_MAX_RANK], noop;
  mx_status st = resolve_axes(c, reduced, &noop);
  if (st != MX_OK) return st;
  int64_t n_in = mx__ktensor_numel(x), n_out = mx__ktensor_numel(out);
  if (noop) {
    if (n_out != n_in) {
      c->why = "Reduce: output size differs from the input's";
      return MX_ERR_KERNEL;
    }
    if (n_in && out->data != x->data) memmove(out->data, x->data, (size_t)n_in * mx_dtype_size(dt));
    return MX_OK;
  }
  int64_t kept = 1, count = 1;
  for (int32_t k = 0; k < x->rank; k++) {
    if (reduced[k])
      count *= x->dims[k];
    else
      kept *= x->dims[k];
  }
  if (kept != n_out) {
    c->why = "Reduce: output size does not match the kept dims";
    return MX_ERR_KERNEL;
  }
  if (n_out == 0) return MX_OK;
  if (c->workspace_size < (size_t)n_out * 2 * sizeof(double) || !c->workspace) {
    c->why = "Reduce: workspace too small";
    return MX_ERR_KERNEL;
  }
  domain dom = dt == MX_FLOAT64                                ? DOM_D
               : mx_dtype_is_float(dt)                         ? DOM_F
               : (op == R_L2 || op == R_LSE || op == R_LOGSUM) ? DOM_D
                                                               : DOM_I;
  static const fold_kind kinds[] = {
      [R_SUM] = F_SUM,  [R_MEAN] = F_SUM, [R_MAX] = F_MAX, [R_MIN] = F_MIN, [R_PROD] = F_PROD,
      [R_SUMSQ] = F_SQ, [R_L1] = F_ABS,   [R_L2] = F_SQ,   [R_LSE] = F_MAX, [R_LOGSUM] = F_SUM};
  void *acc = c->workspace;
  void *shift = (char *)c->workspace + (size_t)n_out * sizeof(double);
  red_plan plan;
  make_plan(x, reduced, &plan);
  red_ctx ctx = {kinds[op], dom, dt, acc, NULL};
  init_acc(acc, dom, ctx.kind, n_out);
  if (n_in) walk(&plan, &ctx, x->data);
  if (op == R_LSE) {
    /* Pass 2: sum of exp(x - max) with the maxima as shift (0 where the max is not finite). */
    memcpy(shift, acc, (size_t)n_out * (dom == DOM_F ? sizeof(float) : sizeof(double)));
    for (int64_t o = 0; o < n_out; o++) {
      if (dom == DOM_F && !isfinite(((float *)shift)[o])) ((float *)shift)[o] = 0.0f;
      if (dom == DOM_D && !isfinite(((double *)shift)[o])) ((double *)shift)[o] = 0.0;
    }
    ctx.kind = F_EXP;
    ctx.shift = shift;
    init_acc(acc, dom, F_EXP, n_out);
    if (n_in) walk(&plan, &ctx, x->data);
  }
  /* Finalize and store. */
  for (int64_t o = 0; o < n_out; o++) {
    if (dom == DOM_I) {
      int64_t v = ((int64_t *)acc)[o];
      if (op == R_MEAN) v = count ? v / count : 0;
      if (op == R_MAX || op == R_MIN)
        store_clamped(out->data, dt, o, v); /* an empty Max/Min gives the type's limit */
      else
        mx__kset_i64(out->data, dt, o, v);
    } else if (dom == DOM_D) {
      double v = ((double *)acc)[o];
      if (op == R_MEAN) v /= (double)count;
      if (op == R_L2) v = sqrt(v);
      if (op == R_LSE) v = log(v) + ((double *)shift)[o];
      if (op == R_LOGSUM) v = log(v);
      if (dt == MX_FLOAT64) {
        ((double *)out->data)[o] = v;
      } else {
        /* Integer L2 / LogSumExp / LogSum: truncate toward zero, saturating. */
        double t = v != v ? 0.0 : v;
        if (t > 9.2e18) t = 9.2e18;
        if (t < -9.2e18) t = -9.2e18;
        store_clamped(out->data, dt, o, (int64_t)t);
      }
    } else {
      float v = ((float *)acc)[o];
      if (op == R_MEAN) v /= (float)count;
      if (op == R_L2) v = sqrtf(v);
      if (op == R_LSE) v = logf(v) + ((float *)shift)[o];
      if (op == R_LOGSUM) v = logf(v);
      if (dt == MX_FLOAT32)
        ((float *)out->data)[o] = v;
      else
        mx__kf32_to_half(&v, dt, (uint16_t *)out->data + o, 1);
    }
  }
  return MX_OK;
}

#define REDUCE_KERNEL(NAME, OP, DTYPES)                                        \
  static mx_status run_##NAME(mx_kernel_call *c) { return run_reduce(c, OP); } \
  static const mx_kernel_def kdef_##NAME = {#NAME, NULL, DTYPES, 0, run_##NAME, reduce_workspace};

#define NUMERIC (MX_KDT_FLOATS | MX_KDT_INTS)
REDUCE_KERNEL(ReduceSum, R_SUM, NUMERIC)
REDUCE_KERNEL(ReduceMean, R_MEAN, NUMERIC)
REDUCE_KERNEL(ReduceMax, R_MAX, NUMERIC | MX_KDT(MX_BOOL))
REDUCE_KERNEL(ReduceMin, R_MIN, NUMERIC | MX_KDT(MX_BOOL))
REDUCE_KERNEL(ReduceProd, R_PROD, NUMERIC)
REDUCE_KERNEL(ReduceSumSquare, R_SUMSQ, NUMERIC)
REDUCE_KERNEL(ReduceL1, R_L1, NUMERIC)
REDUCE_KERNEL(ReduceL2, R_L2, NUMERIC)
REDUCE_KERNEL(ReduceLogSumExp, R_LSE, NUMERIC)
REDUCE_KERNEL(ReduceLogSum, R_LOGSUM, NUMERIC)

const mx_kernel_def *const mx__kernels_reduce[] = {
    &kdef_ReduceSum,       &kdef_ReduceMean,
    &kdef_ReduceMax,       &kdef_ReduceMin,
    &kdef_ReduceProd,      &kdef_ReduceSumSquare,
    &kdef_ReduceL1,        &kdef_ReduceL2,
    &kdef_ReduceLogSumExp, &kdef_ReduceLogSum,
    &mx__kdef_ArgMax,      &mx__kdef_ArgMin,
    &mx__kdef_CumSum,      NULL,
};
