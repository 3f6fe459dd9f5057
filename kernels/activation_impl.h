/* Private header of the activation-group CPU kernels: activation.c (the pointwise ops and the
 * group's kernel list), activation_binary.c (PRelu, Bitwise*, BitShift) and activation_axis.c
 * (Hardmax, CumProd, Det). Nothing else includes it. */
#ifndef MIXRT_KERNELS_ACTIVATION_IMPL_H
#define MIXRT_KERNELS_ACTIVATION_IMPL_H

#include "kernels/kernel.h"

extern const mx_kernel_def mx__kdef_PRelu, mx__kdef_BitwiseAnd, mx__kdef_BitwiseOr, mx__kdef_BitwiseXor,
    mx__kdef_BitShift;
extern const mx_kernel_def mx__kdef_Hardmax, mx__kdef_CumProd, mx__kdef_Det;

#endif /* MIXRT_KERNELS_ACTIVATION_IMPL_H */
