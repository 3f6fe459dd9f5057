/* Bindings (include/mixrt/binding.h): inputs and outputs bound once by name and run step after
 * step give the results mx_session_run gives; outputs the binding allocates keep their buffer
 * while shapes repeat; unknown names, wrong dtypes and ranks, NULL records and unbound inputs
 * are refused naming the thing. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/binding.h"
#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 }; /* the default llama: input_ids, then past/present key and value of 2 layers */

static void make_inputs(mx_tensor *in, int64_t token, int64_t past) {
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  ((int64_t *)in[0].data)[0] = token;
  for (int i = 1; i < N_IO; i++)
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, past, 16}, 90 + (uint64_t)i, &in[i]),
                 MX_OK);
}

static const char *const in_names[N_IO] = {"input_ids", "past_key_0", "past_value_0", "past_key_1",
                                           "past_value_1"};
static const char *const out_names[N_IO] = {"logits", "present_key_0", "present_value_0", "present_key_1",
                                            "present_value_1"};

/* Device tensor of the session's device to a new host tensor. */
static void to_host(mx_session *s, const mx_tensor *d, mx_tensor *h) {
  cr_assert_eq(mx_tensor_alloc(d->dtype, d->rank, d->dims, h), MX_OK);
  size_t nb = 0;
  cr_assert(mx_tensor_nbytes(h, &nb));
  cr_assert_eq(mx_device_copy(mx_session_device(s), h->data, d->data, nb, MX_COPY_D2H), MX_OK);
}

static void same_as_run(int64_t min_ops) {
  mx_session *s = mxs_llama_session(min_ops);
  mx_binding *b;
  cr_assert_eq(mx_binding_create(s, &b), MX_OK, "%s", mx_session_last_error(s));
  /* Bound in reverse order, outputs half on the host, half on the device. */
  for (int k = N_IO - 1; k >= 0; k--)
    cr_assert_eq(mx_binding_bind_output_alloc(b, out_names[k], k % 2 ? MX_DEVICE : MX_HOST), MX_OK, "%s",
                 mx_session_last_error(s));
  const int64_t pasts[] = {5, 5, 17, 3};
  const void *kept[N_IO] = {0};
  for (size_t t = 0; t < sizeof pasts / sizeof pasts[0]; t++) {
    mx_tensor in[N_IO], want[N_IO];
    make_inputs(in, 3 + (int64_t)t, pasts[t]);
    for (int k = N_IO - 1; k >= 0; k--)
      cr_assert_eq(mx_binding_bind_input(b, in_names[k], &in[k]), MX_OK, "%s", mx_session_last_error(s));
    cr_assert_eq(mx_session_run_binding(s, b), MX_OK, "%s", mx_session_last_error(s));
    memset(want, 0, sizeof want);
    cr_assert_eq(mx_session_run(s, in, N_IO, want, N_IO), MX_OK, "%s", mx_session_last_error(s));
    for (int k = 0; k < N_IO; k++) {
      const mx_tensor *o = mx_binding_output(b, (size_t)mx_binding_output_index(b, out_names[k]));
      cr_assert_not_null(o);
      cr_assert_eq(o->placement, k % 2 ? MX_DEVICE : MX_HOST);
      mx_tensor h;
      if (o->placement == MX_DEVICE)
        to_host(s, o, &h);
      else
        h = *o;
      char why[256];
      cr_assert(mxs_same(&h, &want[k], why, sizeof why), "step %zu output %s: %s", t, out_names[k], why);
      if (o->placement == MX_DEVICE) mx_tensor_release(&h);
      /* The same shape as the step before: the same buffer, nothing allocated. */
      if (t == 1) cr_assert_eq(o->data, kept[k], "output %s was reallocated", out_names[k]);
      kept[k] = o->data;
      mx_tensor_release(&want[k]);
    }
    for (int i = 0; i < N_IO; i++) mx_tensor_release(&in[i]);
  }
  mx_binding_destroy(b);
  mx_session_destroy(s);
}

Test(session_binding_object, same_as_run_hybrid) { same_as_run(4); }
Test(session_binding_object, same_as_run_all_dynamic) { same_as_run(-1); }
Test(session_binding_object, same_as_run_all_static) { same_as_run(0); }

/* A caller's device buffer bound as an output is written in place; a subset of outputs. */
Test(session_binding_object, caller_buffers_and_subset) {
  mx_session *s = mxs_llama_session(4);
  mx_device *dev = mx_session_device(s);
  mx_binding *b;
  cr_assert_eq(mx_binding_create(s, &b), MX_OK);
  mx_tensor in[N_IO], want[N_IO];
  make_inputs(in, 7, 9);
  for (int k = 0; k < N_IO; k++) cr_assert_eq(mx_binding_bind_input(b, in_names[k], &in[k]), MX_OK);
  mx_tensor pk = {.dtype = MX_FLOAT32, .rank = 4, .dims = {1, 2, 10, 16}, .placement = MX_DEVICE};
  cr_assert_eq(mx_device_alloc(dev, 10 * 2 * 16 * 4, 64, &pk.data), MX_OK);
  cr_assert_eq(mx_binding_bind_output(b, "present_key_1", &pk), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_session_run_binding(s, b), MX_OK, "%s", mx_session_last_error(s));
  memset(want, 0, sizeof want);
  cr_assert_eq(mx_session_run(s, in, N_IO, want, N_IO), MX_OK);
  const mx_tensor *o = mx_binding_output(b, 3);
  cr_assert_eq(o->data, pk.data);
  cr_assert_null(mx_binding_output(b, 0), "logits were not asked for");
  mx_tensor h;
  to_host(s, o, &h);
  char why[256];
  cr_assert(mxs_same(&h, &want[3], why, sizeof why), "%s", why);
  mx_tensor_release(&h);
  for (int k = 0; k < N_IO; k++) mx_tensor_release(&want[k]);
  for (int i = 0; i < N_IO; i++) mx_tensor_release(&in[i]);
  mx_binding_destroy(b);
  mx_device_free(dev, pk.data);
  mx_session_destroy(s);
}

Test(session_binding_object, refusals_name_the_thing) {
  mx_session *s = mxs_llama_session(4);
  mx_binding *b;
  cr_assert_eq(mx_binding_create(s, &b), MX_OK);
  mx_tensor in[N_IO];
  make_inputs(in, 1, 2);
  cr_assert_eq(mx_binding_bind_input(b, "no_such_input", &in[0]), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_session_last_error(s), "no_such_input"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_bind_output_alloc(b, "no_such_output", MX_HOST), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_session_last_error(s), "no_such_output"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_bind_input(b, "input_ids", NULL), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_session_last_error(s), "input_ids"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_bind_input(b, "input_ids", &in[1]), MX_ERR_DTYPE); /* float32 for int64 */
  cr_assert(strstr(mx_session_last_error(s), "'input_ids'"), "%s", mx_session_last_error(s));
  mx_tensor flat = in[1];
  flat.rank = 2;
  cr_assert_eq(mx_binding_bind_input(b, "past_key_0", &flat), MX_ERR_SHAPE);
  cr_assert(strstr(mx_session_last_error(s), "past_key_0"), "%s", mx_session_last_error(s));
  mx_tensor nodata = {.dtype = MX_FLOAT32, .rank = 3, .dims = {1, 1, 128}};
  cr_assert_eq(mx_binding_bind_output(b, "logits", &nodata), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_session_last_error(s), "logits"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_bind_input(b, "input_ids", &in[0]), MX_OK);
  cr_assert_eq(mx_session_run_binding(s, b), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_session_last_error(s), "'past_key_0' is not bound"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_input_index(b, "past_value_1"), 4);
  cr_assert_eq(mx_binding_output_index(b, "nothing"), -1);
  cr_assert_eq(mx_session_run_binding(s, NULL), MX_ERR_INVALID_ARGUMENT);
  for (int i = 0; i < N_IO; i++) mx_tensor_release(&in[i]);
  mx_binding_destroy(b);
  mx_session_destroy(s);
}
