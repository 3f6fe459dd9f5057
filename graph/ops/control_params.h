/* Params structs of the control-flow and sequence group (graph/ops/control.c, sequence.c):
 * plain old data read by graph/subgraph.c and reference/control.c. The subgraphs themselves
 * stay on the node (GRAPH attributes), never in params. */
#ifndef MIXRT_GRAPH_OPS_CONTROL_PARAMS_H
#define MIXRT_GRAPH_OPS_CONTROL_PARAMS_H

#include <stdint.h>

/* Most scan inputs or outputs of one Scan node whose axes / directions are listed. */
#define MX_SCAN_MAX 32

/* Scan (opset 8: batched, 'directions'; opset 9+: unbatched, per-input axes). */
typedef struct mx_scan_params {
  int64_t num_scan_inputs;
  int64_t in_dir[MX_SCAN_MAX];  /* 0 forward, 1 reverse */
  int64_t in_axis[MX_SCAN_MAX]; /* as given (may be negative) */
  int64_t out_dir[MX_SCAN_MAX];
  int64_t out_axis[MX_SCAN_MAX];
  int32_t n_in_dir, n_in_axis, n_out_dir, n_out_axis;
} mx_scan_params;

/* SplitToSequence / ConcatFromSequence / SequenceEmpty / Optional share one small struct. */
typedef struct mx_seq_params {
  int64_t axis;
  int64_t keepdims;  /* SplitToSequence */
  int64_t new_axis;  /* ConcatFromSequence */
  int64_t type_code; /* Optional 'type' / SequenceEmpty 'dtype' (MX_TYPE_CODE) */
  int32_t has_type;
  int32_t reserved;
} mx_seq_params;

#endif /* MIXRT_GRAPH_OPS_CONTROL_PARAMS_H */
