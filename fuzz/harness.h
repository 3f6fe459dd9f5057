/* The fuzz harnesses of mixrt: one function per libFuzzer target, shared by the fuzz programs
 * (fuzz_main.c, built with clang when MIXRT_FUZZ is on) and by the regression tests in
 * tests/reliability, which replay every kept input through the same function in the ordinary
 * and the sanitizer builds.
 *
 * Each harness takes arbitrary bytes and must return: a bad input is an error status inside,
 * never a crash, a sanitizer report, a leak or a hang. Properties a harness checks on top of
 * that (a session that refused an input still runs a good step and gets the same result as
 * before) abort with a message on stderr when they do not hold, so libFuzzer keeps the input.
 *
 * Targets:
 *   onnx         ONNX import from memory, mx_graph_optimize, partitioning; when all of that
 *                succeeds, compiling the model in a session and one step with zero inputs
 *   tensor_pb    onnx.TensorProto parsing (mx_tensor_parse_pb)
 *   mxm          static-plan .mxm files (mx__mxm_load_memory); a plan that loads is put on a
 *                device and run once with zero inputs
 *   session_mxm  the session's .mxm loader (files written by mx_session_save / mixrt compile),
 *                then one step with zero inputs
 *   session_run  steps with decoded input shapes, dtypes, values, placements and names against
 *                loaded models (tiny llama decode step, mixture of experts, encoder) */
#ifndef MIXRT_FUZZ_HARNESS_H
#define MIXRT_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

typedef int (*mxf_fn)(const uint8_t *data, size_t size);

typedef struct mxf_target {
  const char *name; /* "onnx", "tensor_pb", ... (the fuzz program is fuzz_<name>) */
  mxf_fn fn;
} mxf_target;

/* Every target, ended by {NULL, NULL}. */
extern const mxf_target mxf_targets[];

/* The target called `name`, or NULL. */
const mxf_target *mxf_target_find(const char *name);

int mxf_onnx(const uint8_t *data, size_t size);
int mxf_tensor_pb(const uint8_t *data, size_t size);
int mxf_mxm(const uint8_t *data, size_t size);
int mxf_session_mxm(const uint8_t *data, size_t size);
int mxf_session_run(const uint8_t *data, size_t size);

/* Frees what the harnesses keep between calls (their sessions and baselines), so a test can
 * check for leaks afterwards. Calling a harness again recreates it. */
void mxf_release(void);

/* Models of the session_run target (the first byte of an input selects one, modulo the count). */
enum {
  MXF_RUN_LLAMA = 0,    /* tiny llama decode step, inline device, declared range of past_len */
  MXF_RUN_LLAMA_MT = 1, /* the same on the CPU device, 2 streams, multi-thread executor */
  MXF_RUN_MOE = 2,      /* mixture-of-experts block, inline device */
  MXF_RUN_ENCODER = 3,  /* encoder layer, inline device, 2 streams, topological executor */
  MXF_RUN_MODELS = 4
};

/* Writes a session_run input that decodes to a well-formed step of `model` with the symbols
 * (in order of first appearance among the model's inputs) set to sym[0..n_sym) and the values
 * drawn from `seed`. Returns the number of bytes written to out[0..cap) (0 if cap is too
 * small). */
size_t mxf_session_run_seed(unsigned model, const uint8_t *sym, size_t n_sym, uint64_t seed, uint8_t *out,
                            size_t cap);

#endif /* MIXRT_FUZZ_HARNESS_H */
