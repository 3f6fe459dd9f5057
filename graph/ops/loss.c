/* Op definitions of the losses group: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_loss[] = {
    NULL,
};
