/* Op definitions of the signal processing group: DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_signal[] = {
    NULL,
};
