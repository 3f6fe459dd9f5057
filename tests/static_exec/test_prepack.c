/* Pre-packed weights in static models (kernels/prepack.h): a model packs its Conv, MatMul and
 * Gemm weights once at create and gives the reference interpreter's bits (which packs on every
 * run); on 1 and 2 intra-op threads; models of different weights each get their own blocks,
 * all freed with the models; a plan saved to .mxm and loaded packs
 * from the file's weights; MIXRT_PREPACK=0 is not tested here (read once per process). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernels/gemm_f32.h"
#include "kernels/threads.h"
#include "mixrt/reference.h"
#include "static_exec/static_exec_impl.h"
#include "support_prepack.h"
#include "support_static.h"

TestSuite(static_prepack);

/* Loads p on dev, runs it on seeded inputs and compares with the reference bit for bit; returns
 * the model's pre-packed blocks (and bytes). */
static uint32_t run_checked(mx_graph *g, const mx_static_plan *p, mx_device *dev, bool share, int32_t threads,
                            uint64_t *bytes) {
  mx_static_load_options lo;
  mx__static_load_options_init(&lo);
  lo.share_weights = share;
  mx_static_model *m;
  mx_error err;
  cr_assert_eq(mx__static_model_create(dev, p, &lo, &m, &err), MX_OK, "%s", err.message);
  uint32_t blocks;
  mx__static_model_prepacked(m, &blocks, bytes);
  mx_tensor in[1], out[1], ref[1];
  cr_assert_eq(st_random_inputs(g, 11, in), MX_OK);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  char why[256];
  mx__kthreads_set(threads);
  mx_status st = st_run_device(m, s, in, out, why, sizeof why);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s", why);
  cr_assert_eq(mx_reference_run(g, in, 1, ref, 1, &err), MX_OK, "%s", err.message);
  cr_expect(st_same_bits(&out[0], &ref[0], why, sizeof why), "threads %d: %s", threads, why);
  mx_tensor_release(&in[0]);
  mx_tensor_release(&out[0]);
  mx_tensor_release(&ref[0]);
  mx_stream_destroy(s);
  mx__static_model_destroy(m);
  return blocks;
}

static mx_static_plan *compile(mx_graph *g) {
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  return p;
}

Test(static_prepack, same_bits_as_the_reference_on_one_and_two_threads) {
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  mx_graph *g = pp_cnn(2, 1);
  mx_static_plan *p = compile(g);
  for (int32_t t = 1; t <= 2; t++) {
    uint64_t bytes;
    uint32_t blocks = run_checked(g, p, dev, false, t, &bytes);
    if (mx__kgemm_f32_available()) {
      /* two Convs, the MatMul and the Gemm; packed weights are about the weights' size */
      cr_expect_eq(blocks, 4u, "threads %d: %u blocks", t, blocks);
      cr_expect(bytes >= (32 * 144 + 48 * 288 + 2352 * 40 + 24 * 40) * 4u, "%llu bytes",
                (unsigned long long)bytes);
    }
  }
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
  mx_device_destroy(dev);
}

/* Fresh models of other weights (same shapes, same plan layout) never read another's blocks. */
Test(static_prepack, models_of_different_weights) {
  mx_device *dev = st_device(MX_DEVICE_INLINE, false);
  mx_graph *g1 = pp_cnn(2, 1), *g2 = pp_cnn(2, 2);
  mx_static_plan *p1 = compile(g1), *p2 = compile(g2);
  uint64_t bytes;
  for (int round = 0; round < 2; round++) {
    run_checked(g1, p1, dev, true, 1, &bytes);
    run_checked(g2, p2, dev, true, 1, &bytes);
  }
  /* two live models of each at once: the shared blocks of equal weights are one set */
  mx_static_load_options lo;
  mx__static_load_options_init(&lo);
  lo.share_weights = true;
  mx_static_model *a, *b, *c;
  mx_error err;
  cr_assert_eq(mx__static_model_create(dev, p1, &lo, &a, &err), MX_OK, "%s", err.message);
  mx_device_memory_stats before;
  mx_device_memory_stats_get(dev, &before);
  cr_assert_eq(mx__static_model_create(dev, p1, &lo, &b, &err), MX_OK, "%s", err.message);
  mx_device_memory_stats same;
  mx_device_memory_stats_get(dev, &same);
  cr_assert_eq(mx__static_model_create(dev, p2, &lo, &c, &err), MX_OK, "%s", err.message);
  mx_device_memory_stats other;
  mx_device_memory_stats_get(dev, &other);
  /* (the first model reads the plan's weights in place, the second a shared copy: blocks name
   * the weights' address, so each has its own) */
  if (mx__kgemm_f32_available()) {
    cr_expect_gt(same.shared_bytes, before.shared_bytes, "the second model packed nothing");
    cr_expect_gt(other.shared_bytes, same.shared_bytes, "other weights got no blocks of their own");
  }
  mx__static_model_destroy(a);
  mx__static_model_destroy(b);
  mx__static_model_destroy(c);
  mx_device_memory_stats after;
  mx_device_memory_stats_get(dev, &after);
  cr_expect_eq(after.shared_blocks, 0u, "pre-packed blocks outlive their models");
  mx__static_plan_destroy(p1);
  mx__static_plan_destroy(p2);
  mx_graph_destroy(g1);
  mx_graph_destroy(g2);
  mx_device_destroy(dev);
}

/* A plan through an .mxm file (weights in the mapped file) packs from the loaded weights. */
Test(static_prepack, mxm_round_trip) {
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  mx_graph *g = pp_cnn(3, 5);
  mx_static_plan *p = compile(g);
  char path[256];
  snprintf(path, sizeof path, "%s/mixrt_prepack_%d.mxm", P_tmpdir, (int)getpid());
  mx_error err;
  cr_assert_eq(mx__mxm_save(p, path, NULL, &err), MX_OK, "%s", err.message);
  mx__static_plan_destroy(p);
  mx_static_plan *q;
  cr_assert_eq(mx__mxm_load(path, &q, &err), MX_OK, "%s", err.message);
  uint64_t bytes;
  uint32_t blocks = run_checked(g, q, dev, false, 2, &bytes);
  if (mx__kgemm_f32_available()) cr_expect_eq(blocks, 4u);
  mx__static_plan_destroy(q);
  unlink(path);
  mx_graph_destroy(g);
  mx_device_destroy(dev);
}
