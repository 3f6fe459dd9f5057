/* CPU kernels of the quantization group: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_quant[] = {
    NULL,
};
