/* Hybrid execution of LLM-shaped graphs through the session API, checked against the reference
 * interpreter on the same inputs at every step: a Llama-style decode loop whose KV cache grows
 * step by step (present fed back as past), the same loop with every input and output in device
 * buffers (presents written in place: no output copy), and a mixture-of-experts block with
 * experts that get no token. Every executor and 1, 2 and 4 streams. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { MAX_IO = 64 };

static void decode_loop(uint32_t streams, mx_executor_kind ex, int steps) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g, *ref;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_model_llama(&cfg, &ref, &err), MX_OK, "%s", err.message);
  mx_session *s = mxs_new_session(streams, ex, 4);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  size_t n_in = mx_session_input_count(s), n_out = mx_session_output_count(s);
  cr_assert_eq(n_in, 1 + 2 * (size_t)cfg.layers);
  cr_assert_eq(n_out, n_in);
  mx_tensor in[MAX_IO], out[MAX_IO], want[MAX_IO];
  memset(in, 0, sizeof in);
  int64_t hd = cfg.head_dim ? cfg.head_dim : cfg.hidden / cfg.heads;
  /* Inputs: token id, then past_key_i, past_value_i with past_len 0. */
  int64_t tok_dims[2] = {1, 1};
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, tok_dims, &in[0]), MX_OK);
  for (size_t i = 1; i < n_in; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, 0, hd}, &in[i]), MX_OK);
  for (int step = 0; step < steps; step++) {
    ((int64_t *)in[0].data)[0] = (step * 37 + 5) % cfg.vocab;
    memset(out, 0, sizeof out);
    memset(want, 0, sizeof want);
    cr_assert_eq(mx_session_run(s, in, n_in, out, n_out), MX_OK, "step %d: %s", step,
                 mx_session_last_error(s));
    cr_assert_eq(mx_reference_run(ref, in, n_in, want, n_out, &err), MX_OK, "step %d: %s", step, err.message);
    for (size_t k = 0; k < n_out; k++) {
      char why[256];
      cr_assert(mxs_same(&out[k], &want[k], why, sizeof why), "step %d output %zu: %s", step, k, why);
    }
    /* present -> past */
    for (size_t i = 1; i < n_in; i++) {
      mx_tensor_release(&in[i]);
      in[i] = out[i];
      in[i].name = NULL;
    }
    mx_tensor_release(&out[0]);
    for (size_t k = 0; k < n_out; k++) mx_tensor_release(&want[k]);
  }
  mx_session_stats total;
  cr_assert_eq(mx_session_get_stats(s, NULL, &total), MX_OK);
  cr_assert_eq(total.steps, (uint64_t)steps);
  cr_assert_gt(total.static_executes, 0, "the decode step has static partitions");
  cr_assert_gt(total.dynamic_launches, 0, "and dynamic ops");
  for (size_t i = 0; i < n_in; i++) mx_tensor_release(&in[i]);
  mx_graph_destroy(ref);
  mx_session_destroy(s);
}

Test(llm, decode_50_steps_sequential) { decode_loop(1, MX_EXECUTOR_SEQUENTIAL, 50); }
Test(llm, decode_topological_2_streams) { decode_loop(2, MX_EXECUTOR_TOPOLOGICAL, 12); }
Test(llm, decode_multi_thread_4_streams) { decode_loop(4, MX_EXECUTOR_MULTI_THREAD, 12); }

/* A decode loop with every input and output in device buffers: each step's presents are
 * written by the dynamic partitions straight into the caller's buffers (no output copy in any
 * step) and become the next step's pasts; results equal the reference at every step. */
static void decode_device_io(uint32_t streams, mx_executor_kind ex, mx_device_kind dk, int64_t static_min_ops,
                             int steps) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g, *ref;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_model_llama(&cfg, &ref, &err), MX_OK, "%s", err.message);
  mx_session_options o;
  mx_session_options_init(&o);
  o.streams = streams;
  o.executor = ex;
  o.device_options.kind = dk;
  o.static_min_ops = static_min_ops;
  mx_session *s;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  mx_device *dev = mx_session_device(s);
  size_t n_in = mx_session_input_count(s), n_out = mx_session_output_count(s);
  cr_assert_eq(n_out, n_in);
  int64_t hd = cfg.head_dim ? cfg.head_dim : cfg.hidden / cfg.heads;
  /* Host copies of the inputs (for the reference) and their device twins. */
  mx_tensor host_in[MAX_IO], dev_in[MAX_IO], out[MAX_IO], want[MAX_IO];
  memset(host_in, 0, sizeof host_in);
  memset(dev_in, 0, sizeof dev_in);
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &host_in[0]), MX_OK);
  for (size_t i = 1; i < n_in; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, 0, hd}, &host_in[i]), MX_OK);
  for (size_t i = 0; i < n_in; i++) {
    dev_in[i] = host_in[i];
    dev_in[i].placement = MX_DEVICE;
    dev_in[i].data = NULL;
  }
  cr_assert_eq(mx_device_alloc(dev, sizeof(int64_t), 64, &dev_in[0].data), MX_OK);
  uint64_t copies = 0;
  for (int step = 0; step < steps; step++) {
    ((int64_t *)host_in[0].data)[0] = (step * 31 + 3) % cfg.vocab;
    cr_assert_eq(mx_device_copy(dev, dev_in[0].data, host_in[0].data, sizeof(int64_t), MX_COPY_H2D), MX_OK);
    memset(want, 0, sizeof want);
    cr_assert_eq(mx_reference_run(ref, host_in, n_in, want, n_out, &err), MX_OK, "step %d: %s", step,
                 err.message);
    void *given[MAX_IO];
    for (size_t k = 0; k < n_out; k++) {
      size_t nb;
      cr_assert(mx_tensor_nbytes(&want[k], &nb));
      out[k] = want[k];
      out[k].name = NULL;
      out[k].placement = MX_DEVICE;
      cr_assert_eq(mx_device_alloc(dev, nb ? nb : 1, 64, &out[k].data), MX_OK);
      given[k] = out[k].data;
    }
    cr_assert_eq(mx_session_run(s, dev_in, n_in, out, n_out), MX_OK, "step %d: %s", step,
                 mx_session_last_error(s));
    mx_session_stats last;
    cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
    cr_expect_eq(last.output_copies, 0, "step %d: %llu output copies", step,
                 (unsigned long long)last.output_copies);
    copies += last.output_copies;
    for (size_t k = 0; k < n_out; k++) {
      cr_assert(out[k].data == given[k], "step %d output %zu: not the caller's buffer", step, k);
      mx_tensor back;
      size_t nb;
      cr_assert(mx_tensor_nbytes(&want[k], &nb));
      cr_assert_eq(mx_tensor_alloc(want[k].dtype, want[k].rank, want[k].dims, &back), MX_OK);
      if (nb) cr_assert_eq(mx_device_copy(dev, back.data, out[k].data, nb, MX_COPY_D2H), MX_OK);
      char why[256];
      cr_assert(mxs_same(&back, &want[k], why, sizeof why), "step %d output %zu: %s", step, k, why);
      mx_tensor_release(&back);
    }
    /* present -> past, on the device and on the host */
    for (size_t i = 1; i < n_in; i++) {
      mx_device_free(dev, dev_in[i].data);
      dev_in[i] = out[i];
      dev_in[i].name = NULL;
      mx_tensor_release(&host_in[i]);
      host_in[i] = want[i];
      host_in[i].name = NULL;
      want[i].data = NULL;
    }
    mx_device_free(dev, out[0].data);
    mx_tensor_release(&want[0]);
  }
  mx_session_stats total;
  cr_assert_eq(mx_session_get_stats(s, NULL, &total), MX_OK);
  cr_expect_eq(total.output_copies, copies);
  cr_expect_gt(total.dynamic_launches, 0);
  for (size_t i = 0; i < n_in; i++) {
    mx_device_free(dev, dev_in[i].data);
    mx_tensor_release(&host_in[i]);
  }
  mx_graph_destroy(ref);
  mx_session_destroy(s);
}

Test(llm, decode_device_io_zero_copy_inline) {
  decode_device_io(1, MX_EXECUTOR_SEQUENTIAL, MX_DEVICE_INLINE, 4, 20);
}
Test(llm, decode_device_io_zero_copy_2_streams) {
  decode_device_io(2, MX_EXECUTOR_TOPOLOGICAL, MX_DEVICE_CPU, 4, 10);
}
Test(llm, decode_device_io_zero_copy_all_dynamic) {
  decode_device_io(1, MX_EXECUTOR_MULTI_THREAD, MX_DEVICE_CPU, -1, 10);
}

static void moe(uint32_t streams, mx_executor_kind ex) {
  mx_moe_config cfg;
  mx_moe_config_default(&cfg);
  mx_graph *g, *ref;
  mx_error err;
  cr_assert_eq(mx_model_moe(&cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_model_moe(&cfg, &ref, &err), MX_OK, "%s", err.message);
  mx_session *s = mxs_new_session(streams, ex, 4);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  const int64_t tokens[] = {1, 7, 2, 16, 3, 1};
  for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++) {
    mx_tensor x, got = {0}, want = {0};
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 2, (int64_t[]){tokens[t], cfg.hidden}, 100 + t, &x), MX_OK);
    cr_assert_eq(mx_session_run(s, &x, 1, &got, 1), MX_OK, "tokens %lld: %s", (long long)tokens[t],
                 mx_session_last_error(s));
    cr_assert_eq(mx_reference_run(ref, &x, 1, &want, 1, &err), MX_OK, "%s", err.message);
    char why[256];
    cr_assert(mxs_same(&got, &want, why, sizeof why), "tokens %lld: %s", (long long)tokens[t], why);
    mx_tensor_release(&x);
    mx_tensor_release(&got);
    mx_tensor_release(&want);
  }
  mx_graph_destroy(ref);
  mx_session_destroy(s);
}

Test(llm, moe_sequential) { moe(1, MX_EXECUTOR_SEQUENTIAL); }
Test(llm, moe_topological_2_streams) { moe(2, MX_EXECUTOR_TOPOLOGICAL); }
Test(llm, moe_multi_thread_4_streams) { moe(4, MX_EXECUTOR_MULTI_THREAD); }
