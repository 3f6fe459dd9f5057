/* Loops that carry state the way exported decoders do: a greedy decode of N tokens inside one
 * Loop (the step's present cache carried as the next iteration's past, the token scanned out)
 * gives the same tokens and cache as N separate runs of the step model through a session; and
 * loop-carried values passed through, swapped between slots or scanned out unchanged (the
 * interpreter lends such body outputs instead of copying them) keep their values. */
#include <criterion/criterion.h>
#include <string.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"

#define HIDDEN CTL_DECODE_HIDDEN
#define STEPS  CTL_DECODE_STEPS

static mx_value_id add_input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static mx_value_id add_const(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                             const void *data) {
  mx_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static mx_session *open_session(mx_graph *g) {
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s = NULL;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

Test(control_decode, greedy_decode_in_one_loop_matches_separate_steps) {
  int64_t tok0 = 3;
  float past0[HIDDEN] = {0.25f, -0.5f, 0.125f, 0.75f};

  /* N separate steps through a session, the present fed back as the next past. */
  mx_session *step = open_session(ctl_decode_step_model());
  int64_t tokens[STEPS];
  mx_tensor past;
  ctl_decode_separate_steps(step, tok0, past0, tokens, &past);
  bool varied = false;
  for (int i = 1; i < STEPS; i++) varied = varied || tokens[i] != tokens[0];
  cr_assert(varied, "the toy decoder picks more than one token");

  /* The same N steps inside one Loop, run by a session and by the reference interpreter. */
  mx_session *loop = open_session(ctl_decode_loop_model());
  mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &tok0},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, HIDDEN}, .data = past0}};
  for (int way = 0; way < 2; way++) {
    mx_tensor out[3];
    memset(out, 0, sizeof out);
    if (way == 0) {
      cr_assert_eq(mx_session_run(loop, in, 2, out, 3), MX_OK, "%s", mx_session_last_error(loop));
    } else {
      mx_graph *g = ctl_decode_loop_model();
      mx_error err = {0};
      cr_assert_eq(mx_reference_run(g, in, 2, out, 3, &err), MX_OK, "%s", err.message);
      mx_graph_destroy(g);
    }
    cr_assert_eq(((const int64_t *)out[0].data)[0], tokens[STEPS - 1]);
    char why[200];
    cr_assert(mx_tensor_allclose(&out[1], &past, 1e-6, 1e-6, why, sizeof why), "final cache: %s", why);
    cr_assert_eq(out[2].rank, 2);
    cr_assert_eq(out[2].dims[0], STEPS);
    cr_assert_eq(out[2].dims[1], 1);
    for (int i = 0; i < STEPS; i++)
      cr_assert_eq(((const int64_t *)out[2].data)[i], tokens[i], "token %d of the Loop differs from step %d",
                   i, i);
    for (int k = 0; k < 3; k++) mx_tensor_release(&out[k]);
  }
  mx_tensor_release(&past);
  mx_session_destroy(loop);
  mx_session_destroy(step);
}

/* Loop(M, a, b, c) with body outputs (cond_in, b_in, a_in, c_in) and scan outputs (a_in, c_in):
 * a and b swap every iteration, c is passed through in its own slot, and the scans record the
 * values each iteration saw. */
static mx_graph *swap_loop(void) {
  mx_graph *g = NULL, *body = NULL;
  cr_assert_eq(mx_graph_create("swap", &g), MX_OK);
  int64_t trips = 3;
  mx_value_id m = add_const(g, "m", MX_INT64, 0, NULL, &trips);
  mx_value_id a = add_input(g, "a", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id b = add_input(g, "b", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id c = add_input(g, "c", MX_FLOAT32, 1, (mx_dim[]){2});
  cr_assert_eq(mx_graph_create_subgraph(g, "body", &body), MX_OK);
  add_input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = add_input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id ai = add_input(body, "a_in", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id bi = add_input(body, "b_in", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id cin = add_input(body, "c_in", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id body_outs[] = {ci, bi, ai, cin, ai, cin};
  for (size_t k = 0; k < 6; k++)
    cr_assert_eq(mx_graph_add_output(body, body_outs[k]), MX_OK, "%s", mx_graph_last_error(body));
  mx_attr at = mx_attr_graph("body", body);
  mx_node_desc d = {.op_type = "Loop",
                    .name = "swap_loop",
                    .inputs = (mx_value_id[]){m, MX_NO_VALUE, a, b, c},
                    .n_inputs = 5,
                    .attrs = &at,
                    .n_attrs = 1,
                    .n_outputs = 5};
  mx_value_id outs[5];
  cr_assert_eq(mx_graph_add_node(g, &d, outs), MX_OK, "%s", mx_graph_last_error(g));
  for (int k = 0; k < 5; k++) cr_assert_eq(mx_graph_add_output(g, outs[k]), MX_OK);
  return g;
}

Test(control_decode, carried_values_passed_through_swapped_or_scanned_keep_their_values) {
  float av[2] = {1, 2}, bv[2] = {3, 4}, cv[2] = {5, 6};
  mx_tensor in[3] = {{.dtype = MX_FLOAT32, .rank = 1, .dims = {2}, .data = av},
                     {.dtype = MX_FLOAT32, .rank = 1, .dims = {2}, .data = bv},
                     {.dtype = MX_FLOAT32, .rank = 1, .dims = {2}, .data = cv}};
  mx_graph *g = swap_loop();
  mx_tensor out[5];
  mx_error err = {0};
  cr_assert_eq(mx_reference_run(g, in, 3, out, 5, &err), MX_OK, "%s", err.message);
  const float *fa = out[0].data, *fb = out[1].data, *fc = out[2].data, *sa = out[3].data, *sc = out[4].data;
  /* Three swaps: a ends as b and b as a. */
  cr_assert(fa[0] == 3 && fa[1] == 4 && fb[0] == 1 && fb[1] == 2 && fc[0] == 5 && fc[1] == 6);
  cr_assert_eq(out[3].dims[0], 3);
  cr_assert(sa[0] == 1 && sa[2] == 3 && sa[4] == 1, "iteration k saw a = a, b, a");
  for (int i = 0; i < 6; i++) cr_assert_eq(sc[i], cv[i % 2]);
  for (int k = 0; k < 5; k++) mx_tensor_release(&out[k]);
  mx_graph_destroy(g);
}
