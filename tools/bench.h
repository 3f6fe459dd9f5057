/* `mixrt bench scheduler` (it prints one JSON object on stdout) and the decode-step helpers that
 * `mixrt demo` and `mixrt bench llm` (bench/llm/, a library the program links) share
 * (tools/demo_llm.c). */
#ifndef MIXRT_TOOLS_BENCH_H
#define MIXRT_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/binding.h"
#include "mixrt/models.h"
#include "mixrt/session.h"
#include "mixrt/tensor.h"
#include "tools/cli.h"

/* `mixrt bench scheduler [...]` (argv[0] is "scheduler"). */
int mx_bench_scheduler(int argc, char **argv);

/* --- decode-step helpers (tools/demo_llm.c) ---------------------------------------------- */

/* Fills *cfg with a named size: "tiny" (the generator's defaults: 2 layers, hidden 64, 4 heads,
 * 2 key/value heads, ffn 172, vocab 128) or "small" (the benchmark configuration of
 * docs/models.md: 4 layers, hidden 256, 4 heads of 64, 4 key/value heads, ffn 688, vocab 1000).
 * False for another name. */
bool mx_cli_llm_size(const char *name, mx_llama_config *cfg);
/* Size of one attention head of cfg. */
int64_t mx_cli_llm_head_dim(const mx_llama_config *cfg);

/* Parses "cpu" / "inline"; false otherwise. */
bool mx_cli_parse_device(const char *text, mx_device_kind *out);
/* Parses "sequential" / "topological" / "multi-thread" (also "seq", "topo", "mt"). */
bool mx_cli_parse_executor(const char *text, mx_executor_kind *out);
const char *mx_cli_device_name(mx_device_kind k);
const char *mx_cli_executor_name(mx_executor_kind k);

/* The inputs of one decode step of a Llama decode-step model with `layers` layers: in[0] is
 * input_ids [1, 1] = token, in[1 + 2i] / in[2 + 2i] are past_key_i / past_value_i
 * [1, kv_heads, past, head_dim], zero (seed 0) or seeded values in [-1, 1). Host tensors the
 * caller releases with mx_cli_llm_inputs_release; on failure nothing is left allocated. */
MX_MUST_USE mx_status mx_cli_llm_inputs(const mx_llama_config *cfg, int64_t token, int64_t past,
                                        uint64_t seed, mx_tensor *in);
/* Releases the 1 + 2 * layers tensors of in. */
void mx_cli_llm_inputs_release(const mx_llama_config *cfg, mx_tensor *in);
/* Index of the largest logit (the first one on ties): the greedy next token. */
int64_t mx_cli_argmax(const mx_tensor *logits);

/* A binding of s for a decode loop (include/mixrt/binding.h): every input / output pair that
 * matches by name (past... <- present...) becomes a state along `axis` with room for
 * `capacity` rows; every other input is bound to inputs[i] (by position: host or device
 * tensors the caller keeps); every other output is allocated on the host by the binding.
 * *n_pairs receives the pairs; with none the binding is still made. On failure *out is NULL and
 * the session's last error says why. */
MX_MUST_USE mx_status mx_cli_state_binding(mx_session *s, const mx_tensor *inputs, int32_t axis,
                                           int64_t capacity, mx_binding **out, size_t *n_pairs);
/* A host copy (new tensor, released by the caller) of a device tensor of s. */
MX_MUST_USE mx_status mx_cli_download(mx_session *s, const mx_tensor *dev, mx_tensor *host);

/* Sorts v[0..n) and returns the value at quantile q in [0, 1] (nearest rank); 0 when n is 0. */
uint64_t mx_cli_quantile(uint64_t *v, size_t n, double q);

#endif /* MIXRT_TOOLS_BENCH_H */
