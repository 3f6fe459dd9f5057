/* The MPI suite: every rank of `mpirun -np N mpi_collectives MODE` runs the same checks and
 * prints one line per check ("ok rank R: ..." or "FAIL rank R: ..."); tests/dist/run_mpi.sh
 * runs it with 2 and 4 ranks and reads the lines.
 *
 * MODE "all": before a communicator is given, a model cut for N ranks fails naming the node,
 * and a model cut for one rank is an identity (the single-rank reference); then each collective
 * (AllReduce sum and max, AllGather, ReduceScatter along axes 0 and 1, Broadcast, Send/Recv in a
 * ring) in float32, float16, bfloat16, int32 and int64 where it applies, on rank-dependent data,
 * equals the result computed locally from every rank's data; an AllReduce inside a static model
 * and inside a dynamic partition; a model cut for another size and a model that differs on one
 * rank are refused by mx_session_set_comm on every rank.
 * MODE "killed": the last rank exits (status 1) before the first collective; the others must
 * end within the timeout (run_mpi.sh measures it).
 * MODE "stalled": the last rank waits instead of joining the collective; the others must fail
 * with an error naming the node and the missing rank.
 * In both fault modes an optional second argument names an empty directory through which the
 * ranks still running wait for each other's report before leaving. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/half.h"
#include "mixrt/dist.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"

static int g_rank, g_size, g_failures;

#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (cond) {                                                     \
      printf("ok rank %d: ", g_rank);                               \
    } else {                                                        \
      printf("FAIL rank %d (%s:%d): ", g_rank, __FILE__, __LINE__); \
      g_failures++;                                                 \
    }                                                               \
    printf(__VA_ARGS__);                                            \
    printf("\n");                                                   \
    fflush(stdout);                                                 \
  } while (0)

/* Element i of rank r's input: small integers, exact in every dtype and in every sum. */
static double value_of(int r, int64_t i) { return (double)((r + 1) * (i % 5) - 2 * r + (int)(i % 3)); }

static void put(void *p, mx_dtype dt, int64_t i, double v) {
  switch (dt) {
    case MX_FLOAT32: ((float *)p)[i] = (float)v; break;
    case MX_FLOAT16: ((uint16_t *)p)[i] = mx__f32_to_f16((float)v); break;
    case MX_BFLOAT16: ((uint16_t *)p)[i] = mx__f32_to_bf16((float)v); break;
    case MX_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MX_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: break;
  }
}

static double get(const void *p, mx_dtype dt, int64_t i) {
  switch (dt) {
    case MX_FLOAT32: return ((const float *)p)[i];
    case MX_FLOAT16: return mx__f16_to_f32(((const uint16_t *)p)[i]);
    case MX_BFLOAT16: return mx__bf16_to_f32(((const uint16_t *)p)[i]);
    case MX_INT32: return ((const int32_t *)p)[i];
    case MX_INT64: return (double)((const int64_t *)p)[i];
    default: return 0;
  }
}

/* Rank r's input tensor of dims (host, owned). */
static mx_tensor input_of(int r, mx_dtype dt, int32_t rank, const int64_t *dims) {
  mx_tensor t;
  if (mx_tensor_alloc(dt, rank, dims, &t) != MX_OK) abort();
  int64_t n = 1;
  for (int32_t k = 0; k < rank; k++) n *= dims[k];
  for (int64_t i = 0; i < n; i++) put(t.data, dt, i, value_of(r, i));
  return t;
}

/* A graph x -> op -> y (op in domain "mixrt"); dims NULL: x is [n, 6] with n symbolic. */
static mx_graph *one_op_graph(const char *op, const mx_attr *attrs, size_t n_attrs, mx_dtype dt, int32_t rank,
                              const int64_t *dims) {
  mx_graph *g;
  if (mx_graph_create("collective", &g) != MX_OK) abort();
  if (mx_graph_set_opset(g, "mixrt", 1) != MX_OK) abort();
  mx_shape s = {.rank = rank};
  for (int32_t k = 0; k < rank; k++) s.dims[k] = dims[k];
  mx_value_id x, y;
  if (mx_graph_add_input(g, "x", dt, &s, &x) != MX_OK) abort();
  const char *out_names[] = {"y"};
  mx_node_desc d = {.op_type = op,
                    .domain = "mixrt",
                    .name = op,
                    .inputs = &x,
                    .n_inputs = 1,
                    .attrs = attrs,
                    .n_attrs = n_attrs,
                    .output_names = out_names,
                    .n_outputs = 1};
  if (mx_graph_add_node(g, &d, &y) != MX_OK) {
    printf("add_node %s: %s\n", op, mx_graph_last_error(g));
    abort();
  }
  if (mx_graph_add_output(g, y) != MX_OK) abort();
  return g;
}

/* Runs g on x through the reference interpreter; *y receives the output (caller releases). */
static mx_status run_reference(mx_graph *g, const mx_tensor *x, mx_tensor *y, char *msg, size_t cap) {
  mx_error err = {0};
  memset(y, 0, sizeof *y);
  mx_status st = mx_reference_run(g, x, 1, y, 1, &err);
  snprintf(msg, cap, "%s", err.message);
  return st;
}

/* --- before a communicator ------------------------------------------------------------------------ */

static void check_without_comm(void) {
  int64_t dims[2] = {3, 4};
  mx_tensor x = input_of(g_rank, MX_FLOAT32, 2, dims), y;
  char msg[512];
  mx_attr ws1 = mx_attr_int("world_size", 1);
  const char *ops[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
  for (size_t k = 0; k < 4; k++) {
    mx_graph *g = one_op_graph(ops[k], &ws1, 1, MX_FLOAT32, 2, dims);
    mx_status st = run_reference(g, &x, &y, msg, sizeof msg);
    bool same = st == MX_OK && y.rank == 2 && y.dims[0] == 3 && y.dims[1] == 4 &&
                memcmp(y.data, x.data, 12 * sizeof(float)) == 0;
    CHECK(same, "%s with world_size 1 is the identity (%s)", ops[k], st == MX_OK ? "ran" : msg);
    mx_tensor_release(&y);
    mx_graph_destroy(g);
  }
  mx_attr wsn = mx_attr_int("world_size", g_size);
  mx_graph *g = one_op_graph("AllReduce", &wsn, 1, MX_FLOAT32, 2, dims);
  mx_status st = run_reference(g, &x, &y, msg, sizeof msg);
  CHECK(st != MX_OK && strstr(msg, "AllReduce") && strstr(msg, "communicator"),
        "world_size %d without a communicator fails naming the node: %s", g_size, msg);
  mx_tensor_release(&y);
  mx_graph_destroy(g);
  mx_tensor_release(&x);
}

/* --- one collective through a session ------------------------------------------------------------- */

static uint32_t g_streams = 1; /* streams of the sessions session_for creates */

/* A session over g given communicator c; static_min_ops as the partitioner option. */
static mx_session *session_for(mx_graph *g, mx_comm *c, int64_t static_min_ops, mx_status *set_st, char *msg,
                               size_t cap) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.static_min_ops = static_min_ops;
  o.streams = g_streams;
  mx_session *s;
  mx_error err = {0};
  if (mx_session_create(&o, &s, &err) != MX_OK) {
    printf("session: %s\n", err.message);
    abort();
  }
  if (mx_session_load_graph(s, g) != MX_OK) {
    printf("load: %s\n", mx_session_last_error(s));
    abort();
  }
  *set_st = mx_session_set_comm(s, c);
  snprintf(msg, cap, "%s", mx_session_last_error(s));
  return s;
}

/* Expected element i of the op's output on this rank, from every rank's input (dims of x). */
static double expected(const char *op, int reduce_max, int64_t axis, int64_t root, int32_t rank,
                       const int64_t *dims, int64_t i) {
  int64_t inner = 1; /* elements per index of the axis */
  for (int32_t k = (int32_t)axis; k < rank; k++) inner *= dims[k];
  if (strcmp(op, "Broadcast") == 0) return value_of((int)root, i);
  if (strcmp(op, "AllGather") == 0) { /* output row o holds rank r's row o at r*inner */
    int64_t o = i / (inner * g_size), rest = i % (inner * g_size);
    return value_of((int)(rest / inner), o * inner + rest % inner);
  }
  int64_t src = i; /* AllReduce: the same element everywhere */
  if (strcmp(op, "ReduceScatter") == 0) {
    int64_t chunk = inner / g_size, o = i / chunk;
    src = o * inner + g_rank * chunk + i % chunk;
  }
  double acc = value_of(0, src);
  for (int r = 1; r < g_size; r++) {
    double v = value_of(r, src);
    acc = reduce_max ? (v > acc ? v : acc) : acc + v;
  }
  return acc;
}

static void check_collective(mx_comm *c, const char *op, mx_dtype dt, int reduce_max, int64_t axis) {
  int64_t dims[3] = {2 * g_size, 4, 3}; /* both axes 0 and 1 divide by 2 and 4 ranks */
  int32_t rank = 3;
  mx_attr attrs[3];
  size_t na = 0;
  attrs[na++] = mx_attr_int("world_size", g_size);
  int64_t root = g_size - 1;
  if (!strcmp(op, "AllReduce") || !strcmp(op, "ReduceScatter"))
    attrs[na++] = mx_attr_string("reduce", reduce_max ? "max" : "sum");
  if (!strcmp(op, "AllGather") || !strcmp(op, "ReduceScatter")) attrs[na++] = mx_attr_int("axis", axis);
  if (!strcmp(op, "Broadcast")) attrs[na++] = mx_attr_int("root", root);
  mx_graph *g = one_op_graph(op, attrs, na, dt, rank, dims);
  char msg[512];
  mx_status st;
  mx_session *s = session_for(g, c, 0, &st, msg, sizeof msg);
  mx_tensor x = input_of(g_rank, dt, rank, dims), y = {0};
  if (st == MX_OK) st = mx_session_run(s, &x, 1, &y, 1);
  if (st != MX_OK) snprintf(msg, sizeof msg, "%s", mx_session_last_error(s));
  int64_t want_dims[3] = {dims[0], dims[1], dims[2]};
  axis = axis < 0 ? axis + rank : axis; /* the attribute keeps the sign; the checks below need the dim */
  if (!strcmp(op, "AllGather")) want_dims[axis] *= g_size;
  if (!strcmp(op, "ReduceScatter")) want_dims[axis] /= g_size;
  bool good = st == MX_OK && y.rank == rank;
  for (int32_t k = 0; good && k < rank; k++) good = y.dims[k] == want_dims[k];
  int64_t n = want_dims[0] * want_dims[1] * want_dims[2], bad = -1;
  for (int64_t i = 0; good && i < n; i++)
    if (get(y.data, dt, i) != expected(op, reduce_max, axis, root, rank, dims, i)) {
      bad = i;
      good = false;
    }
  if (bad >= 0)
    snprintf(msg, sizeof msg, "element %lld is %g, expected %g", (long long)bad, get(y.data, dt, bad),
             expected(op, reduce_max, axis, root, rank, dims, bad));
  CHECK(good, "%s%s axis %lld %s over %d ranks equals the local reference%s%s", op, reduce_max ? " max" : "",
        (long long)axis, mx_dtype_name(dt), g_size, good ? "" : ": ", good ? "" : msg);
  mx_tensor_release(&x);
  mx_tensor_release(&y);
  mx_session_destroy(s);
}

/* Send to the next rank, Recv from the previous one (reference interpreter, node order). */
static void check_send_recv(void) {
  mx_graph *g;
  if (mx_graph_create("ring", &g) != MX_OK || mx_graph_set_opset(g, "mixrt", 1) != MX_OK) abort();
  mx_shape s = {.rank = 1, .dims = {5}};
  mx_value_id x, y;
  if (mx_graph_add_input(g, "x", MX_INT64, &s, &x) != MX_OK) abort();
  mx_attr send_attrs[] = {mx_attr_int("world_size", g_size), mx_attr_int("peer", (g_rank + 1) % g_size),
                          mx_attr_int("tag", 3)};
  mx_node_desc send = {
      .op_type = "Send", .domain = "mixrt", .inputs = &x, .n_inputs = 1, .attrs = send_attrs, .n_attrs = 3};
  int64_t shape[] = {5};
  mx_attr recv_attrs[] = {mx_attr_int("world_size", g_size),
                          mx_attr_int("peer", (g_rank + g_size - 1) % g_size), mx_attr_int("tag", 3),
                          mx_attr_int("dtype", MX_INT64), mx_attr_ints("shape", shape, 1)};
  const char *out_names[] = {"y"};
  mx_node_desc recv = {.op_type = "Recv",
                       .domain = "mixrt",
                       .attrs = recv_attrs,
                       .n_attrs = 5,
                       .output_names = out_names,
                       .n_outputs = 1};
  if (mx_graph_add_node(g, &send, NULL) != MX_OK || mx_graph_add_node(g, &recv, &y) != MX_OK ||
      mx_graph_add_output(g, y) != MX_OK) {
    printf("ring graph: %s\n", mx_graph_last_error(g));
    abort();
  }
  mx_tensor in = input_of(g_rank, MX_INT64, 1, shape), out;
  char msg[512];
  mx_status st = run_reference(g, &in, &out, msg, sizeof msg);
  int prev = (g_rank + g_size - 1) % g_size;
  bool good = st == MX_OK && out.rank == 1 && out.dims[0] == 5;
  for (int64_t i = 0; good && i < 5; i++) good = get(out.data, MX_INT64, i) == value_of(prev, i);
  CHECK(good, "Send to rank %d and Recv from rank %d in a ring%s%s", (g_rank + 1) % g_size, prev,
        st == MX_OK ? "" : ": ", st == MX_OK ? "" : msg);
  mx_tensor_release(&in);
  mx_tensor_release(&out);
  mx_graph_destroy(g);
}

/* --- a collective inside a static model and a dynamic partition --------------------------------- */

/* x [rows, 8] -> MatMul W_r (rank-dependent weights) -> AllReduce -> Add b -> y: a row-split
 * linear layer. rows < 0: the first dim is the symbol n. */
static mx_graph *linear_graph(int r, int64_t rows) {
  mx_graph *g;
  if (mx_graph_create("linear", &g) != MX_OK || mx_graph_set_opset(g, "mixrt", 1) != MX_OK) abort();
  mx_shape s = {.rank = 2, .dims = {rows, 8}};
  if (rows < 0) s.dims[0] = mx_sym_named(mx_graph_symtab(g), "n");
  int64_t wd[2] = {8, 8}, bd[1] = {8};
  mx_tensor w = input_of(r + 10, MX_FLOAT32, 2, wd), b = input_of(100, MX_FLOAT32, 1, bd);
  mx_value_id x, wv, bv, mm, red, y;
  if (mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x) != MX_OK ||
      mx_graph_add_constant(g, "w", &w, &wv) != MX_OK || mx_graph_add_constant(g, "b", &b, &bv) != MX_OK)
    abort();
  mx_attr ws = mx_attr_int("world_size", g_size);
  mx_node_desc ar = {.op_type = "AllReduce",
                     .domain = "mixrt",
                     .name = "block0/allreduce",
                     .inputs = &mm,
                     .n_inputs = 1,
                     .attrs = &ws,
                     .n_attrs = 1,
                     .n_outputs = 1};
  const char *out_names[] = {"y"};
  if (mx_graph_add_op(g, "MatMul", (mx_value_id[]){x, wv}, 2, NULL, 0, &mm) != MX_OK ||
      mx_graph_add_node(g, &ar, &red) != MX_OK)
    abort();
  mx_node_desc add = {.op_type = "Add",
                      .inputs = (mx_value_id[]){red, bv},
                      .n_inputs = 2,
                      .output_names = out_names,
                      .n_outputs = 1};
  if (mx_graph_add_node(g, &add, &y) != MX_OK || mx_graph_add_output(g, y) != MX_OK) abort();
  mx_tensor_release(&w);
  mx_tensor_release(&b);
  return g;
}

static void check_linear(mx_comm *c, bool dynamic) {
  int64_t rows = 3;
  mx_graph *g = linear_graph(g_rank, dynamic ? -1 : rows);
  char msg[512];
  mx_status st;
  mx_session *s = session_for(g, c, dynamic ? -1 : 0, &st, msg, sizeof msg);
  int64_t xd[2] = {rows, 8};
  mx_tensor x = input_of(g_rank, MX_FLOAT32, 2, xd), y = {0};
  mx_session_stats last = {0};
  for (int step = 0; st == MX_OK && step < 3; step++) {
    mx_tensor_release(&y);
    memset(&y, 0, sizeof y);
    st = mx_session_run(s, &x, 1, &y, 1);
  }
  if (st != MX_OK) snprintf(msg, sizeof msg, "%s", mx_session_last_error(s));
  if (st == MX_OK) st = mx_session_get_stats(s, &last, NULL);
  bool good = st == MX_OK && y.rank == 2 && y.dims[0] == rows && y.dims[1] == 8;
  for (int64_t i = 0; good && i < rows; i++)
    for (int64_t j = 0; good && j < 8; j++) {
      double want = value_of(100, j);
      for (int r = 0; r < g_size; r++)
        for (int64_t k = 0; k < 8; k++) want += value_of(r, i * 8 + k) * value_of(r + 10, k * 8 + j);
      if (get(y.data, MX_FLOAT32, i * 8 + j) != want) {
        snprintf(msg, sizeof msg, "y[%lld,%lld] is %g, expected %g", (long long)i, (long long)j,
                 get(y.data, MX_FLOAT32, i * 8 + j), want);
        good = false;
      }
    }
  bool path = dynamic ? last.dynamic_launches > 0 && last.static_executes == 0
                      : last.static_executes > 0 && last.dynamic_launches == 0;
  CHECK(good && path,
        "MatMul + AllReduce + Add in a %s (%llu static executes, %llu dynamic launches per step)%s%s",
        dynamic ? "dynamic partition" : "static model", (unsigned long long)last.static_executes,
        (unsigned long long)last.dynamic_launches, good ? "" : ": ", good ? "" : msg);
  mx_tensor_release(&x);
  mx_tensor_release(&y);
  mx_session_destroy(s);
}

/* --- models refused at load ----------------------------------------------------------------------- */

static void check_refusals(mx_comm *c) {
  char msg[512];
  mx_status st;
  int64_t dims[2] = {4, 4};
  /* Cut for another world size: refused on every rank, naming the node. */
  mx_attr ws = mx_attr_int("world_size", g_size + 1);
  mx_session *s =
      session_for(one_op_graph("AllReduce", &ws, 1, MX_FLOAT32, 2, dims), c, 0, &st, msg, sizeof msg);
  CHECK(st == MX_ERR_INVALID_GRAPH && strstr(msg, "'AllReduce'") && strstr(msg, "world_size"),
        "a model cut for %d ranks is refused: %s", g_size + 1, msg);
  mx_session_destroy(s);
  /* The last rank loads another model (a ReduceScatter where the others have an AllReduce). */
  ws = mx_attr_int("world_size", g_size);
  const char *op = g_rank == g_size - 1 ? "ReduceScatter" : "AllReduce";
  s = session_for(one_op_graph(op, &ws, 1, MX_FLOAT32, 2, dims), c, 0, &st, msg, sizeof msg);
  CHECK(st == MX_ERR_INVALID_GRAPH && strstr(msg, "different models"), "mismatched models are refused: %s",
        msg);
  mx_session_destroy(s);
  /* Two streams could start collectives in different orders on different ranks. */
  g_streams = 2;
  s = session_for(one_op_graph("AllReduce", &ws, 1, MX_FLOAT32, 2, dims), c, 0, &st, msg, sizeof msg);
  g_streams = 1;
  CHECK(st == MX_ERR_UNSUPPORTED && strstr(msg, "one stream"), "a session with 2 streams is refused: %s",
        msg);
  mx_session_destroy(s);
}

/* --- faults --------------------------------------------------------------------------------------- */

/* The first rank to leave makes mpirun end every other one, maybe before it has printed its
 * line; so the ranks still running agree through files in DONE_DIR (given by run_mpi.sh) and
 * leave only when each of the first g_size - 1 ranks has reported, or after 20 s. */
static void leave_together(const char *done_dir) {
  char path[512];
  if (done_dir) {
    snprintf(path, sizeof path, "%s/done.%d", done_dir, g_rank);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
  }
  fflush(stdout);
  for (int waited_ms = 0; done_dir && waited_ms < 20000; waited_ms += 50) {
    int reported = 0;
    for (int r = 0; r < g_size - 1; r++) {
      snprintf(path, sizeof path, "%s/done.%d", done_dir, r);
      reported += access(path, F_OK) == 0;
    }
    if (reported == g_size - 1) return;
    usleep(50 * 1000);
  }
}

static int run_fault(mx_comm *c, bool kill, const char *done_dir) {
  int64_t dims[2] = {4, 4};
  mx_attr ws = mx_attr_int("world_size", g_size);
  char msg[512];
  mx_status st;
  mx_session *s =
      session_for(one_op_graph("AllReduce", &ws, 1, MX_FLOAT32, 2, dims), c, 0, &st, msg, sizeof msg);
  if (st != MX_OK) {
    CHECK(false, "set_comm: %s", msg);
    return 1;
  }
  mx_comm_set_timeout_ms(c, 3000);
  if (g_rank == g_size - 1) {
    if (kill) {
      printf("rank %d exits before the collective\n", g_rank);
      fflush(stdout);
      exit(1);
    }
    /* Stalled: never joins; the others time out, hold their roll call and report. */
    leave_together(done_dir);
    printf("ok rank %d: stalled rank done\n", g_rank);
    fflush(stdout);
    _exit(0);
  }
  mx_tensor x = input_of(g_rank, MX_FLOAT32, 2, dims), y = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  st = mx_session_run(s, &x, 1, &y, 1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  const char *m = mx_session_last_error(s);
  char missing[32];
  snprintf(missing, sizeof missing, "rank(s) %d", g_size - 1);
  CHECK(st != MX_OK && sec < 10 && strstr(m, "AllReduce") && (kill || strstr(m, missing)),
        "the run fails in %.1f s: %s", sec, m);
  mx_tensor_release(&x);
  /* The communicator has a collective in flight: leave without MPI_Finalize. */
  leave_together(done_dir);
  _exit(g_failures ? 1 : 0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  mx_comm *c = NULL;
  mx_error err = {0};
  if (mx_comm_create_world(&c, &err) != MX_OK) {
    printf("FAIL: mx_comm_create_world: %s\n", err.message);
    return 1;
  }
  g_rank = mx_comm_rank(c);
  g_size = mx_comm_size(c);
  if (!strcmp(mode, "killed") || !strcmp(mode, "stalled"))
    return run_fault(c, !strcmp(mode, "killed"), argc > 2 ? argv[2] : NULL);
  check_without_comm();
  static const mx_dtype types[] = {MX_FLOAT32, MX_FLOAT16, MX_BFLOAT16, MX_INT32, MX_INT64};
  for (size_t t = 0; t < 5; t++) {
    check_collective(c, "AllReduce", types[t], 0, 0);
    check_collective(c, "AllReduce", types[t], 1, 0);
    check_collective(c, "AllGather", types[t], 0, 1);
    check_collective(c, "ReduceScatter", types[t], 0, 1);
    check_collective(c, "Broadcast", types[t], 0, 0);
  }
  check_collective(c, "AllGather", MX_FLOAT32, 0, 0);
  check_collective(c, "ReduceScatter", MX_FLOAT32, 1, 0);
  check_collective(c, "ReduceScatter", MX_FLOAT16, 0, -2); /* axis 1 counted from the end */
  check_collective(c, "AllGather", MX_BFLOAT16, 0, -1);
  check_send_recv();
  check_linear(c, false);
  check_linear(c, true);
  check_refusals(c);
  mx_comm_release(c);
  mx_comm_finalize_mpi();
  printf("rank %d: %d failure(s)\n", g_rank, g_failures);
  return g_failures ? 1 : 0;
}
