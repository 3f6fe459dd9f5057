/* CPU kernels of the convolutions group: Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv, Col2Im. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_conv[] = {
    NULL,
};
