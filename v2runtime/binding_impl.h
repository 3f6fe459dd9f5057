/* Private layout of a binding (include/mixrt/binding.h): the records bound by graph index, the
 * outputs the binding allocates, and the persistent states (binding.c, state.c). */
#ifndef MIXRT_V2RUNTIME_BINDING_IMPL_H
#define MIXRT_V2RUNTIME_BINDING_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/binding.h"
#include "v2runtime/session_impl.h"

typedef enum mx_bind_out_kind {
  MX_BIND_OUT_NONE = 0,   /* not asked for */
  MX_BIND_OUT_CALLER = 1, /* the caller's buffer */
  MX_BIND_OUT_ALLOC = 2,  /* allocated by the binding (or by the session when its shape is known
                             only at run time), kept and reused */
  MX_BIND_OUT_STATE = 3   /* written into a state's next buffer */
} mx_bind_out_kind;

typedef struct mx_bind_out {
  mx_bind_out_kind kind;
  mx_tensor t;        /* the record the step writes */
  mx_placement where; /* ALLOC: host or device */
  void *buf;          /* ALLOC: the binding's buffer (aligned_alloc or mx_device_alloc) */
  size_t cap;         /* ALLOC: its bytes */
  bool from_session;  /* ALLOC: t.data was allocated by the session (shape known late) */
} mx_bind_out;

/* One persistent state: graph input `in` is the next step's value of graph output `out`. The
 * rows held lie contiguous (the model's layout) at the front of buf[cur]; a step reads them and
 * writes its result into buf[cur ^ 1], which then becomes current. */
typedef struct mx_bind_state {
  uint32_t in, out; /* graph input and output indices */
  int32_t axis;     /* the growing axis */
  void *buf[2];     /* device buffers of `bytes` each (NULL until the first step) */
  size_t bytes;
  int cur;
  int64_t outer, inner; /* elements before the axis and after it (one row), at allocation */
  mx_tensor view;       /* the rows held: the input record of the next step (device) */
  bool append;          /* appended in place (state_append.c): one buffer, buf[0], padded to
                           the capacity along the axis; the step writes only its new rows */
} mx_bind_state;

struct mx_binding {
  mx_session *s;
  const mx_program *prog; /* the model the indices refer to */
  size_t n_in, n_out;
  mx_tensor *in; /* bound input records (n_in) */
  bool *in_bound;
  int32_t *in_state;         /* state index feeding each input, or -1 */
  const mx_tensor **in_slot; /* per step: the record of each input (bound or state view) */
  mx_bind_out *out;          /* n_out */
  mx_tensor **out_slot;      /* per step: the record of each output, NULL when not asked for */
  int64_t *syms;             /* symbol values of the step being prepared */
  size_t n_syms;
  mx_bind_state *states;
  size_t n_states, cap_states;
  int64_t length;        /* rows every state holds */
  int64_t before;        /* rows before the last step, which the other buffers still hold
                                 untouched (a truncate back to them is a swap), or -1 */
  int64_t capacity;      /* rows every state's buffers take (0 until allocated) */
  int64_t want_capacity; /* rows asked for at the first allocation */
  bool no_append;        /* mx_binding_set_state_append(false): every state copies */
  bool append_decided;   /* which states append was worked out (at their first allocation) */
  mx_step_pad *pads;     /* per step: the appended states' padded values (2 per state) */
  size_t n_pads;
};

/* --- states (state.c) ------------------------------------------------------------------------ */

/* Works out the state inputs' records for this step (binding their symbols into b->syms) and
 * the state outputs' records, growing the buffers when the step's rows pass the capacity. */
MX_MUST_USE mx_status mx__binding_states_prepare(mx_binding *b);
/* After a successful step: the outputs become the states' rows. */
void mx__binding_states_advance(mx_binding *b);
/* Whether state x can be appended in place in program p; if so the dynamic partitions it goes
 * through are no longer specialized (state_append.c). */
bool mx__state_append_fits(mx_program *p, const mx_bind_state *x);
/* Frees every state's buffers. */
void mx__binding_states_free(mx_binding *b);
/* Binds the symbols of input `i`'s record dims into b->syms; fails naming the input and symbol
 * when two inputs disagree. */
MX_MUST_USE mx_status mx__binding_bind_symbols(mx_binding *b, size_t i, const mx_tensor *t);
/* Output `j`'s dims for this step from b->syms; false when a dim is known only at run time or
 * its symbols are unbound. */
bool mx__binding_output_dims(mx_binding *b, size_t j, int32_t *rank, int64_t *dims);

#endif /* MIXRT_V2RUNTIME_BINDING_IMPL_H */
