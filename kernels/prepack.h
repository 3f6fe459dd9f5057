/* Pre-packed constant inputs (weights) of the kernels that have a pre-packed form
 * (mx_kernel_def.prepack): the header every packed block starts with, the check a kernel makes
 * before reading one, and the cache an executor keeps its blocks in.
 *
 * A block records the constant's data pointer and the kernel's layout it was packed for; a
 * kernel reads it only when both match its call (mx__kprepack_find), so a block handed to the
 * wrong call, or one whose constant moved, is ignored and the kernel packs as it does without
 * one. The cache belongs to the executor that owns the constants' bytes (a static model, a
 * dynamic executor): those bytes are never rewritten while it lives, and the blocks are freed
 * with it, so a block never outlives or disagrees with the bytes it was packed from. */
#ifndef MIXRT_KERNELS_PREPACK_H
#define MIXRT_KERNELS_PREPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* Bytes of the header in front of the packed data (keeps the data 64-byte aligned). */
#define MX_KPREPACK_HDR_BYTES 64

/* Layout kinds (mx_kernel_prepack_layout.v[0]). */
#define MX_KPREPACK_CONV_A 1 /* a float32 Conv's weights in row panels (kernels/prepack_conv.c) */
#define MX_KPREPACK_MM_B   2 /* a float32 MatMul/Gemm B in column panels (kernels/gemm_f32_matmul.c) */
#define MX_KPREPACK_CONV_WINO 3 /* a 3x3 Conv's Winograd-transformed weights (kernels/conv_winograd.h) */

typedef struct mx_kprepack_hdr {
  uint64_t magic;
  const void *src; /* data of the constant the block was packed from */
  mx_kernel_prepack_layout layout;
  uint64_t bytes;    /* the whole block, header included */
  uint64_t reserved; /* 0 */
} mx_kprepack_hdr;

/* Bytes of a block holding `data_bytes` of packed data (0 when data_bytes is 0). */
static inline size_t mx__kprepack_block_bytes(size_t data_bytes) {
  return data_bytes ? MX_KPREPACK_HDR_BYTES + (data_bytes + 63) / 64 * 64 : 0;
}

/* For a kernel's prepack function: writes the header of a block of `bytes` at dst for input
 * `input` of call and returns where the packed data go. */
void *mx__kprepack_begin(void *dst, size_t bytes, const mx_kernel_call *call, uint32_t input,
                         const mx_kernel_prepack_layout *layout);

/* For a kernel's run: the header of call->prepacked when it was packed from input `input`'s
 * current data, else NULL (no block, or another constant's); its packed data follow at
 * mx__kprepack_data. */
const mx_kprepack_hdr *mx__kprepack_of(const mx_kernel_call *call, uint32_t input);
static inline const void *mx__kprepack_data(const mx_kprepack_hdr *h) {
  return (const char *)h + MX_KPREPACK_HDR_BYTES;
}
/* mx__kprepack_of's data when the block also has this layout, else NULL. */
const void *mx__kprepack_find(const mx_kernel_call *call, uint32_t input, const mx_kernel_prepack_layout *layout);

/* --- the kernels' pre-packed forms ------------------------------------------------------------ */

/* A kernel's pre-packing: its function and the input it packs (when that input is a constant). */
typedef struct mx_kprepack_hook {
  const char *op; /* default ONNX domain */
  mx_kernel_prepack_fn fn;
  uint32_t input;
} mx_kprepack_hook;

/* The pre-packing of kernel kd, or NULL when it has none (the hook itself checks the dtypes
 * and shapes it packs for). */
const mx_kprepack_hook *mx__kprepack_hook(const mx_kernel_def *kd);

/* float32 MatMul and Gemm with a constant B (kernels/linalg.c). */
size_t mx__kmatmul_prepack(const mx_kernel_call *call, void *dst, mx_kernel_prepack_layout *layout);
size_t mx__kgemm_prepack(const mx_kernel_call *call, void *dst, mx_kernel_prepack_layout *layout);

/* float32 Conv (kernels/prepack_conv.c): the prepack hook, and the weights a run may read
 * pre-packed (NULL unless call->prepacked holds wt's panels; *mr their height). */
size_t mx__kconv_prepack(const mx_kernel_call *call, void *dst, mx_kernel_prepack_layout *layout);
const float *mx__kconv_prepacked(const mx_kernel_call *call, const float *wt, int64_t *mr);

/* --- the executors' cache ------------------------------------------------------------------- */

typedef struct mx_kprepack_entry mx_kprepack_entry;

/* Blocks by (constant data, layout). Where a block lives is the executor's: keep() turns a
 * packed host block into the block the kernels read (a device copy, maybe shared with other
 * executors holding equal bytes) and drop() releases that; NULL keep: the host block itself is
 * kept (aligned_alloc, freed with free). */
typedef struct mx_kprepack_cache {
  mx_kprepack_entry *entries;
  void *(*keep)(void *ctx, const void *host, size_t bytes); /* NULL on failure */
  void (*drop)(void *ctx, void *block);
  void *ctx;
  uint64_t bytes;    /* held by the blocks */
  uint32_t blocks;   /* held */
  uint32_t failures; /* packs given up for want of memory (nothing kept: a later request retries) */
} mx_kprepack_cache;

/* Whether executors pre-pack: yes unless MIXRT_PREPACK=0 (or off) in the environment, read once
 * (comparisons with the per-run packing, which gives the same bits). */
bool mx__kprepack_enabled(void);

/* The block for kernel kd's constant input in call (its data pointer set; every tensor's dims
 * set), packed and kept the first time a (data, layout) pair is asked for, or NULL when
 * the kernel has nothing to pre-pack for these shapes or memory ran out (the kernel then packs
 * on every run, as without a cache). */
const void *mx__kprepack_get(mx_kprepack_cache *c, const mx_kernel_def *kd, const mx_kernel_call *call);

/* Releases every block (the kernels reading them must have finished). */
void mx__kprepack_cache_clear(mx_kprepack_cache *c);

#endif /* MIXRT_KERNELS_PREPACK_H */
