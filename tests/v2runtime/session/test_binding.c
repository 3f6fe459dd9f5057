/* Inputs and outputs matched by name: every order of the named inputs of the Llama decode step
 * (and a few orders of its outputs) gives exactly the outputs of the model's own order; a name
 * the model does not have is refused wherever it stands, the first position included, and so
 * is a name given twice. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 }; /* the default llama: token ids, then past key and value of 2 layers */

typedef struct decode_case {
  mx_session *s;
  mx_tensor in[N_IO];   /* in the model's order, named */
  mx_tensor want[N_IO]; /* the outputs of a run in the model's order */
  const char *out_names[N_IO];
} decode_case;

static void setup_case(decode_case *c) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  c->s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(c->s, g), MX_OK, "%s", mx_session_last_error(c->s));
  cr_assert_eq(mx_session_input_count(c->s), N_IO);
  cr_assert_eq(mx_session_output_count(c->s), N_IO);
  int64_t hd = cfg.hidden / cfg.heads;
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &c->in[0]), MX_OK);
  ((int64_t *)c->in[0].data)[0] = 7;
  for (size_t i = 1; i < N_IO; i++)
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, 3, hd}, 11 + i, &c->in[i]),
                 MX_OK);
  for (size_t i = 0; i < N_IO; i++) {
    mx_io_info info;
    cr_assert(mx_session_input_info(c->s, i, &info));
    c->in[i].name = info.name;
    cr_assert(mx_session_output_info(c->s, i, &info));
    c->out_names[i] = info.name;
  }
  memset(c->want, 0, sizeof c->want);
  for (size_t i = 0; i < N_IO; i++) c->want[i].name = c->out_names[i];
  cr_assert_eq(mx_session_run(c->s, c->in, N_IO, c->want, N_IO), MX_OK, "%s", mx_session_last_error(c->s));
}

static void teardown_case(decode_case *c) {
  for (size_t i = 0; i < N_IO; i++) {
    c->in[i].name = NULL;
    mx_tensor_release(&c->in[i]);
    mx_tensor_release(&c->want[i]);
  }
  mx_session_destroy(c->s);
}

/* Runs with inputs in order perm_in and outputs in order perm_out; checks every output. */
static void run_permuted(decode_case *c, const int *perm_in, const int *perm_out) {
  mx_tensor in[N_IO], out[N_IO];
  memset(out, 0, sizeof out);
  for (int i = 0; i < N_IO; i++) {
    in[i] = c->in[perm_in[i]];
    out[i].name = c->out_names[perm_out[i]];
  }
  cr_assert_eq(mx_session_run(c->s, in, N_IO, out, N_IO), MX_OK, "inputs %d %d %d %d %d: %s", perm_in[0],
               perm_in[1], perm_in[2], perm_in[3], perm_in[4], mx_session_last_error(c->s));
  for (int i = 0; i < N_IO; i++) {
    char why[256];
    cr_assert(mxs_same(&out[i], &c->want[perm_out[i]], why, sizeof why), "output '%s': %s", out[i].name, why);
    mx_tensor_release(&out[i]);
  }
}

/* Next permutation in lexicographic order; false after the last. */
static bool next_perm(int *p, int n) {
  int i = n - 2;
  while (i >= 0 && p[i] >= p[i + 1]) i--;
  if (i < 0) return false;
  int j = n - 1;
  while (p[j] <= p[i]) j--;
  int t = p[i];
  p[i] = p[j];
  p[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) t = p[a], p[a] = p[b], p[b] = t;
  return true;
}

Test(session_binding, every_input_order_gives_the_same_outputs) {
  decode_case c;
  setup_case(&c);
  int perm[N_IO] = {0, 1, 2, 3, 4}, same[N_IO] = {0, 1, 2, 3, 4};
  int n = 0;
  do {
    run_permuted(&c, perm, same);
    n++;
  } while (next_perm(perm, N_IO));
  cr_assert_eq(n, 120);
  teardown_case(&c);
}

Test(session_binding, outputs_in_any_order) {
  decode_case c;
  setup_case(&c);
  int same[N_IO] = {0, 1, 2, 3, 4};
  int orders[][N_IO] = {{1, 0, 2, 3, 4}, {4, 2, 0, 3, 1}, {4, 3, 2, 1, 0}, {2, 3, 4, 0, 1}};
  for (size_t k = 0; k < sizeof orders / sizeof orders[0]; k++) {
    run_permuted(&c, same, orders[k]);
    run_permuted(&c, orders[k], orders[k]);
  }
  teardown_case(&c);
}

Test(session_binding, unknown_or_repeated_names_are_refused) {
  decode_case c;
  setup_case(&c);
  for (int pos = 0; pos < N_IO; pos++) {
    mx_tensor in[N_IO], out[N_IO];
    memset(out, 0, sizeof out);
    for (int i = 0; i < N_IO; i++) in[i] = c.in[i], out[i].name = c.out_names[i];
    in[pos].name = "no_such_input";
    cr_assert_eq(mx_session_run(c.s, in, N_IO, out, N_IO), MX_ERR_NOT_FOUND, "position %d", pos);
    cr_assert(strstr(mx_session_last_error(c.s), "no input named 'no_such_input'"), "%s",
              mx_session_last_error(c.s));
    in[pos].name = c.in[(pos + 1) % N_IO].name;
    cr_assert_eq(mx_session_run(c.s, in, N_IO, out, N_IO), MX_ERR_INVALID_ARGUMENT, "position %d", pos);
    cr_assert(strstr(mx_session_last_error(c.s), "given twice"), "%s", mx_session_last_error(c.s));
    in[pos].name = c.in[pos].name;
    out[pos].name = "no_such_output";
    cr_assert_eq(mx_session_run(c.s, in, N_IO, out, N_IO), MX_ERR_NOT_FOUND, "output position %d", pos);
    cr_assert(strstr(mx_session_last_error(c.s), "no output named 'no_such_output'"));
  }
  /* The session still runs after the refusals. */
  int same[N_IO] = {0, 1, 2, 3, 4};
  run_permuted(&c, same, same);
  teardown_case(&c);
}
