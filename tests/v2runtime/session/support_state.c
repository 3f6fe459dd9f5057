/* The default llama's decode loop as the state and binding tests drive it: a session over it,
 * the greedy token of a step's logits, and the copying path every binding is checked against
 * (host pasts, each step's presents fed back as the next pasts through mx_session_run). */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

mx_session *mxs_llama_session(int64_t static_min_ops) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, static_min_ops);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

int64_t mxs_argmax(const mx_tensor *t) {
  int64_t n = 0, best = 0;
  mx_tensor_numel(t, &n);
  const float *f = t->data;
  for (int64_t k = 1; k < n; k++)
    if (f[k] > f[best]) best = k;
  return best;
}

void mxs_copying_init(mxs_copying *c) {
  memset(c, 0, sizeof *c);
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &c->in[0]), MX_OK);
  for (int i = 1; i < MXS_LLAMA_IO; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, 2, 0, 16}, &c->in[i]), MX_OK);
}

void mxs_copying_step(mx_session *s, mxs_copying *c, int64_t token) {
  ((int64_t *)c->in[0].data)[0] = token;
  mx_tensor_release(&c->out[0]);
  memset(c->out, 0, sizeof c->out);
  cr_assert_eq(mx_session_run(s, c->in, MXS_LLAMA_IO, c->out, MXS_LLAMA_IO), MX_OK, "%s",
               mx_session_last_error(s));
  for (int i = 1; i < MXS_LLAMA_IO; i++) {
    mx_tensor_release(&c->in[i]);
    c->in[i] = c->out[i];
    c->in[i].name = NULL;
    memset(&c->out[i], 0, sizeof c->out[i]);
  }
}

void mxs_copying_free(mxs_copying *c) {
  for (int i = 0; i < MXS_LLAMA_IO; i++) {
    mx_tensor_release(&c->in[i]);
    mx_tensor_release(&c->out[i]);
  }
}
