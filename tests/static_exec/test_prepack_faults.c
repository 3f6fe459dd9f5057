/* Device failures while a static model keeps its pre-packed weights at create
 * (static_exec/model.c): running out of device memory costs only the block (the task packs per
 * run and the model still gives the reference interpreter's bits), while any other device
 * failure fails the create, naming the task, and leaves nothing held on the device; a create
 * after either works. The dynamic executor makes the same choice at launch. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "hal/hal_impl.h"
#include "kernels/gemm_f32.h"
#include "mixrt/reference.h"
#include "static_exec/static_exec_impl.h"
#include "support_prepack.h"
#include "support_static.h"

TestSuite(static_prepack_faults);

/* Arms dev to fail the nth operation of `point` from now on. */
static void arm(mx_device *dev, mx_fault_point point, uint64_t nth) {
  dev->faults = true;
  dev->fault_nth[point] = atomic_load(&dev->fault_count[point]) + nth;
}

static void disarm(mx_device *dev) {
  for (int p = 0; p < MX_FAULT_POINT_COUNT; p++) dev->fault_nth[p] = 0;
}

static void expect_reference_bits(mx_graph *g, mx_static_model *m, mx_device *dev) {
  mx_tensor in[1], out[1], ref[1];
  cr_assert_eq(st_random_inputs(g, 7, in), MX_OK);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  char why[256];
  cr_assert_eq(st_run_device(m, s, in, out, why, sizeof why), MX_OK, "%s", why);
  mx_error err;
  cr_assert_eq(mx_reference_run(g, in, 1, ref, 1, &err), MX_OK, "%s", err.message);
  cr_expect(st_same_bits(&out[0], &ref[0], why, sizeof why), "%s", why);
  mx_tensor_release(&in[0]);
  mx_tensor_release(&out[0]);
  mx_tensor_release(&ref[0]);
  mx_stream_destroy(s);
}

/* Fails the 1st, 2nd, ... operation of `point` during create until a create gets through;
 * returns how many creates failed naming a pre-pack, and how many succeeded with fewer blocks. */
static void sweep(mx_fault_point point, uint32_t *failed_on_prepack, uint32_t *short_of_blocks) {
  mx_device *dev = st_device(MX_DEVICE_INLINE, false);
  mx_graph *g = pp_cnn(2, 3);
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  mx_static_load_options lo;
  mx__static_load_options_init(&lo);
  mx_static_model *m;
  cr_assert_eq(mx__static_model_create(dev, p, &lo, &m, &err), MX_OK, "%s", err.message);
  uint32_t all_blocks;
  uint64_t bytes;
  mx__static_model_prepacked(m, &all_blocks, &bytes);
  mx__static_model_destroy(m);
  mx_device_memory_stats base;
  mx_device_memory_stats_get(dev, &base);
  *failed_on_prepack = *short_of_blocks = 0;
  for (uint64_t nth = 1; nth < 200; nth++) {
    arm(dev, point, nth);
    mx_status st = mx__static_model_create(dev, p, &lo, &m, &err);
    disarm(dev);
    if (st == MX_OK) {
      uint32_t blocks;
      mx__static_model_prepacked(m, &blocks, &bytes);
      bool reached = atomic_load(&dev->fault_count[point]) >= dev->fault_nth[point];
      if (blocks < all_blocks) (*short_of_blocks)++;
      expect_reference_bits(g, m, dev);
      mx__static_model_destroy(m);
      if (blocks == all_blocks && !reached) break; /* the fault lies past the create */
      continue;
    }
    cr_expect_neq(err.message[0], '\0', "failure %llu without a message", (unsigned long long)nth);
    if (strstr(err.message, "pre-packed weights")) {
      (*failed_on_prepack)++;
      cr_expect(strstr(err.message, "Conv") || strstr(err.message, "MatMul") || strstr(err.message, "Gemm"),
                "the message names no task: %s", err.message);
    }
    mx_device_memory_stats now;
    mx_device_memory_stats_get(dev, &now);
    cr_expect_eq(now.bytes_in_use, base.bytes_in_use, "failed create %llu left %llu bytes held",
                 (unsigned long long)nth, (unsigned long long)(now.bytes_in_use - base.bytes_in_use));
    /* the device stays usable: a clean create right after works */
    cr_assert_eq(mx__static_model_create(dev, p, &lo, &m, &err), MX_OK, "%s", err.message);
    mx__static_model_destroy(m);
  }
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
  mx_device_destroy(dev);
}

Test(static_prepack_faults, a_failing_copy_fails_the_create_naming_the_task) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no packed float32 GEMM on this CPU: nothing is pre-packed");
  uint32_t failed, short_of;
  sweep(MX_FAULT_COPY, &failed, &short_of);
  cr_expect_geq(failed, 4u, "a failing pre-pack copy was absorbed (%u creates failed on one)", failed);
  cr_expect_eq(short_of, 0u, "a create with a failed copy succeeded short of blocks");
}

Test(static_prepack_faults, out_of_memory_costs_only_the_block) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no packed float32 GEMM on this CPU: nothing is pre-packed");
  uint32_t failed, short_of;
  sweep(MX_FAULT_ALLOC, &failed, &short_of);
  cr_expect_eq(failed, 0u, "running out of memory for a pre-pack failed the create");
  cr_expect_geq(short_of, 4u, "no create ran short of pre-packed blocks (%u)", short_of);
}
