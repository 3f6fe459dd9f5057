/* CPU kernels of the pooling group: MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool, MaxUnpool. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_pool[] = {
    NULL,
};
