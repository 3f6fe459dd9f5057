/* CPU kernels of the recurrent layers group: RNN, GRU, LSTM. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_rnn[] = {
    NULL,
};
