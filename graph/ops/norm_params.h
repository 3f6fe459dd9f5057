/* Params structs of the normalization ops (BatchNormalization, InstanceNormalization,
 * GroupNormalization, LRN, LpNormalization, MeanVarianceNormalization) and of the losses
 * (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), as their CPU kernels read them.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_NORM_PARAMS_H
#define MIXRT_GRAPH_OPS_NORM_PARAMS_H

#include <stdint.h>

/* BatchNormalization. Inference: y = (x - mean) / sqrt(var + epsilon) * scale + bias per
 * channel (what a fusion pass folds into the weights of a preceding Conv). Training: the
 * statistics come from the batch and the running ones are blended with momentum. */
typedef struct mx_batchnorm_params {
  float epsilon;
  float momentum;        /* running = running * momentum + batch * (1 - momentum) */
  int32_t training_mode; /* 1: batch statistics, running_mean / running_var outputs */
  int32_t spatial;       /* opset < 9 spatial=0: scale/bias/mean/var have X's dims after N */
} mx_batchnorm_params;

/* InstanceNormalization and GroupNormalization (InstanceNormalization is the case of one
 * group per channel). */
typedef struct mx_groupnorm_params {
  float epsilon;
  int32_t num_groups;       /* 0 for InstanceNormalization: one group per channel */
  int32_t per_group_affine; /* GroupNormalization opset 18: scale/bias hold one value per group */
  int32_t stash_type;       /* ONNX dtype code of the statistics (1: float32, 11: float64, ...) */
} mx_groupnorm_params;

typedef struct mx_lrn_params {
  float alpha, beta, bias;
  int32_t size; /* channels of the window (>= 1) */
} mx_lrn_params;

typedef struct mx_lpnorm_params {
  int64_t axis;     /* as given (may be negative) */
  int32_t p;        /* 1 or 2 */
  int32_t reserved; /* 0: keeps the struct free of padding */
} mx_lpnorm_params;

/* MeanVarianceNormalization: y = (x - mean) / (sqrt(variance) + 1e-9) over the given axes. */
typedef struct mx_mvn_params {
  int64_t axes[8]; /* as given (may be negative); MX_MAX_RANK entries at most */
  int32_t n_axes;
  int32_t reserved; /* 0: keeps the struct free of padding */
} mx_mvn_params;

/* Loss reductions (the `reduction` attribute). */
enum { MX_LOSS_NONE = 0, MX_LOSS_SUM = 1, MX_LOSS_MEAN = 2 };

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. */
typedef struct mx_loss_params {
  int64_t ignore_index; /* meaningful when has_ignore_index */
  int32_t has_ignore_index;
  int32_t reduction; /* MX_LOSS_* */
} mx_loss_params;

#endif /* MIXRT_GRAPH_OPS_NORM_PARAMS_H */
