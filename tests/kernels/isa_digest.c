/* kernels_isa_digest: runs every CPU kernel that has AVX-512, AVX2 and baseline copies (MX_KHOT,
 * kernels/kmath.h) on seeded inputs, and prints one line per case: its name and a
 * 64-bit FNV-1a hash of the output bytes. The first line names the highest level this CPU
 * supports, which is the copy it runs in a build with copies (not the sanitizer builds).
 *
 * The copies are meant to round alike (fixed summation orders, no FMA contraction), so the hashes
 * must not depend on the CPU. test_isa_copies.c runs this program here and under qemu-x86_64 with
 * an AVX2 CPU and a baseline x86-64 CPU, and compares the lines. The shapes are small (the
 * emulator is slow) but reach every vector width and tail of each kernel. BLAS kernels differ by
 * CPU on their own: the Conv cases whose products go through sgemm (1x1, 3x3, strided) take
 * small integer inputs, whose sums are exact in any order, so only mixrt's own code (im2col,
 * the bias / residual / activation epilogue) can change their bits.
 *
 * Usage: kernels_isa_digest   (exit 0; 1 when a kernel fails) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "graph/ops/elementwise_params.h"
#include "graph/ops/nn_params.h"
#include "kernels/kernel.h"

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static int failures;

/* Values in [-scale, scale) from a 64-bit LCG, different for every seed. */
static float *seeded(size_t n, uint64_t seed, float scale) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  if (!p) {
    fprintf(stderr, "kernels_isa_digest: out of memory\n");
    exit(1);
  }
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = ((float)(s >> 40) / (float)(1u << 24) * 2.0f - 1.0f) * scale;
  }
  return p;
}

static uint64_t fnv1a(const void *data, size_t n, uint64_t h) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

/* A call block of n_in inputs and n_out outputs over `params`. */
static mx_kernel_call *call_new(uint16_t n_in, uint16_t n_out, const void *params) {
  mx_kernel_call *c = mx__kernel_call_new(n_in, n_out, params);
  if (!c) exit(1);
  return c;
}

static void set_f32(mx_kernel_call *c, uint32_t i, int32_t rank, const int64_t *dims, float *data) {
  mx__ktensor_set(&c->t[i], MX_FLOAT32, rank, dims, data);
}

/* Runs `op` on c and prints the hash of the given output buffers. */
static void run_case(const char *name, const char *op, mx_kernel_call *c, float *const *outs,
                     const size_t *lens, int n_outs) {
  const mx_kernel_def *kd = mx__kernel_find("", op, c);
  void *ws = NULL;
  size_t wsz = kd && kd->workspace ? kd->workspace(c) : 0;
  if (wsz && !(ws = aligned_alloc(64, (wsz + 63) & ~(size_t)63))) exit(1);
  c->workspace = ws;
  c->workspace_size = wsz;
  if (!kd || kd->run(c) != MX_OK) {
    printf("%s FAILED %s\n", name, kd ? (c->why ? c->why : "") : "no kernel");
    failures++;
  } else {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int k = 0; k < n_outs; k++) h = fnv1a(outs[k], lens[k] * sizeof(float), h);
    printf("%s %016llx\n", name, (unsigned long long)h);
  }
  free(ws);
  free(c);
}

static void gelu_cases(void) {
  const int64_t n = 1000 + 13;
  for (int approx = 0; approx < 2; approx++) {
    mx_gelu_params prm = {approx, 0};
    float *x = seeded((size_t)n, 1 + (uint64_t)approx, 8.0f), *y = seeded((size_t)n, 99, 0.0f);
    mx_kernel_call *c = call_new(1, 1, &prm);
    set_f32(c, 0, 1, DIMS(n), x);
    set_f32(c, 1, 1, DIMS(n), y);
    size_t len = (size_t)n;
    run_case(approx ? "gelu_tanh" : "gelu_erf", "Gelu", c, &y, &len, 1);
    free(x);
    free(y);
  }
}

/* Row times matrix: both direct paths (column blocks in registers up to 16 384 elements of B,
 * row streaming up to 65 536), with every narrower block and the scalar tail. */
static void matmul_cases(void) {
  static const int64_t shapes[][2] = {{64, 61}, {33, 100}, {255, 203}, {256, 256}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t k = shapes[s][0], n = shapes[s][1];
    float *a = seeded((size_t)k, 10 + s, 1.0f), *b = seeded((size_t)(k * n), 20 + s, 1.0f);
    float *y = seeded((size_t)n, 99, 0.0f);
    mx_kernel_call *c = call_new(2, 1, NULL);
    set_f32(c, 0, 2, DIMS(1, k), a);
    set_f32(c, 1, 2, DIMS(k, n), b);
    set_f32(c, 2, 2, DIMS(1, n), y);
    char name[64];
    snprintf(name, sizeof name, "matmul_1x%lldx%lld", (long long)k, (long long)n);
    size_t len = (size_t)n;
    run_case(name, "MatMul", c, &y, &len, 1);
    free(a);
    free(b);
    free(y);
  }
}

/* Softmax and LogSoftmax over the last axis (rows) and a middle axis (columns). */
static void softmax_cases(void) {
  static const int64_t dims[3] = {7, 5, 301};
  const size_t n = 7 * 5 * 301;
  for (int log = 0; log < 2; log++)
    for (int axis = 1; axis < 3; axis++) {
      mx_softmax_params prm = {axis, 0, log};
      float *x = seeded(n, 30 + (uint64_t)(log * 2 + axis), 20.0f), *y = seeded(n, 99, 0.0f);
      mx_kernel_call *c = call_new(1, 1, &prm);
      set_f32(c, 0, 3, dims, x);
      set_f32(c, 1, 3, dims, y);
      char name[64];
      snprintf(name, sizeof name, "%s_axis%d", log ? "logsoftmax" : "softmax", axis);
      run_case(name, log ? "LogSoftmax" : "Softmax", c, &y, &n, 1);
      free(x);
      free(y);
    }
}

/* LayerNormalization (scale and bias) and RMSNormalization over rows of 301. */
static void norm_cases(void) {
  const int64_t rows = 6, n = 301;
  for (int rms = 0; rms < 2; rms++) {
    mx_norm_params prm = {-1, 1e-5f, 1};
    float *x = seeded((size_t)(rows * n), 40 + (uint64_t)rms, 3.0f), *scale = seeded((size_t)n, 42, 1.0f);
    float *bias = seeded((size_t)n, 43, 1.0f), *y = seeded((size_t)(rows * n), 99, 0.0f);
    mx_kernel_call *c = call_new(rms ? 2 : 3, 1, &prm);
    set_f32(c, 0, 2, DIMS(rows, n), x);
    set_f32(c, 1, 1, DIMS(n), scale);
    if (!rms) set_f32(c, 2, 1, DIMS(n), bias);
    set_f32(c, rms ? 2 : 3, 2, DIMS(rows, n), y);
    size_t len = (size_t)(rows * n);
    run_case(rms ? "rmsnorm" : "layernorm", rms ? "RMSNormalization" : "LayerNormalization", c, &y, &len, 1);
    free(x);
    free(scale);
    free(bias);
    free(y);
  }
}

/* The float32 decode step of Attention (one query row, presents written): head sizes 16 and 64
 * (16-float vectors), 8 (8-float vectors), grouped and not, caches that are and are not a
 * multiple of the row blocks. */
static void attention_cases(void) {
  static const int hq_hkv_d_p[][4] = {{4, 2, 16, 37}, {4, 4, 64, 130}, {6, 2, 8, 19}};
  for (size_t s = 0; s < sizeof hq_hkv_d_p / sizeof hq_hkv_d_p[0]; s++) {
    int64_t hq = hq_hkv_d_p[s][0], hkv = hq_hkv_d_p[s][1], d = hq_hkv_d_p[s][2], p = hq_hkv_d_p[s][3];
    mx_attention_params prm = {0};
    float *q = seeded((size_t)(hq * d), 50 + s, 1.0f), *k = seeded((size_t)(hkv * d), 60 + s, 1.0f);
    float *v = seeded((size_t)(hkv * d), 70 + s, 1.0f), *pk = seeded((size_t)(hkv * p * d), 80 + s, 1.0f);
    float *pv = seeded((size_t)(hkv * p * d), 90 + s, 1.0f), *y = seeded((size_t)(hq * d), 99, 0.0f);
    float *prk = seeded((size_t)(hkv * (p + 1) * d), 99, 0.0f),
          *prv = seeded((size_t)(hkv * (p + 1) * d), 99, 0.0f);
    mx_kernel_call *c = call_new(6, 3, &prm);
    set_f32(c, 0, 4, DIMS(1, hq, 1, d), q);
    set_f32(c, 1, 4, DIMS(1, hkv, 1, d), k);
    set_f32(c, 2, 4, DIMS(1, hkv, 1, d), v);
    set_f32(c, 4, 4, DIMS(1, hkv, p, d), pk);
    set_f32(c, 5, 4, DIMS(1, hkv, p, d), pv);
    set_f32(c, 6, 4, DIMS(1, hq, 1, d), y);
    set_f32(c, 7, 4, DIMS(1, hkv, p + 1, d), prk);
    set_f32(c, 8, 4, DIMS(1, hkv, p + 1, d), prv);
    char name[80];
    snprintf(name, sizeof name, "attention_decode_%lldq_%lldkv_d%lld_past%lld", (long long)hq, (long long)hkv,
             (long long)d, (long long)p);
    float *outs[3] = {y, prk, prv};
    size_t lens[3] = {(size_t)(hq * d), (size_t)(hkv * (p + 1) * d), (size_t)(hkv * (p + 1) * d)};
    run_case(name, "Attention", c, outs, lens, 3);
    free(q), free(k), free(v), free(pk), free(pv), free(y), free(prk), free(prv);
  }
}

/* Integers in [-range, range] as floats: products and sums of a few thousand of them are exact
 * in float32, whatever order BLAS adds them in. */
static float *seeded_int(size_t n, uint64_t seed, int range) {
  float *p = seeded(n, seed, 1.0f);
  for (size_t i = 0; i < n; i++) p[i] = (float)((int)((p[i] + 1.0f) * 0.5f * (float)(2 * range + 1)) - range);
  return p;
}

/* 2-D Conv cases of the CNNs' shapes: 1x1 (one sgemm), 3x3 padded (im2col bands), 3x3 stride 2,
 * depthwise 3x3 stride 1 and 2 (the vectorized direct path), each with a bias and a fused
 * activation, the 1x1 one with a residual too. Widths 13 and 9 leave vector tails. */
static void conv_cases(void) {
  static const struct {
    const char *name;
    int64_t c, m, group, k, stride, pad, h, w;
    int32_t act;
    int residual;
  } cases[] = {
      {"conv_1x1_relu_residual", 24, 20, 1, 1, 1, 0, 7, 13, MX_CONV_ACT_RELU, 1},
      {"conv_3x3_hardswish", 8, 12, 1, 3, 1, 1, 9, 13, MX_CONV_ACT_HARD_SWISH, 0},
      {"conv_3x3_stride2_relu", 8, 16, 1, 3, 2, 1, 11, 13, MX_CONV_ACT_RELU, 0},
      {"conv_depthwise_3x3_hardswish", 16, 16, 16, 3, 1, 1, 9, 21, MX_CONV_ACT_HARD_SWISH, 0},
      {"conv_depthwise_3x3_stride2_relu", 16, 16, 16, 3, 2, 1, 13, 21, MX_CONV_ACT_RELU, 0},
  };
  for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
    int64_t c = cases[s].c, m = cases[s].m, k = cases[s].k, st = cases[s].stride, pad = cases[s].pad;
    int64_t h = cases[s].h, w = cases[s].w, cg = c / cases[s].group;
    int64_t oh = (h + 2 * pad - k) / st + 1, ow = (w + 2 * pad - k) / st + 1;
    bool dw = cases[s].group == c;
    mx_conv_params prm = {0};
    prm.op = MX_CONVOP_CONV;
    prm.group = cases[s].group;
    prm.n_kernel = 2;
    prm.kernel_shape[0] = prm.kernel_shape[1] = k;
    prm.n_strides = 2;
    prm.strides[0] = prm.strides[1] = st;
    prm.n_pads = 4;
    for (int i = 0; i < 4; i++) prm.pads[i] = pad;
    prm.fused_act = cases[s].act;
    size_t nx = (size_t)(c * h * w), nw = (size_t)(m * cg * k * k), ny = (size_t)(m * oh * ow);
    /* The depthwise path is mixrt's own code: general values. */
    float *x = dw ? seeded(nx, 110 + s, 2.0f) : seeded_int(nx, 110 + s, 3);
    float *wt = dw ? seeded(nw, 120 + s, 1.0f) : seeded_int(nw, 120 + s, 2);
    float *b = dw ? seeded((size_t)m, 130 + s, 1.0f) : seeded_int((size_t)m, 130 + s, 4);
    float *z = cases[s].residual ? seeded(ny, 140 + s, 4.0f) : NULL, *y = seeded(ny, 99, 0.0f);
    uint16_t n_in = z ? 4 : 3;
    mx_kernel_call *call = call_new(n_in, 1, &prm);
    set_f32(call, 0, 4, DIMS(1, c, h, w), x);
    set_f32(call, 1, 4, DIMS(m, cg, k, k), wt);
    set_f32(call, 2, 1, DIMS(m), b);
    if (z) set_f32(call, 3, 4, DIMS(1, m, oh, ow), z);
    set_f32(call, n_in, 4, DIMS(1, m, oh, ow), y);
    run_case(cases[s].name, "Conv", call, &y, &ny, 1);
    free(x), free(wt), free(b), free(z), free(y);
  }
}

/* Pools of the CNNs: ResNet's MaxPool 3x3 stride 2 pad 1, an AveragePool 3x3 pad 1 without the
 * padding in the divisor, GlobalAveragePool (the planes' mean). */
static void pool_cases(void) {
  static const struct {
    const char *name, *op;
    int32_t convop;
    int64_t k, stride, pad;
  } cases[] = {
      {"maxpool_3x3_stride2", "MaxPool", MX_CONVOP_MAX_POOL, 3, 2, 1},
      {"averagepool_3x3_pad1", "AveragePool", MX_CONVOP_AVERAGE_POOL, 3, 1, 1},
      {"globalaveragepool", "GlobalAveragePool", MX_CONVOP_GLOBAL_AVERAGE_POOL, 0, 1, 0},
  };
  const int64_t c = 5, h = 17, w = 23;
  for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
    int64_t k = cases[s].k, st = cases[s].stride, pad = cases[s].pad;
    bool global = k == 0;
    int64_t oh = global ? 1 : (h + 2 * pad - k) / st + 1, ow = global ? 1 : (w + 2 * pad - k) / st + 1;
    mx_conv_params prm = {0};
    prm.op = cases[s].convop;
    if (!global) {
      prm.n_kernel = prm.n_strides = 2;
      prm.kernel_shape[0] = prm.kernel_shape[1] = k;
      prm.strides[0] = prm.strides[1] = st;
      prm.n_pads = 4;
      for (int i = 0; i < 4; i++) prm.pads[i] = pad;
    }
    size_t nx = (size_t)(c * h * w), ny = (size_t)(c * oh * ow);
    float *x = seeded(nx, 150 + s, 3.0f), *y = seeded(ny, 99, 0.0f);
    mx_kernel_call *call = call_new(1, 1, &prm);
    set_f32(call, 0, 4, DIMS(1, c, h, w), x);
    set_f32(call, 1, 4, DIMS(1, c, oh, ow), y);
    run_case(cases[s].name, cases[s].op, call, &y, &ny, 1);
    free(x), free(y);
  }
}

/* The highest of the levels the copies are built for that this CPU has. */
static const char *cpu_level(void) {
  __builtin_cpu_init();
#if defined(__clang__)
  /* clang 14 knows the features, not the level names (its builds have one copy anyway). */
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512cd"))
    return "x86-64-v4";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
    return "x86-64-v3";
  return "baseline";
#else
  return __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4"
         : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3"
                                               : "baseline";
#endif
}

int main(void) {
  printf("cpu %s\n", cpu_level());
  gelu_cases();
  matmul_cases();
  softmax_cases();
  norm_cases();
  attention_cases();
  conv_cases();
  pool_cases();
  return failures ? 1 : 0;
}
