/* Shared helpers for op definitions: reading attributes with schema defaults, reporting
 * errors, broadcasting possibly symbolic shapes, and reading the known values of inputs. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/ops/op.h"

/* --- parse helpers -------------------------------------------------------------------------- */

static const mx_attr_spec *find_spec(const mx_op_def *def, const char *name) {
  for (const mx_attr_spec *s = def->attrs; s && s->name; s++)
    if (strcmp(s->name, name) == 0) return s;
  return NULL;
}

const mx_attr *mx__parse_attr(const mx_parse_ctx *pc, const char *name) {
  for (uint32_t i = 0; i < pc->n_attrs; i++)
    if (strcmp(pc->attrs[i].name, name) == 0) return &pc->attrs[i];
  return NULL;
}

int64_t mx__parse_int(const mx_parse_ctx *pc, const char *name) {
  const mx_attr *a = mx__parse_attr(pc, name);
  if (a && a->type == MX_ATTR_INT) return a->i;
  const mx_attr_spec *s = find_spec(pc->def, name);
  return s ? s->def_i : 0;
}

float mx__parse_float(const mx_parse_ctx *pc, const char *name) {
  const mx_attr *a = mx__parse_attr(pc, name);
  if (a && a->type == MX_ATTR_FLOAT) return a->f;
  const mx_attr_spec *s = find_spec(pc->def, name);
  return s ? s->def_f : 0.0f;
}

mx_status mx__parse_string(const mx_parse_ctx *pc, const char *name, char *buf, size_t cap) {
  const mx_attr *a = mx__parse_attr(pc, name);
  const char *v = NULL;
  if (a && a->type == MX_ATTR_STRING) v = a->s;
  if (!v) {
    const mx_attr_spec *s = find_spec(pc->def, name);
    v = s && s->def_s ? s->def_s : "";
  }
  size_t n = strlen(v);
  if (n + 1 > cap) return mx__parse_fail(pc, "attribute '%s' is longer than %zu bytes", name, cap - 1);
  memcpy(buf, v, n + 1);
  return MX_OK;
}

/* Copies a list attribute of the given type (INTS or FLOATS) into out[0..cap) (elem bytes
 * each); absent or of another type: *n = 0. */
static mx_status parse_list(const mx_parse_ctx *pc, const char *name, mx_attr_type type, void *out,
                            size_t elem, size_t cap, size_t *n) {
  const mx_attr *a = mx__parse_attr(pc, name);
  *n = 0;
  if (!a || a->type != type) return MX_OK;
  if (a->count > cap)
    return mx__parse_fail(pc, "attribute '%s' has %zu entries, at most %zu are supported", name, a->count,
                          cap);
  memcpy(out, type == MX_ATTR_INTS ? (const void *)a->ints : (const void *)a->floats, a->count * elem);
  *n = a->count;
  return MX_OK;
}

mx_status mx__parse_ints(const mx_parse_ctx *pc, const char *name, int64_t *out, size_t cap, size_t *n) {
  return parse_list(pc, name, MX_ATTR_INTS, out, sizeof *out, cap, n);
}

mx_status mx__parse_floats(const mx_parse_ctx *pc, const char *name, float *out, size_t cap, size_t *n) {
  return parse_list(pc, name, MX_ATTR_FLOATS, out, sizeof *out, cap, n);
}

mx_status mx__parse_fail(const mx_parse_ctx *pc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx_status st = mx__error_vfail(pc->err, MX_ERR_INVALID_GRAPH, fmt, ap);
  va_end(ap);
  return st;
}

/* --- infer helpers -------------------------------------------------------------------------- */

mx_status mx__infer_fail(mx_infer_ctx *ctx, mx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx_status st = mx__error_vfail(ctx->err, status, fmt, ap);
  va_end(ap);
  return st;
}

mx_dim mx__infer_fresh(mx_infer_ctx *ctx, const char *what) {
  if (ctx->runtime) return MX_DIM_UNKNOWN;
  char hint[160];
  snprintf(hint, sizeof hint, "%.100s.%.50s", ctx->node_name ? ctx->node_name : "op", what ? what : "n");
  return mx_sym_fresh(ctx->syms, hint);
}

mx_dim mx__shape_numel(mx_symtab *t, const mx_shape *s) {
  if (s->rank == MX_RANK_UNKNOWN) return MX_DIM_UNKNOWN;
  mx_dim n = 1;
  for (int32_t i = 0; i < s->rank; i++) n = mx_sym_mul(t, n, s->dims[i]);
  return n;
}

bool mx__norm_axis(int64_t axis, int32_t rank, int32_t *out) {
  if (axis < -(int64_t)rank || axis >= (int64_t)rank) return false;
  *out = (int32_t)(axis < 0 ? axis + rank : axis);
  return true;
}

mx_status mx__broadcast_shapes(mx_infer_ctx *ctx, const mx_shape *a, const mx_shape *b, mx_shape *out) {
  memset(out, 0, sizeof *out);
  if (a->rank == MX_RANK_UNKNOWN || b->rank == MX_RANK_UNKNOWN) {
    out->rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  int32_t r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (int32_t i = 0; i < r; i++) {
    int32_t ia = i - (r - a->rank), ib = i - (r - b->rank);
    mx_dim da = ia >= 0 ? a->dims[ia] : 1;
    mx_dim db = ib >= 0 ? b->dims[ib] : 1;
    mx_dim d;
    if (da == db) {
      d = da; /* equal (incl. equal expressions); unknown == unknown stays unknown */
    } else if (da == 1) {
      d = db;
    } else if (db == 1) {
      d = da;
    } else if (mx_dim_is_concrete(da) && mx_dim_is_concrete(db)) {
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "cannot broadcast dim %lld with dim %lld (axis %d of the result)", (long long)da,
                            (long long)db, (int)i);
    } else if (mx_dim_is_unknown(da) || mx_dim_is_unknown(db)) {
      /* One side may be 1 at run time: only a concrete side greater than 1 decides. */
      mx_dim known = mx_dim_is_unknown(da) ? db : da;
      d = (mx_dim_is_concrete(known) && known > 1) ? known : MX_DIM_UNKNOWN;
    } else if (mx_dim_is_concrete(da) || mx_dim_is_concrete(db)) {
      /* A symbol against a concrete value > 1: broadcasting requires the symbol to equal it
       * (or be 1). The concrete value is the result either way. */
      d = mx_dim_is_concrete(da) ? da : db;
    } else {
      /* Two different expressions: the result is one of them or the other at run time. */
      d = mx_sym_max(ctx->syms, da, db);
    }
    out->dims[i] = d;
  }
  return MX_OK;
}

mx_status mx__check_same_dim(mx_infer_ctx *ctx, mx_dim a, mx_dim b, const char *what) {
  if (mx_dim_is_unknown(a) || mx_dim_is_unknown(b) || a == b) return MX_OK;
  int sign;
  if ((mx_dim_is_concrete(a) && mx_dim_is_concrete(b)) || mx_sym_compare(ctx->syms, a, b, &sign)) {
    char ta[64], tb[64];
    mx_sym_format(ctx->syms, a, ta, sizeof ta);
    mx_sym_format(ctx->syms, b, tb, sizeof tb);
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s: %s does not match %s", what, ta, tb);
  }
  return MX_OK;
}

mx_status mx__infer_same_dtype(mx_infer_ctx *ctx, uint32_t i, uint32_t ref) {
  if (ctx->in[i].dtype == ctx->in[ref].dtype) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u has dtype %s but input %u has %s", i,
                        mx_dtype_name(ctx->in[i].dtype), ref, mx_dtype_name(ctx->in[ref].dtype));
}

const mx_dim *mx__in_values(const mx_infer_ctx *ctx, uint32_t i, int32_t *n) {
  if (!mx__in_present(ctx, i) || !ctx->in[i].sv || ctx->in[i].sv_len < 0) return NULL;
  *n = ctx->in[i].sv_len;
  return ctx->in[i].sv;
}

bool mx__in_const_ints(const mx_infer_ctx *ctx, uint32_t i, int64_t *out, int32_t cap, int32_t *n) {
  int32_t len;
  const mx_dim *sv = mx__in_values(ctx, i, &len);
  if (!sv || len > cap) return false;
  for (int32_t k = 0; k < len; k++)
    if (!mx_sym_const_value(ctx->syms, sv[k], &out[k])) return false;
  *n = len;
  return true;
}
