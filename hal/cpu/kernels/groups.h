/* Kernel groups, one NULL-terminated array per file, mirroring graph/ops/groups.h:
 * elementwise.c, reduce.c, nn.c, linalg.c, shape.c, index.c. */
#ifndef MIXRT_HAL_CPU_KERNELS_GROUPS_H
#define MIXRT_HAL_CPU_KERNELS_GROUPS_H

#include "hal/cpu/kernels/kernel.h"

extern const mx_kernel_def *const mx__kernels_elementwise[];
extern const mx_kernel_def *const mx__kernels_reduce[];
extern const mx_kernel_def *const mx__kernels_nn[];
extern const mx_kernel_def *const mx__kernels_linalg[];
extern const mx_kernel_def *const mx__kernels_shape[];
extern const mx_kernel_def *const mx__kernels_index[];

#endif /* MIXRT_HAL_CPU_KERNELS_GROUPS_H */
