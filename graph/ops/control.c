/* Control-flow group: the definitions of If, Loop, Scan and SequenceMap (ops that run
 * subgraphs held in GRAPH attributes) and the group's array, which also lists the sequence and
 * optional ops of sequence.c.
 *
 * The subgraph ops carry MX_OP_SUBGRAPH: their inference needs the node's subgraphs, which a
 * params struct cannot hold, so graph/subgraph.c infers them from the node, and
 * reference/control.c runs them by running the subgraphs. Their `infer` is never reached. */
#include <string.h>

#include "graph/ops/control_impl.h"
#include "graph/ops/control_params.h"

static mx_status subgraph_infer(mx_infer_ctx *ctx) {
  return mx__infer_fail(ctx, MX_ERR_INTERNAL, "subgraph ops are inferred from the node");
}

static mx_status copy_ints(const mx_parse_ctx *pc, const char *name, int64_t *out, int32_t *n) {
  size_t cnt = 0;
  mx_status st = mx__parse_ints(pc, name, out, MX_SCAN_MAX, &cnt);
  *n = (int32_t)cnt;
  return st;
}

static mx_status scan_parse(const mx_parse_ctx *pc, void *params) {
  mx_scan_params *p = params;
  memset(p, 0, sizeof *p);
  p->num_scan_inputs = mx__parse_int(pc, "num_scan_inputs");
  if (p->num_scan_inputs < 1)
    return mx__parse_fail(pc, "attribute 'num_scan_inputs' must be at least 1, not %lld",
                          (long long)p->num_scan_inputs);
  mx_status st =
      copy_ints(pc, pc->opset < 9 ? "directions" : "scan_input_directions", p->in_dir, &p->n_in_dir);
  if (st == MX_OK && pc->opset >= 9) st = copy_ints(pc, "scan_input_axes", p->in_axis, &p->n_in_axis);
  if (st == MX_OK && pc->opset >= 9) st = copy_ints(pc, "scan_output_directions", p->out_dir, &p->n_out_dir);
  if (st == MX_OK && pc->opset >= 9) st = copy_ints(pc, "scan_output_axes", p->out_axis, &p->n_out_axis);
  if (st != MX_OK) return st;
  if (p->n_in_dir && p->n_in_dir != p->num_scan_inputs)
    return mx__parse_fail(pc, "attribute '%s' has %d entries for %lld scan inputs",
                          pc->opset < 9 ? "directions" : "scan_input_directions", (int)p->n_in_dir,
                          (long long)p->num_scan_inputs);
  if (p->n_in_axis && p->n_in_axis != p->num_scan_inputs)
    return mx__parse_fail(pc, "attribute 'scan_input_axes' has %d entries for %lld scan inputs",
                          (int)p->n_in_axis, (long long)p->num_scan_inputs);
  for (int32_t i = 0; i < p->n_in_dir; i++)
    if (p->in_dir[i] != 0 && p->in_dir[i] != 1) return mx__parse_fail(pc, "scan directions must be 0 or 1");
  for (int32_t i = 0; i < p->n_out_dir; i++)
    if (p->out_dir[i] != 0 && p->out_dir[i] != 1) return mx__parse_fail(pc, "scan directions must be 0 or 1");
  return MX_OK;
}

static const mx_attr_spec if_attrs[] = {
    {.name = "then_branch", .type = MX_ATTR_GRAPH, .required = true},
    {.name = "else_branch", .type = MX_ATTR_GRAPH, .required = true},
    {0},
};
static const mx_attr_spec body_attrs[] = {{.name = "body", .type = MX_ATTR_GRAPH, .required = true}, {0}};
static const mx_attr_spec scan_attrs[] = {
    {.name = "body", .type = MX_ATTR_GRAPH, .required = true},
    {.name = "num_scan_inputs", .type = MX_ATTR_INT, .required = true},
    {.name = "directions", .type = MX_ATTR_INTS},
    {.name = "scan_input_directions", .type = MX_ATTR_INTS},
    {.name = "scan_output_directions", .type = MX_ATTR_INTS},
    {.name = "scan_input_axes", .type = MX_ATTR_INTS},
    {.name = "scan_output_axes", .type = MX_ATTR_INTS},
    {0},
};

static const mx_op_def mx__op_if = {.name = "If",
                                    .min_inputs = 1,
                                    .max_inputs = 1,
                                    .min_outputs = 1,
                                    .max_outputs = MX_VARIADIC,
                                    .flags = MX_OP_SUBGRAPH | MX_OP_ANY_KIND,
                                    .attrs = if_attrs,
                                    .infer = subgraph_infer};
static const mx_op_def mx__op_loop = {.name = "Loop",
                                      .min_inputs = 0,
                                      .max_inputs = MX_VARIADIC,
                                      .min_outputs = 0,
                                      .max_outputs = MX_VARIADIC,
                                      .flags = MX_OP_SUBGRAPH | MX_OP_ANY_KIND,
                                      .attrs = body_attrs,
                                      .infer = subgraph_infer};
static const mx_op_def mx__op_scan = {.name = "Scan",
                                      .min_inputs = 0,
                                      .max_inputs = MX_VARIADIC,
                                      .min_outputs = 0,
                                      .max_outputs = MX_VARIADIC,
                                      .flags = MX_OP_SUBGRAPH,
                                      .attrs = scan_attrs,
                                      .params_size = sizeof(mx_scan_params),
                                      .parse = scan_parse,
                                      .infer = subgraph_infer};
static const mx_op_def mx__op_sequence_map = {.name = "SequenceMap",
                                              .min_inputs = 1,
                                              .max_inputs = MX_VARIADIC,
                                              .min_outputs = 1,
                                              .max_outputs = MX_VARIADIC,
                                              .flags = MX_OP_SUBGRAPH | MX_OP_ANY_KIND,
                                              .attrs = body_attrs,
                                              .infer = subgraph_infer};

const mx_op_def *const mx__ops_control[] = {
    &mx__op_if,
    &mx__op_loop,
    &mx__op_scan,
    &mx__op_sequence_map,
    &mx__op_sequence_construct,
    &mx__op_sequence_empty,
    &mx__op_sequence_insert,
    &mx__op_sequence_at,
    &mx__op_sequence_erase,
    &mx__op_sequence_length,
    &mx__op_split_to_sequence,
    &mx__op_concat_from_sequence,
    &mx__op_optional,
    &mx__op_optional_has_element,
    &mx__op_optional_get_element,
    NULL,
};
