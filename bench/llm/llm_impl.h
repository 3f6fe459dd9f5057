/* Inside `mixrt bench llm` (bench/llm/): the user's choices, the figures measured, the state of
 * one configuration's measurement, and the functions each file of the library offers the others.
 * One file a purpose: options.c (arguments, help), peer.c (the ONNX Runtime process), files.c
 * (the work folder's files), steps.c (one step or block of a mixrt system), check.c (outputs
 * compared), stats.c (medians, quantiles, sign test, Mann-Whitney), measure.c (the rounds of
 * every point of a configuration), identity.c (the binding-overhead probe), report.c (the JSON
 * document and the --table file), processes.c and processes_report.c (--processes), llm.c (the
 * command). */
#ifndef MIXRT_BENCH_LLM_LLM_IMPL_H
#define MIXRT_BENCH_LLM_LLM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "mixrt/binding.h"
#include "mixrt/hal.h"
#include "mixrt/models.h"
#include "mixrt/session.h"

#define CMD "bench llm"

/* The systems measured. Every one before SYS_ORT runs in this process; SYS_CONTROL is a second
 * hybrid session, identical to the first, run only when asked for: the hybrid / control ratio
 * is what the machine alone moves a ratio by. */
enum { SYS_HYBRID, SYS_DYNAMIC, SYS_REFERENCE, SYS_CONTROL, SYS_ORT, SYS_COUNT };
enum { MAX_PAST = 8, MAX_LAYERS = 8, MAX_IO = 1 + 2 * MAX_LAYERS, N_CONFIGS = 2, TOKEN = 7 };

static const char *const sys_names[SYS_COUNT] = {"hybrid", "dynamic", "reference", "control", "ort"};
static const char *const config_names[N_CONFIGS] = {"tiny", "small"};
/* The limit on hybrid / ONNX Runtime per configuration. */
static const double config_ort_limit[N_CONFIGS] = {0.2, 1.0};

/* The user's choices. */
typedef struct llm_args {
  bool configs[N_CONFIGS]; /* which of tiny, small */
  int64_t past[MAX_PAST];  /* KV-cache lengths */
  size_t n_past;
  int64_t rounds;          /* timed rounds (at least) */
  double min_time;         /* fixed mode: more rounds until a point has taken this long, s */
  int64_t steps;           /* steps per system per round */
  int64_t warmup;          /* untimed steps per system before the rounds */
  int64_t block_warmup;    /* untimed steps at the start of every block, before its timed steps */
  int64_t identity_runs;   /* calls timed on the Identity model */
  bool systems[SYS_COUNT]; /* which systems run */
  bool no_ort;             /* --no-ort given */
  bool skip_kernels;       /* --skip-kernels: the device runs no kernel (mixrt's own cost) */
  bool no_huge_pages;      /* --no-huge-pages: device memory in 4 KiB pages only */
  bool no_state;           /* --no-state: sessions run by mx_session_run, the caller feeding
                                the pasts and taking the presents (the default: a binding with
                                the KV cache as session state, include/mixrt/binding.h) */
  bool state_copy;         /* --state-copy: the binding's states take the copying path (two
                                buffers, the whole present written each step), not the append */
  mx_device_kind device;
  int64_t streams;
  mx_executor_kind executor;
  bool device_io;        /* --io device: inputs and outputs in device buffers (zero copy) */
  bool decode;           /* --mode decode: every step feeds its outputs to the next */
  const char *node;      /* the node program (borrowed) */
  const char *peers_dir; /* bench/peers (borrowed, or NULL: found next to the sources) */
  const char *work_dir;  /* kept work directory (borrowed), or NULL: a temporary one */
  const char *table;     /* --table FILE: the latencies as a gnuplot data file (borrowed) */
  int64_t processes;     /* --processes N: the measurement runs in N fresh processes */
  const char *results;   /* --results FILE: this process's figures, binary, for --processes */
} llm_args;

/* Latency of one system at one point, in microseconds. */
typedef struct timing {
  bool have;
  double median, p10, p90;
  size_t samples;
} timing;

/* Largest differences of one system's outputs to ONNX Runtime's (relative = largest absolute
 * difference divided by the largest magnitude in ONNX Runtime's tensors of that kind). */
typedef struct diff {
  bool have;
  double logits_abs, logits_rel;
  double present_abs, present_rel;
} diff;

/* A mixrt session's own counters, per step (mx_session_stats over the point's rounds). */
typedef struct session_step {
  double static_executes, dynamic_launches, kernels, refreshed, device_allocations;
  double static_us, dynamic_us, host_us, step_us;
} session_step;

/* The hybrid against another system round by round: each round's two blocks ran one after the
 * other, so a slow spell of the machine falls on both. */
typedef struct round_pairs {
  bool have;
  int64_t rounds;        /* rounds compared */
  int64_t hybrid_faster; /* rounds whose hybrid block median was below the other's */
  double median_ratio;   /* median over the rounds of hybrid block median / other block median */
  double sign_test_p;    /* two-sided sign test: chance of a split this uneven if both were alike */
} round_pairs;

/* Everything measured at one (configuration, past length). */
typedef struct point {
  int64_t past;
  int64_t rounds; /* rounds run (--rounds, or more for --min-time) */
  timing t[SYS_COUNT];
  round_pairs vs[SYS_COUNT]; /* the hybrid against dynamic, reference, ort (index 0 unused) */
  diff to_ort[SYS_ORT];      /* hybrid, dynamic, reference, control against ONNX Runtime */
  int same_as_ref[2];        /* hybrid, dynamic bitwise equal to the reference: 1, 0, or -1 not run */
  bool have_step[2];         /* by system: hybrid, dynamic */
  session_step step[2];
} point;

typedef struct config_result {
  bool run;
  mx_llama_config cfg;
  size_t nodes;         /* nodes of the ONNX graph */
  int64_t huge_kib;     /* KiB of the process backed by huge pages after the points,
                                    sessions still loaded (-1: unknown) */
  uint64_t shared_hits; /* weight blocks the systems' sessions found already loaded by
                                    another one (mx_device_memory_stats.shared_hits at load) */
  point points[MAX_PAST];
} config_result;

/* The figures one process measured, as --results writes them for --processes (same executable,
 * so the layout is the same on both sides; the header guards against a mismatch). */
typedef struct llm_results_header {
  char magic[8];        /* "MXBLLM1" */
  uint32_t result_size; /* sizeof(config_result) */
  uint32_t n_configs;   /* N_CONFIGS */
} llm_results_header;

/* The ONNX Runtime peer process. */
typedef struct peer {
  pid_t pid;       /* the node process, or -1 when the peer is not running */
  FILE *to, *from; /* its stdin / stdout */
  char *line;      /* the last reply line (getline buffer, owned) */
  size_t line_cap;
  char version[64]; /* onnxruntime-node version */
  char node_version[64];
  char reason[512]; /* why ONNX Runtime is not measured (pid < 0) */
} peer;

/* State shared by the measurement of one configuration. */
typedef struct bench_ctx {
  const llm_args *a;
  peer *p;
  const char *dir;                  /* the work directory */
  mx_device *dev;                   /* the device both sessions run on (borrowed) */
  mx_session *sessions[SYS_ORT];    /* by system: hybrid, dynamic, control (NULL when not run; the
                                    reference interpreter's slot is always NULL) */
  mx_graph *ref;                    /* the reference interpreter's graph */
  const char *name;                 /* configuration name, also the peer's session name */
  bool ort;                         /* ONNX Runtime runs for this configuration */
  bool device_io;                   /* sessions read dev_in and write dev_out (--io device) */
  const mx_llama_config *cfg;       /* the configuration measured */
  mx_tensor state[SYS_ORT][MAX_IO]; /* --mode decode: each mixrt system's next inputs (owned; in
                                       device memory for the sessions under --io device) */
  bool state_live[SYS_ORT];         /* state[s] holds tensors */
  mx_binding *binding[SYS_ORT];     /* by session system: its binding with the KV cache as state
                                    (made at the point's first step, unless --no-state) */
  mx_tensor binding_ids[SYS_ORT];   /* the token id each binding reads (host, or device under
                                     --io device; owned) */
  mx_tensor dev_in[MAX_IO];         /* device copies of the point's inputs (owned, --io device) */
  mx_tensor dev_out[MAX_IO];        /* device output buffers of the point's shapes (owned) */
} bench_ctx;

/* --- options.c ------------------------------------------------------------------------------ */

/* Parses argv[1..argc) into *a (defaults for what is not given); MX_EXIT_OK or, after a message,
 * MX_EXIT_USAGE. */
int mx__llm_parse_args(int argc, char **argv, llm_args *a);
/* Rows the models' rotary tables need for the past lengths asked for: the preset's (2048), doubled
 * until every position fits (up to 16384). */
int64_t mx__llm_rotary_rows(const llm_args *a, int64_t preset);
/* Why ONNX Runtime is not run with these options, or NULL when it is to be. */
const char *mx__llm_no_ort_reason(const llm_args *a);

/* --- peer.c --------------------------------------------------------------------------------- */

/* Starts the Node process and waits for its "ready" line. On failure p->pid is -1 and
 * p->reason says why (the benchmark then runs without ONNX Runtime). */
void mx__llm_peer_start(const llm_args *a, peer *p);
/* Sends one request line and reads the reply into p->line (without its newline). True when
 * the reply starts with "ok"; false on "err ..." or when the process is gone (p->line then
 * holds a message). */
bool mx__llm_peer_call(peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses the times of a "run" reply (ns): the first `skip` are passed over (untimed warm-up),
 * the next n go to samples[0..n). False when fewer came back. */
bool mx__llm_peer_times(const peer *p, int64_t skip, uint64_t *samples, int64_t n);
/* Asks the process to quit and waits for it; p is then stopped (pid -1). */
void mx__llm_peer_stop(peer *p);

/* --- files.c -------------------------------------------------------------------------------- */

/* Removes a folder and everything in it (the work folders). */
void mx__llm_remove_tree(const char *dir);
/* Writes in[0..n) as DIR/<name>.npy, named after the session's inputs. */
MX_MUST_USE mx_status mx__llm_write_inputs(mx_session *s, const char *dir, const mx_tensor *in, size_t n,
                                           mx_error *err);
/* Builds the decode step of cfg, infers it and writes it as ONNX to path; *nodes receives its
 * node count. */
MX_MUST_USE mx_status mx__llm_write_model(const mx_llama_config *cfg, const char *path, size_t *nodes,
                                          mx_error *err);

/* --- steps.c -------------------------------------------------------------------------------- */

/* Frees system sys's binding and its token tensor (at the end of a point). */
void mx__llm_binding_free(bench_ctx *c, int sys);

/* Releases the host tensors t[0..n). */
void mx__llm_release_all(mx_tensor *t, size_t n);
/* A device tensor of the given type and dims (at least one byte is allocated). */
MX_MUST_USE mx_status mx__llm_device_tensor(mx_device *dev, mx_dtype dt, int32_t rank, const int64_t *dims,
                                            mx_tensor *t);
/* --io device: uploads the inputs and allocates output buffers of the step's shapes
 * (logits [1, 1, vocab], presents [1, kv_heads, past + 1, head_dim]). */
MX_MUST_USE mx_status mx__llm_make_device_io(bench_ctx *c, const mx_llama_config *cfg, const mx_tensor *in,
                                             size_t n);
/* Frees the device buffers of the point. */
void mx__llm_free_device_io(bench_ctx *c, size_t n);
/* Runs one step of mixrt system sys. Host I/O (and the reference interpreter): out receives
 * host tensors the caller releases. Device I/O: the session reads c->dev_in and writes
 * c->dev_out; out receives host copies only when `download` is set (else it is left empty). */
MX_MUST_USE mx_status mx__llm_run_mixrt(bench_ctx *c, int sys, const mx_tensor *in, size_t n, mx_tensor *out,
                                        bool download, char *why, size_t cap);
/* --mode decode: system sys starts from a copy of the point's inputs. */
MX_MUST_USE mx_status mx__llm_state_init(bench_ctx *c, int sys, const mx_tensor *in, size_t n);
/* Frees the decode state of system sys. */
void mx__llm_state_free(bench_ctx *c, int sys, size_t n);
/* One timed block of a mixrt system: `count` steps of the fixed step repeated, or decode
 * steps, each timed into samples (ns; NULL: untimed warm-up). */
MX_MUST_USE mx_status mx__llm_run_block(bench_ctx *c, int sys, const mx_tensor *in, size_t n, int64_t count,
                                        uint64_t *samples, char *why, size_t cap);

/* --- check.c -------------------------------------------------------------------------------- */

/* Correctness: one step of every system on `in`, compared with ONNX Runtime's outputs and the
 * reference interpreter's into pt->to_ort and pt->same_as_ref. */
int mx__llm_check_point(bench_ctx *c, const mx_tensor *in, size_t n, point *pt);

/* --- stats.c -------------------------------------------------------------------------------- */

/* Median of the finite values among v[0..n) (v is left alone); NAN when there are none. */
double mx__llm_median(const double *v, size_t n);
/* Median, p10 and p90 of samples[0..n) (ns, sorted in place) in microseconds. */
timing mx__llm_summarize(uint64_t *samples, size_t n);
/* Two-sided sign test: the probability of k or fewer, or as many or more the other way, of n
 * fair coin tosses coming up heads (1 at most). */
double mx__llm_sign_test(int64_t k, int64_t n);
/* Compares the hybrid's block with the other system's block of the same round, round by round
 * (blocks of `steps` samples). Without the scratch memory it reports nothing rather than fail
 * the benchmark. */
round_pairs mx__llm_compare_rounds(const uint64_t *hybrid, const uint64_t *other, int64_t rounds,
                                   int64_t steps);
/* Two-sided Mann-Whitney test of whether the finite values of x[0..n) and y[0..n) come from
 * one distribution; NAN with fewer than 2 each. */
double mx__llm_mann_whitney_p(const double *x, const double *y, int n);

/* --- measure.c, identity.c ------------------------------------------------------------------ */

/* Opens a mixrt session on dev with the user's stream and executor choices and loads path.
 * private_weights: the session uploads weights of its own instead of sharing equal ones with
 * the sessions before it. NULL (with *rc set after a message) on failure. */
mx_session *mx__llm_open_session(const llm_args *a, mx_device *dev, int64_t static_min_ops,
                                 bool private_weights, const char *path, int *rc);
/* Writes configuration `which` as ONNX into dir and measures every past length into *cr. */
int mx__llm_measure_config(const llm_args *a, peer *p, mx_device *dev, const char *dir, int which,
                           config_result *cr);
/* The binding overhead: calls of an Identity model through ONNX Runtime (when p runs), and
 * through a mixrt session on the same device settings for comparison. */
int mx__llm_measure_identity(const llm_args *a, peer *p, mx_device *dev, const char *dir, timing *ort_t,
                             timing *mixrt_t);

/* --- report.c ------------------------------------------------------------------------------- */

/* A JSON number on stdout (null when not finite). */
void mx__llm_json_num(double v);
/* Opens the document: {"benchmark": "llm", "command": "mixrt bench <argv, escaped>" (no comma
 * after it). */
void mx__llm_json_head(int argc, char **argv);
/* One entry of the "targets" list (value NAN: met is null, with `missing` as the reason; the
 * worst single process of --processes is printed when not NAN). */
void mx__llm_json_target(bool *first, const char *name, double value, double limit, const char *missing,
                         double worst_single_process);
/* The whole JSON document of one process's measurement. */
void mx__llm_print_json(const llm_args *a, int argc, char **argv, const peer *p, double load,
                        const timing *id_ort, const timing *id_mixrt, const config_result *res);
/* Writes res's latencies as a gnuplot data file at a->table (see --table in the help); with
 * processes > 1 the header says each figure is a median over that many processes. */
int mx__llm_write_table(const llm_args *a, const config_result *res, int64_t processes);

/* --- processes.c, processes_report.c -------------------------------------------------------- */

/* One process's figures and its JSON document. */
typedef struct process_run {
  config_result res[N_CONFIGS];
  char *json; /* the document it printed (owned), trailing white space removed */
} process_run;

/* Runs the measurement in a->processes fresh processes, one after another, and prints their
 * JSON documents with the figures summed up across them. */
int mx__llm_processes(const llm_args *a, int argc, char **argv);
/* Writes this process's figures at a->results for the --processes driver. */
int mx__llm_write_results(const llm_args *a, const config_result *res);
/* The --processes document: every run's JSON and the figures across the n runs. scratch holds
 * 2n values. */
void mx__llm_print_summary(const llm_args *a, int argc, char **argv, const process_run *runs, int n,
                           double *scratch);
/* --table with --processes: each figure the median of the processes' figures. */
int mx__llm_write_median_table(const llm_args *a, const process_run *runs, int n, double *scratch);

#endif /* MIXRT_BENCH_LLM_LLM_IMPL_H */
