/* Bindings: a session's inputs and outputs bound once by name, then run step after step, and the
 * persistent state (a KV cache) the session keeps on its device between steps.
 *
 * A binding belongs to one session and the model loaded when it was made. Names are looked up
 * when binding; each step (mx_session_run_binding) then runs on the records as bound, with no
 * lookup, and allocates nothing while shapes repeat (outputs the session allocates are kept and
 * reused while they fit).
 *
 * State: an input declared the next step's value of an output (past_key_<i> <- present_key_<i>,
 * past_key_values.<i>.key <- present.<i>.key) is held by the binding in device buffers with a
 * capacity along its growing axis. The caller never feeds nor collects it: each step reads the
 * rows held and the result becomes the next step's past, with no allocation and no host copy.
 * Growth past the capacity reallocates geometrically (x2). Truncate and reset roll back
 * (speculative decoding, a new prompt).
 *
 * Typical decode loop:
 *
 *   mx_binding *b; mx_binding_create(s, &b);
 *   mx_binding_pair_states(b, 2, 4096, NULL);      // past_* <- present_*, axis 2, 4096 rows
 *   mx_binding_bind_input(b, "input_ids", &ids);   // host tensor, read at every step
 *   mx_binding_bind_output_alloc(b, "logits", MX_HOST);
 *   const mx_tensor *logits = mx_binding_output(b, mx_binding_output_index(b, "logits"));
 *   for (...) { ids_data[0] = token; mx_session_run_binding(s, b); token = argmax(logits); }
 *   mx_binding_destroy(b);                          // before mx_session_destroy
 *
 * Every failure returns a status and leaves a message on the session (mx_session_last_error)
 * naming the input, output or state at fault. */
#ifndef MIXRT_BINDING_H
#define MIXRT_BINDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/session.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_binding mx_binding;

/* Makes an empty binding for the model loaded in s. Destroy it before the session. */
MX_API MX_MUST_USE mx_status mx_binding_create(mx_session *s, mx_binding **out);
/* Frees the binding, the outputs it allocated and its state buffers. NULL is a no-op. */
MX_API void mx_binding_destroy(mx_binding *b);

/* Index of the model input / output called `name`, or -1 (no lookup is needed after this). */
MX_API int64_t mx_binding_input_index(const mx_binding *b, const char *name);
MX_API int64_t mx_binding_output_index(const mx_binding *b, const char *name);

/* Binds input `name` to t (the record is copied; its data is borrowed and read at every step:
 * host or device memory of the session's device). dtype and rank must be the model's. */
MX_API MX_MUST_USE mx_status mx_binding_bind_input(mx_binding *b, const char *name, const mx_tensor *t);
/* The same by index, for changing an input between steps without a lookup (new data or dims). */
MX_API MX_MUST_USE mx_status mx_binding_set_input(mx_binding *b, size_t index, const mx_tensor *t);

/* Binds output `name` to a caller buffer (host or device; dtype must be the model's, dims the
 * step's). A device buffer is written in place. */
MX_API MX_MUST_USE mx_status mx_binding_bind_output(mx_binding *b, const char *name, const mx_tensor *t);
/* Output `name` is allocated by the session, in host or device memory (`where`), kept by the
 * binding and reused at the next step while it fits (mx_binding_output gives it). */
MX_API MX_MUST_USE mx_status mx_binding_bind_output_alloc(mx_binding *b, const char *name,
                                                          mx_placement where);
/* Output `name` is not asked for any more (still computed when another output needs it). */
MX_API MX_MUST_USE mx_status mx_binding_unbind_output(mx_binding *b, const char *name);
/* The record output `index` has after the last step (dims, data, placement); for an allocated
 * output the data stays the binding's. For a state output: the state's rows (device). NULL when
 * out of range or nothing is bound there. */
MX_API const mx_tensor *mx_binding_output(const mx_binding *b, size_t index);

/* --- persistent state ------------------------------------------------------------------------ */

/* For mx_binding_add_state / mx_binding_pair_states: the one axis along which the input's and
 * the output's declared dims differ. */
#define MX_BINDING_AXIS_AUTO INT32_MIN

/* Declares input `input` the next step's value of output `output`: both must have one dtype and
 * rank and differ only along `axis` (the growing one; MX_BINDING_AXIS_AUTO finds it). `capacity` rows along that axis are
 * allocated on the device when the first step runs (0: 256). The state starts empty (0 rows). */
MX_API MX_MUST_USE mx_status mx_binding_add_state(mx_binding *b, const char *input, const char *output,
                                                  int32_t axis, int64_t capacity);
/* Pairs every input and output whose names match (input "past..." with output "present...":
 * past_key_values.N.key <- present.N.key, past_key_N <- present_key_N) as states along `axis`
 * with `capacity` rows; *n_pairs (may be NULL) receives how many. Pairs already declared stay. */
MX_API MX_MUST_USE mx_status mx_binding_pair_states(mx_binding *b, int32_t axis, int64_t capacity,
                                                    size_t *n_pairs);
/* Whether input `index` is a state's (fed by the binding, not by the caller). */
MX_API bool mx_binding_input_is_state(const mx_binding *b, size_t index);
/* States declared. */
MX_API size_t mx_binding_state_count(const mx_binding *b);
/* Rows every state holds (they grow together, one step's rows each step). */
MX_API int64_t mx_binding_state_length(const mx_binding *b);
/* Rows every state can hold before it grows. */
MX_API int64_t mx_binding_state_capacity(const mx_binding *b);
/* Loads the rows of the state fed to input `index` from t (host or device memory of the
 * session's device; the model's dtype and rank, rows along the state's axis): a prompt's cache
 * computed elsewhere, or a model's given pasts. Every state must then hold as many rows before
 * the next step. The buffers grow when t has more rows than the capacity. */
MX_API MX_MUST_USE mx_status mx_binding_load_state(mx_binding *b, size_t index, const mx_tensor *t);
/* Keeps the first `length` rows of every state (<= the rows held), dropping the rest. Back to
 * the rows held before the last step it costs nothing (the previous buffers are swapped back);
 * else it copies the rows kept when the axis is not the outermost. */
MX_API MX_MUST_USE mx_status mx_binding_truncate(mx_binding *b, int64_t length);
/* Empties every state (0 rows; buffers kept). */
MX_API MX_MUST_USE mx_status mx_binding_reset(mx_binding *b);
/* Whether states may be appended in place (default: yes), set before the first step or load.
 * A state is appended in place when the session can see every kernel reading its rows and the
 * one writing its next value (the fused Attention's past and present): its rows then stay in one
 * device buffer padded to the capacity along the axis (a key/value head's rows stay where they
 * are as it grows), the step writes only the new rows, the buffer's address changes only when it
 * grows, and truncate costs nothing. Other states, or all with false, keep the copying path: two
 * buffers, the step writing the whole next value into the other one. */
MX_API MX_MUST_USE mx_status mx_binding_set_state_append(mx_binding *b, bool on);
/* States appended in place (known from the first step or load on; 0 before). */
MX_API size_t mx_binding_state_appended(const mx_binding *b);
/* Copies output `index` as the last step left it into dst (host or device memory of the
 * session's device, contiguous, the output's dtype and dims). For an appended state's output
 * mx_binding_output gives the padded buffer (rows of each outer block `capacity` rows apart):
 * this reads its rows packed. */
MX_API MX_MUST_USE mx_status mx_binding_read_output(mx_binding *b, size_t index, const mx_tensor *dst);

/* --- running --------------------------------------------------------------------------------- */

/* Runs one step on what b binds (every input not a state must be bound); states advance by the
 * step's rows. A failed step leaves the states as they were. */
MX_API MX_MUST_USE mx_status mx_session_run_binding(mx_session *s, mx_binding *b);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_BINDING_H */
