/* Test helper: the rules by which the executor suites (dynamic_exec, static_exec, session) set
 * an ONNX node-test model aside instead of failing it.
 *
 * The static executor runs no control flow (If, Loop, Scan, SequenceMap: nodes with subgraphs)
 * and no sequence or optional value: in a session such nodes are UNKNOWN and run elsewhere, so
 * a static-executor suite skips every model holding one. The dynamic executor does not run them
 * yet either; its suite still tries such a model and counts a refusal (a plan, create or run
 * error, never a wrong result) as skipped. Sessions run such models (through the interpreter).
 *
 * String tensors are host only (mixrt/dtype.h): the reference interpreter runs them, and the
 * executors and sessions refuse them by design, so every executor suite skips a model holding
 * one. Every other model must pass. */
#ifndef MIXRT_TESTS_SUPPORT_CONTROL_RULE_H
#define MIXRT_TESTS_SUPPORT_CONTROL_RULE_H

#include <stdbool.h>
#include <stddef.h>

#include "mixrt/graph.h"

/* True when g (loaded, inferred or not) holds a node that runs subgraphs or takes or gives a
 * sequence / optional value, or a graph input or output that is not a tensor; why then names
 * the first such node or value (why may be NULL). */
bool mxt_needs_control(const mx_graph *g, char *why, size_t cap);

/* True when a value of g (graph input or output, node input or output) is a string tensor; why
 * then names it (why may be NULL). */
bool mxt_holds_strings(const mx_graph *g, char *why, size_t cap);

#endif /* MIXRT_TESTS_SUPPORT_CONTROL_RULE_H */
