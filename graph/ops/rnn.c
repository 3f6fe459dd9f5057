/* Op definitions of the recurrent layers group: RNN, GRU, LSTM. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_rnn[] = {
    NULL,
};
