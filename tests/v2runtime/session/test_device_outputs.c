/* Device outputs the session allocates: an output record with placement MX_DEVICE and data NULL
 * receives a device buffer of the step's shape (run-time dims included) that the caller frees
 * with mx_device_free; a failed step leaves none behind. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 }; /* the default llama: token ids, then past key and value of 2 layers */

static void make_inputs(mx_tensor *in, int64_t token, int64_t past) {
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  ((int64_t *)in[0].data)[0] = token;
  for (int i = 1; i < N_IO; i++)
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, past, 16}, 70 + (uint64_t)i, &in[i]),
                 MX_OK);
}

static void device_outputs(int64_t min_ops) {
  mx_session *s = mxs_llama_session(min_ops);
  mx_device *dev = mx_session_device(s);
  const int64_t pasts[] = {3, 40};
  for (size_t t = 0; t < 2; t++) {
    mx_tensor in[N_IO], want[N_IO], out[N_IO];
    make_inputs(in, 9, pasts[t]);
    memset(want, 0, sizeof want);
    cr_assert_eq(mx_session_run(s, in, N_IO, want, N_IO), MX_OK, "%s", mx_session_last_error(s));
    memset(out, 0, sizeof out);
    for (int k = 0; k < N_IO; k++) out[k].placement = MX_DEVICE;
    cr_assert_eq(mx_session_run(s, in, N_IO, out, N_IO), MX_OK, "%s", mx_session_last_error(s));
    for (int k = 0; k < N_IO; k++) {
      cr_assert_not_null(out[k].data);
      cr_assert_eq(out[k].placement, MX_DEVICE);
      mx_tensor host;
      cr_assert_eq(mx_tensor_alloc(out[k].dtype, out[k].rank, out[k].dims, &host), MX_OK);
      size_t nb = 0;
      cr_assert(mx_tensor_nbytes(&host, &nb));
      cr_assert_eq(mx_device_copy(dev, host.data, out[k].data, nb, MX_COPY_D2H), MX_OK);
      char why[256];
      cr_assert(mxs_same(&host, &want[k], why, sizeof why), "output %d: %s", k, why);
      mx_tensor_release(&host);
      cr_assert_eq(mx_device_free(dev, out[k].data), MX_OK);
      mx_tensor_release(&want[k]);
    }
    for (int i = 0; i < N_IO; i++) mx_tensor_release(&in[i]);
  }
  /* A failing step (token past the vocabulary) hands nothing back and keeps nothing. */
  mx_device_memory_stats before, after;
  mx_device_memory_stats_get(dev, &before);
  mx_tensor in[N_IO], out[N_IO];
  make_inputs(in, 100000, 3);
  memset(out, 0, sizeof out);
  for (int k = 0; k < N_IO; k++) out[k].placement = MX_DEVICE;
  cr_assert_neq(mx_session_run(s, in, N_IO, out, N_IO), MX_OK);
  for (int k = 0; k < N_IO; k++) cr_assert_null(out[k].data);
  mx_device_memory_stats_get(dev, &after);
  cr_assert_eq(after.bytes_in_use, before.bytes_in_use);
  for (int i = 0; i < N_IO; i++) mx_tensor_release(&in[i]);
  mx_session_destroy(s);
}

Test(session_device_outputs, hybrid) { device_outputs(4); }
Test(session_device_outputs, all_dynamic) { device_outputs(-1); }
Test(session_device_outputs, all_static) { device_outputs(0); }

/* A named subset: one device output of run-time shape, one host output. */
Test(session_device_outputs, subset) {
  mx_session *s = mxs_llama_session(4);
  mx_tensor in[N_IO], out[2];
  make_inputs(in, 4, 17);
  memset(out, 0, sizeof out);
  mx_io_info info;
  cr_assert(mx_session_output_info(s, 2, &info));
  out[0].name = info.name;
  out[0].placement = MX_DEVICE;
  cr_assert(mx_session_output_info(s, 0, &info));
  out[1].name = info.name;
  cr_assert_eq(mx_session_run(s, in, N_IO, out, 2), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(out[0].placement, MX_DEVICE);
  cr_assert_eq(out[0].rank, 4);
  cr_assert_eq(out[0].dims[2], 18);
  cr_assert_eq(out[1].placement, MX_HOST);
  cr_assert_eq(mx_device_free(mx_session_device(s), out[0].data), MX_OK);
  mx_tensor_release(&out[1]);
  for (int i = 0; i < N_IO; i++) mx_tensor_release(&in[i]);
  mx_session_destroy(s);
}
