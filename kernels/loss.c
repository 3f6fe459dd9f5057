/* CPU kernels of the losses group: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_loss[] = {
    NULL,
};
