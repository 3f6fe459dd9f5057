/* Op definitions of the normalizations group: BatchNormalization, InstanceNormalization, GroupNormalization, LRN, LpNormalization, MeanVarianceNormalization. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_norm[] = {
    NULL,
};
