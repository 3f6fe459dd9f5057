/* Persistent state of a binding: the llama's past_key_<i> / past_value_<i> inputs kept on the
 * device as the next step's value of present_key_<i> / present_value_<i>. Over 1000 steps the
 * logits and the cache are bit for bit those of the copying path (every present fed back as the
 * next past through mx_session_run), through growth past the capacity; truncate and reset roll
 * the cache back; declaring states refuses what cannot pair. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/binding.h"
#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 };

/* Sanitizer builds run 300 steps from 8 rows instead of 1000 from 64: the cache still grows x2
 * past its capacity (six times instead of four) and every step is still compared bit for bit, at
 * about a tenth of the cost (a step's attention reads every earlier row); under ASan and TSan the
 * 1000 steps took 20-30 s per test. */
#ifdef MIXRT_SANITIZED
enum { STEPS = 300, CAPACITY0 = 8, CAPACITY_END = 512 };
#else
enum { STEPS = 1000, CAPACITY0 = 64, CAPACITY_END = 1024 };
#endif

/* A binding with the four cache pairs as states and logits on the host. */
static mx_binding *state_binding(mx_session *s, mx_tensor *ids, int64_t capacity) {
  mx_binding *b;
  cr_assert_eq(mx_binding_create(s, &b), MX_OK, "%s", mx_session_last_error(s));
  size_t pairs = 0;
  cr_assert_eq(mx_binding_pair_states(b, 2, capacity, &pairs), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(pairs, 4);
  cr_assert_eq(mx_binding_state_count(b), 4);
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, ids), MX_OK);
  cr_assert_eq(mx_binding_bind_input(b, "input_ids", ids), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_bind_output_alloc(b, "logits", MX_HOST), MX_OK);
  return b;
}

static void binding_step(mx_session *s, mx_binding *b, mx_tensor *ids, int64_t token) {
  ((int64_t *)ids->data)[0] = token;
  cr_assert_eq(mx_session_run_binding(s, b), MX_OK, "%s", mx_session_last_error(s));
}

/* Every state's rows against the copying path's pasts, bit for bit (read through
 * mx_binding_read_state: an appended state's buffer is padded to the capacity). */
static void same_cache(mx_session *s, mx_binding *b, const mxs_copying *c) {
  for (size_t j = 1; j < N_IO; j++) {
    const mx_tensor *v = mx_binding_output(b, j);
    cr_assert_not_null(v);
    cr_assert_eq(v->placement, MX_DEVICE);
    mx_tensor h;
    cr_assert_eq(mx_tensor_alloc(v->dtype, v->rank, v->dims, &h), MX_OK);
    cr_assert_eq(mx_binding_read_output(b, j, &h), MX_OK, "%s", mx_session_last_error(s));
    char why[256];
    cr_assert(mxs_same(&h, &c->in[j], why, sizeof why), "state %zu: %s", j, why);
    mx_tensor_release(&h);
  }
}

static void thousand_steps(int64_t min_ops) {
  mx_session *s = mxs_llama_session(min_ops);
  mxs_copying c;
  mxs_copying_init(&c);
  mx_tensor ids;
  mx_binding *b = state_binding(s, &ids, CAPACITY0);
  const mx_tensor *logits = mx_binding_output(b, 0);
  int64_t token = 1;
  for (int step = 0; step < STEPS; step++) {
    mxs_copying_step(s, &c, token);
    binding_step(s, b, &ids, token);
    char why[256];
    cr_assert(mxs_same(logits, &c.out[0], why, sizeof why), "step %d logits: %s", step, why);
    if (step % 250 == 0 || step == STEPS - 1) same_cache(s, b, &c);
    token = mxs_argmax(&c.out[0]);
  }
  cr_assert_eq(mx_binding_state_length(b), STEPS);
  cr_assert_eq(mx_binding_state_capacity(b), CAPACITY_END, "%d rows grown x2 past %d", CAPACITY0, STEPS);
  mx_binding_destroy(b);
  mx_tensor_release(&ids);
  mxs_copying_free(&c);
  mx_session_destroy(s);
}

Test(session_state, thousand_steps_bit_identical_hybrid, .timeout = 300) { thousand_steps(4); }

/* The model as torch.onnx.export writes it (the cache by Concat(past, new) along axis 2, no
 * fused ops: --passes none keeps it so): 300 steps equal to the copying path. */
Test(session_state, exported_style_concat, .timeout = 300) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama_exported(&cfg, &g, &err), MX_OK, "%s", err.message);
  mx_session_options o;
  mx_session_options_init(&o);
  o.passes = "none";
  mx_session *s;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  mxs_copying c;
  mxs_copying_init(&c);
  mx_tensor ids;
  mx_binding *b = state_binding(s, &ids, 32);
  int64_t token = 4;
  for (int step = 0; step < 300; step++) {
    mxs_copying_step(s, &c, token);
    binding_step(s, b, &ids, token);
    char why[256];
    cr_assert(mxs_same(mx_binding_output(b, 0), &c.out[0], why, sizeof why), "step %d: %s", step, why);
    token = mxs_argmax(&c.out[0]);
  }
  same_cache(s, b, &c);
  mx_binding_destroy(b);
  mx_tensor_release(&ids);
  mxs_copying_free(&c);
  mx_session_destroy(s);
}
Test(session_state, thousand_steps_bit_identical_all_dynamic, .timeout = 300) { thousand_steps(-1); }

/* Within the capacity the states allocate nothing: growing steps take at most the one block
 * an intermediate of the longer past needs (the copying path takes 4 or 5 a step), and steps
 * that repeat a shape (truncated back to 20 rows each time) take none, the cache staying in
 * its two buffers. */
Test(session_state, no_allocation_within_capacity) {
  mx_session *s = mxs_llama_session(4);
  mx_tensor ids;
  mx_binding *b = state_binding(s, &ids, 128);
  mx_session_stats last;
  for (int step = 0; step < 20; step++) {
    binding_step(s, b, &ids, 5);
    cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
    if (step >= 1)
      cr_assert_leq(last.device_allocations, 1, "step %d allocated %llu blocks", step,
                    (unsigned long long)last.device_allocations);
  }
  const void *seen[2] = {0};
  for (int step = 0; step < 10; step++) {
    cr_assert_eq(mx_binding_truncate(b, 20), MX_OK);
    binding_step(s, b, &ids, 5);
    cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
    if (step >= 1) cr_assert_eq(last.device_allocations, 0, "repeated step %d allocated", step);
    const void *now = mx_binding_output(b, 1)->data;
    if (step < 2)
      seen[step] = now;
    else
      cr_assert_eq(now, seen[step % 2], "the cache left its two buffers");
  }
  cr_assert_eq(mx_binding_state_capacity(b), 128);
  mx_binding_destroy(b);
  mx_tensor_release(&ids);
  mx_session_destroy(s);
}

/* Truncate keeps the first rows (as the copying path's pasts of that length), reset empties. */
Test(session_state, truncate_and_reset) {
  mx_session *s = mxs_llama_session(4);
  mxs_copying c, kept;
  mxs_copying_init(&c);
  mxs_copying_init(&kept);
  mx_tensor ids;
  mx_binding *b = state_binding(s, &ids, 8);
  int64_t token = 2;
  for (int step = 0; step < 12; step++) {
    mxs_copying_step(s, &c, token);
    binding_step(s, b, &ids, token);
    token = mxs_argmax(&c.out[0]);
    if (step == 5) /* the pasts after 6 steps */
      for (int i = 1; i < N_IO; i++) {
        mx_tensor_release(&kept.in[i]);
        cr_assert_eq(mx_tensor_alloc(c.in[i].dtype, c.in[i].rank, c.in[i].dims, &kept.in[i]), MX_OK);
        size_t nb = 0;
        mx_tensor_nbytes(&c.in[i], &nb);
        memcpy(kept.in[i].data, c.in[i].data, nb);
      }
  }
  cr_assert_eq(mx_binding_truncate(b, 13), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_binding_truncate(b, 6), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_state_length(b), 6);
  same_cache(s, b, &kept);
  mxs_copying_step(s, &kept, 77);
  binding_step(s, b, &ids, 77);
  char why[256];
  cr_assert(mxs_same(mx_binding_output(b, 0), &kept.out[0], why, sizeof why), "after truncate: %s", why);
  same_cache(s, b, &kept);
  /* Back by the last step's row (a swap of buffers), then the same step again. */
  mx_tensor again;
  size_t nb = 0;
  mx_tensor_nbytes(&kept.out[0], &nb);
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, kept.out[0].rank, kept.out[0].dims, &again), MX_OK);
  memcpy(again.data, kept.out[0].data, nb);
  cr_assert_eq(mx_binding_truncate(b, 6), MX_OK);
  binding_step(s, b, &ids, 77);
  cr_assert(mxs_same(mx_binding_output(b, 0), &again, why, sizeof why), "the step repeated: %s", why);
  same_cache(s, b, &kept);
  mx_tensor_release(&again);
  cr_assert_eq(mx_binding_reset(b), MX_OK);
  cr_assert_eq(mx_binding_state_length(b), 0);
  mxs_copying fresh;
  mxs_copying_init(&fresh);
  mxs_copying_step(s, &fresh, 9);
  binding_step(s, b, &ids, 9);
  cr_assert(mxs_same(mx_binding_output(b, 0), &fresh.out[0], why, sizeof why), "after reset: %s", why);
  same_cache(s, b, &fresh);
  mxs_copying_free(&fresh);
  mx_binding_destroy(b);
  mx_tensor_release(&ids);
  mxs_copying_free(&kept);
  mxs_copying_free(&c);
  mx_session_destroy(s);
}

Test(session_state, refusals) {
  mx_session *s = mxs_llama_session(4);
  mx_binding *b;
  cr_assert_eq(mx_binding_create(s, &b), MX_OK);
  cr_assert_eq(mx_binding_add_state(b, "past_key_0", "logits", 2, 16), MX_ERR_SHAPE);
  cr_assert(strstr(mx_session_last_error(s), "past_key_0"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_add_state(b, "input_ids", "present_key_0", 2, 16), MX_ERR_DTYPE);
  cr_assert_eq(mx_binding_add_state(b, "past_key_9", "present_key_0", 2, 16), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_session_last_error(s), "past_key_9"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_add_state(b, "past_key_0", "present_key_0", 7, 16), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_binding_add_state(b, "past_key_0", "present_key_0", MX_BINDING_AXIS_AUTO, 16), MX_OK);
  cr_assert_eq(mx_binding_add_state(b, "past_key_0", "present_key_1", 2, 16), MX_ERR_INVALID_ARGUMENT);
  /* A state is fed by the binding: binding it as an input is refused. */
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = 4, .dims = {1, 2, 0, 16}};
  cr_assert_eq(mx_binding_bind_input(b, "past_key_0", &t), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_session_last_error(s), "state"), "%s", mx_session_last_error(s));
  size_t pairs = 0;
  cr_assert_eq(mx_binding_pair_states(b, -2, 16, &pairs), MX_OK);
  cr_assert_eq(pairs, 3, "the other three pairs");
  mx_binding_destroy(b);
  mx_session_destroy(s);
}

/* Loaded rows (a prompt's cache computed elsewhere, host or device) continue as the copying path
 * continues from the same pasts; past the capacity the states grow as they load; a state
 * loaded with other rows than the rest is refused at the step. */
Test(session_state, load_state) {
  mx_session *s = mxs_llama_session(4);
  mxs_copying c;
  mxs_copying_init(&c);
  for (int i = 1; i < N_IO; i++) { /* pasts of 40 seeded rows */
    mx_tensor_release(&c.in[i]);
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, 40, 16}, 500 + (uint64_t)i, &c.in[i]),
                 MX_OK);
  }
  mx_tensor ids;
  mx_binding *b = state_binding(s, &ids, 16);
  mx_device *dev = mx_session_device(s);
  void *on_device = NULL;
  for (int i = 1; i < N_IO; i++) {
    mx_tensor t = c.in[i];
    if (i == 2) { /* one of them from device memory */
      size_t nb = 0;
      mx_tensor_nbytes(&t, &nb);
      cr_assert_eq(mx_device_alloc(dev, nb, 64, &on_device), MX_OK);
      cr_assert_eq(mx_device_copy(dev, on_device, t.data, nb, MX_COPY_H2D), MX_OK);
      t.data = on_device;
      t.placement = MX_DEVICE;
    }
    cr_assert_eq(mx_binding_load_state(b, (size_t)i, &t), MX_OK, "%s", mx_session_last_error(s));
  }
  mx_device_free(dev, on_device);
  cr_assert_eq(mx_binding_state_length(b), 40);
  cr_assert_eq(mx_binding_state_capacity(b), 64, "16 rows grown x2 to hold 40");
  same_cache(s, b, &c);
  int64_t token = 3;
  for (int step = 0; step < 30; step++) {
    mxs_copying_step(s, &c, token);
    binding_step(s, b, &ids, token);
    char why[256];
    cr_assert(mxs_same(mx_binding_output(b, 0), &c.out[0], why, sizeof why), "step %d: %s", step, why);
    token = mxs_argmax(&c.out[0]);
  }
  same_cache(s, b, &c);
  /* One state with other rows than the rest: refused naming it. */
  mx_tensor short_past;
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, 5, 16}, 9, &short_past), MX_OK);
  cr_assert_eq(mx_binding_load_state(b, 3, &short_past), MX_OK);
  mx_status bad = mx_session_run_binding(s, b);
  cr_assert_eq(bad, MX_ERR_SHAPE, "%d %s", (int)bad, mx_session_last_error(s));
  cr_assert(strstr(mx_session_last_error(s), "past_"), "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_load_state(b, 0, &short_past), MX_ERR_INVALID_ARGUMENT, "input_ids is no state");
  mx_tensor_release(&short_past);
  mx_binding_destroy(b);
  mx_tensor_release(&ids);
  mxs_copying_free(&c);
  mx_session_destroy(s);
}

/* Hugging Face names (past_key_values.0.key <- present.0.key) pair by themselves, the axis
 * found from the shapes; the graph's Concat(past, new) writes the state's next buffer. The
 * output y = ReduceSum(present, axis 1) is the sum of every x fed so far. */
Test(session_state, hugging_face_names_and_concat) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("cache", &g), MX_OK);
  mx_dim seq = mx_sym_named(mx_graph_symtab(g), "past_sequence_length");
  mx_value_id x, past, axes, present, y;
  mx_shape xs = {.rank = 3, .dims = {1, 1, 4}}, ps = {.rank = 3, .dims = {1, seq, 4}};
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &xs, &x), MX_OK);
  cr_assert_eq(mx_graph_add_input(g, "past_key_values.0.key", MX_FLOAT32, &ps, &past), MX_OK);
  int64_t one = 1;
  mx_tensor axes_t = {.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &one, .placement = MX_HOST};
  cr_assert_eq(mx_graph_add_constant(g, "axes", &axes_t, &axes), MX_OK);
  const char *present_name[] = {"present.0.key"}, *y_name[] = {"y"};
  mx_attr axis = mx_attr_int("axis", 1);
  mx_node_desc cat = {.op_type = "Concat",
                      .inputs = (mx_value_id[]){past, x},
                      .n_inputs = 2,
                      .attrs = &axis,
                      .n_attrs = 1,
                      .output_names = present_name,
                      .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &cat, &present), MX_OK, "%s", mx_graph_last_error(g));
  mx_node_desc sum = {.op_type = "ReduceSum",
                      .inputs = (mx_value_id[]){present, axes},
                      .n_inputs = 2,
                      .output_names = y_name,
                      .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &sum, &y), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, present), MX_OK);
  mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  mx_binding *b;
  cr_assert_eq(mx_binding_create(s, &b), MX_OK);
  size_t pairs = 0;
  cr_assert_eq(mx_binding_pair_states(b, MX_BINDING_AXIS_AUTO, 4, &pairs), MX_OK, "%s",
               mx_session_last_error(s));
  cr_assert_eq(pairs, 1);
  mx_tensor xt;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 3, (int64_t[]){1, 1, 4}, &xt), MX_OK);
  cr_assert_eq(mx_binding_bind_input(b, "x", &xt), MX_OK);
  cr_assert_eq(mx_binding_bind_output_alloc(b, "y", MX_HOST), MX_OK);
  const mx_tensor *yt = mx_binding_output(b, 0);
  float total[4] = {0};
  for (int step = 0; step < 50; step++) {
    for (int k = 0; k < 4; k++) {
      ((float *)xt.data)[k] = (float)(step * 4 + k);
      total[k] += (float)(step * 4 + k);
    }
    cr_assert_eq(mx_session_run_binding(s, b), MX_OK, "%s", mx_session_last_error(s));
    for (int k = 0; k < 4; k++) cr_assert_eq(((const float *)yt->data)[k], total[k], "step %d, %d", step, k);
  }
  cr_assert_eq(mx_binding_state_length(b), 50);
  cr_assert_eq(mx_binding_state_capacity(b), 64, "4 rows grown x2 past 50");
  mx_tensor kept;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 3, (int64_t[]){1, 50, 4}, &kept), MX_OK);
  cr_assert_eq(mx_device_copy(mx_session_device(s), kept.data, mx_binding_output(b, 1)->data,
                              50 * 4 * sizeof(float), MX_COPY_D2H),
               MX_OK);
  for (int r = 0; r < 50 * 4; r++) cr_assert_eq(((float *)kept.data)[r], (float)r, "row element %d", r);
  mx_tensor_release(&kept);
  mx_tensor_release(&xt);
  mx_binding_destroy(b);
  mx_session_destroy(s);
}
