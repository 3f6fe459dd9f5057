/* Op definitions of the LLM building blocks group: SwiGLU, LinearAttention, FlexAttention, CausalConvWithState. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_llm[] = {
    NULL,
};
