/* The op groups the registry knows. Each array is NULL-terminated and lives in the file of the
 * same name: elementwise.c (unary/binary/variadic math, logic, comparisons, Cast, Where, Clip),
 * reduce.c (Reduce*, ArgMax/ArgMin, CumSum), nn.c (Softmax, LogSoftmax, LayerNormalization,
 * RMSNormalization, Gelu, Attention, RotaryEmbedding), linalg.c (MatMul, Gemm, Einsum),
 * shape.c (Shape, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Expand,
 * Tile, Identity, Dropout, Constant, ConstantOfShape, Range), index.c (Gather, GatherElements,
 * GatherND, ScatterND, Slice, Trilu, TopK, NonZero). */
#ifndef MIXRT_GRAPH_OPS_GROUPS_H
#define MIXRT_GRAPH_OPS_GROUPS_H

#include "graph/ops/op.h"

extern const mx_op_def *const mx__ops_elementwise[];
extern const mx_op_def *const mx__ops_reduce[];
extern const mx_op_def *const mx__ops_nn[];
extern const mx_op_def *const mx__ops_linalg[];
extern const mx_op_def *const mx__ops_shape[];
extern const mx_op_def *const mx__ops_index[];
extern const mx_op_def
    *const mx__ops_conv[]; /* conv.c: Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv, Col2Im */
extern const mx_op_def *const mx__ops_pool
    []; /* pool.c: MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool, MaxUnpool */
extern const mx_op_def *const mx__ops_norm
    []; /* norm.c: BatchNormalization, InstanceNormalization, GroupNormalization, LRN, LpNormalization, MeanVarianceNormalization */
extern const mx_op_def *const mx__ops_activation
    []; /* activation.c: Elu, Selu, Celu, LeakyRelu, PRelu, HardSigmoid, HardSwish, ThresholdedRelu, Softplus, Softsign, Shrink, Mish, Swish, Hardmax, inverse trig and hyperbolic functions, Round, IsNaN, IsInf, BitShift, Bitwise*, Det, CumProd */
extern const mx_op_def *const mx__ops_loss[]; /* loss.c: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss */
extern const mx_op_def *const mx__ops_resample
    []; /* resample.c: Resize, Upsample, GridSample, AffineGrid, RoiAlign, NonMaxSuppression, CenterCropPad, DepthToSpace, SpaceToDepth, Pad */
extern const mx_op_def *const mx__ops_tensor
    []; /* tensor.c: OneHot, Compress, Unique, Scatter, ScatterElements, EyeLike, ReverseSequence, TensorScatter */
extern const mx_op_def *const mx__ops_quant
    []; /* quant.c: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul */
extern const mx_op_def *const mx__ops_rnn[]; /* rnn.c: RNN, GRU, LSTM */
extern const mx_op_def *const
    mx__ops_signal[]; /* signal.c: DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix */
extern const mx_op_def
    *const mx__ops_llm[]; /* llm.c: SwiGLU, LinearAttention, FlexAttention, CausalConvWithState */
extern const mx_op_def *const mx__ops_random
    []; /* random.c: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli, Multinomial */
extern const mx_op_def *const mx__ops_control
    []; /* control.c: If, Loop, Scan, SequenceMap, Sequence*, SplitToSequence, ConcatFromSequence, Optional* */
extern const mx_op_def
    *const mx__ops_string[]; /* string.c: StringConcat, StringSplit, StringNormalizer, RegexFullMatch */
extern const mx_op_def *const mx__ops_ml
    []; /* ml.c (ai.onnx.ml): LabelEncoder, Binarizer, ArrayFeatureExtractor, TreeEnsemble; TfIdfVectorizer */
extern const mx_op_def
    *const mx__ops_training[]; /* training.c (ai.onnx.preview.training): Adagrad, Adam, Momentum */
extern const mx_op_def *const mx__ops_image[]; /* image.c: ImageDecoder */
extern const mx_op_def *const mx__ops_collective
    []; /* collective.c (domain "mixrt"): AllReduce, AllGather, ReduceScatter, Broadcast, Send, Recv */
extern const mx_op_def *const mx__ops_mixrt[]; /* mixrt_ops.c: PartitionedCall (domain "mixrt") */

#endif /* MIXRT_GRAPH_OPS_GROUPS_H */
