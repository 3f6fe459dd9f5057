/* CPU kernels of the activation group's broadcasting ops: PRelu (the slope broadcast to X),
 * BitwiseAnd, BitwiseOr, BitwiseXor and BitShift. Each is a row function per element type run
 * by the elementwise group's broadcast walker (mx__ew_binary_apply), which also takes
 * float16/bfloat16 PRelu through the float32 row. The bitwise ops only depend on the element
 * width, so signed and unsigned types share rows. A shift by the type's width or more gives 0
 * (C leaves it undefined; numpy's result for the unsigned types ONNX allows). */
#include "graph/ops/activation_params.h"
#include "kernels/activation_impl.h"
#include "kernels/elementwise_impl.h"

/* NAME(n, a, sa, b, sb, o): o[i] = EXPR of x = a[i*sa] and y = b[i*sb], with a separate loop
 * for the common contiguous case that the compiler vectorizes. */
#define BIN_ROW(NAME, T, EXPR)                                                                    \
  static bool NAME(int64_t n, const void *pa, int64_t sa, const void *pb, int64_t sb, void *po) { \
    const T *a = pa, *b = pb;                                                                     \
    T *o = po;                                                                                    \
    if (sa == 1 && sb == 1) {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                                           \
        const T x = a[i], y = b[i];                                                               \
        o[i] = (T)(EXPR);                                                                         \
      }                                                                                           \
    } else {                                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                           \
        const T x = a[i * sa], y = b[i * sb];                                                     \
        o[i] = (T)(EXPR);                                                                         \
      }                                                                                           \
    }                                                                                             \
    return true;                                                                                  \
  }

/* PRelu: x < 0 ? slope * x : x (integers multiply wrapping, in the unsigned type). */
BIN_ROW(prelu_f32, float, x < 0.0f ? y * x : x)
BIN_ROW(prelu_f64, double, x < 0.0 ? y * x : x)
BIN_ROW(prelu_i32, int32_t, x < 0 ? (int32_t)((uint32_t)y * (uint32_t)x) : x)
BIN_ROW(prelu_i64, int64_t, x < 0 ? (int64_t)((uint64_t)y * (uint64_t)x) : x)

#define BITWISE_ROWS(OP, EXPR)     \
  BIN_ROW(OP##_8, uint8_t, EXPR)   \
  BIN_ROW(OP##_16, uint16_t, EXPR) \
  BIN_ROW(OP##_32, uint32_t, EXPR) \
  BIN_ROW(OP##_64, uint64_t, EXPR)
BITWISE_ROWS(and, x &y)
BITWISE_ROWS(or, x | y)
BITWISE_ROWS(xor, x ^ y)
BITWISE_ROWS(shl, y >= sizeof x * 8 ? 0 : (uint64_t)x << y)
BITWISE_ROWS(shr, y >= sizeof x * 8 ? 0 : x >> y)

/* Unsigned X is never negative: PRelu copies it. */
#define COPY_ROW(NAME, T) BIN_ROW(NAME, T, x + 0 * y)
COPY_ROW(copy_32, uint32_t)
COPY_ROW(copy_64, uint64_t)

static mx_status unsupported(mx_kernel_call *c) {
  c->why = "dtype not supported by this kernel";
  return MX_ERR_UNSUPPORTED;
}

/* The row of width-indexed rows[0..3] (1, 2, 4, 8 bytes) for an integer dtype, or NULL. */
static mx__ew_bin_fn by_width(mx_dtype dt, const mx__ew_bin_fn rows[4]) {
  if (!(MX_KDT(dt) & MX_KDT_INTS)) return NULL;
  switch (mx_dtype_size(dt)) {
    case 1: return rows[0];
    case 2: return rows[1];
    case 4: return rows[2];
    case 8: return rows[3];
    default: return NULL;
  }
}

static mx_status run_rows(mx_kernel_call *c, mx__ew_bin_fn fn) {
  const mx_ktensor *a = mx__kin(c, 0), *b = mx__kin(c, 1);
  mx_ktensor *o = mx__kout(c, 0);
  if (!fn || a->dtype != b->dtype || o->dtype != a->dtype) return unsupported(c);
  return mx__ew_binary_apply(c, fn, o, a, b);
}

#define BITWISE_KERNEL(NAME, OP)                                              \
  static mx_status run_##NAME(mx_kernel_call *c) {                            \
    static const mx__ew_bin_fn rows[4] = {OP##_8, OP##_16, OP##_32, OP##_64}; \
    return run_rows(c, by_width(mx__kin(c, 0)->dtype, rows));                 \
  }                                                                           \
  const mx_kernel_def mx__kdef_##NAME = {#NAME, NULL, MX_KDT_INTS, 0, run_##NAME, NULL};
BITWISE_KERNEL(BitwiseAnd, and)
BITWISE_KERNEL(BitwiseOr, or)
BITWISE_KERNEL(BitwiseXor, xor)

static mx_status run_BitShift(mx_kernel_call *c) {
  static const mx__ew_bin_fn left[4] = {shl_8, shl_16, shl_32, shl_64};
  static const mx__ew_bin_fn right[4] = {shr_8, shr_16, shr_32, shr_64};
  const mx_bitshift_params *p = c->params;
  mx_dtype dt = mx__kin(c, 0)->dtype;
  if (!(MX_KDT(dt) & MX_KDT_UINTS)) return unsupported(c);
  return run_rows(c, by_width(dt, p && p->left ? left : right));
}
const mx_kernel_def mx__kdef_BitShift = {"BitShift", NULL, MX_KDT_UINTS, 0, run_BitShift, NULL};

static mx_status run_PRelu(mx_kernel_call *c) {
  mx__ew_bin_fn fn = NULL;
  switch (mx__kin(c, 0)->dtype) {
    case MX_FLOAT32:
    case MX_FLOAT16:
    case MX_BFLOAT16: fn = prelu_f32; break;
    case MX_FLOAT64: fn = prelu_f64; break;
    case MX_INT32: fn = prelu_i32; break;
    case MX_INT64: fn = prelu_i64; break;
    case MX_UINT32: fn = copy_32; break;
    case MX_UINT64: fn = copy_64; break;
    default: break;
  }
  return run_rows(c, fn);
}
const mx_kernel_def mx__kdef_PRelu = {
    "PRelu",
    NULL,
    MX_KDT_FLOATS | MX_KDT(MX_INT32) | MX_KDT(MX_INT64) | MX_KDT(MX_UINT32) | MX_KDT(MX_UINT64),
    0,
    run_PRelu,
    NULL};
