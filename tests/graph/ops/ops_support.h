/* Shared helpers of the op-inference tests (tests/graph/ops/test_*.c): one graph under construction
 * per test (G, with its symbol table T), builders that add inputs, constants and nodes to it and
 * fail the test when the builder API refuses, and checks of what mx_graph_infer concluded
 * (dtypes, printed shapes, symbolic values, error statuses and messages).
 *
 * Each test file opens the graph in its suite's .init (mxt_ops_setup, with the graph's name)
 * and closes it in .fini (mxt_ops_teardown). The short names (S, op, input, ...) are the tests'
 * vocabulary; they are shared by this folder's executable only. */
#ifndef MIXRT_TESTS_OPS_SUPPORT_H
#define MIXRT_TESTS_OPS_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/ir.h"
#include "mixrt/graph.h"

extern mx_graph *G;  /* the graph the current test builds (owned by the fixture) */
extern mx_symtab *T; /* G's symbol table */

/* Creates G (named `name`) and sets T; the suites' .init. */
void mxt_ops_setup(const char *name);
/* Destroys G; the suites' .fini. */
void mxt_ops_teardown(void);

/* --- dims and shapes -------------------------------------------------------------------------- */

mx_dim S(const char *name); /* the named symbol */
mx_dim C(int64_t v);        /* the concrete dim v */

mx_shape shp(int32_t rank, const mx_dim *dims);
#define SHAPE(...) shp((int32_t)(sizeof((mx_dim[]){__VA_ARGS__}) / sizeof(mx_dim)), (mx_dim[]){__VA_ARGS__})
extern const mx_shape SCALAR; /* rank 0 */

/* --- building --------------------------------------------------------------------------------- */

mx_value_id input(const char *name, mx_dtype dt, mx_shape s);
mx_value_id input_unknown_rank(const char *name, mx_dtype dt);
/* A graph input of dtype dt whose symbolic value is sv (static storage): 1-D of n elements, or
 * a scalar (one element) when n < 0. */
mx_value_id input_sv(const char *name, mx_dtype dt, int32_t n, mx_dim *sv);

/* An int64 constant of the given dims; data is copied. */
mx_value_id const_i64(const char *name, int32_t rank, const int64_t *dims, const int64_t *data);
#define CONST_1D(name, ...)                                                                      \
  const_i64(name, 1, (int64_t[]){(int64_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))}, \
            (int64_t[]){__VA_ARGS__})
/* A rank-0 constant of dtype dt (float32, float64, int32; any other dtype is stored as int64). */
mx_value_id const_scalar(const char *name, mx_dtype dt, double v);

/* A single-output node; returns its output. */
mx_value_id op(const char *type, const mx_value_id *in, size_t n, const mx_attr *attrs, size_t na);
/* A node with n_out outputs written to outs. */
void op_multi(const char *type, const mx_value_id *in, size_t n, const mx_attr *attrs, size_t na,
              mx_value_id *outs, size_t n_out);

/* --- inference and its results ---------------------------------------------------------------- */

void infer_ok(void);
/* Inference fails with status want and, when needle is not NULL, a message containing it. */
void infer_fails(mx_status want, const char *needle);

/* v has dtype dt and shape want: the same printed shape, rank and dims. */
void expect_shape(mx_value_id v, mx_dtype dt, mx_shape want);
/* v has dtype dt and its shape prints as want. */
void expect_shape_str(mx_value_id v, mx_dtype dt, const char *want);
mx_shape shape_of(mx_value_id v);

/* Asserts that v's symbolic value is exactly want[0..n) (MX_DIM_UNKNOWN entries included). */
void expect_sv(mx_value_id v, int32_t n, const mx_dim *want);
#define EXPECT_SV(v, ...) \
  expect_sv(v, (int32_t)(sizeof((mx_dim[]){__VA_ARGS__}) / sizeof(mx_dim)), (mx_dim[]){__VA_ARGS__})
void expect_no_sv(mx_value_id v);

/* True when d is a symbolic expression (a fresh symbol, say), neither concrete nor unknown. */
bool is_expr(mx_dim d);

#endif /* MIXRT_TESTS_OPS_SUPPORT_H */
