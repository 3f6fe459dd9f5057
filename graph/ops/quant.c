/* Op definitions of the quantization group: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_quant[] = {
    NULL,
};
