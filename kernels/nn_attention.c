/* CPU kernel of Attention (opsets 23 and 24): a real fused kernel, not a decomposition.
 *
 * Inputs Q, K, V are 3-D (batch, seq, heads*head_size) or 4-D (batch, heads, seq, head_size);
 * the plan turns either layout into strides, so no transposes are materialized. past_key /
 * past_value (4-D) and the new K/V are used in place as two column ranges of the scores; the
 * present_key / present_value outputs get the concatenation. Past and presents may lie in
 * buffers padded along the sequence (a session state with room to grow: their strides say so);
 * a present sharing its past's buffer is an append: only the new rows are written. The mask (bool or float, rank
 * 1..4, broadcast to (batch, q_heads, q_seq, mask_len), shorter masks leaving the remaining keys
 * out), is_causal (aligned to the bottom right: the offset is the past length, or
 * nonpad_kv_seqlen[b] - q_seq for an external cache), and nonpad_kv_seqlen padding all become
 * -inf biases. float32 and float64 compute in their own type through CBLAS; float16/bfloat16
 * are widened to float32 in the workspace and rounded once. */
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h> /* streaming stores of the decode step's presents */
#endif

#include "graph/ops/nn_params.h"
#include "kernels/gemm_f32.h"
#include "kernels/gemm_f32_matmul.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"
#include "kernels/nn_impl.h"

typedef struct att_plan {
  int64_t B, Hq, Hkv, Sq, Skv, P, T, Dk, Dv; /* T = P + Skv keys */
  int64_t q_batch, q_head, q_row;            /* element strides of Q (3-D and 4-D alike) */
  int64_t k_batch, k_head, k_row;
  int64_t v_batch, v_head, v_row;
  int64_t y_batch, y_head, y_row;
  float scale, softcap;
  int32_t mode; /* qk_matmul_output_mode */
  bool causal;
  bool mask_bool;
  int64_t Tm;            /* mask's last dim (keys it covers) */
  int64_t m_str[4];      /* mask strides over (batch, head, q row, key) */
  const int64_t *nonpad; /* nonpad_kv_seqlen (batch entries) or NULL */
  bool stream_presents;  /* decode step: presents by streaming stores */
  /* Element strides of the (batch, head) slabs of past_key, past_value, present_key and
   * present_value (rows inside a slab are contiguous: D apart). */
  int64_t pk_batch, pk_head, pv_batch, pv_head, ok_batch, ok_head, ov_batch, ov_head;
  bool append_k, append_v; /* the present is its past's buffer: the past rows are already there */
  float *own; /* float32 without a past: the own GEMM's scratch (see att_own_floats); NULL: sgemm */
} att_plan;

static bool present(const mx_kernel_call *call, uint32_t i) {
  return i < call->n_in && call->t[i].dtype != MX_DTYPE_UNDEFINED;
}

static mx_status att_make_plan(const mx_kernel_call *call, att_plan *p, const char **why) {
  const mx_attention_params *prm = call->params;
  const mx_ktensor *q = &call->t[0], *k = &call->t[1], *v = &call->t[2];
  memset(p, 0, sizeof *p);
  for (uint32_t i = 1; i < call->n_in && i < 6; i++) {
    bool mask_bool = i == 3 && call->t[i].dtype == MX_BOOL;
    if (present(call, i) && !mask_bool && call->t[i].dtype != q->dtype) {
      *why = "Attention: Q, K, V, past and a float mask must have one dtype";
      return MX_ERR_KERNEL;
    }
  }
  for (uint32_t o = 0; o < call->n_out; o++) {
    mx_dtype dt = call->t[call->n_in + o].dtype;
    if (dt != MX_DTYPE_UNDEFINED && dt != q->dtype) {
      *why = "Attention: outputs must have Q's dtype";
      return MX_ERR_KERNEL;
    }
  }
  int32_t r = q->rank;
  if ((r != 3 && r != 4) || k->rank != r || v->rank != r) {
    *why = "Attention: Q, K and V must all be 3-D or all 4-D";
    return MX_ERR_KERNEL;
  }
  p->B = q->dims[0];
  if (k->dims[0] != p->B || v->dims[0] != p->B) goto bad_shape;
  if (r == 4) {
    p->Hq = q->dims[1], p->Sq = q->dims[2], p->Dk = q->dims[3];
    p->Hkv = k->dims[1], p->Skv = k->dims[2], p->Dv = v->dims[3];
    if (k->dims[3] != p->Dk || v->dims[1] != p->Hkv || v->dims[2] != p->Skv) goto bad_shape;
    p->q_row = p->Dk, p->q_head = p->Sq * p->Dk, p->q_batch = p->Hq * p->Sq * p->Dk;
    p->k_row = p->Dk, p->k_head = p->Skv * p->Dk, p->k_batch = p->Hkv * p->Skv * p->Dk;
    p->v_row = p->Dv, p->v_head = p->Skv * p->Dv, p->v_batch = p->Hkv * p->Skv * p->Dv;
    p->y_row = p->Dv, p->y_head = p->Sq * p->Dv, p->y_batch = p->Hq * p->Sq * p->Dv;
  } else {
    p->Hq = prm->q_num_heads, p->Hkv = prm->kv_num_heads;
    if (p->Hq <= 0 || p->Hkv <= 0) {
      *why = "Attention: 3-D inputs need q_num_heads and kv_num_heads";
      return MX_ERR_KERNEL;
    }
    if (q->dims[2] % p->Hq || k->dims[2] % p->Hkv || v->dims[2] % p->Hkv) goto bad_shape;
    p->Sq = q->dims[1], p->Dk = q->dims[2] / p->Hq;
    p->Skv = k->dims[1], p->Dv = v->dims[2] / p->Hkv;
    if (k->dims[2] / p->Hkv != p->Dk || v->dims[1] != p->Skv) goto bad_shape;
    p->q_row = p->Hq * p->Dk, p->q_head = p->Dk, p->q_batch = p->Sq * p->Hq * p->Dk;
    p->k_row = p->Hkv * p->Dk, p->k_head = p->Dk, p->k_batch = p->Skv * p->Hkv * p->Dk;
    p->v_row = p->Hkv * p->Dv, p->v_head = p->Dv, p->v_batch = p->Skv * p->Hkv * p->Dv;
    p->y_row = p->Hq * p->Dv, p->y_head = p->Dv, p->y_batch = p->Sq * p->Hq * p->Dv;
  }
  if (p->Hkv == 0 || p->Hq % p->Hkv != 0) {
    *why = "Attention: query heads are not a multiple of key/value heads";
    return MX_ERR_KERNEL;
  }
  if (present(call, 4) != present(call, 5)) {
    *why = "Attention: past_key and past_value must be given together";
    return MX_ERR_KERNEL;
  }
  if (present(call, 4)) {
    const mx_ktensor *pk = &call->t[4], *pv = &call->t[5];
    if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != p->B || pk->dims[1] != p->Hkv ||
        pk->dims[3] != p->Dk || pv->dims[0] != p->B || pv->dims[1] != p->Hkv || pv->dims[2] != pk->dims[2] ||
        pv->dims[3] != p->Dv)
      goto bad_shape;
    p->P = pk->dims[2];
    if (pk->strides[3] != 1 || pk->strides[2] != p->Dk || pv->strides[3] != 1 || pv->strides[2] != p->Dv) {
      *why = "Attention: the rows of past_key and past_value must be contiguous";
      return MX_ERR_KERNEL;
    }
    p->pk_batch = pk->strides[0], p->pk_head = pk->strides[1];
    p->pv_batch = pv->strides[0], p->pv_head = pv->strides[1];
  }
  p->T = p->P + p->Skv;
  p->scale = prm->has_scale ? prm->scale : (p->Dk > 0 ? (float)(1.0 / sqrt((double)p->Dk)) : 1.0f);
  p->softcap = prm->softcap;
  p->mode = prm->qk_matmul_output_mode;
  p->causal = prm->is_causal != 0;
  if (present(call, 3)) {
    const mx_ktensor *m = &call->t[3];
    if (m->rank < 1 || m->rank > 4) goto bad_mask;
    int64_t want[4] = {p->B, p->Hq, p->Sq, -1};
    for (int32_t i = 0; i < m->rank - 1; i++) {
      int64_t d = m->dims[i], w = want[4 - m->rank + i];
      if (d != 1 && d != w) goto bad_mask;
    }
    p->Tm = m->dims[m->rank - 1];
    if (p->Tm > p->T) goto bad_mask;
    mx__kbroadcast_strides(m, 4, p->m_str);
    p->mask_bool = m->dtype == MX_BOOL;
  }
  if (present(call, 6)) {
    const mx_ktensor *np = &call->t[6];
    if (np->dtype != MX_INT64 || mx__ktensor_numel(np) != p->B) {
      *why = "Attention: nonpad_kv_seqlen must hold one int64 per batch entry";
      return MX_ERR_KERNEL;
    }
    p->nonpad = np->data;
  }
  /* The output must have the shape the inputs give. */
  const mx_ktensor *y = &call->t[call->n_in];
  if (mx__ktensor_numel(y) != p->B * p->Hq * p->Sq * p->Dv) goto bad_shape;
  for (uint32_t o = 1; o < call->n_out && o < 4; o++) {
    int64_t want = o == 1   ? p->B * p->Hkv * p->T * p->Dk
                   : o == 2 ? p->B * p->Hkv * p->T * p->Dv
                            : p->B * p->Hq * p->Sq * p->T;
    if (call->t[call->n_in + o].dtype != MX_DTYPE_UNDEFINED &&
        mx__ktensor_numel(&call->t[call->n_in + o]) != want)
      goto bad_shape;
  }
  /* Presents: slab strides (padded when they lie in a state buffer), and whether they append. */
  for (uint32_t o = 1; o < call->n_out && o < 3; o++) {
    const mx_ktensor *t = &call->t[call->n_in + o];
    if (t->dtype == MX_DTYPE_UNDEFINED || t->rank != 4) continue;
    int64_t D = o == 1 ? p->Dk : p->Dv;
    if (t->strides[3] != 1 || t->strides[2] != D) {
      *why = "Attention: the rows of present_key and present_value must be contiguous";
      return MX_ERR_KERNEL;
    }
    const mx_ktensor *past = &call->t[o == 1 ? 4 : 5];
    bool same = present(call, o == 1 ? 4 : 5) && t->data && t->data == past->data;
    if (same && (t->strides[0] != past->strides[0] || t->strides[1] != past->strides[1])) {
      *why = "Attention: a present sharing its past's buffer must have the past's strides";
      return MX_ERR_KERNEL;
    }
    if (o == 1)
      p->ok_batch = t->strides[0], p->ok_head = t->strides[1], p->append_k = same;
    else
      p->ov_batch = t->strides[0], p->ov_head = t->strides[1], p->append_v = same;
  }
  return MX_OK;
bad_shape:
  *why = "Attention: the shapes of Q, K, V, past and outputs do not agree";
  return MX_ERR_KERNEL;
bad_mask:
  *why = "Attention: attn_mask does not broadcast to (batch, q_heads, q_seq, keys)";
  return MX_ERR_KERNEL;
}

/* present = concat(past, new) along the sequence, for key (D = Dk) or value (D = Dv): raw
 * element copies of `es` bytes, any dtype. Slabs are past_s / out_s apart (padded layouts);
 * with append the past rows are already in place and only the new rows are written. */
static void att_present(const att_plan *p, const void *past, const void *cur, int64_t batch_s, int64_t head_s,
                        int64_t row_s, int64_t D, size_t es, const int64_t past_s[2], const int64_t out_s[2],
                        bool append, void *out) {
  if (D == 0) return;
  for (int64_t b = 0; b < p->B; b++) {
    for (int64_t g = 0; g < p->Hkv; g++) {
      char *o = (char *)out + (size_t)(b * out_s[0] + g * out_s[1]) * es;
      if (p->P > 0 && !append)
        memcpy(o, (const char *)past + (size_t)(b * past_s[0] + g * past_s[1]) * es, (size_t)(p->P * D) * es);
      o += (size_t)(p->P * D) * es;
      for (int64_t s = 0; s < p->Skv; s++) {
        memcpy(o, (const char *)cur + (size_t)(b * batch_s + g * head_s + s * row_s) * es, (size_t)D * es);
        o += (size_t)D * es;
      }
    }
  }
}

/* Floats of scratch a float32 head's two products need on the own GEMM (gemm_f32_matmul.c),
 * or 0 when they stay on sgemm: several queries, no past (one column range), and shapes where
 * the own GEMM pays. */
static size_t att_own_floats(const att_plan *p) {
  if (p->Sq < 2 || p->P != 0 || p->Skv < 1 || p->Dk < 1 || p->Dv < 1) return 0;
  if (!mx__kmm_own_pays(p->Sq, p->Skv, p->Dk, 0) || !mx__kmm_own_pays(p->Sq, p->Dv, p->Skv, 0)) return 0;
  size_t qk = mx__kmm_own_scratch_floats(p->Sq, p->Skv, p->Dk);
  size_t pv = mx__kmm_own_scratch_floats(p->Sq, p->Dv, p->Skv);
  return qk > pv ? qk : pv;
}

/* The scale of the scores, applied to each tile of Q K^T as it is finished. */
typedef struct att_scale_tile {
  float *c;
  int64_t ldc;
  float scale;
} att_scale_tile;

static void att_scale_tile_fn(void *ctx, int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
  const att_scale_tile *t = ctx;
  for (int64_t i = 0; i < rows; i++) {
    float *r = t->c + (row0 + i) * t->ldc + col0;
    for (int64_t j = 0; j < cols; j++) r[j] *= t->scale;
  }
}

/* scores = scale * Q_h K_h^T on the own GEMM (K's rows packed as the columns of B); false when
 * the plan has no scratch for it. */
static bool att_own_qk(const att_plan *p, const float *qh, const float *kh, float *scores) {
  if (!p->own) return false;
  float *bp = p->own + mx__kgemm_f32_a_floats(p->Sq);
  mx__kmm_pack_b(kh, p->k_row, 1, p->Dk, p->Skv, bp);
  att_scale_tile t = {scores, p->T, p->scale};
  mx__kgemm_f32_packed(p->Sq, p->Skv, p->Dk, qh, p->q_row, bp, scores, p->T, p->own, att_scale_tile_fn, &t);
  return true;
}

/* Y_h = P V_h on the own GEMM; false when the plan has no scratch for it. */
static bool att_own_pv(const att_plan *p, const float *weights, const float *vh, float *yh) {
  if (!p->own) return false;
  float *bp = p->own + mx__kgemm_f32_a_floats(p->Sq);
  mx__kmm_pack_b(vh, p->v_row, 0, p->Skv, p->Dv, bp);
  mx__kgemm_f32_packed(p->Sq, p->Dv, p->Skv, weights, p->T, bp, yh, p->y_row, p->own, NULL, NULL);
  return true;
}

#define ATT_T        float
#define ATT_SUF      f32
#define ATT_OWN_QK   att_own_qk
#define ATT_OWN_PV   att_own_pv
#define ATT_IS_FLOAT 1
#define ATT_GEMM     cblas_sgemm
#define ATT_GEMV     cblas_sgemv
#define ATT_TANH     tanhf
#include "kernels/nn_attention_walk.inc"

/* The float32 decode step (nn_attention_decode.inc): head sizes a multiple of 8. */
static bool att_decode_fits(const att_plan *p) {
  return p->Sq == 1 && p->B > 0 && p->Hq > 0 && p->Dk > 0 && p->Dv > 0 && p->Dk % 8 == 0 && p->Dv % 8 == 0;
}

/* Bytes of one core's L2 cache, asked once (1 MiB when the C library cannot tell). */
static size_t att_l2_bytes(void) {
  static _Atomic size_t cached;
  size_t v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v) return v;
  long n = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
  n = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  v = n > 0 ? (size_t)n : (size_t)1 << 20;
  atomic_store_explicit(&cached, v, memory_order_relaxed);
  return v;
}

/* Whether the decode step writes the presents by streaming stores. It reads the past and writes
 * the presents, a little more; when the two together pass the core's L2 the presents cannot stay
 * there until anything reads them, and ordinary stores would first read every line of them and
 * then push other data out of the shared cache: in a decode step that is the weights the next
 * matrix products read (measured: small model at past 512, 700 -> 460 us a step). Below that
 * size ordinary stores keep the presents in L2 for the next step, which streaming would lose
 * (tiny model at past 512, 19.5 -> 24.8 us). Rows must be 16-byte aligned. */
static bool att_stream_fits(const att_plan *p, const float *present_k, const float *present_v) {
  if (!present_k || !present_v || (((uintptr_t)present_k | (uintptr_t)present_v) & 15) != 0) return false;
  size_t past_bytes = (size_t)(p->B * p->Hkv * p->P) * (size_t)(p->Dk + p->Dv) * sizeof(float);
  size_t present_bytes = (size_t)(p->B * p->Hkv * p->T) * (size_t)(p->Dk + p->Dv) * sizeof(float);
  if (p->append_k || p->append_v) return false; /* one new row per head: nothing to keep out of L2 */
  return past_bytes + present_bytes > att_l2_bytes();
}

/* What the float32 decode step keeps per query head of a key/value group. */
typedef struct att_head {
  float lanes[16]; /* running maxima of the scores, lane by lane (8 or 16 lanes used) */
  float max;       /* the scores' maximum (plain step) */
  bool ready;      /* the scores hold final weights (not a plain step, or no finite score) */
  double sum;      /* sum of exp(score - max) so far (plain step) */
} att_head;

/* Rows of the cache per chunk: about 8 KB of one head's rows, a multiple of 16. */
static int64_t att_chunk_rows(int64_t D) {
  int64_t c = (8192 / (D * (int64_t)sizeof(float))) & ~(int64_t)15;
  return c < 16 ? 16 : c;
}

/* Vectors of 8 or 16 floats cross no call in the decode step (see the file), so gcc's note that
 * their passing convention differs without AVX does not apply. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#define ATTV 8
#include "kernels/nn_attention_decode.inc"
#define ATTV 16
#include "kernels/nn_attention_decode.inc"

/* The decode step with the widest vectors the head sizes allow. */
static void att_decode_f32(const att_plan *p, const float *q, const float *k, const float *v, const float *pk,
                           const float *pv, const void *mask, float *y, mx_ktensor *qk_out, float *scores,
                           att_head *heads, float *present_k, float *present_v) {
  if (p->Dk % 16 == 0 && p->Dv % 16 == 0)
    att_decode_f32_16(p, q, k, v, pk, pv, mask, y, qk_out, scores, heads, present_k, present_v);
  else
    att_decode_f32_8(p, q, k, v, pk, pv, mask, y, qk_out, scores, heads, present_k, present_v);
}

#define ATT_T        double
#define ATT_SUF      f64
#define ATT_OWN_QK(p, q, k, s) false
#define ATT_OWN_PV(p, w, v, y) false
#define ATT_IS_FLOAT 0
#define ATT_GEMM     cblas_dgemm
#define ATT_GEMV     cblas_dgemv
#define ATT_TANH     tanh
#include "kernels/nn_attention_walk.inc"

/* Elements input t's data spans: its numel, or more for a past padded along the sequence. */
static int64_t att_span(const mx_ktensor *t) {
  return t->rank > 0 ? t->dims[0] * t->strides[0] : mx__ktensor_numel(t);
}

/* Workspace: the score matrix of one head, plus float32 copies of every float input and of Y
 * for 16-bit types. */
static size_t att_workspace(const mx_kernel_call *call) {
  att_plan p;
  const char *why;
  if (att_make_plan(call, &p, &why) != MX_OK) return 0;
  mx_dtype dt = call->t[0].dtype;
  size_t es = dt == MX_FLOAT64 ? 8 : 4;
  /* Score rows: Sq of one head, or in the float32 decode step one per head of a key/value group,
   * followed by an att_head per head of the group. */
  if (dt == MX_FLOAT32 && att_decode_fits(&p)) {
    int64_t group = p.Hq / p.Hkv;
    return mx__kalign64((size_t)(group * p.T) * 4) + mx__kalign64((size_t)group * sizeof(att_head));
  }
  size_t total = mx__kalign64((size_t)(p.Sq * p.T) * es);
  if (dt == MX_FLOAT32) total += mx__kalign64(att_own_floats(&p) * 4);
  if (dt == MX_FLOAT16 || dt == MX_BFLOAT16) {
    for (uint32_t i = 0; i < call->n_in && i < 6; i++) {
      if (!present(call, i) || call->t[i].dtype == MX_BOOL) continue;
      total += mx__kalign64((size_t)att_span(&call->t[i]) * 4);
    }
    total += mx__kalign64((size_t)mx__ktensor_numel(&call->t[call->n_in]) * 4);
  }
  return total;
}

static mx_status att_run(mx_kernel_call *call) {
  att_plan p;
  mx_status st = att_make_plan(call, &p, &call->why);
  if (st != MX_OK) return st;
  mx_dtype dt = call->t[0].dtype;
  size_t es = mx_dtype_size(dt);
  mx_ktensor *y = mx__kout(call, 0);
  const void *pk = present(call, 4) ? call->t[4].data : NULL, *pv = present(call, 5) ? call->t[5].data : NULL;
  void *present_k = call->n_out > 1 ? call->t[call->n_in + 1].data : NULL;
  void *present_v = call->n_out > 2 ? call->t[call->n_in + 2].data : NULL;
  mx_ktensor *qk = call->n_out > 3 && call->t[call->n_in + 3].data ? &call->t[call->n_in + 3] : NULL;
  const void *mask = present(call, 3) ? call->t[3].data : NULL;
  if (dt == MX_FLOAT32 && att_decode_fits(&p)) {
    float *scores = call->workspace;
    att_head *heads = (att_head *)((char *)call->workspace + mx__kalign64((size_t)(p.Hq / p.Hkv * p.T) * 4));
    p.stream_presents = att_stream_fits(&p, present_k, present_v);
    att_decode_f32(&p, call->t[0].data, call->t[1].data, call->t[2].data, pk, pv, mask, y->data, qk, scores,
                   heads, present_k, present_v);
    return MX_OK;
  }
  /* present_key / present_value first: they only copy. */
  if (present_k)
    att_present(&p, pk, call->t[1].data, p.k_batch, p.k_head, p.k_row, p.Dk, es,
                (const int64_t[2]){p.pk_batch, p.pk_head}, (const int64_t[2]){p.ok_batch, p.ok_head},
                p.append_k, present_k);
  if (present_v)
    att_present(&p, pv, call->t[2].data, p.v_batch, p.v_head, p.v_row, p.Dv, es,
                (const int64_t[2]){p.pv_batch, p.pv_head}, (const int64_t[2]){p.ov_batch, p.ov_head},
                p.append_v, present_v);
  if (p.B == 0 || p.Hq == 0 || p.Sq == 0) return MX_OK;
  mx__kblas_init();
  char *w = call->workspace;
  if (dt == MX_FLOAT64) {
    att_core_f64(&p, call->t[0].data, call->t[1].data, call->t[2].data, pk, pv, mask, y->data, qk,
                 (double *)w);
    return MX_OK;
  }
  float *scores = (float *)w;
  w += mx__kalign64((size_t)(p.Sq * p.T) * 4);
  if (dt == MX_FLOAT32) {
    size_t own = mx__kalign64(att_own_floats(&p) * 4);
    if (own && (size_t)(w - (char *)call->workspace) + own <= call->workspace_size) p.own = (float *)w;
    att_core_f32(&p, call->t[0].data, call->t[1].data, call->t[2].data, pk, pv, mask, y->data, qk, scores);
    return MX_OK;
  }
  if (dt != MX_FLOAT16 && dt != MX_BFLOAT16) return MX_ERR_UNSUPPORTED;
  /* 16-bit floats: widen every float input (same layouts) and compute Y in float32. */
  const float *f[6] = {NULL};
  for (uint32_t i = 0; i < call->n_in && i < 6; i++) {
    if (!present(call, i) || call->t[i].dtype == MX_BOOL) continue;
    int64_t n = att_span(&call->t[i]);
    mx__khalf_to_f32(call->t[i].data, call->t[i].dtype, (float *)w, n);
    f[i] = (const float *)w;
    w += mx__kalign64((size_t)n * 4);
  }
  const void *fmask = mask && call->t[3].dtype != MX_BOOL ? (const void *)f[3] : mask;
  float *fy = (float *)w;
  att_core_f32(&p, f[0], f[1], f[2], f[4], f[5], fmask, fy, qk, scores);
  mx__kf32_to_half(fy, y->dtype, y->data, mx__ktensor_numel(y));
  return MX_OK;
}

const mx_kernel_def mx__kernel_attention_float = {
    .op = "Attention",
    .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT16) | MX_KDT(MX_BFLOAT16),
    .key = 0,
    .run = att_run,
    .workspace = att_workspace};
const mx_kernel_def mx__kernel_attention_f64 = {
    .op = "Attention", .dtypes = MX_KDT(MX_FLOAT64), .key = 0, .run = att_run, .workspace = att_workspace};
