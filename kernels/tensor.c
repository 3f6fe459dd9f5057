/* CPU kernels of the tensor construction and scatter group: OneHot, Compress, Unique, Scatter, ScatterElements, EyeLike, ReverseSequence, TensorScatter. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_tensor[] = {
    NULL,
};
