/* A named subset of the outputs: every non-empty subset of the llama decode step's outputs, in
 * several orders, gives exactly those outputs of a full run and leaves the rest untouched; a
 * subset by position, an unknown or a repeated name is refused; subsets work with caller device
 * buffers, every partitioning, several streams and asynchronous runs. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 }; /* the default llama: token ids, then past key and value of 2 layers */

typedef struct subset_case {
  mx_session *s;
  mx_tensor in[N_IO];
  mx_tensor want[N_IO]; /* a full run's outputs, in the model's order */
  const char *names[N_IO];
} subset_case;

static void setup_case(subset_case *c, uint32_t streams, mx_executor_kind ex, int64_t min_ops) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  c->s = mxs_new_session(streams, ex, min_ops);
  cr_assert_eq(mx_session_load_graph(c->s, g), MX_OK, "%s", mx_session_last_error(c->s));
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &c->in[0]), MX_OK);
  ((int64_t *)c->in[0].data)[0] = 11;
  for (int i = 1; i < N_IO; i++)
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, 6, 16}, 40 + (uint64_t)i, &c->in[i]),
                 MX_OK);
  for (int i = 0; i < N_IO; i++) {
    mx_io_info info;
    cr_assert(mx_session_output_info(c->s, (size_t)i, &info));
    c->names[i] = info.name;
  }
  memset(c->want, 0, sizeof c->want);
  cr_assert_eq(mx_session_run(c->s, c->in, N_IO, c->want, N_IO), MX_OK, "%s", mx_session_last_error(c->s));
}

static void teardown_case(subset_case *c) {
  for (int i = 0; i < N_IO; i++) {
    mx_tensor_release(&c->in[i]);
    mx_tensor_release(&c->want[i]);
  }
  mx_session_destroy(c->s);
}

/* Runs with the outputs whose bits are set in `mask`, in ascending or descending model order. */
static void run_subset(subset_case *c, unsigned mask, bool reversed) {
  mx_tensor out[N_IO];
  int idx[N_IO], n = 0;
  memset(out, 0, sizeof out);
  for (int k = 0; k < N_IO; k++)
    if (mask >> k & 1u) idx[n++] = k;
  if (reversed)
    for (int a = 0, b = n - 1; a < b; a++, b--) {
      int t = idx[a];
      idx[a] = idx[b];
      idx[b] = t;
    }
  for (int j = 0; j < n; j++) out[j].name = c->names[idx[j]];
  cr_assert_eq(mx_session_run(c->s, c->in, N_IO, out, (size_t)n), MX_OK, "subset %#x: %s", mask,
               mx_session_last_error(c->s));
  for (int j = 0; j < n; j++) {
    char why[256];
    cr_assert(mxs_same(&out[j], &c->want[idx[j]], why, sizeof why), "subset %#x, output '%s': %s", mask,
              out[j].name, why);
    mx_tensor_release(&out[j]);
  }
  for (int j = n; j < N_IO; j++) cr_assert_null(out[j].data); /* records past the count untouched */
}

static void every_subset(uint32_t streams, mx_executor_kind ex, int64_t min_ops) {
  subset_case c;
  setup_case(&c, streams, ex, min_ops);
  for (unsigned mask = 1; mask < (1u << N_IO); mask++) {
    run_subset(&c, mask, false);
    run_subset(&c, mask, true);
  }
  teardown_case(&c);
}

Test(session_output_subsets, every_subset_default) { every_subset(1, MX_EXECUTOR_SEQUENTIAL, 4); }
Test(session_output_subsets, every_subset_all_dynamic) { every_subset(1, MX_EXECUTOR_SEQUENTIAL, -1); }
Test(session_output_subsets, every_subset_all_static) { every_subset(1, MX_EXECUTOR_SEQUENTIAL, 0); }
Test(session_output_subsets, every_subset_streams_threads) { every_subset(2, MX_EXECUTOR_MULTI_THREAD, 4); }

Test(session_output_subsets, refused) {
  subset_case c;
  setup_case(&c, 1, MX_EXECUTOR_SEQUENTIAL, 4);
  mx_tensor out[2];
  memset(out, 0, sizeof out);
  cr_assert_eq(mx_session_run(c.s, c.in, N_IO, out, 2), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_session_last_error(c.s), "a subset must be given by name"), "%s",
            mx_session_last_error(c.s));
  out[0].name = c.names[0];
  out[1].name = "no_such_output";
  cr_assert_eq(mx_session_run(c.s, c.in, N_IO, out, 2), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_session_last_error(c.s), "no_such_output"), "%s", mx_session_last_error(c.s));
  out[1].name = c.names[0];
  cr_assert_eq(mx_session_run(c.s, c.in, N_IO, out, 2), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_session_last_error(c.s), "given twice"), "%s", mx_session_last_error(c.s));
  cr_assert_null(out[0].data);
  cr_assert_null(out[1].data);
  /* Still usable. */
  out[1].name = c.names[3];
  cr_assert_eq(mx_session_run(c.s, c.in, N_IO, out, 2), MX_OK, "%s", mx_session_last_error(c.s));
  mx_tensor_release(&out[0]);
  mx_tensor_release(&out[1]);
  teardown_case(&c);
}

/* One output into a caller device buffer (written in place), one more as a host tensor, and an
 * asynchronous run of the device output alone. */
Test(session_output_subsets, device_buffers_and_async) {
  subset_case c;
  setup_case(&c, 1, MX_EXECUTOR_SEQUENTIAL, 4);
  mx_device *dev = mx_session_device(c.s);
  const mx_tensor *w = &c.want[1];
  size_t nb = 0;
  cr_assert(mx_tensor_nbytes(w, &nb));
  void *buf;
  cr_assert_eq(mx_device_alloc(dev, nb, 64, &buf), MX_OK);
  mx_tensor out[2];
  memset(out, 0, sizeof out);
  out[0] = *w;
  out[0].data = buf;
  out[0].placement = MX_DEVICE;
  out[0].name = c.names[1];
  out[1].name = c.names[0];
  cr_assert_eq(mx_session_run(c.s, c.in, N_IO, out, 2), MX_OK, "%s", mx_session_last_error(c.s));
  char why[256];
  cr_assert(mxs_same(&out[1], &c.want[0], why, sizeof why), "%s", why);
  mx_tensor_release(&out[1]);
  mx_tensor host;
  cr_assert_eq(mx_tensor_alloc(w->dtype, w->rank, w->dims, &host), MX_OK);
  cr_assert_eq(mx_device_copy(dev, host.data, buf, nb, MX_COPY_D2H), MX_OK);
  cr_assert(mxs_same(&host, w, why, sizeof why), "%s", why);
  memset(host.data, 0, nb);
  cr_assert_eq(mx_device_copy(dev, buf, host.data, nb, MX_COPY_H2D), MX_OK);
  cr_assert_eq(mx_session_run_async(c.s, c.in, N_IO, out, 1, NULL, NULL, NULL), MX_OK, "%s",
               mx_session_last_error(c.s));
  cr_assert_eq(mx_session_synchronize(c.s), MX_OK);
  cr_assert_eq(mx_device_copy(dev, host.data, buf, nb, MX_COPY_D2H), MX_OK);
  cr_assert(mxs_same(&host, w, why, sizeof why), "async: %s", why);
  mx_tensor_release(&host);
  mx_device_free(dev, buf);
  teardown_case(&c);
}
