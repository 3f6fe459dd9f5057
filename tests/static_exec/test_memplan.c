/* Memory-plan invariants over random graphs (elementwise chains with branches, MatMul,
 * Transpose, alias Reshapes, Softmax with workspaces, repeated / input / constant outputs),
 * planned for 1, 2 and 4 streams: no two buffers whose lifetimes overlap (in the multi-stream
 * sense: not ordered by stream order and events) share bytes, every task argument in the FM lies
 * in a buffer that lists the task, and the arena is at least the lower bound. A subset also runs
 * against the reference interpreter, bit for bit. */
#include <criterion/criterion.h>

#include "support_static.h"

Test(static_memplan, random_graph_invariants) {
  int checked = 0;
  uint64_t cross = 0, waits = 0;
  for (uint64_t seed = 1; seed <= 60; seed++) {
    mx_graph *g;
    cr_assert_eq(st_random_graph(seed, 10 + (int)(seed * 7 % 90), seed % 3 == 0, &g), MX_OK);
    for (uint32_t streams = 1; streams <= 4; streams *= 2) {
      mx_static_options o;
      mx__static_options_init(&o);
      o.max_streams = streams;
      mx_static_plan *p;
      mx_error err;
      cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_OK, "seed %llu: %s", (unsigned long long)seed,
                   err.message);
      char why[512] = "";
      cr_assert(st_check_memory_plan(p, why, sizeof why), "seed %llu, %u streams: %s",
                (unsigned long long)seed, streams, why);
      mx_static_report r;
      mx__static_plan_report(p, &r);
      cr_assert_geq(r.fm_bytes, r.lower_bound);
      cr_assert_leq(r.fm_bytes, r.no_reuse);
      /* Events: at most one wait per other stream per task (the reduction keeps only the latest
       * producer of each stream), never more waits than cross-stream edges. */
      cr_assert_leq(r.waits, r.cross_edges);
      cr_assert_leq(r.events, r.waits);
      for (size_t t = 0; t < mx__static_plan_task_count(p); t++) {
        mx_static_task_info ti;
        mx__static_plan_task(p, t, &ti);
        cr_assert_leq(ti.n_waits + 1, r.streams);
      }
      cross += r.cross_edges;
      waits += r.waits;
      mx__static_plan_destroy(p);
      checked++;
    }
    mx_graph_destroy(g);
  }
  cr_assert_eq(checked, 180);
  cr_assert_lt(waits, cross, "the reduction removed no event (%llu waits for %llu cross-stream edges)",
               (unsigned long long)waits, (unsigned long long)cross);
}

Test(static_memplan, random_graphs_match_reference) {
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  cr_assert(dev);
  for (uint64_t seed = 100; seed < 112; seed++) {
    mx_graph *g;
    cr_assert_eq(st_random_graph(seed, 40, seed % 2 == 0, &g), MX_OK);
    for (uint32_t streams = 1; streams <= 4; streams *= 2) {
      mx_static_options o;
      mx__static_options_init(&o);
      o.max_streams = streams;
      o.mode = seed % 3 ? MX_HAL_MODEL_PATCH : MX_HAL_MODEL_INDIRECT;
      char why[512] = "";
      cr_assert(st_check_against_reference(g, &o, NULL, dev, seed, why, sizeof why),
                "seed %llu, %u streams: %s", (unsigned long long)seed, streams, why);
    }
    mx_graph_destroy(g);
  }
  mx_device_destroy(dev);
}

/* A chain of elementwise ops runs in place: one buffer serves the whole chain. */
Test(static_memplan, chain_in_place) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("chain", &g), MX_OK);
  mx_shape s = {1, {256}};
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &v), MX_OK);
  static const char *ops[] = {"Relu", "Neg", "Abs", "Sigmoid"};
  for (int k = 0; k < 20; k++) cr_assert_eq(mx_graph_add_op(g, ops[k % 4], &v, 1, NULL, 0, &v), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, v), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  mx_static_report r;
  mx__static_plan_report(p, &r);
  cr_assert_eq(r.fm_bytes, 1024, "one 1 KiB buffer, not %llu bytes", (unsigned long long)r.fm_bytes);
  cr_assert_eq(r.lower_bound, 1024);
  cr_assert_eq(r.in_place, 18);
  cr_assert_eq(r.tasks, 20);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}
