/* Kernel groups, one NULL-terminated array per file, mirroring graph/ops/groups.h:
 * elementwise.c, reduce.c, nn.c, linalg.c, shape.c, index.c, and the families: conv.c, pool.c, norm.c, activation.c, loss.c, resample.c, tensor.c, quant.c, rnn.c, signal.c, llm.c, random.c. */
#ifndef MIXRT_KERNELS_GROUPS_H
#define MIXRT_KERNELS_GROUPS_H

#include "kernels/kernel.h"

extern const mx_kernel_def *const mx__kernels_elementwise[];
extern const mx_kernel_def *const mx__kernels_reduce[];
extern const mx_kernel_def *const mx__kernels_nn[];
extern const mx_kernel_def *const mx__kernels_linalg[];
extern const mx_kernel_def *const mx__kernels_shape[];
extern const mx_kernel_def *const mx__kernels_index[];

extern const mx_kernel_def *const mx__kernels_conv[];       /* conv.c */
extern const mx_kernel_def *const mx__kernels_pool[];       /* pool.c */
extern const mx_kernel_def *const mx__kernels_norm[];       /* norm.c */
extern const mx_kernel_def *const mx__kernels_activation[]; /* activation.c */
extern const mx_kernel_def *const mx__kernels_loss[];       /* loss.c */
extern const mx_kernel_def *const mx__kernels_resample[];   /* resample.c */
extern const mx_kernel_def *const mx__kernels_tensor[];     /* tensor.c */
extern const mx_kernel_def *const mx__kernels_quant[];      /* quant.c */
extern const mx_kernel_def *const mx__kernels_rnn[];        /* rnn.c */
extern const mx_kernel_def *const mx__kernels_signal[];     /* signal.c */
extern const mx_kernel_def *const mx__kernels_llm[];        /* llm.c */
extern const mx_kernel_def *const mx__kernels_random[];     /* random.c */
extern const mx_kernel_def *const mx__kernels_string[];     /* string.c */
extern const mx_kernel_def *const mx__kernels_ml[];         /* ml.c */
extern const mx_kernel_def *const mx__kernels_training[];   /* training.c */
extern const mx_kernel_def *const mx__kernels_image[];      /* image.c */
extern const mx_kernel_def *const mx__kernels_collective[]; /* collective.c (domain "mixrt") */

#endif /* MIXRT_KERNELS_GROUPS_H */
