/* Params struct of the recurrent layers RNN, GRU and LSTM, as their CPU kernel reads it.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_RNN_PARAMS_H
#define MIXRT_GRAPH_OPS_RNN_PARAMS_H

#include <stdint.h>

/* Which layer the params describe (also fixes the gate count: 1, 3 or 4). */
enum { MX_RNN_SIMPLE = 0, MX_RNN_GRU = 1, MX_RNN_LSTM = 2 };

/* Direction attribute. */
enum { MX_RNN_FORWARD = 0, MX_RNN_REVERSE = 1, MX_RNN_BIDIRECTIONAL = 2 };

/* Activation functions the ONNX recurrent ops name in their `activations` attribute. */
enum {
  MX_RNN_ACT_SIGMOID = 0,
  MX_RNN_ACT_TANH,
  MX_RNN_ACT_RELU,
  MX_RNN_ACT_AFFINE,           /* alpha * x + beta */
  MX_RNN_ACT_LEAKY_RELU,       /* alpha */
  MX_RNN_ACT_THRESHOLDED_RELU, /* alpha */
  MX_RNN_ACT_SCALED_TANH,      /* alpha * tanh(beta * x) */
  MX_RNN_ACT_HARD_SIGMOID,     /* max(0, min(1, alpha * x + beta)) */
  MX_RNN_ACT_ELU,              /* alpha */
  MX_RNN_ACT_SOFTSIGN,
  MX_RNN_ACT_SOFTPLUS
};

/* Activations per direction: f (and g, h) in the order the spec lists them. */
#define MX_RNN_MAX_ACTS 3

typedef struct mx_rnn_params {
  int32_t kind;        /* MX_RNN_SIMPLE / GRU / LSTM */
  int32_t direction;   /* MX_RNN_FORWARD / REVERSE / BIDIRECTIONAL */
  int64_t hidden_size; /* 0 when the attribute is absent (taken from R) */
  int32_t layout;      /* 0: [seq, batch, ...]; 1: [batch, seq, ...] */
  int32_t has_clip;
  float clip;                      /* gate pre-activations are clipped to [-clip, clip] */
  int32_t input_forget;            /* LSTM: forget gate = 1 - input gate */
  int32_t linear_before_reset;     /* GRU: reset gate applied after the hidden GEMM */
  int32_t n_acts;                  /* activations per direction (1, 2 or 3) */
  int32_t act[2][MX_RNN_MAX_ACTS]; /* [direction][slot] MX_RNN_ACT_* */
  float alpha[2][MX_RNN_MAX_ACTS];
  float beta[2][MX_RNN_MAX_ACTS];
} mx_rnn_params;

#endif /* MIXRT_GRAPH_OPS_RNN_PARAMS_H */
