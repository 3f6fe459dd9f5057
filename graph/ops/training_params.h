/* Params of the ai.onnx.preview.training optimizers (graph/ops/training.c, kernels/training.c). */
#ifndef MIXRT_GRAPH_OPS_TRAINING_PARAMS_H
#define MIXRT_GRAPH_OPS_TRAINING_PARAMS_H

#include <stdint.h>

typedef struct mx_optimizer_params {
  float alpha, beta;           /* Adam: moment decays; Momentum: v decay and gradient scale */
  float epsilon;               /* Adagrad, Adam */
  float decay_factor;          /* Adagrad: learning-rate decay over T */
  float norm_coefficient;      /* L2 term added to the gradient */
  float norm_coefficient_post; /* Adam: weight shrink after the step */
  int32_t nesterov;            /* Momentum: mode "nesterov" (1) or "standard" (0) */
  int32_t groups;              /* tensors optimized: (inputs - 2) / states per tensor */
} mx_optimizer_params;

#endif /* MIXRT_GRAPH_OPS_TRAINING_PARAMS_H */
