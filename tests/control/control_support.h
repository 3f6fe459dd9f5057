/* Graph-building helpers the control-flow suites share (support_build.c): each adds one thing
 * to a graph and fails the test, with the graph's last error, if mixrt refuses it. */
#ifndef MIXRT_TESTS_CONTROL_SUPPORT_H
#define MIXRT_TESTS_CONTROL_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "mixrt/graph.h"

/* A constant of dtype dt and the given dims (rank 0: a scalar; dims may then be NULL). */
mx_value_id ctl_constant(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                         const void *data);
/* A float32 [1] constant and an int64 scalar constant. */
mx_value_id ctl_fconst(mx_graph *g, const char *name, float v);
mx_value_id ctl_iconst(mx_graph *g, const char *name, int64_t v);
/* A one-output node without attributes. */
mx_value_id ctl_op(mx_graph *g, const char *type, const mx_value_id *ins, size_t n);
/* A named node with attributes and n_out outputs, written to outs. */
void ctl_node(mx_graph *g, const char *type, const char *name, const mx_value_id *ins, size_t n_in,
              const mx_attr *attrs, size_t n_attrs, mx_value_id *outs, size_t n_out);
/* A subgraph of parent (a branch or body) and a value it captures from the outer scope. */
mx_graph *ctl_sub(mx_graph *parent, const char *name);
mx_value_id ctl_outer(mx_graph *s, const char *name);

#endif /* MIXRT_TESTS_CONTROL_SUPPORT_H */
