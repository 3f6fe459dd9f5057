/* `mixrt inspect M.mxm` on a model whose Loop body runs a Loop of its own: the control bodies
 * stored compiled are listed under their control node, the inner body under the outer one, each
 * with its own static plans, in the text output and nested the same way in the JSON; an If's
 * two branches are each named by their attribute (then_branch, else_branch). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/graph.h"
#include "mixrt/session.h"
#include "support/cli_run.h"
#include "support/json_check.h"

#define H 16

static float w_data[H * H], b_data[H];
static char out[1 << 16];

static mx_value_id input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static mx_value_id constant(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                            const void *data) {
  mx_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static mx_value_id op(mx_graph *g, const char *type, const mx_value_id *ins, size_t n) {
  mx_value_id y;
  cr_assert_eq(mx_graph_add_op(g, type, ins, n, NULL, 0, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

static mx_value_id outer(mx_graph *s, const char *name) {
  mx_value_id v;
  cr_assert_eq(mx_graph_add_outer(s, name, &v), MX_OK, "%s", mx_graph_last_error(s));
  return v;
}

/* Adds Loop `name` to g carrying h [1,H] through `body_name`: h = Tanh(h @ W + b) (W, b from the
 * root), or, nested, an inner Loop of two iterations followed by a Tanh of its own. */
static mx_value_id loop(mx_graph *g, const char *name, const char *body_name, mx_value_id trips,
                        mx_value_id cond, mx_value_id h0, bool nested) {
  mx_graph *body;
  cr_assert_eq(mx_graph_create_subgraph(g, body_name, &body), MX_OK);
  input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id h = input(body, "h", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id next;
  if (nested) {
    int64_t two = 2;
    mx_value_id m = constant(body, "inner_trips", MX_INT64, 0, NULL, &two);
    mx_value_id inner = loop(body, "inner", "inner_body", m, outer(body, "cond"), h, false);
    next = op(body, "Tanh", &inner, 1);
  } else {
    mx_value_id mm = op(body, "MatMul", (mx_value_id[]){h, outer(body, "W")}, 2);
    mx_value_id ad = op(body, "Add", (mx_value_id[]){mm, outer(body, "b")}, 2);
    next = op(body, "Tanh", &ad, 1);
  }
  cr_assert_eq(mx_graph_add_output(body, op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, next), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_node_desc d = {.op_type = "Loop",
                    .name = name,
                    .inputs = (mx_value_id[]){trips, cond, h0},
                    .n_inputs = 3,
                    .attrs = &a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  mx_value_id y;
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

/* Compiles the nested-Loop model in a session, runs it once (so its bodies are compiled) and
 * saves it to path. */
static void save_nested_loop(const char *path) {
  for (int i = 0; i < H * H; i++) w_data[i] = 0.02f * (float)((i * 7 % 11) - 5);
  for (int i = 0; i < H; i++) b_data[i] = 0.01f * (float)(i % 3);
  mx_graph *g;
  cr_assert_eq(mx_graph_create("nested", &g), MX_OK);
  mx_value_id trips = input(g, "trips", MX_INT64, 0, NULL);
  mx_value_id h0 = input(g, "h0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  uint8_t yes = 1;
  mx_value_id cond = constant(g, "cond", MX_BOOL, 0, NULL, &yes);
  constant(g, "W", MX_FLOAT32, 2, (int64_t[]){H, H}, w_data);
  constant(g, "b", MX_FLOAT32, 1, (int64_t[]){H}, b_data);
  cr_assert_eq(mx_graph_add_output(g, loop(g, "rnn", "rnn_body", trips, cond, h0, true)), MX_OK);

  mx_session_options o;
  mx_session_options_init(&o);
  o.executor = MX_EXECUTOR_SEQUENTIAL;
  o.streams = 1;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  int64_t m = 3;
  float h[H] = {0};
  mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 0, .data = &m},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h}};
  mx_tensor got = {0};
  cr_assert_eq(mx_session_run(s, in, 2, &got, 1), MX_OK, "%s", mx_session_last_error(s));
  mx_tensor_release(&got);
  cr_assert_eq(mx_session_save(s, path, NULL), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

Test(cli_inspect_bodies, stored_bodies_are_listed_under_their_control_node) {
  cr_assert(mxt_cli_available(), "build the mixrt program first");
  char path[] = "/tmp/mixrt_inspect_bodies_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  save_nested_loop(path);
  char args[256];

  snprintf(args, sizeof args, "inspect %s", path);
  cr_assert_eq(mxt_cli_run_stdout(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "(1 of the root, ") || strstr(out, "(0 of the root, "), "%s", out);
  cr_assert(strstr(out, "control bodies stored compiled: 2\n"), "%s", out);
  /* The outer body at depth 1, the inner one indented under it, after it. */
  const char *outer_line = strstr(out, "\n  Loop 'rnn' body 'rnn_body': ");
  const char *inner_line = strstr(out, "\n    Loop 'inner' body 'inner_body': ");
  cr_assert(outer_line && inner_line && outer_line < inner_line, "%s", out);
  /* The inner body (MatMul, Add, Tanh, Identity) runs as one static plan, listed under it. */
  cr_assert(strstr(inner_line, ": 1 static plan, "), "%s", out);
  const char *after_inner = strchr(inner_line + 1, '\n');
  cr_assert(after_inner && strncmp(after_inner, "\n      ", 7) == 0 && after_inner[7] != ' ',
            "the inner body's plan indented under it: %s", out);

  snprintf(args, sizeof args, "inspect %s --json", path);
  cr_assert_eq(mxt_cli_run_stdout(out, sizeof out, args), 0, "%s", out);
  char why[256];
  cr_assert(mxt_json_valid(out, why, sizeof why), "%s: %s", why, out);
  cr_assert(strstr(out, "\"static_plans_total\": "), "%s", out);
  const char *outer_obj =
      strstr(out, "\"bodies\": [{\"node\": \"rnn\", \"op\": \"Loop\", \"attribute\": \"body\"");
  cr_assert(outer_obj, "%s", out);
  const char *inner_obj =
      strstr(outer_obj,
             "\"bodies\": [{\"node\": \"inner\", \"op\": \"Loop\", \"attribute\": \"body\", \"body\": "
             "\"inner_body\", \"depth\": 2");
  cr_assert(inner_obj, "the inner body nested in the outer one: %s", out);
  cr_assert_eq(mxt_count(out, "\"node\": \"inner\""), 1, "%s", out);
  remove(path);
}

/* A branch of If: y = op_type(x @ W + b), W and b from the root. */
static mx_graph *branch(mx_graph *g, const char *name, const char *op_type) {
  mx_graph *s;
  cr_assert_eq(mx_graph_create_subgraph(g, name, &s), MX_OK);
  mx_value_id mm = op(s, "MatMul", (mx_value_id[]){outer(s, "x"), outer(s, "W")}, 2);
  mx_value_id ad = op(s, "Add", (mx_value_id[]){mm, outer(s, "b")}, 2);
  cr_assert_eq(mx_graph_add_output(s, op(s, op_type, &ad, 1)), MX_OK);
  return s;
}

Test(cli_inspect_bodies, if_branches_are_named_by_their_attribute) {
  cr_assert(mxt_cli_available(), "build the mixrt program first");
  for (int i = 0; i < H * H; i++) w_data[i] = 0.02f * (float)((i * 5 % 13) - 6);
  for (int i = 0; i < H; i++) b_data[i] = 0.01f * (float)(i % 4);
  mx_graph *g;
  cr_assert_eq(mx_graph_create("branches", &g), MX_OK);
  mx_value_id c = input(g, "c", MX_BOOL, 0, NULL);
  input(g, "x", MX_FLOAT32, 2, (mx_dim[]){1, H});
  constant(g, "W", MX_FLOAT32, 2, (int64_t[]){H, H}, w_data);
  constant(g, "b", MX_FLOAT32, 1, (int64_t[]){H}, b_data);
  mx_attr a[2] = {mx_attr_graph("then_branch", branch(g, "up", "Tanh")),
                  mx_attr_graph("else_branch", branch(g, "down", "Sigmoid"))};
  mx_node_desc d = {
      .op_type = "If", .name = "pick", .inputs = &c, .n_inputs = 1, .attrs = a, .n_attrs = 2, .n_outputs = 1};
  mx_value_id y;
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);

  mx_session_options o;
  mx_session_options_init(&o);
  o.executor = MX_EXECUTOR_SEQUENTIAL;
  o.streams = 1;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  float x[H] = {0};
  for (int pass = 0; pass < 2; pass++) {
    uint8_t cond = (uint8_t)pass;
    mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cond},
                       {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = x}};
    mx_tensor got = {0};
    cr_assert_eq(mx_session_run(s, in, 2, &got, 1), MX_OK, "%s", mx_session_last_error(s));
    mx_tensor_release(&got);
  }
  char path[] = "/tmp/mixrt_inspect_if_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(s, path, NULL), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);

  char args[256];
  snprintf(args, sizeof args, "inspect %s", path);
  cr_assert_eq(mxt_cli_run_stdout(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "control bodies stored compiled: 2\n"), "%s", out);
  cr_assert(strstr(out, "\n  If 'pick' then_branch 'up': 1 static plan, "), "%s", out);
  cr_assert(strstr(out, "\n  If 'pick' else_branch 'down': 1 static plan, "), "%s", out);
  snprintf(args, sizeof args, "inspect %s --json", path);
  cr_assert_eq(mxt_cli_run_stdout(out, sizeof out, args), 0, "%s", out);
  char why[256];
  cr_assert(mxt_json_valid(out, why, sizeof why), "%s: %s", why, out);
  cr_assert(strstr(out,
                   "{\"node\": \"pick\", \"op\": \"If\", \"attribute\": \"then_branch\", \"body\": \"up\", "
                   "\"depth\": 1"),
            "%s", out);
  remove(path);
}
