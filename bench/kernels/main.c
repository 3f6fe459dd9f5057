/* bench_kernels: throughput of the CPU kernels that dominate transformer inference, printed as
 * JSON.
 *
 * - MatMul float32 GFLOP/s for [1,256]x[256,768] (a decode-step projection),
 *   [1,4096]x[4096,4096] (a large decode-step projection, memory bound) and
 *   [128,768]x[768,3072] (a prefill MLP block, compute bound).
 * - Add and Softmax float32 on 1M elements, in GB/s of compulsory traffic (Add: two reads and
 *   one write per element; Softmax over rows of 1024: one read and one write), next to the
 *   single-core memcpy bandwidth on buffers of the same size, measured in the same run: the
 *   ceiling for memory-bound kernels.
 * - Attention float32 decode step (one query row, presents written), in microseconds per call
 *   and GB/s of compulsory traffic (cache read, presents written), for the shapes of one layer
 *   of `mixrt bench llm`'s tiny model (4 query heads, 2 key/value heads of 16) over caches of 16
 *   and 512 rows and its small model (4 and 4 heads of 64) over 512 rows.
 * - One sequential read of as many bytes as `mixrt bench llm`'s small model has weights
 *   (15 230 064), best and median microseconds: the floor of a small decode step at a short
 *   past length, which reads every weight once and little else.
 * Each figure is the best of several timed repetitions (the read also gives its median).
 *
 * Kernels are called through mx__kernel_find exactly as executors do (workspace included).
 * Usage: bench_kernels [--quick]   (--quick: fewer repetitions, for smoke tests) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "graph/ops/nn_params.h"
#include "kernels/kernel.h"
#include "mixrt/hal.h"

static double min_seconds = 0.5; /* time each measurement for at least this long */

/* A kernel call block with its workspace, ready to run repeatedly. */
typedef struct bench_call {
  mx_kernel_call *call;
  const mx_kernel_def *def;
  void *ws;
} bench_call;

static int bc_prepare(bench_call *b, const char *op) {
  b->def = mx__kernel_find("", op, b->call);
  if (!b->def) {
    fprintf(stderr, "bench_kernels: no %s kernel\n", op);
    return -1;
  }
  size_t ws = b->def->workspace ? b->def->workspace(b->call) : 0;
  b->ws = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
  if (ws && !b->ws) return -1;
  b->call->workspace = b->ws;
  b->call->workspace_size = ws;
  return 0;
}

/* Best seconds per call over repetitions lasting at least min_seconds in total. */
static double bc_time(bench_call *b) {
  if (b->def->run(b->call) != MX_OK) {
    fprintf(stderr, "bench_kernels: %s failed: %s\n", b->def->op, b->call->why ? b->call->why : "");
    return -1.0;
  }
  double best = 1e30, total = 0.0;
  int reps = 0;
  while (total < min_seconds || reps < 3) {
    uint64_t t0 = mx__now_ns();
    b->def->run(b->call);
    double dt = (double)(mx__now_ns() - t0) * 1e-9;
    if (dt < best) best = dt;
    total += dt;
    reps++;
  }
  return best;
}

static float *alloc_floats(size_t n, float seed) {
  float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) & ~(size_t)63);
  if (!p) return NULL;
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000u) * 1e-3f * seed - 0.5f;
  return p;
}

static void set_tensor(mx_kernel_call *c, uint32_t i, int32_t rank, const int64_t *dims, void *data) {
  mx__ktensor_set(&c->t[i], MX_FLOAT32, rank, dims, data);
}

static double bench_matmul(int64_t m, int64_t k, int64_t n) {
  float *a = alloc_floats((size_t)(m * k), 1.0f), *b = alloc_floats((size_t)(k * n), 0.5f);
  float *y = alloc_floats((size_t)(m * n), 0.0f);
  mx_kernel_call *c = mx__kernel_call_new(2, 1, NULL);
  double gflops = -1.0;
  bench_call bc = {.call = c};
  if (!a || !b || !y || !c) goto done;
  set_tensor(c, 0, 2, (int64_t[]){m, k}, a);
  set_tensor(c, 1, 2, (int64_t[]){k, n}, b);
  set_tensor(c, 2, 2, (int64_t[]){m, n}, y);
  if (bc_prepare(&bc, "MatMul") != 0) goto done;
  double s = bc_time(&bc);
  if (s > 0) gflops = 2.0 * (double)m * (double)k * (double)n / s * 1e-9;
done:
  free(bc.ws);
  free(c);
  free(a);
  free(b);
  free(y);
  return gflops;
}

/* GB/s of memcpy over n floats (read + write counted). */
static double bench_memcpy(size_t n) {
  float *src = alloc_floats(n, 1.0f), *dst = alloc_floats(n, 0.0f);
  double gbps = -1.0;
  if (!src || !dst) goto done;
  double best = 1e30, total = 0.0;
  int reps = 0;
  while (total < min_seconds || reps < 3) {
    uint64_t t0 = mx__now_ns();
    memcpy(dst, src, n * sizeof(float));
    __asm__ volatile("" ::"r"(dst) : "memory"); /* keep the copy */
    double dt = (double)(mx__now_ns() - t0) * 1e-9;
    if (dt < best) best = dt;
    total += dt;
    reps++;
  }
  gbps = 2.0 * (double)(n * sizeof(float)) / best * 1e-9;
done:
  free(src);
  free(dst);
  return gbps;
}

/* Weight bytes of `mixrt bench llm`'s small model (4 layers, hidden 256, ffn 688, vocab 1000). */
#define SMALL_MODEL_WEIGHT_BYTES 15230064u

typedef float read_v4 __attribute__((vector_size(16)));

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Seconds of one sequential read of `bytes` (a multiple of 64), summed into four vector
 * accumulators so the adds never wait on each other: best and median of the repetitions. The
 * bytes are device memory of an inline device, with huge pages or without (as the executors'
 * weight blocks get them). */
static double bench_read(size_t bytes, bool huge_pages, double *median) {
  size_t n = bytes / sizeof(read_v4);
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = MX_DEVICE_INLINE;
  o.huge_pages = huge_pages;
  mx_device *dev = NULL;
  read_v4 *p = NULL;
  enum { MAX_REPS = 8192 };
  double *times = malloc(MAX_REPS * sizeof *times);
  double best = -1.0;
  *median = -1.0;
  if (!times || mx_device_create(&o, &dev, NULL) != MX_OK ||
      mx_device_alloc(dev, n * sizeof *p, 64, (void **)&p) != MX_OK)
    goto done;
  for (size_t i = 0; i < n; i++) p[i] = (read_v4){1.0f, 2.0f, 3.0f, 4.0f};
  double total = 0.0;
  int reps = 0;
  while ((total < min_seconds || reps < 3) && reps < MAX_REPS) {
    uint64_t t0 = mx__now_ns();
    read_v4 a = {0}, b = {0}, c = {0}, d = {0};
    for (size_t i = 0; i + 4 <= n; i += 4) {
      a += p[i];
      b += p[i + 1];
      c += p[i + 2];
      d += p[i + 3];
    }
    read_v4 sum = a + b + c + d;
    __asm__ volatile("" ::"x"(sum)); /* keep the reads */
    times[reps] = (double)(mx__now_ns() - t0) * 1e-9;
    total += times[reps++];
  }
  qsort(times, (size_t)reps, sizeof *times, cmp_double);
  best = times[0];
  *median = times[reps / 2];
done:
  if (dev) {
    mx_device_free(dev, p);
    mx_device_destroy(dev);
  }
  free(times);
  return best;
}

static double bench_add(size_t n) {
  float *a = alloc_floats(n, 1.0f), *b = alloc_floats(n, 2.0f), *y = alloc_floats(n, 0.0f);
  mx_kernel_call *c = mx__kernel_call_new(2, 1, NULL);
  bench_call bc = {.call = c};
  double gbps = -1.0;
  if (!a || !b || !y || !c) goto done;
  int64_t d[] = {(int64_t)n};
  set_tensor(c, 0, 1, d, a);
  set_tensor(c, 1, 1, d, b);
  set_tensor(c, 2, 1, d, y);
  if (bc_prepare(&bc, "Add") != 0) goto done;
  double s = bc_time(&bc);
  if (s > 0) gbps = 3.0 * (double)(n * sizeof(float)) / s * 1e-9;
done:
  free(bc.ws);
  free(c);
  free(a);
  free(b);
  free(y);
  return gbps;
}

static double bench_softmax(size_t n, int64_t row) {
  float *x = alloc_floats(n, 8.0f), *y = alloc_floats(n, 0.0f);
  mx_softmax_params p = {.axis = -1};
  mx_kernel_call *c = mx__kernel_call_new(1, 1, &p);
  bench_call bc = {.call = c};
  double gbps = -1.0;
  if (!x || !y || !c) goto done;
  int64_t d[] = {(int64_t)n / row, row};
  set_tensor(c, 0, 2, d, x);
  set_tensor(c, 1, 2, d, y);
  if (bc_prepare(&bc, "Softmax") != 0) goto done;
  double s = bc_time(&bc);
  if (s > 0) gbps = 2.0 * (double)(n * sizeof(float)) / s * 1e-9;
done:
  free(bc.ws);
  free(c);
  free(x);
  free(y);
  return gbps;
}

/* Seconds per decode-step Attention call: Q [1, hq, 1, d], K and V [1, hkv, 1, d], past
 * [1, hkv, past, d], outputs Y and both presents. *gbps gets the compulsory traffic rate. */
static double bench_attention_decode(int64_t hq, int64_t hkv, int64_t d, int64_t past, double *gbps) {
  const size_t cache = (size_t)(hkv * past * d), grown = (size_t)(hkv * (past + 1) * d);
  float *q = alloc_floats((size_t)(hq * d), 1.0f), *k = alloc_floats((size_t)(hkv * d), 2.0f);
  float *v = alloc_floats((size_t)(hkv * d), 3.0f), *pk = alloc_floats(cache, 4.0f);
  float *pv = alloc_floats(cache, 5.0f), *y = alloc_floats((size_t)(hq * d), 0.0f);
  float *ok = alloc_floats(grown, 0.0f), *ov = alloc_floats(grown, 0.0f);
  mx_attention_params prm = {0};
  mx_kernel_call *c = mx__kernel_call_new(6, 3, &prm);
  bench_call bc = {.call = c};
  double s = -1.0;
  if (!q || !k || !v || !pk || !pv || !y || !ok || !ov || !c) goto done;
  set_tensor(c, 0, 4, (int64_t[]){1, hq, 1, d}, q);
  set_tensor(c, 1, 4, (int64_t[]){1, hkv, 1, d}, k);
  set_tensor(c, 2, 4, (int64_t[]){1, hkv, 1, d}, v);
  c->t[3].dtype = MX_DTYPE_UNDEFINED; /* no mask */
  set_tensor(c, 4, 4, (int64_t[]){1, hkv, past, d}, pk);
  set_tensor(c, 5, 4, (int64_t[]){1, hkv, past, d}, pv);
  set_tensor(c, 6, 4, (int64_t[]){1, hq, 1, d}, y);
  set_tensor(c, 7, 4, (int64_t[]){1, hkv, past + 1, d}, ok);
  set_tensor(c, 8, 4, (int64_t[]){1, hkv, past + 1, d}, ov);
  if (bc_prepare(&bc, "Attention") != 0) goto done;
  s = bc_time(&bc);
  if (s > 0) *gbps = (double)(2 * (cache + grown) * sizeof(float)) / s * 1e-9;
done:
  free(bc.ws);
  free(c);
  free(q);
  free(k);
  free(v);
  free(pk);
  free(pv);
  free(y);
  free(ok);
  free(ov);
  return s;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      min_seconds = 0.02;
    } else {
      fprintf(stderr, "usage: bench_kernels [--quick]\n");
      return 2;
    }
  }
  static const int64_t shapes[3][3] = {{1, 256, 768}, {1, 4096, 4096}, {128, 768, 3072}};
  double g[3];
  for (int i = 0; i < 3; i++) g[i] = bench_matmul(shapes[i][0], shapes[i][1], shapes[i][2]);
  const size_t n = 1u << 20;
  double mc = bench_memcpy(n), add = bench_add(n), sm = bench_softmax(n, 1024);
  /* q heads, kv heads, head size, past */
  static const int64_t att_shapes[3][4] = {{4, 2, 16, 16}, {4, 2, 16, 512}, {4, 4, 64, 512}};
  static const char *const att_names[3] = {"tiny", "tiny", "small"};
  double att_s[3], att_gbps[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++)
    att_s[i] = bench_attention_decode(att_shapes[i][0], att_shapes[i][1], att_shapes[i][2], att_shapes[i][3],
                                      &att_gbps[i]);
  double read_median, read_best = bench_read(SMALL_MODEL_WEIGHT_BYTES / 64 * 64, true, &read_median);
  double read4k_median, read4k_best = bench_read(SMALL_MODEL_WEIGHT_BYTES / 64 * 64, false, &read4k_median);
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  printf("{\n  \"benchmark\": \"kernels\",\n  \"date\": \"%s\",\n  \"matmul_f32\": [\n", date);
  for (int i = 0; i < 3; i++)
    printf("    {\"shape\": \"[%lld,%lld]x[%lld,%lld]\", \"gflops\": %.2f}%s\n", (long long)shapes[i][0],
           (long long)shapes[i][1], (long long)shapes[i][1], (long long)shapes[i][2], g[i], i < 2 ? "," : "");
  printf("  ],\n  \"elements\": %zu,\n  \"memcpy_gbps\": %.2f,\n", n, mc);
  printf("  \"add_f32\": {\"gbps\": %.2f, \"fraction_of_memcpy\": %.3f},\n", add, mc > 0 ? add / mc : 0.0);
  printf("  \"softmax_f32\": {\"row\": 1024, \"gbps\": %.2f, \"fraction_of_memcpy\": %.3f},\n", sm,
         mc > 0 ? sm / mc : 0.0);
  printf("  \"attention_decode_f32\": [\n");
  for (int i = 0; i < 3; i++)
    printf(
        "    {\"model\": \"%s\", \"q_heads\": %lld, \"kv_heads\": %lld, \"head_size\": %lld, \"past\": %lld, "
        "\"us\": %.3f, \"gbps\": %.2f}%s\n",
        att_names[i], (long long)att_shapes[i][0], (long long)att_shapes[i][1], (long long)att_shapes[i][2],
        (long long)att_shapes[i][3], att_s[i] * 1e6, att_gbps[i], i < 2 ? "," : "");
  printf("  ],\n");
  printf(
      "  \"read_small_model_weights\": {\"bytes\": %u, \"huge_pages\": {\"best_us\": %.1f, \"median_us\": "
      "%.1f, "
      "\"best_gbps\": %.2f}, \"4k_pages\": {\"best_us\": %.1f, \"median_us\": %.1f, \"best_gbps\": "
      "%.2f}}\n}\n",
      SMALL_MODEL_WEIGHT_BYTES, read_best * 1e6, read_median * 1e6,
      read_best > 0 ? SMALL_MODEL_WEIGHT_BYTES / read_best * 1e-9 : 0.0, read4k_best * 1e6,
      read4k_median * 1e6, read4k_best > 0 ? SMALL_MODEL_WEIGHT_BYTES / read4k_best * 1e-9 : 0.0);
  for (int i = 0; i < 3; i++)
    if (g[i] < 0) return 1;
  if (read_best < 0 || read4k_best < 0) return 1;
  return mc < 0 || add < 0 || sm < 0 || att_s[0] < 0 || att_s[1] < 0 || att_s[2] < 0 ? 1 : 0;
}
