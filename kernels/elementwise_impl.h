/* Private header of the elementwise CPU kernels (kernels/elementwise*.c).
 *
 * Broadcasting. An mx__ew_plan describes how up to four operands (the output and up to three
 * inputs) walk the output's index space: dims where every operand moves in step are merged, so
 * a same-shape op is one row of numel elements and a [N,D] + [D] bias add is N rows of D
 * contiguous elements. mx__ew_run calls a row function once per innermost row with each
 * operand's pointer and inner stride (in elements: 1, or 0 for a broadcast operand), so the
 * row functions are tight loops the compiler vectorizes.
 *
 * Row functions for binary ops take (n, a, stride_a, b, stride_b, out) and return false on bad
 * data (integer division by zero). float16/bfloat16 run the float32 row function on chunks
 * converted to float32 (mx__ew_half_row), so they compute in float32 and round once.
 * Nothing outside kernels/elementwise*.c includes this header. */
#ifndef MIXRT_KERNELS_ELEMENTWISE_IMPL_H
#define MIXRT_KERNELS_ELEMENTWISE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "kernels/kutil.h"

#define MX__EW_MAX_OPS 4   /* output + up to three inputs */
#define MX__EW_CHUNK   256 /* elements per float32 chunk of the 16-bit adapters */

typedef struct mx__ew_plan {
  int32_t rank;                                 /* merged rank, >= 1 */
  int32_t n_ops;                                /* operand 0 is the output, 1.. the inputs */
  int64_t dims[MX_MAX_RANK];                    /* merged dims */
  int64_t strides[MX__EW_MAX_OPS][MX_MAX_RANK]; /* per operand, in elements (0: broadcast) */
  int64_t esize[MX__EW_MAX_OPS];                /* bytes per element of each operand */
} mx__ew_plan;

/* One innermost row: n elements; p[k] is operand k's first element, s[k] its stride. */
typedef bool (*mx__ew_row_fn)(void *ctx, int64_t n, char *const *p, const int64_t *s);

/* Binary row: out[i] = f(a[i*sa], b[i*sb]). False on bad data. */
typedef bool (*mx__ew_bin_fn)(int64_t n, const void *a, int64_t sa, const void *b, int64_t sb, void *out);

/* Plans a walk of `out` with inputs ins[0..n_in) broadcast to it (numpy rules). Fails with
 * MX_ERR_KERNEL (call->why set) when an input does not broadcast to the output's dims. */
MX_MUST_USE mx_status mx__ew_plan_make(mx_kernel_call *call, const mx_ktensor *out,
                                       const mx_ktensor *const *ins, int n_in, mx__ew_plan *plan);
/* Walks the plan from the operands' base pointers; false as soon as a row returns false. */
bool mx__ew_run(const mx__ew_plan *plan, void *const *base, mx__ew_row_fn fn, void *ctx);

/* Context of mx__ew_bin_row / mx__ew_half_row. */
typedef struct mx__ew_bin_ctx {
  mx__ew_bin_fn fn; /* the row function (float32 one for 16-bit operands) */
  mx_dtype dt[3];   /* dtypes of out, a, b: FLOAT16/BFLOAT16 are converted, others not */
} mx__ew_bin_ctx;

/* Row adapter calling ctx->fn directly. */
bool mx__ew_bin_row(void *ctx, int64_t n, char *const *p, const int64_t *s);
/* Row adapter converting 16-bit operands to float32 chunks around ctx->fn. */
bool mx__ew_half_row(void *ctx, int64_t n, char *const *p, const int64_t *s);

/* Runs a binary row function over out = f(a, b) with broadcasting; 16-bit operands go through
 * the float32 adapter (fn must then be the float32 row). dt_out/dt_a/dt_b may differ from the
 * tensors' own dtypes to accumulate into a float32 workspace. */
MX_MUST_USE mx_status mx__ew_binary_apply(mx_kernel_call *call, mx__ew_bin_fn fn, const mx_ktensor *out,
                                          const mx_ktensor *a, const mx_ktensor *b);

/* Unary row: o[i] = f(x[i]) for n contiguous elements; ctx carries the op's data. */
typedef void (*mx__ew_un_fn)(int64_t n, const void *x, void *o, const void *ctx);
/* Entries of a table of unary rows indexed by mx_dtype (NULL: dtype not supported). */
#define MX__EW_UN_TABLE_SIZE (MX_BFLOAT16 + 1)
/* out 0 = f(in 0) elementwise through table[dtype] (16-bit floats through the float32 row in
 * chunks, rounded once); input and output must share dtype and element count. */
MX_MUST_USE mx_status mx__ew_unary_apply(mx_kernel_call *call, const mx__ew_un_fn *table, const void *ctx);

static inline bool mx__ew_is_half(mx_dtype dt) { return dt == MX_FLOAT16 || dt == MX_BFLOAT16; }

/* Saturating double -> integer conversions (NaN gives 0): C leaves out-of-range float to int
 * conversions undefined, so every float-to-int store goes through these. */
static inline int64_t mx__ew_sat_i64(double v, double lo, double hi) {
  if (!(v == v)) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
  return (int64_t)v;
}
/* Stores double v into element i of a buffer of dtype dt: integers saturate, bool is v != 0,
 * floats round once (correctly, also for float16/bfloat16). */
void mx__ew_store_sat(void *p, mx_dtype dt, int64_t i, double v);
/* double -> float16 (dt FLOAT16) or bfloat16 bits, rounded once to nearest even. */
uint16_t mx__ew_f64_to_half(double v, mx_dtype dt);

/* Kernel definitions of the group, one per op (the registry picks by the deciding dtype). */
/* (the formatter packs such lists unevenly: one entry per line) */
// clang-format off
#define MX__EW_KERNEL_LIST(X) \
  X(Abs)             \
  X(Neg)             \
  X(Exp)             \
  X(Log)             \
  X(Sqrt)            \
  X(Sin)             \
  X(Cos)             \
  X(Tanh)            \
  X(Sigmoid)         \
  X(Relu)            \
  X(Erf)             \
  X(Floor)           \
  X(Ceil)            \
  X(Reciprocal)      \
  X(Sign)            \
  X(Not)             \
  X(Gelu)            \
  X(Clip)            \
  X(Add)             \
  X(Sub)             \
  X(Mul)             \
  X(Div)             \
  X(Pow)             \
  X(Mod)             \
  X(And)             \
  X(Or)              \
  X(Xor)             \
  X(Equal)           \
  X(Less)            \
  X(LessOrEqual)     \
  X(Greater)         \
  X(GreaterOrEqual)  \
  X(Sum)             \
  X(Mean)            \
  X(Max)             \
  X(Min)             \
  X(Cast)            \
  X(CastLike)        \
  X(BitCast)         \
  X(Where)
// clang-format on
#define MX__EW_DECLARE_(name) extern const mx_kernel_def mx__kdef_##name;
MX__EW_KERNEL_LIST(MX__EW_DECLARE_)
#undef MX__EW_DECLARE_

#endif /* MIXRT_KERNELS_ELEMENTWISE_IMPL_H */
