/* `mixrt bench llm`, shared between the measurement (tools/bench_llm.c) and the driver that
 * runs it in several processes and sums them up (tools/bench_llm_processes.c): the user's
 * choices and the figures of one process. */
#ifndef MIXRT_TOOLS_BENCH_LLM_H
#define MIXRT_TOOLS_BENCH_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
  bool configs[N_CONFIGS];   /* which of tiny, small */
  int64_t past[MAX_PAST];    /* KV-cache lengths */
  size_t n_past;
  int64_t rounds;            /* timed rounds (at least) */
  double min_time;           /* fixed mode: more rounds until a point has taken this long, s */
  int64_t steps;             /* steps per system per round */
  int64_t warmup;            /* untimed steps per system before the rounds */
  int64_t block_warmup;      /* untimed steps at the start of every block, before its timed steps */
  int64_t identity_runs;     /* calls timed on the Identity model */
  bool systems[SYS_COUNT];   /* which systems run */
  bool no_ort;               /* --no-ort given */
  bool skip_kernels;         /* --skip-kernels: the device runs no kernel (mixrt's own cost) */
  bool no_huge_pages;        /* --no-huge-pages: device memory in 4 KiB pages only */
  mx_device_kind device;
  int64_t streams;
  mx_executor_kind executor;
  bool device_io;            /* --io device: inputs and outputs in device buffers (zero copy) */
  bool decode;               /* --mode decode: every step feeds its outputs to the next */
  const char *node;          /* the node program (borrowed) */
  const char *peers_dir;     /* bench/peers (borrowed, or NULL: found next to the sources) */
  const char *work_dir;      /* kept work directory (borrowed), or NULL: a temporary one */
  const char *table;         /* --table FILE: the latencies as a gnuplot data file (borrowed) */
  int64_t processes;         /* --processes N: the measurement runs in N fresh processes */
  const char *results;       /* --results FILE: this process's figures, binary, for --processes */
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
  int64_t rounds;                /* rounds run (--rounds, or more for --min-time) */
  timing t[SYS_COUNT];
  round_pairs vs[SYS_COUNT];     /* the hybrid against dynamic, reference, ort (index 0 unused) */
  diff to_ort[SYS_ORT];          /* hybrid, dynamic, reference, control against ONNX Runtime */
  int same_as_ref[2];            /* hybrid, dynamic bitwise equal to the reference: 1, 0, or -1 not run */
  bool have_step[2];     /* by system: hybrid, dynamic */
  session_step step[2];
} point;

typedef struct config_result {
  bool run;
  mx_llama_config cfg;
  size_t nodes;                  /* nodes of the ONNX graph */
  int64_t huge_kib;              /* KiB of the process backed by huge pages after the points,
                                    sessions still loaded (-1: unknown) */
  uint64_t shared_hits;          /* weight blocks the systems' sessions found already loaded by
                                    another one (mx_device_memory_stats.shared_hits at load) */
  point points[MAX_PAST];
} config_result;

/* The figures one process measured, as --results writes them for --processes (same executable,
 * so the layout is the same on both sides; the header guards against a mismatch). */
typedef struct llm_results_header {
  char magic[8];            /* "MXBLLM1" */
  uint32_t result_size;     /* sizeof(config_result) */
  uint32_t n_configs;       /* N_CONFIGS */
} llm_results_header;

/* Two-sided sign test: the probability of k or fewer, or as many or more the other way, of n
 * fair coin tosses coming up heads (1 at most). */
double mx_cli_llm_sign_test(int64_t k, int64_t n);
/* Median of the finite values among v[0..n) (v is left alone); NAN when there are none. */
double mx_cli_median(const double *v, size_t n);
/* JSON output on stdout: a number (null when not finite), a quoted string, and one entry of
 * the "targets" list (value NAN: met is null, with `missing` as the reason; the worst single
 * process of --processes is printed when not NAN). */
void mx_cli_json_num(double v);
/* Opens the document: {"benchmark": "llm", "command": "mixrt bench <argv, escaped>" (no comma
 * after it). */
void mx_cli_llm_json_head(int argc, char **argv);
void mx_cli_llm_json_target(bool *first, const char *name, double value, double limit, const char *missing,
                            double worst_single_process);

/* Why ONNX Runtime is not run with these options, or NULL when it is to be. */
const char *mx_cli_llm_no_ort_reason(const llm_args *a);
/* Writes res's latencies as a gnuplot data file at a->table (see --table in the help); with
 * processes > 1 the header says each figure is a median over that many processes. */
int mx_cli_llm_write_table(const llm_args *a, const config_result *res, int64_t processes);

/* Removes a folder and everything in it (the work folders). */
void mx_cli_remove_tree(const char *dir);

/* Runs the measurement in a->processes fresh processes, one after another, and prints their
 * JSON documents with the figures summed up across them. */
int mx_cli_llm_processes(const llm_args *a, int argc, char **argv);

#endif /* MIXRT_TOOLS_BENCH_LLM_H */
