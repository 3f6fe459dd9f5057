/* The per-operator summary of `mixrt conformance --by-op`: each test's result counted under every
 * operator it uses (a test of Loop around Add counts for both). The operators of a test come from
 * the folder's MANIFEST.tsv when it has one (the upstream list: op types joined by '+', prefixed
 * "domain:" outside the default domain), else from the imported model's nodes and subgraphs. */
#ifndef MIXRT_TOOLS_CONFORMANCE_BY_OP_H
#define MIXRT_TOOLS_CONFORMANCE_BY_OP_H

#include <stddef.h>
#include <stdio.h>

typedef enum mx_conf_outcome { MX_CONF_PASSED, MX_CONF_FAILED, MX_CONF_SKIPPED } mx_conf_outcome;

typedef struct mx_conf_by_op mx_conf_by_op;

/* A tally for the tests of folder dir (reads dir/MANIFEST.tsv when present); NULL when out of
 * memory. */
mx_conf_by_op *mx_conf_by_op_create(const char *dir);
void mx_conf_by_op_destroy(mx_conf_by_op *t);
/* Counts test `name` (its folder is dir/name) with outcome under each of its operators. */
void mx_conf_by_op_add(mx_conf_by_op *t, const char *name, mx_conf_outcome outcome);
/* Prints the table, one operator a line, sorted by name: operator, tests, passed, failed, skipped. */
void mx_conf_by_op_print(const mx_conf_by_op *t, FILE *out);

#endif /* MIXRT_TOOLS_CONFORMANCE_BY_OP_H */
