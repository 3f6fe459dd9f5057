/* Op definitions of the convolutions group: Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv, Col2Im. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_conv[] = {
    NULL,
};
