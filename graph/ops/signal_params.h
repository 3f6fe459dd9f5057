/* Params structs of the signal processing ops: DFT, STFT, the window generators (HannWindow,
 * HammingWindow, BlackmanWindow) and MelWeightMatrix, as their CPU kernels read them.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_SIGNAL_PARAMS_H
#define MIXRT_GRAPH_OPS_SIGNAL_PARAMS_H

#include <stdint.h>

typedef struct mx_dft_params {
  int64_t axis;       /* the axis attribute (opset 17) or -2 (opset 20 without the input) */
  int32_t axis_input; /* opset 20: the axis comes from input 2 when it is given */
  int32_t inverse;
  int32_t onesided;
  int32_t reserved; /* always 0 */
} mx_dft_params;

typedef struct mx_stft_params {
  int32_t onesided;
  int32_t reserved; /* always 0 */
} mx_stft_params;

/* Which window a window op generates. */
enum { MX_WINDOW_HANN = 0, MX_WINDOW_HAMMING = 1, MX_WINDOW_BLACKMAN = 2 };

typedef struct mx_window_params {
  int32_t kind;            /* MX_WINDOW_* */
  int32_t periodic;        /* 1: a window of size + 1 points, the first size returned */
  int32_t output_datatype; /* ONNX dtype code of the output */
  int32_t reserved;        /* always 0 */
} mx_window_params;

typedef struct mx_mel_params {
  int32_t output_datatype; /* ONNX dtype code of the output */
  int32_t reserved;        /* always 0 */
} mx_mel_params;

#endif /* MIXRT_GRAPH_OPS_SIGNAL_PARAMS_H */
