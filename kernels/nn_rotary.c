/* CPU kernel of RotaryEmbedding (opset 23).
 *
 * X is 4-D (batch, heads, seq, head_size) or 3-D (batch, seq, heads*head_size); each head row
 * has its first rotary_embedding_dim elements rotated by the (cos, sin) row of its position and
 * the rest copied. With position_ids the caches are (max_position, rot/2) tables indexed by
 * position_ids[b, s]; without, they are (batch, seq, rot/2). Pairs are either the two halves of
 * the rotated part or adjacent elements (interleaved). float32 runs in place on the data;
 * float16/bfloat16 rows are widened to float32 in the workspace and rounded once. */
#include <string.h>

#include "common/fail_cause.h"
#include "graph/ops/nn_params.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"
#include "kernels/nn_impl.h"

typedef struct rot_plan {
  int64_t B, H, S, D;  /* batch, heads, sequence, head size */
  int64_t rd, half;    /* rotated elements per row, and half of them */
  bool four_d;         /* X is (batch, heads, seq, head) */
  int64_t pos_bstride; /* position_ids (or cache rows without ids) per batch entry; 0: shared */
  int64_t max_pos;     /* rows of the caches */
} rot_plan;

static mx_status rot_make_plan(const mx_kernel_call *call, rot_plan *p, const char **why) {
  const mx_rotary_params *prm = call->params;
  const mx_ktensor *x = &call->t[0], *c = &call->t[1], *s = &call->t[2];
  bool has_ids = call->n_in > 3 && call->t[3].dtype != MX_DTYPE_UNDEFINED;
  memset(p, 0, sizeof *p);
  if (c->dtype != x->dtype || s->dtype != x->dtype || call->t[call->n_in].dtype != x->dtype) {
    *why = "RotaryEmbedding: X, the caches and Y must have one dtype";
    return MX_ERR_KERNEL;
  }
  if (has_ids && call->t[3].dtype != MX_INT64) {
    *why = "RotaryEmbedding: position_ids must be int64";
    return MX_ERR_KERNEL;
  }
  if (x->rank == 4) {
    p->four_d = true;
    p->B = x->dims[0], p->H = x->dims[1], p->S = x->dims[2], p->D = x->dims[3];
  } else if (x->rank == 3) {
    if (prm->num_heads <= 0 || x->dims[2] % prm->num_heads) {
      *why = "RotaryEmbedding: 3-D input needs num_heads dividing the hidden size";
      return MX_ERR_KERNEL;
    }
    p->B = x->dims[0], p->S = x->dims[1], p->H = prm->num_heads, p->D = x->dims[2] / prm->num_heads;
  } else {
    *why = "RotaryEmbedding: input must be 3-D or 4-D";
    return MX_ERR_KERNEL;
  }
  p->rd = prm->rotary_embedding_dim > 0 ? prm->rotary_embedding_dim : p->D;
  p->half = p->rd / 2;
  if (p->rd > p->D || p->rd % 2) {
    *why = "RotaryEmbedding: rotary_embedding_dim exceeds the head size or is odd";
    return MX_ERR_KERNEL;
  }
  if (c->rank != s->rank || c->rank < 2 || c->dims[c->rank - 1] != p->half ||
      s->dims[s->rank - 1] != p->half || mx__ktensor_numel(c) != mx__ktensor_numel(s)) {
    *why = "RotaryEmbedding: cos_cache and sin_cache must end in rotary_embedding_dim / 2";
    return MX_ERR_KERNEL;
  }
  if (has_ids) {
    const mx_ktensor *ids = &call->t[3];
    if (ids->rank != 2 || ids->dims[1] != p->S || (ids->dims[0] != p->B && ids->dims[0] != 1) ||
        c->rank != 2) {
      *why = "RotaryEmbedding: position_ids must be (batch, seq) with 2-D caches";
      return MX_ERR_KERNEL;
    }
    p->pos_bstride = ids->dims[0] == 1 ? 0 : p->S;
    p->max_pos = c->dims[0];
  } else {
    if (c->rank != 3 || c->dims[1] != p->S || (c->dims[0] != p->B && c->dims[0] != 1)) {
      *why = "RotaryEmbedding: without position_ids the caches must be (batch, seq, rot/2)";
      return MX_ERR_KERNEL;
    }
    p->pos_bstride = c->dims[0] == 1 ? 0 : p->S;
  }
  return MX_OK;
}

/* Rotates one head row: x, y hold D elements, cs / sn hold half. */
static void rot_row(const rot_plan *p, bool interleaved, const float *restrict x, float *restrict y,
                    const float *restrict cs, const float *restrict sn) {
  int64_t h = p->half;
  if (interleaved) {
    for (int64_t j = 0; j < h; j++) {
      float a = x[2 * j], b = x[2 * j + 1];
      y[2 * j] = cs[j] * a - sn[j] * b;
      y[2 * j + 1] = sn[j] * a + cs[j] * b;
    }
  } else {
    for (int64_t j = 0; j < h; j++) {
      float a = x[j], b = x[h + j];
      y[j] = cs[j] * a - sn[j] * b;
      y[h + j] = sn[j] * a + cs[j] * b;
    }
  }
  for (int64_t j = p->rd; j < p->D; j++) y[j] = x[j];
}

static size_t rot_workspace(const mx_kernel_call *call) {
  rot_plan p;
  const char *why;
  if (rot_make_plan(call, &p, &why) != MX_OK) return 0;
  return 2 * mx__kalign64((size_t)p.D * 4) + 2 * mx__kalign64((size_t)p.half * 4);
}

static mx_status rot_run(mx_kernel_call *call) {
  const mx_rotary_params *prm = call->params;
  rot_plan p;
  mx_status st = rot_make_plan(call, &p, &call->why);
  if (st != MX_OK) return st;
  const mx_ktensor *x = &call->t[0], *c = &call->t[1], *s = &call->t[2];
  mx_ktensor *y = mx__kout(call, 0);
  const int64_t *ids = call->n_in > 3 && call->t[3].dtype != MX_DTYPE_UNDEFINED ? call->t[3].data : NULL;
  if (p.B * p.S * p.H * p.D == 0) return MX_OK;
  mx_dtype dt = x->dtype;
  bool half_t = dt == MX_FLOAT16 || dt == MX_BFLOAT16;
  if (!half_t && dt != MX_FLOAT32) return MX_ERR_UNSUPPORTED;
  char *w = call->workspace;
  float *xb = (float *)w;
  float *yb = (float *)(w + mx__kalign64((size_t)p.D * 4));
  float *cb = (float *)((char *)yb + mx__kalign64((size_t)p.D * 4));
  float *sb = (float *)((char *)cb + mx__kalign64((size_t)p.half * 4));
  for (int64_t b = 0; b < p.B; b++) {
    for (int64_t si = 0; si < p.S; si++) {
      int64_t row = b * p.pos_bstride + si; /* index into ids, or cache row without ids */
      if (ids) {
        int64_t pos = ids[row];
        if (pos < 0 || pos >= p.max_pos) {
          call->why = mx__fail_cause_set(
              "RotaryEmbedding: position id %lld (batch %lld, token %lld) is out of the "
              "cos/sin caches' range [0, %lld)",
              (long long)pos, (long long)b, (long long)si, (long long)p.max_pos);
          return MX_ERR_KERNEL;
        }
        row = pos;
      }
      const float *cs, *sn;
      if (half_t) {
        mx__khalf_to_f32((const uint16_t *)c->data + row * p.half, dt, cb, p.half);
        mx__khalf_to_f32((const uint16_t *)s->data + row * p.half, dt, sb, p.half);
        cs = cb, sn = sb;
      } else {
        cs = (const float *)c->data + row * p.half;
        sn = (const float *)s->data + row * p.half;
      }
      for (int64_t h = 0; h < p.H; h++) {
        int64_t off = p.four_d ? ((b * p.H + h) * p.S + si) * p.D : (b * p.S + si) * p.H * p.D + h * p.D;
        if (half_t) {
          mx__khalf_to_f32((const uint16_t *)x->data + off, dt, xb, p.D);
          rot_row(&p, prm->interleaved != 0, xb, yb, cs, sn);
          mx__kf32_to_half(yb, dt, (uint16_t *)y->data + off, p.D);
        } else if (x->data == y->data) {
          /* In place: rotate from a copy of the row. */
          memcpy(xb, (const float *)x->data + off, (size_t)p.D * 4);
          rot_row(&p, prm->interleaved != 0, xb, (float *)y->data + off, cs, sn);
        } else {
          rot_row(&p, prm->interleaved != 0, (const float *)x->data + off, (float *)y->data + off, cs, sn);
        }
      }
    }
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_rotary = {
    .op = "RotaryEmbedding",
    .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT16) | MX_KDT(MX_BFLOAT16),
    .key = 0,
    .run = rot_run,
    .workspace = rot_workspace};
