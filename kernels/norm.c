/* CPU kernels of the normalizations group: BatchNormalization, InstanceNormalization, GroupNormalization, LRN, LpNormalization, MeanVarianceNormalization. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_norm[] = {
    NULL,
};
