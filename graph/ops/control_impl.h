/* Private interface of the control-flow and sequence group (graph/ops/control.c, sequence.c). */
#ifndef MIXRT_GRAPH_OPS_CONTROL_IMPL_H
#define MIXRT_GRAPH_OPS_CONTROL_IMPL_H

#include "graph/ops/op.h"

extern const mx_op_def mx__op_sequence_construct, mx__op_sequence_empty, mx__op_sequence_insert,
    mx__op_sequence_at, mx__op_sequence_erase, mx__op_sequence_length, mx__op_split_to_sequence,
    mx__op_concat_from_sequence, mx__op_optional, mx__op_optional_has_element, mx__op_optional_get_element;

#endif /* MIXRT_GRAPH_OPS_CONTROL_IMPL_H */
