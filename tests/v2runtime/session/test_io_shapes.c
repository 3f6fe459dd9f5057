/* Structured input and output shapes: every dim of the llama decode step as a concrete size or
 * a symbolic expression, and the concrete output shapes for given input shapes or symbol
 * values, equal to what a run produces. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 }; /* the default llama: token ids, then past key and value of 2 layers */

static mx_session *llama_session(void) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

Test(session_io_shapes, dims_are_values_or_expressions) {
  mx_session *s = llama_session();
  cr_assert_eq(mx_session_symbol_count(s), 1);
  cr_assert_str_eq(mx_session_symbol_name(s, 0), "past_len");
  cr_assert_null(mx_session_symbol_name(s, 1));
  mx_io_dim d;
  cr_assert(mx_session_io_dim(s, false, 1, 0, &d));
  cr_assert_eq(d.kind, MX_IO_DIM_CONCRETE);
  cr_assert_eq(d.value, 1);
  cr_assert(mx_session_io_dim(s, false, 1, 2, &d));
  cr_assert_eq(d.kind, MX_IO_DIM_SYMBOLIC);
  cr_assert_eq(d.value, -1);
  cr_assert_eq(d.n_symbols, 1);
  cr_assert_str_eq(d.expression, "past_len");
  cr_assert(mx_session_io_dim(s, true, 1, 2, &d));
  cr_assert_eq(d.kind, MX_IO_DIM_SYMBOLIC);
  cr_assert_str_eq(d.expression, "past_len + 1");
  cr_assert(mx_session_io_dim(s, true, 0, 2, &d));
  cr_assert_eq(d.kind, MX_IO_DIM_CONCRETE);
  cr_assert_eq(d.value, 128);
  /* The printed shape stays. */
  mx_io_info info;
  cr_assert(mx_session_output_info(s, 1, &info));
  cr_assert_str_eq(info.shape, "[1, 2, past_len + 1, 16]");
  cr_assert_not(mx_session_io_dim(s, true, N_IO, 0, &d));
  cr_assert_not(mx_session_io_dim(s, true, 1, 4, &d));
  cr_assert_not(mx_session_io_dim(s, true, 1, -1, &d));
  cr_assert_not(mx_session_io_dim(NULL, true, 1, 0, &d));
  mx_session_destroy(s);
}

/* The shapes worked out beforehand equal a run's, for several past lengths, from input shapes
 * (by position and by name, data NULL) and from symbol values. */
Test(session_io_shapes, output_shapes_equal_a_run) {
  mx_session *s = llama_session();
  const int64_t pasts[] = {0, 1, 7, 64};
  for (size_t t = 0; t < sizeof pasts / sizeof pasts[0]; t++) {
    int64_t past = pasts[t];
    mx_tensor in[N_IO], out[N_IO];
    memset(out, 0, sizeof out);
    cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
    ((int64_t *)in[0].data)[0] = 1;
    for (int i = 1; i < N_IO; i++)
      cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, past, 16}, (uint64_t)i, &in[i]), MX_OK);
    cr_assert_eq(mx_session_run(s, in, N_IO, out, N_IO), MX_OK, "%s", mx_session_last_error(s));
    mx_tensor desc[N_IO];
    memcpy(desc, in, sizeof desc);
    for (int i = 0; i < N_IO; i++) desc[i].data = NULL;
    mx_tensor named[N_IO];
    for (int i = 0; i < N_IO; i++) {
      mx_io_info info;
      cr_assert(mx_session_input_info(s, (size_t)i, &info));
      named[N_IO - 1 - i] = desc[i];
      named[N_IO - 1 - i].name = info.name;
    }
    for (size_t k = 0; k < N_IO; k++) {
      int32_t rank = -1;
      int64_t dims[MX_MAX_RANK];
      const mx_tensor *sets[2] = {desc, named};
      for (int v = 0; v < 2; v++) {
        cr_assert_eq(mx_session_output_shape(s, sets[v], N_IO, k, &rank, dims), MX_OK, "%s",
                     mx_session_last_error(s));
        cr_assert_eq(rank, out[k].rank);
        for (int32_t d = 0; d < rank; d++)
          cr_assert_eq(dims[d], out[k].dims[d], "output %zu dim %d", k, (int)d);
      }
      const char *sym = "past_len";
      cr_assert_eq(mx_session_output_shape_for(s, &sym, &past, 1, k, &rank, dims), MX_OK, "%s",
                   mx_session_last_error(s));
      cr_assert_eq(rank, out[k].rank);
      for (int32_t d = 0; d < rank; d++) cr_assert_eq(dims[d], out[k].dims[d]);
    }
    for (int i = 0; i < N_IO; i++) {
      mx_tensor_release(&in[i]);
      mx_tensor_release(&out[i]);
    }
  }
  mx_session_destroy(s);
}

Test(session_io_shapes, refusals_name_the_cause) {
  mx_session *s = llama_session();
  int32_t rank;
  int64_t dims[MX_MAX_RANK];
  /* No value for the symbol. */
  cr_assert_eq(mx_session_output_shape_for(s, NULL, NULL, 0, 1, &rank, dims), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_session_last_error(s), "output 'present_key_0' dim 2 is 'past_len + 1'"), "%s",
            mx_session_last_error(s));
  /* The symbol output 0 does not need. */
  cr_assert_eq(mx_session_output_shape_for(s, NULL, NULL, 0, 0, &rank, dims), MX_OK, "%s",
               mx_session_last_error(s));
  cr_assert_eq(rank, 3);
  const char *bad = "seq";
  int64_t v = 3;
  cr_assert_eq(mx_session_output_shape_for(s, &bad, &v, 1, 1, &rank, dims), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_session_last_error(s), "no symbol named 'seq'"), "%s", mx_session_last_error(s));
  const char *sym = "past_len";
  cr_assert_eq(mx_session_output_shape_for(s, &sym, &v, 1, N_IO, &rank, dims), MX_ERR_INVALID_ARGUMENT);
  /* Inputs that disagree on past_len. */
  mx_tensor desc[N_IO];
  memset(desc, 0, sizeof desc);
  desc[0].dtype = MX_INT64;
  desc[0].rank = 2;
  desc[0].dims[0] = desc[0].dims[1] = 1;
  for (int i = 1; i < N_IO; i++) {
    desc[i].dtype = MX_FLOAT32;
    desc[i].rank = 4;
    int64_t d[4] = {1, 2, i == 3 ? 9 : 8, 16};
    memcpy(desc[i].dims, d, sizeof d);
  }
  cr_assert_eq(mx_session_output_shape(s, desc, N_IO, 1, &rank, dims), MX_ERR_SHAPE);
  cr_assert(strstr(mx_session_last_error(s), "past_len = 9, another input gave 8"), "%s",
            mx_session_last_error(s));
  desc[3].dims[2] = 8;
  cr_assert_eq(mx_session_output_shape(s, desc, N_IO, 1, &rank, dims), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(dims[2], 9);
  cr_assert_eq(mx_session_output_shape(s, desc, N_IO - 1, 1, &rank, dims), MX_ERR_INVALID_ARGUMENT);
  mx_session_destroy(s);
}
