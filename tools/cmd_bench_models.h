/* `mixrt bench models` (tools/cmd_bench_models*.c): latency of the zoo's models (bench/zoo) in
 * mixrt hybrid, mixrt all-dynamic, ONNX Runtime and PyTorch eager. Every runner is a child
 * process spoken to over pipes with one request line and one reply line (the protocol of
 * bench/peers/ort_runner.js); mixrt's own runners are this program started with --serve, one
 * process per thread count, since the kernels' thread pool is sized once per process. */
#ifndef MIXRT_TOOLS_CMD_BENCH_MODELS_H
#define MIXRT_TOOLS_CMD_BENCH_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* `mixrt bench models [...]` (argv[0] is "models") and its help (tools/cmd_bench.c calls them). */
int mx_cmd_bench_models(int argc, char **argv);
void mx_cmd_bench_models_help(FILE *out);

/* --- a small JSON reader, for the zoo's manifest.json (cmd_bench_models_json.c) --------------- */

typedef enum {
  MX_BMJ_NULL,
  MX_BMJ_BOOL,
  MX_BMJ_NUMBER,
  MX_BMJ_STRING,
  MX_BMJ_ARRAY,
  MX_BMJ_OBJECT
} mx_bmj_kind;

typedef struct mx_bmj {
  mx_bmj_kind kind;
  double number;        /* NUMBER, BOOL (0 or 1) */
  char *text;           /* STRING */
  size_t n;             /* ARRAY, OBJECT: entries */
  struct mx_bmj *items; /* ARRAY, OBJECT: the values */
  char **keys;          /* OBJECT: the keys */
} mx_bmj;

/* Parses text into a tree (free with mx__bmj_free); NULL with the offset and cause in why. */
mx_bmj *mx__bmj_parse(const char *text, char *why, size_t cap);
void mx__bmj_free(mx_bmj *v);
/* The value of key in an object (NULL when v is no object or lacks the key). */
const mx_bmj *mx__bmj_get(const mx_bmj *v, const char *key);
/* The string of key in an object, or NULL. */
const char *mx__bmj_str(const mx_bmj *v, const char *key);

/* --- runner processes (cmd_bench_models_peer.c) ---------------------------------------------- */

typedef struct mx_bm_peer {
  pid_t pid;       /* -1: not running */
  FILE *to, *from; /* request and reply pipes */
  char *line;      /* the last reply line (getline buffer) */
  size_t line_cap;
  char version[96]; /* second word of the `ready` line and the rest */
  char reason[512]; /* why it is not running (when pid < 0) */
} mx_bm_peer;

/* Starts argv[0] with argv and waits for its `ready ...` line; on failure p->pid is -1 and
 * p->reason says why. */
void mx__bm_peer_start(mx_bm_peer *p, char *const argv[]);
/* Sends one request line and reads the reply; true when it starts with `ok`. The reply is in
 * p->line (an `err MESSAGE` reply, or a note that the process stopped). */
bool mx__bm_peer_call(mx_bm_peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text after the first word of the last reply. */
const char *mx__bm_peer_rest(const mx_bm_peer *p);
/* Sends quit, closes the pipes and waits for the process. */
void mx__bm_peer_stop(mx_bm_peer *p);

/* --- the mixrt runner (cmd_bench_models_serve.c) --------------------------------------------- */

/* `mixrt bench models --serve --threads N`: serves load/feed/run/drop/quit on stdin/stdout
 * (load NAME MODEL hybrid|dynamic). Returns the exit code. */
int mx__bench_models_serve(int argc, char **argv);

/* --- per-Conv GFLOP/s (cmd_bench_models_layers.c) --------------------------------------------- */

/* `--layers`: times every Conv of model (one by one through the kernels, threads intra-op
 * threads), prints a table with GFLOP/s per layer on out and the sgemm peak measured by a
 * cblas_sgemm probe. Returns an exit code. */
int mx__bench_models_layers(const char *model, const char *input_npy, int32_t threads, int64_t steps,
                            FILE *out);

#endif /* MIXRT_TOOLS_CMD_BENCH_MODELS_H */
