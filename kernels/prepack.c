/* Pre-packed constant inputs: block headers, the kernels' check and the executors' cache (see
 * prepack.h). */
#include "kernels/prepack.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Marks a pre-packed block's header (a fixed pattern). */
#define PREPACK_MAGIC 0x6d78707265706b31ull

struct mx_kprepack_entry {
  const void *src;
  mx_kernel_prepack_layout layout;
  void *block; /* what keep() returned (or the host block) */
  size_t bytes;
  mx_kprepack_entry *next;
};

void *mx__kprepack_begin(void *dst, size_t bytes, const mx_kernel_call *call, uint32_t input,
                         const mx_kernel_prepack_layout *layout) {
  mx_kprepack_hdr *h = dst;
  memset(h, 0, MX_KPREPACK_HDR_BYTES);
  h->magic = PREPACK_MAGIC;
  h->src = call->t[input].data;
  h->layout = *layout;
  h->bytes = bytes;
  return (char *)dst + MX_KPREPACK_HDR_BYTES;
}

const mx_kprepack_hdr *mx__kprepack_of(const mx_kernel_call *call, uint32_t input) {
  const mx_kprepack_hdr *h = call->prepacked;
  if (!h || input >= call->n_in || h->magic != PREPACK_MAGIC || !h->src || h->src != call->t[input].data)
    return NULL;
  return h;
}

const void *mx__kprepack_find(const mx_kernel_call *call, uint32_t input, const mx_kernel_prepack_layout *layout) {
  const mx_kprepack_hdr *h = mx__kprepack_of(call, input);
  return h && memcmp(&h->layout, layout, sizeof *layout) == 0 ? mx__kprepack_data(h) : NULL;
}

/* Every kernel with a pre-packed form. */
static const mx_kprepack_hook hooks[] = {
    {"Conv", mx__kconv_prepack, 1},
    {"MatMul", mx__kmatmul_prepack, 1},
    {"Gemm", mx__kgemm_prepack, 1},
};

const mx_kprepack_hook *mx__kprepack_hook(const mx_kernel_def *kd) {
  if (!kd || !kd->op || (kd->domain && kd->domain[0])) return NULL;
  for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
    if (strcmp(hooks[i].op, kd->op) == 0) return &hooks[i];
  return NULL;
}

bool mx__kprepack_enabled(void) {
  static _Atomic int state; /* 0: not read yet, 1: on, 2: off */
  int v = atomic_load_explicit(&state, memory_order_relaxed);
  if (!v) {
    const char *env = getenv("MIXRT_PREPACK");
    v = env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0) ? 2 : 1;
    atomic_store_explicit(&state, v, memory_order_relaxed);
  }
  return v == 1;
}

static bool same_layout(const mx_kernel_prepack_layout *a, const mx_kernel_prepack_layout *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

const void *mx__kprepack_get(mx_kprepack_cache *c, const mx_kernel_def *kd, const mx_kernel_call *call) {
  const mx_kprepack_hook *hook = mx__kprepack_hook(kd);
  if (!c || !hook || hook->input >= call->n_in) return NULL;
  const uint32_t input = hook->input;
  const void *src = call->t[input].data;
  if (!src) return NULL;
  mx_kernel_prepack_layout layout;
  memset(&layout, 0, sizeof layout);
  size_t bytes = hook->fn(call, NULL, &layout);
  if (!bytes) return NULL;
  for (mx_kprepack_entry *e = c->entries; e; e = e->next)
    if (e->src == src && same_layout(&e->layout, &layout)) return e->block;
  mx_kprepack_entry *e = calloc(1, sizeof *e);
  void *host = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!e || !host) {
    free(e);
    free(host);
    c->failures++;
    return NULL;
  }
  mx_kernel_prepack_layout written;
  memset(&written, 0, sizeof written);
  /* the packer must agree with itself: a layout that differs between the two calls is unusable */
  if (hook->fn(call, host, &written) != bytes || !same_layout(&written, &layout)) {
    free(e);
    free(host);
    return NULL;
  }
  void *block = host;
  if (c->keep) {
    block = c->keep(c->ctx, host, bytes);
    free(host);
    if (!block) {
      free(e);
      c->failures++;
      return NULL;
    }
  }
  e->src = src;
  e->layout = layout;
  e->block = block;
  e->bytes = bytes;
  e->next = c->entries;
  c->entries = e;
  c->bytes += bytes;
  c->blocks++;
  return block;
}

void mx__kprepack_cache_clear(mx_kprepack_cache *c) {
  if (!c) return;
  mx_kprepack_entry *e = c->entries;
  while (e) {
    mx_kprepack_entry *next = e->next;
    if (c->keep)
      c->drop(c->ctx, e->block);
    else
      free(e->block);
    free(e);
    e = next;
  }
  c->entries = NULL;
  c->bytes = 0;
  c->blocks = 0;
}
