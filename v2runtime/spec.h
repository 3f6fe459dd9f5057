/* Shape specialization at run time ("gears"): a dynamic partition whose shapes depend only on
 * symbols bound by input shapes (partitioner/spec.h) gets, for each binding of those symbols it
 * meets, a static model compiled for that binding (the body with the values substituted, then
 * the static compile path: memory plan, tasks, sink). Later steps with the same values run it
 * with one call instead of op by op.
 *
 *   spec.c          install (which calls are specializable; their Main kernels are wrapped),
 *                   the per-call LRU cache and its guard, churn fallback, declared gears,
 *                   counters
 *   spec_compile.c  one specialization: a concrete copy of the body, folded, compiled, loaded
 *   spec_split.c    a split specialization, for a partition some of whose symbols churn: the
 *                   ops that involve them stay dynamic, the others become static models
 *
 * The Main graph is not changed (a saved .mxm stays valid): the wrapped BindSymbols of a
 * specializable call looks the binding up, and when a specialization serves the step it runs it
 * and the call's per-op kernels and DynStepEnd do nothing that step. */
#ifndef MIXRT_V2RUNTIME_SPEC_H
#define MIXRT_V2RUNTIME_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "partitioner/spec.h"
#include "v2runtime/session_impl.h"

/* Default of mx_session_options.spec_cache_size and spec_churn_limit. */
#define MX_SPEC_DEFAULT_CACHE 8u
#define MX_SPEC_DEFAULT_CHURN 4u

typedef struct mx_spec_split mx_spec_split;

/* One compiled specialization of a call. */
typedef struct mx_spec_entry {
  int64_t values[MX_SPEC_MAX_SYMS]; /* the guard: the value of each of the call's symbols */
  uint32_t mask;                    /* bit k: symbol k is guarded (all bits for a whole static
                                       model; a split one leaves the churned symbols out) */
  mx_static_model *model;           /* whole static model (owned), or NULL */
  mx_spec_split *split;             /* split specialization (owned), or NULL */
  uint64_t last_use;                /* LRU clock */
  bool declared;                    /* a declared gear: evicted only when nothing else is */
} mx_spec_entry;

/* Specialization state of one partition call. */
typedef struct mx_spec_call {
  bool specializable; /* its body passed the analysis */
  bool disabled;      /* never compiles again (churn, or the body cannot be
                                       made static); cached entries still serve hits */
  bool active;        /* a specialization ran this step; per-op kernels skip */
  uint32_t churned;   /* bit k: symbol k churned, specializations leave it out */
  uint32_t minor;     /* bit k: few of the body's ops have dims over symbol k (past_len, used
                         by the attention over the cache only): its second value already
                         counts as churn, so a decode loop compiles one split per seq value
                         instead of a model per past_len first */
  uint32_t n_syms;
  uint32_t syms[MX_SPEC_MAX_SYMS];   /* symbol indices of the root's table */
  uint32_t misses[MX_SPEC_MAX_SYMS]; /* per symbol: misses where its value was new */
  mx_spec_entry *entries;            /* cache (malloc'd, cap entries) */
  uint32_t n_entries, cap;
  /* Body values of states appended in place (state_append.c): the rows (an input) and the next
   * value (an output) lie in a padded buffer, so every op reading or writing one runs in a
   * dynamic run of a split specialization, which hands the padding on as strides; never a whole
   * static model (malloc'd). */
  mx_value_id *padded;
  uint32_t n_padded;
} mx_spec_call;

/* Counters (cumulative since the model was loaded). */
typedef struct mx_spec_counters {
  uint64_t hits, misses, compiles, evictions, compile_ns, fallbacks;
  uint64_t launches;                         /* dynamic op launches of split specializations */
  uint64_t retired_launches, retired_copies; /* figures of dynamic executors released while
                                                specializations serve their partition */
} mx_spec_counters;

typedef struct mx_spec_state {
  mx_spec_call *calls; /* by call index (malloc'd, n_calls) */
  size_t n_calls;
  mx_static_plan **stored; /* gear plans read from an .mxm, loaded at install (malloc'd) */
  size_t n_stored;
  uint64_t clock; /* LRU clock */
  mx_spec_counters count;
} mx_spec_state;

/* Analyzes p's dynamic calls, wraps the Main kernels of the specializable ones and compiles the
 * session's declared gears. A program whose options disable specialization gets no state. */
MX_MUST_USE mx_status mx__spec_install(mx_session *s, mx_program *p, mx_error *err);
/* Frees the state and its static models (the device must be idle for them). NULL state: no-op. */
void mx__spec_release(mx_session *s, mx_program *p);
/* Fills the specialization fields of the step's and the total statistics. */
void mx__spec_account(mx_session *s, mx_session_stats *last, mx_session_stats *total);

/* Compiles and loads call c's body specialized for `values` (by symbol of the root's table,
 * INT64_MIN for unbound; the call's symbols must be bound). *permanent is set when the failure
 * is the body's (it cannot become static), not a resource fault. */
MX_MUST_USE mx_status mx__spec_compile(mx_session *s, mx_program *p, const mx_rt_call *c,
                                       const int64_t *values, size_t n_values, mx_static_model **out,
                                       bool *permanent, mx_error *err);

/* The static plan of call c specialized for `values` (not loaded), named `name` (NULL: the
 * call's name). */
MX_MUST_USE mx_status mx__spec_plan(mx_session *s, mx_program *p, const mx_rt_call *c, const int64_t *values,
                                    size_t n_values, const char *name, mx_static_plan **out, bool *permanent,
                                    mx_error *err);

/* Declared gears in .mxm files: each whole specialization of a declared gear is saved as a
 * static plan named "<call>@<symbol>=<value>,..." after the partitions' own plans. At save,
 * the plans of the program's declared gears (compiled again; the caller destroys them); at
 * load, the plans so named, kept (ownership taken, the array entries set to NULL) until the
 * session's install loads them into the cache instead of compiling. */
MX_MUST_USE mx_status mx__spec_gear_plans(mx_session *s, mx_program *p, mx_static_plan ***plans,
                                          size_t *n_plans, mx_error *err);
bool mx__spec_is_gear_plan(const mx_static_plan *plan);
MX_MUST_USE mx_status mx__spec_stash_plans(mx_program *p, mx_static_plan **plans, size_t n_plans,
                                           mx_error *err);

/* Copies nodes[0..n_nodes) of body (in that order) into a new graph whose inputs are ins and
 * outputs outs_wanted (body value ids), with the constants they read. Dims of the inputs take
 * their value under `values` (by symbol of syms); with `symbolic`, dims without one stay
 * expressions over symbols of the copy's own table, else they fail (MX_ERR_SHAPE). An input that
 * is a small integer tensor whose symbolic value the binding gives becomes a constant of the
 * copy (as_const[i] set; as_const may be NULL). */
MX_MUST_USE mx_status mx__spec_copy_nodes(mx_graph *body, const mx_node_id *nodes, size_t n_nodes,
                                          const mx_value_id *ins, size_t n_ins,
                                          const mx_value_id *outs_wanted, size_t n_outs,
                                          const mx_symtab *syms, const int64_t *values, size_t n_values,
                                          bool symbolic, bool *as_const, mx_graph **out, mx_error *err);
/* Inference, then constant folding and dead-node removal to a fixed point. */
MX_MUST_USE mx_status mx__spec_concretize(mx_graph *g, mx_error *err);

/* Builds a split specialization of call c: the ops whose shapes use a symbol of `churned` (bits
 * index syms[0..n_syms)) or that read or write one of the call's padded values run dynamically,
 * the others as static models for `values` (by symbol of the root's table; the churned ones
 * INT64_MIN). */
MX_MUST_USE mx_status mx__spec_compile_split(mx_session *s, mx_program *p, const mx_rt_call *c,
                                             const uint32_t *syms, uint32_t n_syms, uint32_t churned,
                                             const int64_t *values, size_t n_values, mx_spec_split **out,
                                             bool *permanent, mx_error *err);
/* Live ops of body whose dims use a symbol whose bit is set in `which` (bits index syms); the
 * number of live ops into *n_live (may be NULL). */
size_t mx__spec_ops_using(const mx_graph *body, const uint32_t *syms, uint32_t n_syms, uint32_t which,
                          size_t *n_live);
/* Runs a split specialization on `stream` and hands its outputs to the call's root values; adds
 * the dynamic runs' op launches to *launches. The step's padded states (s->step.pads) are read
 * through their strides and appended in place by the dynamic runs holding their ops. */
MX_MUST_USE mx_status mx__spec_split_run(mx_session *s, mx_program *p, mx_rt_call *c, mx_stream *stream,
                                         mx_spec_split *sp, uint64_t *launches, mx_error *err);
/* Ops of the body in static runs and in dynamic runs, and the number of each kind of run. */
void mx__spec_split_ops(const mx_spec_split *sp, size_t *static_ops, size_t *dynamic_ops,
                        uint32_t *static_runs, uint32_t *dynamic_runs);
void mx__spec_split_destroy(mx_spec_split *sp);

#endif /* MIXRT_V2RUNTIME_SPEC_H */
