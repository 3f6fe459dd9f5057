/* Pre-packed weights in the dynamic executor (kernels/prepack.h): a CNN head with a symbolic
 * batch packs its Conv, MatMul and Gemm weights at the first launch of each layout and gives
 * the reference interpreter's bits (which packs on every run) over batches 3, 1, 3, 2 (a batch
 * of 1 leaves the MatMul and Gemm to sgemm: no block for them until a larger batch comes), on 1
 * and 2 intra-op threads and 1 and 2 streams; executors of different weights each get their
 * own blocks, all freed with the executor. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../static_exec/support_prepack.h"
#include "kernels/gemm_f32.h"
#include "kernels/threads.h"
#include "mixrt/reference.h"
#include "support_dyn.h"

TestSuite(dyn_prepack);

/* Runs g on `dev` over the batches, comparing each step with the reference bit for bit;
 * returns the executor's blocks after the steps. */
static uint32_t run_batches(mx_graph *g, mx_device *dev, uint32_t streams, int32_t threads, const int64_t *batches,
                            size_t n, uint64_t *bytes) {
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.max_streams = streams;
  mx_dyn_plan *plan;
  mx_error err;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, &err), MX_OK, "%s", err.message);
  mx_dyn_exec *e;
  cr_assert_eq(mx__dyn_exec_create(dev, plan, NULL, NULL, 0, &e, &err), MX_OK, "%s", err.message);
  uint32_t blocks = 0;
  mx__kthreads_set(threads);
  for (size_t s = 0; s < n; s++) {
    mx_tensor in = dyn_random(MX_FLOAT32, 4, (int64_t[]){batches[s], 16, 14, 14}, 100 + s);
    mx_tensor out = {.placement = MX_HOST};
    mx_status st = mx__dyn_exec_run(e, &in, 1, &out, 1, NULL);
    cr_assert_eq(st, MX_OK, "%s", mx__dyn_exec_last_error(e));
    char tag[64];
    snprintf(tag, sizeof tag, "batch %lld, %u streams, %d threads", (long long)batches[s], streams, threads);
    cr_expect_eq(dyn_compare_reference(g, &in, 1, &out, 1, 0.0, 0.0, tag), 0, "%s", tag);
    mx_tensor_release(&in);
    mx_tensor_release(&out);
  }
  mx__kthreads_set(1);
  mx__dyn_exec_prepacked(e, &blocks, bytes);
  mx__dyn_exec_destroy(e);
  mx__dyn_plan_destroy(plan);
  return blocks;
}

Test(dyn_prepack, same_bits_as_the_reference_over_batches) {
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_graph *g = pp_cnn(0, 3);
  static const int64_t batches[] = {3, 1, 3, 2};
  for (uint32_t streams = 1; streams <= 2; streams++)
    for (int32_t threads = 1; threads <= 2; threads++) {
      uint64_t bytes;
      uint32_t blocks = run_batches(g, dev, streams, threads, batches, 4, &bytes);
      /* both Convs and (from batch 2 on) the MatMul and the Gemm: a block per layout met */
      if (mx__kgemm_f32_available()) cr_expect_geq(blocks, 4u, "%u blocks", blocks);
    }
  mx_graph_destroy(g);
  mx_device_destroy(dev);
}

/* A fresh executor of other weights computes with its own (the reference's bits), and the
 * device holds nothing once the executors are gone. */
Test(dyn_prepack, executors_of_different_weights) {
  mx_device *dev = dyn_device(MX_DEVICE_INLINE, false);
  static const int64_t batches[] = {2, 4};
  for (uint64_t seed = 1; seed <= 3; seed++) {
    mx_graph *g = pp_cnn(0, seed);
    uint64_t bytes;
    run_batches(g, dev, 1, 1, batches, 2, &bytes);
    mx_graph_destroy(g);
  }
  mx_device_memory_stats ms;
  mx_device_memory_stats_get(dev, &ms);
  cr_expect_eq(ms.bytes_in_use, 0u, "%llu device bytes left", (unsigned long long)ms.bytes_in_use);
  mx_device_destroy(dev);
}
