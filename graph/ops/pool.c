/* Op definitions of the pooling group: MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool, MaxUnpool. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_pool[] = {
    NULL,
};
