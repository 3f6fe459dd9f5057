/* Compiling holds a model's weights once: the partitioned bodies share the imported initializers
 * instead of copying them (the graphs' copy counter moves by far less than the weights), and the
 * static models of a host-memory device compute on their plan's weight block in place (device
 * memory after compiling well below the weights). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"
#include "v2runtime/session_impl.h"

/* Bytes of every live constant of g. */
static uint64_t constant_bytes(const mx_graph *g) {
  uint64_t total = 0;
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    size_t nb = 0;
    if ((val->flags & MX_VALUE_CONST) && !(val->flags & MX_VALUE_DEAD) && val->data &&
        mx_tensor_nbytes(val->data, &nb))
      total += nb;
  }
  return total;
}

static mx_device *host_device(mx_device_kind kind) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.fault_from_env = false;
  mx_device *dev;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK, "%s", err.message);
  return dev;
}

static mx_session *session_on(mx_device *dev) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device = dev;
  o.static_min_ops = 4;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}

static void check_shared(mx_device_kind kind) {
  mx_llama_config cfg;
  cr_assert(mx_llama_config_preset(&cfg, "small"));
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  uint64_t weights = constant_bytes(g);
  cr_assert_gt(weights, 10u << 20);
  mx_device *dev = host_device(kind);
  mx_session *s = session_on(dev);
  uint64_t copied_before = mx__graph_tensor_bytes_copied();
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  uint64_t copied = mx__graph_tensor_bytes_copied() - copied_before;
  /* Folding makes a few small constants (positions, shapes): nothing near a weight matrix. */
  cr_assert_lt(copied, weights / 20, "%llu bytes copied into graphs compiling %llu bytes of weights",
               (unsigned long long)copied, (unsigned long long)weights);
  cr_assert_gt(s->prog->static_calls, 0u);
  mx_device_memory_stats ms;
  mx_device_memory_stats_get(dev, &ms);
  cr_assert_lt(ms.bytes_in_use, weights / 4, "%llu device bytes after compiling %llu bytes of weights",
               (unsigned long long)ms.bytes_in_use, (unsigned long long)weights);
  mx_session_destroy(s);
  mx_device_destroy(dev);
}

Test(mxm_share, compile_shares_initializers_inline_device) { check_shared(MX_DEVICE_INLINE); }

Test(mxm_share, compile_shares_initializers_cpu_device) { check_shared(MX_DEVICE_CPU); }
