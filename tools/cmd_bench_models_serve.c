/* `mixrt bench models --serve --threads N --device D`: mixrt as a runner process of `mixrt bench models`,
 * speaking the request/reply protocol of bench/peers/ort_runner.js on stdin/stdout. One process
 * per thread count: the kernels' intra-op pool is sized once per process, when the first session
 * is created, and every session of the process shares it.
 *   load NAME MODEL.onnx hybrid|dynamic  a session (dynamic: every op a dynamic op) -> ok
 *   feed NAME DIR                        DIR/<input>.npy for every graph input -> ok
 *   run NAME N                           N steps on the fed inputs -> ok NS NS ...
 *   drop NAME                            release the session -> ok
 *   quit                                 exit (no reply) */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "mixrt/onnx.h"
#include "mixrt/session.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/cmd_bench_models.h"
#include "tools/run_inputs.h"
#include "v2runtime/session_impl.h"

#define MAX_SESSIONS 16
#define MAX_IO       256

typedef struct served {
  char name[64];
  mx_session *s;
  mx_graph *g; /* the session's root graph (borrowed): input names and dtypes for feed */
  mx_tensor *in, *out;
  size_t n_in, n_out;
  bool fed;
} served;

static served sessions[MAX_SESSIONS];

static served *find(const char *name) {
  for (int k = 0; k < MAX_SESSIONS; k++)
    if (sessions[k].s && strcmp(sessions[k].name, name) == 0) return &sessions[k];
  return NULL;
}

static void release_io(served *e) {
  for (size_t k = 0; e->in && k < e->n_in; k++) mx_tensor_release(&e->in[k]);
  for (size_t k = 0; e->out && k < e->n_out; k++) mx_tensor_release(&e->out[k]);
  e->fed = false;
}

static void drop(served *e) {
  release_io(e);
  free(e->in);
  free(e->out);
  mx_session_destroy(e->s);
  memset(e, 0, sizeof *e);
}

/* `err MESSAGE` on one line (line breaks in the message become spaces). */
__attribute__((format(printf, 1, 2))) static void reply_err(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *c = msg; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  printf("err %s\n", msg);
}

static void load(const char *name, const char *model, const char *mode, uint32_t threads,
                 mx_device_kind device) {
  if (find(name)) return reply_err("session %s exists", name);
  served *e = NULL;
  for (int k = 0; k < MAX_SESSIONS && !e; k++)
    if (!sessions[k].s) e = &sessions[k];
  if (!e) return reply_err("too many sessions");
  bool dynamic = strcmp(mode, "dynamic") == 0;
  if (!dynamic && strcmp(mode, "hybrid") != 0) return reply_err("mode %s: hybrid or dynamic", mode);
  mx_session_options o;
  mx_session_options_init(&o);
  o.intra_op_threads = threads;
  o.device_options.kind = device;
  if (dynamic) o.static_min_ops = -1;
  mx_error err;
  if (mx_session_create(&o, &e->s, &err) != MX_OK) return reply_err("%s", err.message);
  /* The session's load is the only one: its root graph declares the inputs. */
  if (mx_session_load_file(e->s, model) != MX_OK) {
    reply_err("%s", mx_session_last_error(e->s));
    drop(e);
    return;
  }
  e->g = e->s->prog->root;
  e->n_in = mx_graph_input_count(e->g);
  e->n_out = mx_graph_output_count(e->g);
  e->in = calloc(e->n_in ? e->n_in : 1, sizeof *e->in);
  e->out = calloc(e->n_out ? e->n_out : 1, sizeof *e->out);
  if (!e->in || !e->out) {
    drop(e);
    return reply_err("out of memory");
  }
  snprintf(e->name, sizeof e->name, "%s", name);
  printf("ok\n");
}

static void feed(served *e, const char *dir) {
  release_io(e);
  if (e->n_in > MAX_IO) return reply_err("more than 256 inputs");
  static char paths[MAX_IO][1024];
  static mx_named_file files[MAX_IO];
  for (size_t k = 0; k < e->n_in; k++) {
    files[k].name = mx_graph_value_name(e->g, mx_graph_input(e->g, k));
    snprintf(paths[k], sizeof paths[k], "%s/%s.npy", dir, files[k].name);
    files[k].path = paths[k];
  }
  /* Errors of reading the files go to stderr (the terminal of `mixrt bench models`). */
  if (mx_cli_make_inputs("bench models --serve", e->g, files, e->n_in, false, 0, NULL, 0, e->in) !=
      MX_EXIT_OK)
    return reply_err("cannot read the inputs in %s", dir);
  e->fed = true;
  printf("ok\n");
}

static void run(served *e, int64_t n) {
  if (!e->fed) return reply_err("%s: no feeds yet", e->name);
  if (n < 1 || n > 100000) return reply_err("run needs a count from 1 to 100000");
  uint64_t *times = calloc((size_t)n, sizeof *times);
  if (!times) return reply_err("out of memory");
  for (int64_t k = 0; k < n; k++) {
    for (size_t o = 0; o < e->n_out; o++) mx_tensor_release(&e->out[o]);
    uint64_t t0 = mx__now_ns();
    if (mx_session_run(e->s, e->in, e->n_in, e->out, e->n_out) != MX_OK) {
      free(times);
      return reply_err("%s", mx_session_last_error(e->s));
    }
    times[k] = mx__now_ns() - t0;
  }
  printf("ok");
  for (int64_t k = 0; k < n; k++) printf(" %llu", (unsigned long long)times[k]);
  printf("\n");
  free(times);
}

int mx__bench_models_serve(int argc, char **argv) {
  int64_t threads = 1;
  mx_device_kind device = MX_DEVICE_INLINE;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--serve") == 0) continue;
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc && mx_cli_parse_int(argv[i + 1], &threads) &&
        threads >= 1 && threads <= 64) {
      i++;
      continue;
    }
    if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && mx_cli_parse_device(argv[i + 1], &device)) {
      i++;
      continue;
    }
    return mx_cli_usage_error("bench models",
                              "--serve takes only --threads N (1 to 64) and --device inline|cpu, not '%s'",
                              argv[i]);
  }
  printf("ready mixrt %s\n", MIXRT_VERSION_STRING);
  fflush(stdout);
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, stdin) >= 0) {
    char cmd[16] = "", name[64] = "", arg[1024] = "", arg2[32] = "";
    int words = sscanf(line, "%15s %63s %1023s %31s", cmd, name, arg, arg2);
    if (words < 1) continue;
    if (strcmp(cmd, "quit") == 0) break;
    served *e = find(name);
    int64_t n = 0;
    if (strcmp(cmd, "load") == 0 && words == 4)
      load(name, arg, arg2, (uint32_t)threads, device);
    else if (strcmp(cmd, "load") == 0)
      reply_err("load needs NAME MODEL hybrid|dynamic");
    else if (!e)
      reply_err("no session named %s", name);
    else if (strcmp(cmd, "feed") == 0 && words >= 3)
      feed(e, arg);
    else if (strcmp(cmd, "run") == 0 && words >= 3 && mx_cli_parse_int(arg, &n))
      run(e, n);
    else if (strcmp(cmd, "drop") == 0) {
      drop(e);
      printf("ok\n");
    } else
      reply_err("unknown request %s", cmd);
    fflush(stdout);
  }
  free(line);
  for (int k = 0; k < MAX_SESSIONS; k++)
    if (sessions[k].s) drop(&sessions[k]);
  return MX_EXIT_OK;
}
