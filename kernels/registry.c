/* Kernel registry: finds the kernel of an op for the dtype of its deciding tensor. Lookups scan
 * the (small) table per op name; executors look kernels up once per node when they plan, never
 * per step. Also the small helpers that fill call blocks (tensor dims and strides, a new block). */
#include <stdlib.h>
#include <string.h>

#include "kernels/groups.h"

static const mx_kernel_def *const *const groups[] = {
    mx__kernels_elementwise, mx__kernels_reduce,     mx__kernels_nn,     mx__kernels_linalg,
    mx__kernels_shape,       mx__kernels_index,      mx__kernels_conv,   mx__kernels_pool,
    mx__kernels_norm,        mx__kernels_activation, mx__kernels_loss,   mx__kernels_resample,
    mx__kernels_tensor,      mx__kernels_quant,      mx__kernels_rnn,    mx__kernels_signal,
    mx__kernels_llm,         mx__kernels_random,     mx__kernels_string, mx__kernels_ml,
    mx__kernels_training,    mx__kernels_image,      mx__kernels_collective,
};
#define N_GROUPS (sizeof groups / sizeof groups[0])

void mx__ktensor_set_dims(mx_ktensor *t, int32_t rank, const int64_t *dims) {
  t->rank = rank;
  int64_t stride = 1;
  for (int32_t i = MX_MAX_RANK - 1; i >= 0; i--) {
    if (i >= rank) {
      t->dims[i] = 0;
      t->strides[i] = 0;
      continue;
    }
    t->dims[i] = dims[i];
    t->strides[i] = stride;
    stride *= dims[i] ? dims[i] : 1;
  }
}

void mx__ktensor_set(mx_ktensor *t, mx_dtype dtype, int32_t rank, const int64_t *dims, void *data) {
  t->dtype = dtype;
  t->data = data;
  mx__ktensor_set_dims(t, rank, dims);
}

mx_kernel_call *mx__kernel_call_new(uint16_t n_in, uint16_t n_out, const void *params) {
  mx_kernel_call *c = calloc(1, mx__kernel_call_size((uint32_t)n_in + n_out));
  if (!c) return NULL;
  c->n_in = n_in;
  c->n_out = n_out;
  c->params = params;
  return c;
}

int64_t mx__ktensor_numel(const mx_ktensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

static bool same_domain(const mx_kernel_def *k, const char *domain) {
  const char *kd = k->domain ? k->domain : "";
  if (!domain || strcmp(domain, "ai.onnx") == 0) domain = "";
  return strcmp(kd, domain) == 0;
}

const mx_kernel_def *mx__kernel_find(const char *domain, const char *op, const mx_kernel_call *call) {
  for (size_t g = 0; g < N_GROUPS; g++) {
    for (const mx_kernel_def *const *k = groups[g]; *k; k++) {
      if (strcmp((*k)->op, op) != 0 || !same_domain(*k, domain)) continue;
      int key = (*k)->key;
      uint32_t idx = key >= 0 ? (uint32_t)key : (uint32_t)call->n_in + (uint32_t)(-1 - key);
      if (idx >= (uint32_t)call->n_in + call->n_out) continue;
      if ((*k)->dtypes & MX_KDT(call->t[idx].dtype)) return *k;
    }
  }
  return NULL;
}

bool mx__kernel_exists(const char *domain, const char *op) {
  for (size_t g = 0; g < N_GROUPS; g++)
    for (const mx_kernel_def *const *k = groups[g]; *k; k++)
      if (strcmp((*k)->op, op) == 0 && same_domain(*k, domain)) return true;
  return false;
}

size_t mx__kernel_count(void) {
  size_t n = 0;
  for (size_t g = 0; g < N_GROUPS; g++)
    for (const mx_kernel_def *const *k = groups[g]; *k; k++) n++;
  return n;
}

const mx_kernel_def *mx__kernel_at(size_t index) {
  for (size_t g = 0; g < N_GROUPS; g++)
    for (const mx_kernel_def *const *k = groups[g]; *k; k++)
      if (index-- == 0) return *k;
  return NULL;
}
