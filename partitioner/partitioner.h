/* What the stages after the partitioner (static and dynamic compilation, the V2 lowering, the
 * benchmarks) need to read a partitioned root graph: the names of the partition call op and its
 * attributes, small readers for a call node, and the phase timings of a partition.
 *
 * The call op itself (inference through its body) is defined in graph/ops/mixrt_ops.c; the
 * names below must match its schema. */
#ifndef MIXRT_PARTITIONER_H
#define MIXRT_PARTITIONER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "graph/ir.h"
#include "mixrt/partition.h"

#define MX_PART_CALL_OP           "PartitionedCall" /* op type of a partition call node */
#define MX_PART_DOMAIN            "mixrt"           /* its domain */
#define MX_PART_DOMAIN_VERSION    1                 /* opset version of the domain a root imports */
#define MX_PART_ATTR_BODY         "body"            /* GRAPH: the cluster's subgraph */
#define MX_PART_ATTR_UNKNOWN      "unknown"         /* INT: 0 KNOWN, 1 UNKNOWN */
#define MX_PART_ATTR_CONST_INPUTS "const_inputs"    /* INTS: call input positions fed by shared constants */

/* True when node n is a partition call. */
bool mx__part_is_call(const mx_node *n);
/* The call's subgraph (borrowed from the node), or NULL when n is not a call. */
mx_graph *mx__part_call_body(const mx_node *n);
/* True when the call runs an UNKNOWN cluster. */
bool mx__part_call_is_unknown(const mx_node *n);
/* True when call input `index` is a shared constant (its data never changes). */
bool mx__part_call_input_is_const(const mx_node *n, uint32_t index);

/* --- part_control.c: control nodes as partition calls of their own ---------------------- */

/* True when node nd is control flow: an op running subgraphs (If, Loop, Scan, SequenceMap). */
bool mx__part_is_control(const mx_node *nd);
/* True when a control node of g takes and gives tensors only (sequences, optionals and strings
 * keep the reference interpreter). */
bool mx__part_control_wrappable(const mx_graph *g, const mx_node *nd);
/* Replaces every root-level control node of g by an UNKNOWN PartitionedCall whose body holds
 * the node alone and whose inputs are the node's inputs plus every value its bodies capture by
 * name (so the partitioner and the executors see every edge); the call keeps the node's name
 * and output values. Re-infers g when anything changed; *wrapped (optional) gets the count. */
MX_MUST_USE mx_status mx__part_wrap_control(mx_graph *g, size_t *wrapped, mx_error *err);
/* True when call node nd is such a wrapper (an UNKNOWN call whose body is one control node). */
bool mx__part_is_control_call(const mx_node *nd);
/* The control node inside a wrapper call (borrowed), or NULL. */
const mx_node *mx__part_control_node(const mx_node *call);
/* Prints the nesting under wrapper call `call`: the control node, each of its subgraphs (node
 * count, first ops, captures) and the control nodes inside them, recursively; lines indented by
 * 2 * depth. Nothing when call is not a wrapper. */
void mx__part_dump_control_text(FILE *out, const mx_partition *p, const mx_node *call, int depth);
/* The same nesting as one JSON object ({"op", "name", "subgraphs": [{"attribute", "graph",
 * "nodes", "inputs", "outputs", "captures", "control": [...]}]}). */
void mx__part_dump_control_json(FILE *out, const mx_partition *p, const mx_node *call);

/* --- part_control_body.c: a control node's body as a root graph of its own --------------- */

/* A deep copy of body (an If branch, a Loop or Scan body) as a root graph: body's inputs, then
 * one input per value it (or a graph nested in it) reads from the enclosing graphs, under the
 * same name (*n_captures of them); nested subgraphs copied too. The caller owns *out. */
MX_MUST_USE mx_status mx__part_body_standalone(const mx_graph *body, mx_graph **out, size_t *n_captures,
                                               mx_error *err);
/* True when body holds nodes and (with the graphs nested in it) moves tensors only, so its copy
 * can be compiled like a root graph; otherwise false with why saying what keeps it in the
 * interpreter (no nodes to run, or the value that is a sequence, optional or strings). */
bool mx__part_body_compilable(const mx_graph *body, char *why, size_t cap);
/* How body partitions as a program of its own under p's options (what a session compiles and
 * runs on each pass of the body): one line per KNOWN / UNKNOWN cluster with its first nodes
 * and, for UNKNOWN, the reason; or why it stays with the interpreter. Lines indented by depth. */
void mx__part_dump_body_text(FILE *out, const mx_partition *p, const mx_graph *body, int depth);
/* The same as a JSON object: {"compiled": true, "clusters": [{"id", "type", "ops", "nodes",
 * "reason"}]} or {"compiled": false, "reason": "..."}. */
void mx__part_dump_body_json(FILE *out, const mx_partition *p, const mx_graph *body);
/* One line: "1 KNOWN (4 ops), 0 UNKNOWN (0 ops)" or "interpreter: <why>". */
void mx__part_body_summary(const mx_partition *p, const mx_graph *body, char *buf, size_t cap);

/* Time of each phase of one mx_partition_create, in nanoseconds: wall clock, and CPU time of
 * the calling thread (which does not grow when other jobs share the machine). */
typedef struct mx__part_timings {
  uint64_t mark_ns, mark_cpu_ns;   /* topological order and unknown marking */
  uint64_t merge_ns, merge_cpu_ns; /* cluster building and merging */
  uint64_t place_ns, place_cpu_ns; /* final clusters, constant placement, boundary values */
  uint64_t build_ns, build_cpu_ns; /* root graph and subgraphs */
} mx__part_timings;

void mx__partition_timings(const mx_partition *p, mx__part_timings *out);

#endif /* MIXRT_PARTITIONER_H */
