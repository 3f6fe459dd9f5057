/* Helpers of the rewrite-rule tests (test_fusion_*.c): graph building in a few calls, op counts,
 * rule hits, and a fused graph checked against the unfused one through the reference
 * interpreter on random inputs. */
#ifndef MIXRT_TESTS_GRAPH_SUPPORT_FUSION_H
#define MIXRT_TESTS_GRAPH_SUPPORT_FUSION_H

#include "graph/ir.h"
#include "mixrt/graph.h"

typedef void (*fz_builder)(mx_graph *g);

/* A graph input of the given dtype and dims (symbolic dims from mx_sym_named). */
mx_value_id fz_input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims);
/* A float32 constant of the given dims, data copied. */
mx_value_id fz_const(mx_graph *g, int32_t rank, const int64_t *dims, const float *data);
/* A constant of any dtype. */
mx_value_id fz_const_dt(mx_graph *g, mx_dtype dt, int32_t rank, const int64_t *dims, const void *data);
/* A float32 constant whose elements are a fixed pseudo-random function of their index. */
mx_value_id fz_weights(mx_graph *g, int32_t rank, const int64_t *dims, unsigned seed);
/* A 1-D int64 constant. */
mx_value_id fz_ints(mx_graph *g, size_t n, const int64_t *data);
/* The output of a new node. */
mx_value_id fz_op(mx_graph *g, const char *type, size_t n, const mx_value_id *in, const mx_attr *attrs,
                  size_t na);
#define FZ1(g, t, a)    fz_op(g, t, 1, (mx_value_id[]){a}, NULL, 0)
#define FZ2(g, t, a, b) fz_op(g, t, 2, (mx_value_id[]){a, b}, NULL, 0)
/* A Transpose with the given permutation. */
mx_value_id fz_transpose(mx_graph *g, mx_value_id x, size_t rank, const int64_t *perm);

/* Live nodes of op type `type` in g; with _deep, also in the subgraphs of its live nodes. */
size_t fz_count(const mx_graph *g, const char *type);
size_t fz_count_deep(const mx_graph *g, const char *type);
/* Hits of rule `rule` in report r. */
size_t fz_hits(const mx_fuse_report *r, const char *rule);

/* Builds the graph twice, optimizes both, fuses one with `passes`, and checks both give the
 * same outputs (rtol 1e-4, atol 1e-5; float16 within 1e-2) on random inputs whose run-time dims
 * are dims[i] for graph input i. Returns the fused graph (the caller destroys it) and its
 * report. */
mx_graph *fz_fuse_and_compare(fz_builder build, const char *passes, const int64_t (*dims)[MX_MAX_RANK],
                              mx_fuse_report *rep);

#endif /* MIXRT_TESTS_GRAPH_SUPPORT_FUSION_H */
