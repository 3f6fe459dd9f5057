/* Private header of the elementwise op definitions (graph/ops/elementwise*.c): dtype sets,
 * input checks and the symbolic-value (sv) arithmetic the shape-arithmetic ops share.
 * Nothing outside graph/ops/elementwise*.c includes it. */
#ifndef MIXRT_GRAPH_OPS_ELEMENTWISE_IMPL_H
#define MIXRT_GRAPH_OPS_ELEMENTWISE_IMPL_H

#include "graph/ops/op.h"

/* Dtype sets as bit masks over mx_dtype codes. */
#define MX__EW_DT(dt) (1u << (unsigned)(dt))
#define MX__EW_FLOATS \
  (MX__EW_DT(MX_FLOAT32) | MX__EW_DT(MX_FLOAT16) | MX__EW_DT(MX_BFLOAT16) | MX__EW_DT(MX_FLOAT64))
#define MX__EW_SINTS (MX__EW_DT(MX_INT8) | MX__EW_DT(MX_INT16) | MX__EW_DT(MX_INT32) | MX__EW_DT(MX_INT64))
#define MX__EW_UINTS \
  (MX__EW_DT(MX_UINT8) | MX__EW_DT(MX_UINT16) | MX__EW_DT(MX_UINT32) | MX__EW_DT(MX_UINT64))
#define MX__EW_INTS    (MX__EW_SINTS | MX__EW_UINTS)
#define MX__EW_NUMERIC (MX__EW_FLOATS | MX__EW_INTS)
#define MX__EW_BOOL    MX__EW_DT(MX_BOOL)
#define MX__EW_ALL     (MX__EW_NUMERIC | MX__EW_BOOL)
/* The one-byte narrow types (8/4-bit floats, 4/2-bit integers): Cast and CastLike take them. */
#define MX__EW_NARROW                                                                     \
  (MX__EW_DT(MX_FLOAT8E4M3FN) | MX__EW_DT(MX_FLOAT8E4M3FNUZ) | MX__EW_DT(MX_FLOAT8E5M2) | \
   MX__EW_DT(MX_FLOAT8E5M2FNUZ) | MX__EW_DT(MX_FLOAT4E2M1) | MX__EW_DT(MX_FLOAT8E8M0) |   \
   MX__EW_DT(MX_UINT4) | MX__EW_DT(MX_INT4) | MX__EW_DT(MX_UINT2) | MX__EW_DT(MX_INT2))

/* Fails with MX_ERR_DTYPE naming input i when its dtype is not in `allowed`. */
MX_MUST_USE mx_status mx__ew_check_dtype(mx_infer_ctx *ctx, uint32_t i, uint32_t allowed);
/* Fails with MX_ERR_DTYPE when present input i's dtype differs from input j's. */
MX_MUST_USE mx_status mx__ew_check_same(mx_infer_ctx *ctx, uint32_t i, uint32_t j);

/* Symbolic-value operations (element by element, with numpy broadcasting). */
typedef enum mx__sv_op {
  MX__SV_NONE = 0,
  MX__SV_ADD,
  MX__SV_SUB,
  MX__SV_MUL,
  MX__SV_DIV,
  MX__SV_MOD,
  MX__SV_FMOD,
  MX__SV_EQ,
  MX__SV_LT,
  MX__SV_LE,
  MX__SV_GT,
  MX__SV_GE,
  MX__SV_AND,
  MX__SV_OR,
  MX__SV_XOR,
  MX__SV_MAX,
  MX__SV_MIN,
  MX__SV_NEG,
  MX__SV_ABS,
  MX__SV_NOT
} mx__sv_op;

/* True for dtypes whose values inference tracks (int32, int64 and bool). */
bool mx__sv_dtype(mx_dtype dt);
/* Brings a known element into the range of dtype: constants wrap like a C cast to int32, bool
 * becomes 0/1; symbolic expressions are kept (shape values fit). */
mx_dim mx__sv_fit(mx_symtab *t, mx_dim d, mx_dtype dt);
/* Number of elements of a fully concrete shape, or -1. */
int64_t mx__sv_numel(const mx_shape *s);
/* Flat index into `in` (broadcast to `out`) of the output element with flat index `o`. */
int64_t mx__sv_bcast_index(const mx_shape *out, const mx_shape *in, int64_t o);
/* Applies a unary sv op to one element (MX_DIM_UNKNOWN when it cannot be decided). */
mx_dim mx__sv_unary(mx_symtab *t, mx__sv_op op, mx_dim a);
/* Applies a binary sv op to one element (MX_DIM_UNKNOWN when it cannot be decided). */
mx_dim mx__sv_binary(mx_symtab *t, mx__sv_op op, mx_dim a, mx_dim b);
/* Computes output 0's sv for an elementwise op over inputs [0, n_in) whose output shape is
 * already in ctx->out[0]: every input must carry an sv and the output must be small and
 * concrete, else nothing is set. Variadic ops fold `op` left to right. */
void mx__sv_elementwise(mx_infer_ctx *ctx, mx__sv_op op, uint32_t n_in);

/* Op definitions living in elementwise_misc.c. */
extern const mx_op_def mx__op_cast, mx__op_castlike, mx__op_bitcast, mx__op_clip, mx__op_where, mx__op_gelu;

#endif /* MIXRT_GRAPH_OPS_ELEMENTWISE_IMPL_H */
