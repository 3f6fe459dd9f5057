/* Op definitions of the tensor construction and scatter group: OneHot, Compress, Unique, Scatter, ScatterElements, EyeLike, ReverseSequence, TensorScatter. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_tensor[] = {
    NULL,
};
