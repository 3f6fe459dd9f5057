/* Private header of the reduce CPU kernels: reduce.c (the Reduce* ops and the group's kernel
 * list) and reduce_arg.c (ArgMax, ArgMin, CumSum). Nothing else includes it. */
#ifndef MIXRT_KERNELS_REDUCE_IMPL_H
#define MIXRT_KERNELS_REDUCE_IMPL_H

#include "kernels/kernel.h"

extern const mx_kernel_def mx__kdef_ArgMax, mx__kdef_ArgMin, mx__kdef_CumSum;

#endif /* MIXRT_KERNELS_REDUCE_IMPL_H */
