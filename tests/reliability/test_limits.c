/* Limits: inputs outside the declared symbol ranges, absurd sizes (2^40 elements, dims whose
 * product overflows, huge dims with no data), and a device out of memory (a small device memory
 * limit). Each is an error with a message saying what and where, never a crash or a hang, and
 * the session keeps working: the next well-formed step equals the reference interpreter. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "reliability/reliability.h"

/* A session on the inline device with the given options (memory limit, ranges). */
static mx_session *session(uint64_t memory_limit, const mx_symbol_range *ranges, size_t n_ranges) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.kind = MX_DEVICE_INLINE;
  o.device_options.fault_from_env = false;
  o.device_options.memory_limit = memory_limit;
  o.symbol_ranges = ranges;
  o.n_symbol_ranges = n_ranges;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}

/* Runs decode steps until past_len reaches `to` (checked against the reference). */
static void decode_to(mxr_llama *l, mx_session *s, int64_t to) {
  char why[512];
  while (l->past_len < to)
    cr_assert_eq(mxr_llama_step(l, s, (l->past_len * 5 + 1) % 64, MXR_CHECK | MXR_ADVANCE, why, sizeof why),
                 MX_OK, "past_len %lld: %s", (long long)l->past_len, why);
}

Test(limits, inputs_outside_declared_symbol_ranges) {
  static const mx_symbol_range ranges[] = {{"past_len", 0, 8}};
  mx_session *s = session(0, ranges, 1);
  mxr_llama l;
  cr_assert_eq(mxr_llama_init(&l, NULL), MX_OK);
  cr_assert_eq(mxr_llama_load(&l, s), MX_OK, "%s", mx_session_last_error(s));
  decode_to(&l, s, 9); /* the step at past_len 8 is the last one inside the range */
  char why[512];
  mx_status st = mxr_llama_step(&l, s, 3, MXR_CHECK, why, sizeof why);
  cr_assert_eq(st, MX_ERR_SHAPE, "%s", why);
  cr_log_info("past_len 9, range [0, 8]: %s", why);
  cr_assert(strstr(why, "past_key_0") && strstr(why, "past_len") && strstr(why, "[0, 8]") && strstr(why, "9"),
            "the message names the input, the symbol, its range and the value: %s", why);
  /* Back inside the range: the session works and is right. */
  mxr_llama_reset(&l);
  decode_to(&l, s, 3);
  mxr_llama_free(&l);
  mx_session_destroy(s);
}

Test(limits, huge_and_overflowing_input_dims) {
  mx_session *s = session(0, NULL, 0);
  mxr_llama l;
  cr_assert_eq(mxr_llama_init(&l, NULL), MX_OK);
  cr_assert_eq(mxr_llama_load(&l, s), MX_OK, "%s", mx_session_last_error(s));
  decode_to(&l, s, 2);
  const int64_t hd = l.head_dim, kv = l.cfg.kv_heads;
  /* 2^40 elements announced with no data; dims whose product overflows; a negative dim. */
  const int64_t cases[][4] = {{1, kv, (int64_t)1 << 40, hd},
                              {1, kv, INT64_MAX / 2, hd},
                              {1, kv, -3, hd},
                              {1 << 20, 1 << 20, 1 << 20, hd}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    mx_tensor in[MXR_MAX_IO], out[MXR_MAX_IO];
    memset(out, 0, sizeof out);
    cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
    for (size_t i = 1; i < l.n_io; i++) in[i] = l.past[i];
    mx_tensor bad = {.dtype = MX_FLOAT32, .rank = 4, .placement = MX_HOST};
    memcpy(bad.dims, cases[c], sizeof cases[c]);
    in[1] = bad;
    mx_status st = mx_session_run(s, in, l.n_io, out, l.n_io);
    cr_assert_neq(st, MX_OK, "case %zu ran", c);
    const char *msg = mx_session_last_error(s);
    cr_log_info("dims [%lld, %lld, %lld, %lld]: %s: %s", (long long)cases[c][0], (long long)cases[c][1],
                (long long)cases[c][2], (long long)cases[c][3], mx_status_string(st), msg);
    cr_assert(strstr(msg, "past_key_0"), "case %zu: the message names the input: %s", c, msg);
    for (size_t k = 0; k < l.n_io; k++)
      cr_assert_null(out[k].data, "case %zu: output %zu left allocated", c, k);
    mx_tensor_release(&in[0]);
  }
  decode_to(&l, s, 4);
  mxr_llama_free(&l);
  mx_session_destroy(s);
}

/* y = ReduceSum(ConstantOfShape(shape)): the intermediate's size comes from the input's values. */
static mx_graph *constant_of_shape_model(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("sized_by_values", &g), MX_OK);
  mx_shape sh = {.rank = 1, .dims = {2}};
  mx_value_id shape, filled, sum;
  cr_assert_eq(mx_graph_add_input(g, "shape", MX_INT64, &sh, &shape), MX_OK);
  mx_tensor one;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 1, (int64_t[]){1}, &one), MX_OK);
  ((float *)one.data)[0] = 1.0f;
  mx_attr value = mx_attr_tensor("value", &one);
  cr_assert_eq(mx_graph_add_op(g, "ConstantOfShape", &shape, 1, &value, 1, &filled), MX_OK, "%s",
               mx_graph_last_error(g));
  mx_tensor_release(&one);
  mx_attr keep = mx_attr_int("keepdims", 0);
  cr_assert_eq(mx_graph_add_op(g, "ReduceSum", &filled, 1, &keep, 1, &sum), MX_OK, "%s",
               mx_graph_last_error(g));
  cr_assert_eq(mx_graph_add_output(g, sum), MX_OK);
  return g;
}

/* Runs the model with shape = {a, b}; returns the status, the sum in *y on success. */
static mx_status run_sized(mx_session *s, int64_t a, int64_t b, float *y) {
  mx_tensor in, out = {0};
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 1, (int64_t[]){2}, &in), MX_OK);
  ((int64_t *)in.data)[0] = a;
  ((int64_t *)in.data)[1] = b;
  mx_status st = mx_session_run(s, &in, 1, &out, 1);
  if (st == MX_OK) *y = ((float *)out.data)[0];
  mx_tensor_release(&in);
  mx_tensor_release(&out);
  return st;
}

Test(limits, a_value_dependent_size_of_2_to_the_40_elements) {
  for (int limited = 0; limited < 2; limited++) {
    /* Without a limit the allocation itself must fail cleanly; with one, the limit refuses it. */
    mx_session *s = session(limited ? (uint64_t)64 << 20 : 0, NULL, 0);
    cr_assert_eq(mx_session_load_graph(s, constant_of_shape_model()), MX_OK, "%s", mx_session_last_error(s));
    float y = 0;
    cr_assert_eq(run_sized(s, 3, 5, &y), MX_OK, "%s", mx_session_last_error(s));
    cr_assert_eq(y, 15.0f);
    const int64_t huge[][2] = {{1 << 20, 1 << 20}, {INT64_MAX / 2, 4}, {-1, 4}};
    for (size_t c = 0; c < sizeof huge / sizeof huge[0]; c++) {
      mx_status st = run_sized(s, huge[c][0], huge[c][1], &y);
      const char *msg = mx_session_last_error(s);
      cr_assert_neq(st, MX_OK, "shape {%lld, %lld} ran", (long long)huge[c][0], (long long)huge[c][1]);
      cr_log_info("limit %s, shape {%lld, %lld}: %s: %s", limited ? "64 MiB" : "none", (long long)huge[c][0],
                  (long long)huge[c][1], mx_status_string(st), msg);
      cr_assert(strchr(msg, '\''), "the message names the op or value: %s", msg);
    }
    cr_assert_eq(run_sized(s, 7, 2, &y), MX_OK, "after the refusals: %s", mx_session_last_error(s));
    cr_assert_eq(y, 14.0f);
    mx_session_destroy(s);
  }
}

Test(limits, device_out_of_memory_then_smaller_steps_work) {
  /* Measure what loading and a short decode hold, then allow a little more than that. */
  mxr_llama l;
  cr_assert_eq(mxr_llama_init(&l, NULL), MX_OK);
  mx_session *probe = session(0, NULL, 0);
  cr_assert_eq(mxr_llama_load(&l, probe), MX_OK, "%s", mx_session_last_error(probe));
  decode_to(&l, probe, 4);
  mx_device_memory_stats ms;
  mx_device_memory_stats_get(mx_session_device(probe), &ms);
  mx_session_destroy(probe);
  uint64_t limit = ms.peak_bytes + (64u << 10);

  mx_session *s = session(limit, NULL, 0);
  mxr_llama_reset(&l);
  cr_assert_eq(mxr_llama_load(&l, s), MX_OK, "%s", mx_session_last_error(s));
  decode_to(&l, s, 4);
  /* Grow the cache until the device refuses: each step needs more than the one before. */
  char why[512];
  mx_status st = MX_OK;
  while (st == MX_OK && l.past_len < 4096)
    st = mxr_llama_step(&l, s, 9, MXR_CHECK | MXR_ADVANCE, why, sizeof why);
  cr_assert_eq(st, MX_ERR_DEVICE_OOM, "past_len %lld: %s: %s", (long long)l.past_len, mx_status_string(st),
               why);
  cr_log_info("device memory limit %llu bytes: refused at past_len %lld: %s", (unsigned long long)limit,
              (long long)l.past_len, why);
  cr_assert(strstr(why, "limit") && strchr(why, '\''),
            "the message says the limit and names the op or value: %s", why);
  /* A short cache fits again, on the same session. */
  mxr_llama_reset(&l);
  decode_to(&l, s, 3);
  mx_session_destroy(s);

  /* A limit below the weights: loading fails naming what did not fit; the session stays usable. */
  s = session(16u << 10, NULL, 0);
  cr_assert_neq(mxr_llama_load(&l, s), MX_OK);
  cr_log_info("16 KiB limit, loading the llama: %s", mx_session_last_error(s));
  cr_assert(strstr(mx_session_last_error(s), "limit"), "%s", mx_session_last_error(s));
  mxr_moe m;
  cr_assert_eq(mxr_moe_init(&m), MX_OK);
  /* The MoE block runs all-dynamic: on a host-memory device its executor reads the large
   * weights in the graph's own bytes, which take no device memory, so its load may pass. Then
   * the first step's values do not fit, and the step fails naming the limit. */
  if (mxr_moe_load(&m, s) == MX_OK) {
    char moe_why[512];
    mx_status moe_st = mxr_moe_step(&m, s, 5, 1, MXR_CHECK, moe_why, sizeof moe_why);
    cr_assert_eq(moe_st, MX_ERR_DEVICE_OOM, "%s: %s", mx_status_string(moe_st), moe_why);
    cr_assert(strstr(moe_why, "limit"), "%s", moe_why);
  } else {
    cr_assert(strstr(mx_session_last_error(s), "limit"), "%s", mx_session_last_error(s));
  }
  mx_session_destroy(s);
  mxr_moe_free(&m);
  mxr_llama_free(&l);
}
