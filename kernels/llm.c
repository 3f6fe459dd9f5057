/* CPU kernels of the LLM building blocks group: SwiGLU, LinearAttention, FlexAttention, CausalConvWithState. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_llm[] = {
    NULL,
};
