/* Shared helpers of the dynamic executor tests (see support_dyn.h). */
#include "support_dyn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/reference.h"

uint64_t dyn_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

mx_device *dyn_device_opts(const mx_device_options *o) {
  mx_device *dev = NULL;
  mx_error err;
  cr_assert_eq(mx_device_create(o, &dev, &err), MX_OK, "device: %s", err.message);
  return dev;
}

mx_device *dyn_device(mx_device_kind kind, bool check) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.check = check ? MX_CHECK_ON : MX_CHECK_OFF;
  o.fault_from_env = false;
  return dyn_device_opts(&o);
}

mx_value_id dyn_input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t d = 0; d < rank; d++) s.dims[d] = dims[d];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

mx_value_id dyn_op(mx_graph *g, const char *op, const mx_value_id *in, size_t n, const mx_attr *attrs,
                   size_t n_attrs) {
  mx_value_id out;
  cr_assert_eq(mx_graph_add_op(g, op, in, n, attrs, n_attrs, &out), MX_OK, "%s: %s", op,
               mx_graph_last_error(g));
  return out;
}

mx_graph *dyn_default_encoder(mx_encoder_config *cfg) {
  mx_encoder_config_default(cfg);
  mx_graph *g;
  cr_assert_eq(mx_model_encoder(cfg, &g, NULL), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  return g;
}

mx_value_id dyn_weights(mx_graph *g, const char *name, int32_t rank, const int64_t *dims, float scale,
                        uint64_t seed) {
  mx_tensor t = dyn_random(MX_FLOAT32, rank, dims, seed);
  float *f = t.data;
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++) n *= dims[d];
  for (int64_t i = 0; i < n; i++) f[i] *= scale;
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  mx_tensor_release(&t);
  return v;
}

mx_value_id dyn_ints(mx_graph *g, const char *name, const int64_t *v, int64_t n) {
  mx_tensor t = {.dtype = MX_INT64, .rank = 1, .dims = {n}, .data = (void *)v};
  mx_value_id id;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &id), MX_OK, "%s", mx_graph_last_error(g));
  return id;
}

mx_value_id dyn_scalar_i64(mx_graph *g, const char *name, int64_t v) {
  mx_tensor t = {.dtype = MX_INT64, .rank = 0, .data = &v};
  mx_value_id id;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &id), MX_OK, "%s", mx_graph_last_error(g));
  return id;
}

mx_tensor dyn_random(mx_dtype dt, int32_t rank, const int64_t *dims, uint64_t seed) {
  mx_tensor t;
  cr_assert_eq(mx_tensor_alloc(dt, rank, dims, &t), MX_OK);
  int64_t n;
  cr_assert(mx_tensor_numel(&t, &n));
  uint64_t st = seed * 7919 + 13;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = dyn_rand(&st);
    switch (dt) {
      case MX_FLOAT32:
        ((float *)t.data)[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        break;
      case MX_INT64: ((int64_t *)t.data)[i] = (int64_t)(r % 8); break;
      case MX_INT32: ((int32_t *)t.data)[i] = (int32_t)(r % 8); break;
      case MX_BOOL: ((uint8_t *)t.data)[i] = (uint8_t)(r & 1); break;
      default: cr_assert_fail("dyn_random: unsupported dtype %s", mx_dtype_name(dt));
    }
  }
  return t;
}

int dyn_compare_reference(mx_graph *g, const mx_tensor *inputs, size_t n_in, const mx_tensor *got,
                          size_t n_out, double rtol, double atol, const char *what) {
  mx_tensor *ref = calloc(n_out ? n_out : 1, sizeof *ref);
  cr_assert_not_null(ref);
  mx_error err;
  mx_status st = mx_reference_run(g, inputs, n_in, ref, n_out, &err);
  cr_assert_eq(st, MX_OK, "%s: reference: %s", what, err.message);
  int bad = 0;
  for (size_t i = 0; i < n_out; i++) {
    char why[256];
    if (!mx_tensor_allclose(&got[i], &ref[i], rtol, atol, why, sizeof why)) {
      fprintf(stderr, "%s: output %zu ('%s'): %s\n", what, i, mx_graph_value_name(g, mx_graph_output(g, i)),
              why);
      bad++;
    }
    mx_tensor_release(&ref[i]);
  }
  free(ref);
  return bad;
}

int dyn_run_steps(mx_graph *g, mx_device *dev, uint32_t max_streams, const mx_tensor *steps, size_t n_in,
                  size_t n_steps, double rtol, double atol, const char *what) {
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s: %s", what, mx_graph_last_error(g));
  mx_dyn_options o;
  mx__dyn_options_init(&o);
  o.max_streams = max_streams;
  mx_dyn_plan *plan;
  mx_error err;
  cr_assert_eq(mx__dyn_plan_create(g, &o, &plan, &err), MX_OK, "%s: plan: %s", what, err.message);
  mx_dyn_exec *e;
  cr_assert_eq(mx__dyn_exec_create(dev, plan, NULL, NULL, 0, &e, &err), MX_OK, "%s: exec: %s", what,
               err.message);
  size_t n_out = mx_graph_output_count(g);
  mx_tensor *out = calloc(n_out, sizeof *out);
  cr_assert_not_null(out);
  int bad = 0;
  for (size_t s = 0; s < n_steps; s++) {
    for (size_t k = 0; k < n_out; k++) {
      memset(&out[k], 0, sizeof out[k]);
      out[k].placement = MX_HOST;
    }
    char tag[256];
    snprintf(tag, sizeof tag, "%s (%u streams) step %zu", what, max_streams, s);
    mx_status st = mx__dyn_exec_run(e, steps + s * n_in, n_in, out, n_out, NULL);
    cr_assert_eq(st, MX_OK, "%s: %s", tag, mx__dyn_exec_last_error(e));
    bad += dyn_compare_reference(g, steps + s * n_in, n_in, out, n_out, rtol, atol, tag);
    for (size_t k = 0; k < n_out; k++) mx_tensor_release(&out[k]);
  }
  mx_caching_stats cs;
  mx__caching_stats_get(mx__dyn_exec_allocator(e), &cs);
  cr_expect_eq(cs.bytes_in_use, 0, "%s: %llu bytes still in use after the steps", what,
               (unsigned long long)cs.bytes_in_use);
  free(out);
  mx__dyn_exec_destroy(e);
  mx__dyn_plan_destroy(plan);
  return bad;
}

mx_tensor dyn_to_device(mx_dyn_exec *e, const mx_tensor *host) {
  mx_tensor t = *host;
  t.placement = MX_DEVICE;
  t.data = NULL;
  size_t n;
  cr_assert(mx_tensor_nbytes(host, &n));
  mx_caching_allocator *a = mx__dyn_exec_allocator(e);
  cr_assert_eq(mx__caching_alloc(a, n, NULL, &t.data, NULL), MX_OK);
  if (n)
    cr_assert_eq(mx_device_copy(mx__caching_allocator_device(a), t.data, host->data, n, MX_COPY_H2D), MX_OK);
  return t;
}

mx_tensor dyn_to_host(mx_device *dev, const mx_tensor *t) {
  mx_tensor h;
  cr_assert_eq(mx_tensor_alloc(t->dtype, t->rank, t->dims, &h), MX_OK);
  size_t n;
  cr_assert(mx_tensor_nbytes(t, &n));
  if (n) cr_assert_eq(mx_device_copy(dev, h.data, t->data, n, MX_COPY_D2H), MX_OK);
  h.name = t->name;
  return h;
}

/* Provided by the sanitizer runtime in AddressSanitizer builds; NULL otherwise. */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

void dyn_check_leaks(void) {
  if (__lsan_do_recoverable_leak_check)
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "host memory leaked (report above)");
}
