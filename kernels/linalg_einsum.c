/* CPU kernel of Einsum.
 *
 * The equation (parsed at load into label codes, graph/ops/linalg_params.h) becomes a plan of
 * "slots": one per distinct label plus one per broadcast "..." dim. Each operand gets a stride
 * per slot (the sum of its strides when a label repeats inside it, which walks a diagonal; 0
 * where it broadcasts a size-1 dim), the output gets its slots in order, and every other slot
 * is summed.
 *
 * Fast path: a two-operand float32/float64 contraction whose labels are each batch (both
 * operands and output), row (A and output), column (B and output) or contracted (A and B) is
 * packed into [batch, M, K] x [batch, K, N] and run through sgemm/dgemm. Everything else runs
 * the generic loop over double (floats) or int64 (integers) copies of the operands. */
#include <cblas.h>
#include <string.h>

#include "graph/ops/linalg_params.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

#define EIN_MAX_SLOTS (MX_EINSUM_MAX_OPERANDS * MX_EINSUM_MAX_TERM)

typedef struct ein_plan {
  int32_t n_ops;
  int32_t n_slots;
  int64_t size[EIN_MAX_SLOTS];
  int64_t stride[MX_EINSUM_MAX_OPERANDS][EIN_MAX_SLOTS]; /* elements; 0: absent or broadcast */
  uint8_t uses[MX_EINSUM_MAX_OPERANDS][EIN_MAX_SLOTS];   /* operand has a dim of full size there */
  int32_t n_out, out_slot[EIN_MAX_SLOTS];
  int32_t n_sum, sum_slot[EIN_MAX_SLOTS];
  int64_t out_numel;
  bool diagonal;  /* some operand repeats a label */
  bool broadcast; /* some operand has size 1 where the slot is larger */
} ein_plan;

/* Kinds of slots for the matmul fast path. */
typedef struct ein_mm {
  int32_t nb, nm, nn, nk;
  int32_t b[EIN_MAX_SLOTS], m[EIN_MAX_SLOTS], n[EIN_MAX_SLOTS], k[EIN_MAX_SLOTS];
  int64_t bt, ms, ns, ks; /* products of the sizes of each kind */
} ein_mm;

/* Builds the plan; on failure *why says what is wrong with the call. */
static mx_status ein_make_plan(const mx_kernel_call *call, ein_plan *p, const char **why) {
  const mx_einsum_params *prm = call->params;
  memset(p, 0, sizeof *p);
  p->n_ops = prm->n_operands;
  if ((int32_t)call->n_in != p->n_ops) {
    *why = "Einsum: the number of inputs does not match the equation";
    return MX_ERR_KERNEL;
  }
  /* The "..." dims take the first slots, right-aligned across operands. */
  int32_t ell = 0, ell_rank[MX_EINSUM_MAX_OPERANDS] = {0};
  for (int32_t k = 0; k < p->n_ops; k++) {
    bool has = false;
    for (int32_t j = 0; j < prm->term_len[k]; j++) has |= prm->terms[k][j] == MX_EINSUM_ELLIPSIS;
    int32_t letters = has ? prm->term_len[k] - 1 : prm->term_len[k];
    if (has ? call->t[k].rank < letters : call->t[k].rank != letters) {
      *why = "Einsum: an input's rank does not match its term";
      return MX_ERR_KERNEL;
    }
    ell_rank[k] = has ? call->t[k].rank - letters : 0;
    if (ell_rank[k] > ell) ell = ell_rank[k];
  }
  int32_t letter_slot[128];
  for (int i = 0; i < 128; i++) letter_slot[i] = -1;
  p->n_slots = ell;
  for (int32_t s = 0; s < EIN_MAX_SLOTS; s++) p->size[s] = -1;
  for (int32_t k = 0; k < p->n_ops; k++) {
    const mx_ktensor *t = &call->t[k];
    int32_t d = 0;
    for (int32_t j = 0; j < prm->term_len[k]; j++) {
      int8_t c = prm->terms[k][j];
      int32_t first, count;
      if (c == MX_EINSUM_ELLIPSIS) {
        first = ell - ell_rank[k];
        count = ell_rank[k];
      } else {
        if (letter_slot[(int)c] < 0) letter_slot[(int)c] = p->n_slots++;
        first = letter_slot[(int)c];
        count = 1;
      }
      for (int32_t e = 0; e < count; e++, d++) {
        int32_t s = first + e;
        int64_t dim = t->dims[d];
        if (c != MX_EINSUM_ELLIPSIS && p->uses[k][s]) p->diagonal = true;
        if (p->size[s] < 0 || p->size[s] == 1) {
          if (p->size[s] == 1 && dim != 1) p->broadcast = true;
          p->size[s] = dim;
        } else if (dim != p->size[s]) {
          if (dim != 1) {
            *why = "Einsum: a label has different sizes in different places";
            return MX_ERR_KERNEL;
          }
          p->broadcast = true;
        }
        if (dim != 1) p->stride[k][s] += t->strides[d];
        p->uses[k][s] = 1;
      }
    }
  }
  for (int32_t s = 0; s < p->n_slots; s++)
    if (p->size[s] < 0) p->size[s] = 1;
  /* A size-1 dim of an operand whose slot is larger broadcasts: it is not a full use. */
  for (int32_t k = 0; k < p->n_ops; k++)
    for (int32_t s = 0; s < p->n_slots; s++)
      if (p->uses[k][s] && p->size[s] != 1 && p->stride[k][s] == 0) p->uses[k][s] = 0;
  bool in_out[EIN_MAX_SLOTS] = {false};
  for (int32_t j = 0; j < prm->out_len; j++) {
    int8_t c = prm->out[j];
    if (c == MX_EINSUM_ELLIPSIS) {
      for (int32_t s = 0; s < ell; s++) {
        p->out_slot[p->n_out++] = s;
        in_out[s] = true;
      }
    } else {
      int32_t s = letter_slot[(int)c];
      if (s < 0) {
        *why = "Einsum: an output label is in no input";
        return MX_ERR_KERNEL;
      }
      p->out_slot[p->n_out++] = s;
      in_out[s] = true;
    }
  }
  p->out_numel = 1;
  for (int32_t j = 0; j < p->n_out; j++) p->out_numel *= p->size[p->out_slot[j]];
  for (int32_t s = 0; s < p->n_slots; s++)
    if (!in_out[s]) p->sum_slot[p->n_sum++] = s;
  if (mx__ktensor_numel(&call->t[call->n_in]) != p->out_numel) {
    *why = "Einsum: the output tensor does not have the equation's shape";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

/* Classifies the slots of a two-operand plan for the matmul fast path; false if it does not fit. */
static bool ein_as_matmul(const ein_plan *p, const mx_kernel_call *call, ein_mm *mm) {
  if (p->n_ops != 2 || p->diagonal || p->broadcast) return false;
  mx_dtype dt = call->t[0].dtype;
  if ((dt != MX_FLOAT32 && dt != MX_FLOAT64) || call->t[1].dtype != dt || call->t[2].dtype != dt)
    return false;
  memset(mm, 0, sizeof *mm);
  bool in_out[EIN_MAX_SLOTS] = {false};
  for (int32_t j = 0; j < p->n_out; j++) in_out[p->out_slot[j]] = true;
  mm->bt = mm->ms = mm->ns = mm->ks = 1;
  for (int32_t s = 0; s < p->n_slots; s++) {
    bool a = p->uses[0][s], b = p->uses[1][s], o = in_out[s];
    if (p->size[s] == 1 && !o) continue; /* summing one element: nothing to do */
    if (p->size[s] == 1) {
      /* A size-1 dim is in the output only; it can be any kind: call it batch. */
      mm->b[mm->nb++] = s;
      continue;
    }
    if (a && b && o) {
      mm->b[mm->nb++] = s;
      mm->bt *= p->size[s];
    } else if (a && !b && o) {
      mm->m[mm->nm++] = s;
      mm->ms *= p->size[s];
    } else if (!a && b && o) {
      mm->n[mm->nn++] = s;
      mm->ns *= p->size[s];
    } else if (a && b && !o) {
      mm->k[mm->nk++] = s;
      mm->ks *= p->size[s];
    } else {
      return false;
    }
  }
  return true;
}

/* Copies the elements of src (strides per slot) visited in the order of slot lists l1, l2, l3
 * into contiguous dst, or (scatter) the contiguous src into dst at those strides. */
static void ein_permute(const ein_plan *p, const int64_t *strides, const int32_t *const lists[3],
                        const int32_t counts[3], const char *src, char *dst, size_t esize, bool scatter) {
  int32_t order[EIN_MAX_SLOTS], n = 0;
  for (int l = 0; l < 3; l++)
    for (int32_t i = 0; i < counts[l]; i++) order[n++] = lists[l][i];
  int64_t total = 1;
  for (int32_t i = 0; i < n; i++) total *= p->size[order[i]];
  int64_t coord[EIN_MAX_SLOTS] = {0}, off = 0;
  for (int64_t lin = 0; lin < total; lin++) {
    const char *s = scatter ? src + lin * (int64_t)esize : src + off * (int64_t)esize;
    char *d = scatter ? dst + off * (int64_t)esize : dst + lin * (int64_t)esize;
    if (esize == 4)
      memcpy(d, s, 4);
    else
      memcpy(d, s, 8);
    for (int32_t i = n - 1; i >= 0; i--) {
      int32_t sl = order[i];
      off += strides[sl];
      if (++coord[i] < p->size[sl]) break;
      off -= strides[sl] * coord[i];
      coord[i] = 0;
    }
  }
}

/* Output strides per slot (contiguous output in out-slot order). */
static void ein_out_strides(const ein_plan *p, int64_t *os) {
  memset(os, 0, EIN_MAX_SLOTS * sizeof *os);
  int64_t s = 1;
  for (int32_t j = p->n_out - 1; j >= 0; j--) {
    os[p->out_slot[j]] = s;
    s *= p->size[p->out_slot[j]];
  }
}

static void ein_run_matmul(const ein_plan *p, const ein_mm *mm, mx_kernel_call *call) {
  size_t es = call->t[0].dtype == MX_FLOAT32 ? 4 : 8;
  char *wa = call->workspace;
  char *wb = wa + mx__kalign64((size_t)(mm->bt * mm->ms * mm->ks) * es);
  char *wc = wb + mx__kalign64((size_t)(mm->bt * mm->ks * mm->ns) * es);
  const int32_t *la[3] = {mm->b, mm->m, mm->k}, *lb[3] = {mm->b, mm->k, mm->n},
                *lc[3] = {mm->b, mm->m, mm->n};
  int32_t ca[3] = {mm->nb, mm->nm, mm->nk}, cb[3] = {mm->nb, mm->nk, mm->nn},
          cc[3] = {mm->nb, mm->nm, mm->nn};
  ein_permute(p, p->stride[0], la, ca, call->t[0].data, wa, es, false);
  ein_permute(p, p->stride[1], lb, cb, call->t[1].data, wb, es, false);
  mx__kblas_init();
  int64_t m = mm->ms, n = mm->ns, k = mm->ks;
  for (int64_t b = 0; b < mm->bt; b++) {
    if (es == 4) {
      const float *a = (const float *)wa + b * m * k, *bb = (const float *)wb + b * k * n;
      float *c = (float *)wc + b * m * n;
      if (k == 0)
        memset(c, 0, (size_t)(m * n) * es);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0f, a,
                    (blasint)k, bb, (blasint)n, 0.0f, c, (blasint)n);
    } else {
      const double *a = (const double *)wa + b * m * k, *bb = (const double *)wb + b * k * n;
      double *c = (double *)wc + b * m * n;
      if (k == 0)
        memset(c, 0, (size_t)(m * n) * es);
      else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0, a,
                    (blasint)k, bb, (blasint)n, 0.0, c, (blasint)n);
    }
  }
  int64_t os[EIN_MAX_SLOTS];
  ein_out_strides(p, os);
  ein_permute(p, os, lc, cc, wc, call->t[call->n_in].data, es, true);
}

/* Offsets of every operand for a coordinate given per slot. */
static void ein_offsets(const ein_plan *p, const int64_t *coord, int64_t *off) {
  for (int32_t k = 0; k < p->n_ops; k++) {
    int64_t o = 0;
    for (int32_t s = 0; s < p->n_slots; s++) o += coord[s] * p->stride[k][s];
    off[k] = o;
  }
}

/* Sets coord[slots[0..n)] to the row-major coordinates of linear index idx over those slots. */
static void ein_coord(const ein_plan *p, const int32_t *slots, int32_t n, int64_t idx, int64_t *coord) {
  for (int32_t j = n - 1; j >= 0; j--) {
    coord[slots[j]] = idx % p->size[slots[j]];
    idx /= p->size[slots[j]];
  }
}

/* Number of summed coordinates: the product of the summed slots' sizes. */
static int64_t ein_n_sum(const ein_plan *p) {
  int64_t n_sum = 1;
  for (int32_t i = 0; i < p->n_sum; i++) n_sum *= p->size[p->sum_slot[i]];
  return n_sum;
}

/* The generic loop over double copies of the operands. */
static void ein_run_f64(const ein_plan *p, const double *const *ops, mx_ktensor *y) {
  int64_t coord[EIN_MAX_SLOTS] = {0}, off[MX_EINSUM_MAX_OPERANDS];
  int64_t n_sum = ein_n_sum(p);
  for (int64_t o = 0; o < p->out_numel; o++) {
    ein_coord(p, p->out_slot, p->n_out, o, coord);
    double acc = 0.0;
    for (int64_t s = 0; s < n_sum; s++) {
      ein_coord(p, p->sum_slot, p->n_sum, s, coord);
      ein_offsets(p, coord, off);
      double prod = ops[0][off[0]];
      for (int32_t k = 1; k < p->n_ops; k++) prod *= ops[k][off[k]];
      acc += prod;
    }
    mx__kset_f64(y->data, y->dtype, o, acc);
  }
}

/* The same over int64 copies, wrapping like the integer kernels. */
static void ein_run_i64(const ein_plan *p, const int64_t *const *ops, mx_ktensor *y) {
  int64_t coord[EIN_MAX_SLOTS] = {0}, off[MX_EINSUM_MAX_OPERANDS];
  int64_t n_sum = ein_n_sum(p);
  for (int64_t o = 0; o < p->out_numel; o++) {
    ein_coord(p, p->out_slot, p->n_out, o, coord);
    uint64_t acc = 0;
    for (int64_t s = 0; s < n_sum; s++) {
      ein_coord(p, p->sum_slot, p->n_sum, s, coord);
      ein_offsets(p, coord, off);
      uint64_t prod = (uint64_t)ops[0][off[0]];
      for (int32_t k = 1; k < p->n_ops; k++) prod *= (uint64_t)ops[k][off[k]];
      acc += prod;
    }
    mx__kset_i64(y->data, y->dtype, o, (int64_t)acc);
  }
}

static size_t ein_workspace(const mx_kernel_call *call) {
  ein_plan p;
  ein_mm mm;
  const char *why;
  if (ein_make_plan(call, &p, &why) != MX_OK) return 0;
  if (ein_as_matmul(&p, call, &mm)) {
    size_t es = call->t[0].dtype == MX_FLOAT32 ? 4 : 8;
    return mx__kalign64((size_t)(mm.bt * mm.ms * mm.ks) * es) +
           mx__kalign64((size_t)(mm.bt * mm.ks * mm.ns) * es) +
           mx__kalign64((size_t)(mm.bt * mm.ms * mm.ns) * es);
  }
  size_t total = 0;
  for (uint32_t k = 0; k < call->n_in; k++) total += mx__kalign64((size_t)mx__ktensor_numel(&call->t[k]) * 8);
  return total;
}

static mx_status ein_run(mx_kernel_call *call) {
  ein_plan p;
  mx_status st = ein_make_plan(call, &p, &call->why);
  if (st != MX_OK) return st;
  mx_ktensor *y = mx__kout(call, 0);
  if (p.out_numel == 0) return MX_OK;
  ein_mm mm;
  if (ein_as_matmul(&p, call, &mm)) {
    ein_run_matmul(&p, &mm, call);
    return MX_OK;
  }
  bool is_float = mx_dtype_is_float(call->t[0].dtype);
  char *w = call->workspace;
  const void *ops[MX_EINSUM_MAX_OPERANDS];
  for (uint32_t k = 0; k < call->n_in; k++) {
    const mx_ktensor *t = &call->t[k];
    int64_t n = mx__ktensor_numel(t);
    if (is_float) {
      double *d = (double *)w;
      if (t->dtype == MX_FLOAT64 && n > 0)
        memcpy(d, t->data, (size_t)n * 8);
      else
        for (int64_t i = 0; i < n; i++) d[i] = mx__kget_f64(t->data, t->dtype, i);
    } else {
      int64_t *d = (int64_t *)w;
      for (int64_t i = 0; i < n; i++) d[i] = mx__kget_i64(t->data, t->dtype, i);
    }
    ops[k] = w;
    w += mx__kalign64((size_t)n * 8);
  }
  if (is_float)
    ein_run_f64(&p, (const double *const *)ops, y);
  else
    ein_run_i64(&p, (const int64_t *const *)ops, y);
  return MX_OK;
}

const mx_kernel_def mx__kernel_einsum_float = {
    .op = "Einsum", .dtypes = MX_KDT_FLOATS, .key = 0, .run = ein_run, .workspace = ein_workspace};
const mx_kernel_def mx__kernel_einsum_int = {
    .op = "Einsum", .dtypes = MX_KDT_INTS, .key = 0, .run = ein_run, .workspace = ein_workspace};
