/* Op definitions of the linear-algebra group: MatMul (numpy matmul: 1-D promotion and batch
 * broadcasting), Gemm (alpha, beta, transposes, optional C broadcast to the result) and Einsum
 * (equation parsed once at load into label lists: explicit and implicit outputs, repeated
 * labels inside one operand, "..." broadcasting, summed labels).
 *
 * Inference keeps symbolic dims: batch dims broadcast with mx__broadcast_shapes, contraction
 * dims are checked when they are decidable, and anything undecidable stays unknown rather
 * than guessed. */
#include <stdio.h>
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/linalg_params.h"
#include "graph/ops/op.h"

/* --- shared helpers ---------------------------------------------------------------------------- */

/* Element types ONNX allows for MatMul / Gemm among those mixrt has. */
static bool linalg_dtype_ok(mx_dtype dt) {
  return dt == MX_FLOAT32 || dt == MX_FLOAT16 || dt == MX_BFLOAT16 || dt == MX_FLOAT64 || dt == MX_INT32 ||
         dt == MX_INT64;
}

/* The more precise of two dims that must be equal (a concrete one wins over a symbol). */
static mx_dim pick_dim(mx_dim a, mx_dim b) {
  if (mx_dim_is_unknown(a)) return b;
  if (mx_dim_is_unknown(b)) return a;
  if (mx_dim_is_concrete(b) && !mx_dim_is_concrete(a)) return b;
  return a;
}

/* --- MatMul ------------------------------------------------------------------------------------- */

/* ONNX MatMul has no attributes and two inputs; the mixrt_* ones are set by the fusion pass
 * (graph/passes/fuse_matmul.c) only, see mx_matmul_params. */
static const mx_attr_spec matmul_attrs[] = {
    {.name = "mixrt_trans_a", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "mixrt_trans_b", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "mixrt_bias", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "mixrt_activation", .type = MX_ATTR_STRING, .def_s = ""},
    {0},
};

/* Names of the MX_MATMUL_ACT_* values, in their order. */
static const char *const matmul_acts[] = {"", "Relu", "Gelu", "GeluTanh", "SiLU", "Sigmoid", "Tanh", NULL};

static mx_status matmul_parse(const mx_parse_ctx *pc, void *params) {
  mx_matmul_params *p = params;
  p->trans_a = mx__parse_int(pc, "mixrt_trans_a") != 0;
  p->trans_b = mx__parse_int(pc, "mixrt_trans_b") != 0;
  p->has_bias = mx__parse_int(pc, "mixrt_bias") != 0;
  /* A third input is only the fused bias: an ONNX MatMul with three inputs is malformed. */
  if (p->has_bias != (pc->n_inputs > 2))
    return mx__parse_fail(pc, "MatMul has %u inputs; it takes 2 (3 only with the fused bias, mixrt_bias = 1)",
                          (unsigned)pc->n_inputs);
  char act[16];
  mx_status st = mx__parse_string(pc, "mixrt_activation", act, sizeof act);
  if (st != MX_OK) return st;
  int32_t k = 0;
  while (matmul_acts[k] && strcmp(matmul_acts[k], act) != 0) k++;
  if (!matmul_acts[k])
    return mx__parse_fail(pc, "attribute 'mixrt_activation' is '%s', not a fused activation", act);
  p->fused_act = k;
  return MX_OK;
}

/* The fused bias (input 2) must be a vector along Y's last axis: every other dim 1, no more dims
 * than Y, so adding it never changes Y's shape. */
static mx_status matmul_check_bias(mx_infer_ctx *ctx, const mx_value_info *o) {
  const mx_value_info *c = &ctx->in[2];
  mx_status st = mx__infer_same_dtype(ctx, 2, 0);
  if (st != MX_OK) return st;
  if (c->shape.rank == MX_RANK_UNKNOWN || o->shape.rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t rc = c->shape.rank;
  if (rc > o->shape.rank || (rc >= 1 && o->shape.rank == 0))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 2 (fused bias) has rank %d, more than the product's %d",
                          (int)rc, (int)o->shape.rank);
  for (int32_t i = 0; i + 1 < rc; i++)
    if (c->shape.dims[i] != 1)
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "input 2 (fused bias) dim %d is not 1: it must run along the last axis", (int)i);
  if (rc == 0 || c->shape.dims[rc - 1] == 1) return MX_OK;
  if (ctx->in[1].shape.rank == 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 2 (fused bias) must have one element when B is 1-D");
  return mx__check_same_dim(ctx, c->shape.dims[rc - 1], o->shape.dims[o->shape.rank - 1],
                            "input 2 (fused bias) length and the product's last dim");
}

static mx_status matmul_infer(mx_infer_ctx *ctx) {
  const mx_matmul_params *p = ctx->params;
  mx_value_info ai = ctx->in[0], bi = ctx->in[1];
  const mx_value_info *a = &ai, *b = &bi;
  if (!linalg_dtype_ok(a->dtype))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 has dtype %s, which MatMul does not take",
                          mx_dtype_name(a->dtype));
  mx_status st = mx__infer_same_dtype(ctx, 1, 0);
  if (st != MX_OK) return st;
  if (p && p->fused_act && a->dtype != MX_FLOAT32 && a->dtype != MX_FLOAT64 && a->dtype != MX_FLOAT16 &&
      a->dtype != MX_BFLOAT16)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "a fused activation needs a float dtype, not %s",
                          mx_dtype_name(a->dtype));
  /* Transposed operands: the product sees their last two axes swapped. */
  for (int i = 0; i < 2 && p; i++) {
    mx_value_info *t = i == 0 ? &ai : &bi;
    if (!(i == 0 ? p->trans_a : p->trans_b) || t->shape.rank == MX_RANK_UNKNOWN) continue;
    int32_t r = t->shape.rank;
    if (r < 2)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %d has rank %d; mixrt_trans_%c needs rank >= 2", i,
                            (int)r, i == 0 ? 'a' : 'b');
    mx_dim d = t->shape.dims[r - 1];
    t->shape.dims[r - 1] = t->shape.dims[r - 2];
    t->shape.dims[r - 2] = d;
  }
  mx_value_info *o = &ctx->out[0];
  o->dtype = a->dtype;
  if (a->shape.rank == MX_RANK_UNKNOWN || b->shape.rank == MX_RANK_UNKNOWN) {
    o->shape.rank = MX_RANK_UNKNOWN;
    return p && p->has_bias ? matmul_check_bias(ctx, o) : MX_OK;
  }
  int32_t ra = a->shape.rank, rb = b->shape.rank;
  if (ra == 0 || rb == 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %d is a scalar; MatMul needs rank >= 1", ra == 0 ? 0 : 1);
  mx_dim ka = a->shape.dims[ra - 1];
  mx_dim kb = rb == 1 ? b->shape.dims[0] : b->shape.dims[rb - 2];
  st = mx__check_same_dim(ctx, ka, kb, "MatMul contraction dim (last of input 0, rows of input 1)");
  if (st != MX_OK) return st;
  mx_shape ba = {0}, bb = {0}, bo;
  ba.rank = ra > 2 ? ra - 2 : 0;
  bb.rank = rb > 2 ? rb - 2 : 0;
  for (int32_t i = 0; i < ba.rank; i++) ba.dims[i] = a->shape.dims[i];
  for (int32_t i = 0; i < bb.rank; i++) bb.dims[i] = b->shape.dims[i];
  st = mx__broadcast_shapes(ctx, &ba, &bb, &bo);
  if (st != MX_OK) return st;
  o->shape = bo;
  if (ra >= 2) o->shape.dims[o->shape.rank++] = a->shape.dims[ra - 2];
  if (rb >= 2) o->shape.dims[o->shape.rank++] = b->shape.dims[rb - 1];
  return p && p->has_bias ? matmul_check_bias(ctx, o) : MX_OK;
}

static const mx_op_def op_matmul = {
    .name = "MatMul",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = matmul_attrs,
    .params_size = sizeof(mx_matmul_params),
    .parse = matmul_parse,
    .infer = matmul_infer,
};

/* --- Gemm --------------------------------------------------------------------------------------- */

static const mx_attr_spec gemm_attrs[] = {
    {.name = "alpha", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {.name = "beta", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {.name = "transA", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "transB", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "broadcast", .type = MX_ATTR_INT, .def_i = 0}, /* opset < 7; C always broadcasts */
    /* mixrt-internal: set by the fusion pass (graph/passes/fuse_matmul.c) only. */
    {.name = "mixrt_activation", .type = MX_ATTR_STRING, .def_s = ""},
    {0},
};

static mx_status gemm_parse(const mx_parse_ctx *pc, void *params) {
  mx_gemm_params *p = params;
  p->alpha = mx__parse_float(pc, "alpha");
  p->beta = mx__parse_float(pc, "beta");
  p->trans_a = mx__parse_int(pc, "transA") != 0;
  p->trans_b = mx__parse_int(pc, "transB") != 0;
  if (pc->opset < 11 && pc->n_inputs < 3) return mx__parse_fail(pc, "Gemm before opset 11 needs input C");
  char act[16];
  mx_status st = mx__parse_string(pc, "mixrt_activation", act, sizeof act);
  if (st != MX_OK) return st;
  int32_t k = 0;
  while (matmul_acts[k] && strcmp(matmul_acts[k], act) != 0) k++;
  if (!matmul_acts[k])
    return mx__parse_fail(pc, "attribute 'mixrt_activation' is '%s', not a fused activation", act);
  p->fused_act = k;
  p->act_reserved = 0;
  return MX_OK;
}

static mx_status gemm_infer(mx_infer_ctx *ctx) {
  const mx_gemm_params *p = ctx->params;
  const mx_value_info *a = &ctx->in[0], *b = &ctx->in[1];
  if (!linalg_dtype_ok(a->dtype))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 has dtype %s, which Gemm does not take",
                          mx_dtype_name(a->dtype));
  mx_status st = mx__infer_same_dtype(ctx, 1, 0);
  if (st != MX_OK) return st;
  if (p->fused_act && a->dtype != MX_FLOAT32 && a->dtype != MX_FLOAT64 && a->dtype != MX_FLOAT16 &&
      a->dtype != MX_BFLOAT16)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "a fused activation needs a float dtype, not %s",
                          mx_dtype_name(a->dtype));
  bool has_c = mx__in_present(ctx, 2);
  if (has_c && (st = mx__infer_same_dtype(ctx, 2, 0)) != MX_OK) return st;
  for (int i = 0; i < 2; i++)
    if (ctx->in[i].shape.rank != MX_RANK_UNKNOWN && ctx->in[i].shape.rank != 2)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %d has rank %d; Gemm needs 2-D A and B", i,
                            (int)ctx->in[i].shape.rank);
  mx_dim m = MX_DIM_UNKNOWN, ka = MX_DIM_UNKNOWN, kb = MX_DIM_UNKNOWN, n = MX_DIM_UNKNOWN;
  if (a->shape.rank == 2) {
    m = a->shape.dims[p->trans_a ? 1 : 0];
    ka = a->shape.dims[p->trans_a ? 0 : 1];
  }
  if (b->shape.rank == 2) {
    kb = b->shape.dims[p->trans_b ? 1 : 0];
    n = b->shape.dims[p->trans_b ? 0 : 1];
  }
  st = mx__check_same_dim(ctx, ka, kb, "Gemm contraction dim of op(A) and op(B)");
  if (st != MX_OK) return st;
  if (has_c) {
    const mx_shape *c = &ctx->in[2].shape;
    if (c->rank > 2)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 2 (C) has rank %d; it must broadcast to [M, N]",
                            (int)c->rank);
    mx_dim want[2] = {m, n};
    for (int32_t i = 0; c->rank > 0 && i < c->rank; i++) {
      mx_dim cd = c->dims[i], od = want[2 - c->rank + i];
      if (cd == 1 || mx_dim_is_unknown(cd) || mx_dim_is_unknown(od) || cd == od) continue;
      if (mx_dim_is_concrete(cd) && mx_dim_is_concrete(od))
        return mx__infer_fail(ctx, MX_ERR_SHAPE,
                              "input 2 (C) dim %d is %lld, which does not broadcast to %lld", (int)i,
                              (long long)cd, (long long)od);
    }
  }
  mx_value_info *o = &ctx->out[0];
  o->dtype = a->dtype;
  o->shape.rank = 2;
  o->shape.dims[0] = m;
  o->shape.dims[1] = n;
  return MX_OK;
}

static const mx_op_def op_gemm = {
    .name = "Gemm",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = gemm_attrs,
    .params_size = sizeof(mx_gemm_params),
    .parse = gemm_parse,
    .infer = gemm_infer,
};

/* --- Einsum ------------------------------------------------------------------------------------- */

static const mx_attr_spec einsum_attrs[] = {
    {.name = "equation", .type = MX_ATTR_STRING, .required = true},
    {0},
};

static bool is_label(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Parses one term (letters and at most one "...") of text[0..len) into codes. */
static mx_status parse_term(const mx_parse_ctx *pc, const char *eq, const char *text, size_t len,
                            int8_t *codes, int32_t *n_codes, bool *ellipsis) {
  *n_codes = 0;
  *ellipsis = false;
  for (size_t i = 0; i < len;) {
    if (text[i] == '.') {
      if (i + 3 > len || text[i + 1] != '.' || text[i + 2] != '.' || *ellipsis)
        return mx__parse_fail(pc, "equation '%s': a term may hold one \"...\" and no other dots", eq);
      *ellipsis = true;
      if (*n_codes >= MX_EINSUM_MAX_TERM) goto too_long;
      codes[(*n_codes)++] = MX_EINSUM_ELLIPSIS;
      i += 3;
      continue;
    }
    if (!is_label(text[i]))
      return mx__parse_fail(pc, "equation '%s': '%c' is not a label letter", eq, text[i]);
    if (*n_codes >= MX_EINSUM_MAX_TERM) goto too_long;
    codes[(*n_codes)++] = (int8_t)text[i];
    i++;
  }
  return MX_OK;
too_long:
  return mx__parse_fail(pc, "equation '%s': a term has more than %d labels", eq, MX_EINSUM_MAX_TERM);
}

static mx_status einsum_parse(const mx_parse_ctx *pc, void *params) {
  mx_einsum_params *p = params;
  memset(p, 0, sizeof *p);
  char raw[MX_EINSUM_MAX_EQUATION];
  mx_status st = mx__parse_string(pc, "equation", raw, sizeof raw);
  if (st != MX_OK) return st;
  /* Spaces carry no meaning. */
  size_t len = 0;
  for (size_t i = 0; raw[i]; i++)
    if (raw[i] != ' ' && raw[i] != '\t') p->equation[len++] = raw[i];
  p->equation[len] = '\0';
  const char *eq = p->equation;
  const char *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : len;
  bool any_ellipsis = false;
  int counts[128] = {0};
  size_t start = 0;
  for (size_t i = 0; i <= lhs_len; i++) {
    if (i < lhs_len && eq[i] != ',') continue;
    if (p->n_operands >= MX_EINSUM_MAX_OPERANDS)
      return mx__parse_fail(pc, "equation '%s' has more than %d operands", eq, MX_EINSUM_MAX_OPERANDS);
    int32_t k = p->n_operands++;
    bool ell;
    st = parse_term(pc, eq, eq + start, i - start, p->terms[k], &p->term_len[k], &ell);
    if (st != MX_OK) return st;
    any_ellipsis |= ell;
    for (int32_t j = 0; j < p->term_len[k]; j++)
      if (p->terms[k][j] != MX_EINSUM_ELLIPSIS) counts[(int)p->terms[k][j]]++;
    start = i + 1;
  }
  if ((uint32_t)p->n_operands != pc->n_inputs)
    return mx__parse_fail(pc, "equation '%s' names %d operands but the node has %u inputs", eq,
                          (int)p->n_operands, pc->n_inputs);
  if (arrow) {
    bool ell;
    st = parse_term(pc, eq, arrow + 2, strlen(arrow + 2), p->out, &p->out_len, &ell);
    if (st != MX_OK) return st;
    p->out_has_ellipsis = ell;
    if (ell && !any_ellipsis)
      return mx__parse_fail(pc, "equation '%s': the output has \"...\" but no operand does", eq);
    for (int32_t j = 0; j < p->out_len; j++) {
      int8_t c = p->out[j];
      if (c == MX_EINSUM_ELLIPSIS) continue;
      if (!counts[(int)c])
        return mx__parse_fail(pc, "equation '%s': output label '%c' is in no operand", eq, (char)c);
      for (int32_t q = 0; q < j; q++)
        if (p->out[q] == c)
          return mx__parse_fail(pc, "equation '%s': output label '%c' repeats", eq, (char)c);
    }
  } else {
    /* Implicit output: the broadcast dims, then the labels used once, in ASCII order. */
    if (any_ellipsis) {
      p->out[p->out_len++] = MX_EINSUM_ELLIPSIS;
      p->out_has_ellipsis = 1;
    }
    for (int c = 0; c < 128; c++) {
      if (counts[c] != 1) continue;
      if (p->out_len >= MX_EINSUM_MAX_TERM)
        return mx__parse_fail(pc, "equation '%s': output has more than %d labels", eq, MX_EINSUM_MAX_TERM);
      p->out[p->out_len++] = (int8_t)c;
    }
  }
  return MX_OK;
}

static mx_status einsum_infer(mx_infer_ctx *ctx) {
  const mx_einsum_params *p = ctx->params;
  mx_dtype dt = ctx->in[0].dtype;
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    mx_status st = mx__infer_same_dtype(ctx, i, 0);
    if (st != MX_OK) return st;
  }
  if (dt == MX_BOOL)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 has dtype bool, which Einsum does not take");
  mx_value_info *o = &ctx->out[0];
  o->dtype = dt;
  mx_dim label_dim[128];
  for (int c = 0; c < 128; c++) label_dim[c] = MX_DIM_UNKNOWN;
  mx_shape ell = {0};    /* broadcast of every operand's "..." dims */
  bool ell_known = true; /* false once an operand with "..." has an unknown rank */
  for (int32_t k = 0; k < p->n_operands; k++) {
    const mx_shape *s = &ctx->in[k].shape;
    int32_t tl = p->term_len[k];
    bool has_ell = false;
    for (int32_t j = 0; j < tl; j++) has_ell |= p->terms[k][j] == MX_EINSUM_ELLIPSIS;
    if (s->rank == MX_RANK_UNKNOWN) {
      if (has_ell) ell_known = false;
      continue;
    }
    int32_t n_letters = has_ell ? tl - 1 : tl;
    if (has_ell ? s->rank < n_letters : s->rank != n_letters)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %d has rank %d but its term in '%s' needs %s%d", (int)k,
                            (int)s->rank, p->equation, has_ell ? "at least " : "", (int)n_letters);
    int32_t ell_rank = s->rank - n_letters;
    int32_t d = 0;
    for (int32_t j = 0; j < tl; j++) {
      int8_t c = p->terms[k][j];
      if (c == MX_EINSUM_ELLIPSIS) {
        mx_shape mine = {0}, merged;
        mine.rank = ell_rank;
        for (int32_t e = 0; e < ell_rank; e++) mine.dims[e] = s->dims[d + e];
        mx_status st = mx__broadcast_shapes(ctx, &ell, &mine, &merged);
        if (st != MX_OK) return st;
        ell = merged;
        d += ell_rank;
        continue;
      }
      mx_dim have = label_dim[(int)c], dim = s->dims[d++];
      if (have == 1 && !mx_dim_is_unknown(dim)) {
        label_dim[(int)c] = dim; /* size-1 dims broadcast */
      } else if (dim != 1) {
        char what[96];
        snprintf(what, sizeof what, "Einsum label '%c' (input %d)", (char)c, (int)k);
        mx_status st = mx__check_same_dim(ctx, have, dim, what);
        if (st != MX_OK) return st;
        label_dim[(int)c] = pick_dim(have, dim);
      } else if (mx_dim_is_unknown(have)) {
        label_dim[(int)c] = dim;
      }
    }
  }
  if (p->out_has_ellipsis && !ell_known) {
    o->shape.rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  int32_t rank = 0;
  for (int32_t j = 0; j < p->out_len; j++) {
    int8_t c = p->out[j];
    if (c == MX_EINSUM_ELLIPSIS) {
      if (rank + ell.rank > MX_MAX_RANK) goto too_big;
      for (int32_t e = 0; e < ell.rank; e++) o->shape.dims[rank++] = ell.dims[e];
    } else {
      if (rank + 1 > MX_MAX_RANK) goto too_big;
      o->shape.dims[rank++] = label_dim[(int)c];
    }
  }
  o->shape.rank = rank;
  return MX_OK;
too_big:
  return mx__infer_fail(ctx, MX_ERR_LIMIT, "Einsum output of '%s' has more than %d dims", p->equation,
                        MX_MAX_RANK);
}

static const mx_op_def op_einsum = {
    .name = "Einsum",
    .min_inputs = 1,
    .max_inputs = MX_EINSUM_MAX_OPERANDS,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = einsum_attrs,
    .params_size = sizeof(mx_einsum_params),
    .parse = einsum_parse,
    .infer = einsum_infer,
};

const mx_op_def *const mx__ops_linalg[] = {&op_matmul, &op_gemm, &op_einsum, NULL};
