/* The toy greedy decoder of control_support.h: one step as a model, and CTL_DECODE_STEPS steps
 * inside one Loop, so suites can check that the Loop's tokens equal separate steps. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "control_support.h"

/* The weights: an embedding [VOCAB, HIDDEN] and an output projection [HIDDEN, VOCAB], fixed so
 * that the greedy tokens change from step to step. The graph's constants copy them. */
static void decode_weights(float *emb, float *proj) {
  for (int v = 0; v < CTL_DECODE_VOCAB; v++)
    for (int h = 0; h < CTL_DECODE_HIDDEN; h++) {
      emb[v * CTL_DECODE_HIDDEN + h] = sinf(1.7f * (float)v + 0.9f * (float)h + 0.3f);
      proj[h * CTL_DECODE_VOCAB + v] = cosf(2.3f * (float)h + 1.1f * (float)v);
    }
}

/* One decode step in graph g: token [1] int64 and past [p, HIDDEN] give the next token [1]
 * (ArgMax of tanh(sum of the cache rows) x proj) and present = past with the token's embedding
 * appended. */
static void decode_step(mx_graph *g, mx_value_id token, mx_value_id past, mx_value_id *next,
                        mx_value_id *present) {
  float emb[CTL_DECODE_VOCAB * CTL_DECODE_HIDDEN], proj[CTL_DECODE_HIDDEN * CTL_DECODE_VOCAB];
  decode_weights(emb, proj);
  int64_t axes0 = 0;
  mx_value_id e = ctl_constant(g, "emb", MX_FLOAT32, 2, (int64_t[]){CTL_DECODE_VOCAB, CTL_DECODE_HIDDEN}, emb);
  mx_value_id w = ctl_constant(g, "proj", MX_FLOAT32, 2, (int64_t[]){CTL_DECODE_HIDDEN, CTL_DECODE_VOCAB}, proj);
  mx_value_id ax = ctl_constant(g, "axes0", MX_INT64, 1, (int64_t[]){1}, &axes0);
  mx_value_id h = ctl_op(g, "Gather", (mx_value_id[]){e, token}, 2);
  mx_attr cat = mx_attr_int("axis", 0);
  ctl_node(g, "Concat", "append", (mx_value_id[]){past, h}, 2, &cat, 1, present, 1);
  mx_value_id sum = ctl_op(g, "ReduceSum", (mx_value_id[]){*present, ax}, 2);
  mx_value_id logits = ctl_op(g, "MatMul", (mx_value_id[]){ctl_op(g, "Tanh", &sum, 1), w}, 2);
  mx_attr am[] = {mx_attr_int("axis", 1), mx_attr_int("keepdims", 0)};
  ctl_node(g, "ArgMax", "pick", &logits, 1, am, 2, next, 1);
}

static mx_value_id decode_input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id id;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &id), MX_OK, "%s", mx_graph_last_error(g));
  return id;
}

mx_graph *ctl_decode_step_model(void) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("decode_step", &g), MX_OK);
  mx_dim p = mx_sym_named(mx_graph_symtab(g), "past_len");
  mx_value_id tok = decode_input(g, "token", MX_INT64, 1, (mx_dim[]){1});
  mx_value_id past = decode_input(g, "past", MX_FLOAT32, 2, (mx_dim[]){p, CTL_DECODE_HIDDEN});
  mx_value_id next, present;
  decode_step(g, tok, past, &next, &present);
  cr_assert_eq(mx_graph_add_output(g, next), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, present), MX_OK);
  return g;
}

mx_graph *ctl_decode_loop_model(void) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("decode_loop", &g), MX_OK);
  mx_value_id m = ctl_iconst(g, "steps", CTL_DECODE_STEPS);
  mx_value_id tok0 = decode_input(g, "token", MX_INT64, 1, (mx_dim[]){1});
  mx_value_id past0 = decode_input(g, "past", MX_FLOAT32, 2, (mx_dim[]){1, CTL_DECODE_HIDDEN});
  mx_graph *body = ctl_sub(g, "body");
  decode_input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = decode_input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id tok = decode_input(body, "tok_in", MX_INT64, 1, (mx_dim[]){1});
  mx_value_id past = decode_input(body, "past_in", MX_FLOAT32, 2, (mx_dim[]){MX_DIM_UNKNOWN, CTL_DECODE_HIDDEN});
  mx_value_id next, present;
  decode_step(body, tok, past, &next, &present);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, next), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, present), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &next, 1)), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id outs[3];
  ctl_node(g, "Loop", "generate", (mx_value_id[]){m, MX_NO_VALUE, tok0, past0}, 4, &a, 1, outs, 3);
  for (int k = 0; k < 3; k++) cr_assert_eq(mx_graph_add_output(g, outs[k]), MX_OK);
  return g;
}

void ctl_decode_separate_steps(mx_session *step, int64_t tok0, const float *past0, int64_t *tokens,
                               mx_tensor *past) {
  int64_t tok = tok0;
  memset(past, 0, sizeof *past);
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 2, (int64_t[]){1, CTL_DECODE_HIDDEN}, past), MX_OK);
  memcpy(past->data, past0, CTL_DECODE_HIDDEN * sizeof *past0);
  for (int i = 0; i < CTL_DECODE_STEPS; i++) {
    mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &tok}, *past};
    mx_tensor out[2];
    memset(out, 0, sizeof out);
    cr_assert_eq(mx_session_run(step, in, 2, out, 2), MX_OK, "step %d: %s", i, mx_session_last_error(step));
    tok = tokens[i] = ((const int64_t *)out[0].data)[0];
    cr_assert(tok >= 0 && tok < CTL_DECODE_VOCAB);
    mx_tensor_release(&out[0]);
    mx_tensor_release(past);
    *past = out[1];
    cr_assert_eq(past->rank, 2);
    cr_assert_eq(past->dims[0], i + 2, "the cache grows by one row per step");
  }
}
