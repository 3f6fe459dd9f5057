/* The fuzz harnesses (see harness.h): decoding arbitrary bytes into calls of mixrt's loaders
 * and of session steps, with every resource released whatever the outcome. Sessions the
 * harnesses keep between calls live in one static table, created on first use and freed by
 * mxf_release. Nothing here asserts on a status: any status is a valid answer to a bad input;
 * only crashes, sanitizer reports, leaks, hangs and the explicit properties (a refused step
 * leaves the session usable and its results unchanged) are findings. */
#include "harness.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "mixrt/partition.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"
#include "mixrt/tensor.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/static_exec.h"
#include "static_exec/static_exec_impl.h"

/* Largest tensor (bytes) a harness allocates for an input or output: bigger ones are given with
 * no data, which must be refused. Keeps one input well below libFuzzer's malloc limit. */
#define MXF_MAX_TENSOR_BYTES ((size_t)4 << 20)
/* Device memory limit of the harnesses' devices: a hostile model that plans huge buffers meets
 * an out-of-memory error instead of exhausting the machine. */
#define MXF_DEVICE_LIMIT ((uint64_t)256 << 20)
enum { MXF_MAX_IO = 64 };

static void die(const char *what, const char *detail) {
  fprintf(stderr, "mixrt fuzz harness: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

/* --- byte reader ---------------------------------------------------------------------------- */

typedef struct reader {
  const uint8_t *p;
  size_t n, i; /* size, read position; reads past the end give zeros */
} reader;

static uint8_t rd8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }

/* --- zero-input steps (onnx and session_mxm targets) --------------------------------------- */

/* The dims of a printed shape ("[1, past_len, 16]"): literals as written, anything else 1.
 * False when the text is not a bracketed list of at most MX_MAX_RANK entries ("[*]"). */
static bool parse_shape(const char *text, int32_t *rank, int64_t *dims) {
  *rank = 0;
  if (!text || text[0] != '[') return false;
  const char *p = text + 1;
  while (*p == ' ') p++;
  if (*p == ']') return true;
  for (;;) {
    if (*rank >= MX_MAX_RANK) return false;
    char *end;
    long long v = strtoll(p, &end, 10);
    const char *q = p;
    while (*q && *q != ',' && *q != ']') q++;
    bool literal = end != p && (end == q || *end == ' ');
    if (*p == '*') return false;
    dims[(*rank)++] = literal && v >= 0 && v <= 64 ? v : 1;
    if (*q != ',') return *q == ']';
    p = q + 1;
    while (*p == ' ') p++;
  }
}

/* Runs one step of the loaded model with zeroed host inputs of the declared shapes (symbols 1).
 * Any status is fine; everything allocated is released. */
static void zero_step(mx_session *s) {
  size_t n_in = mx_session_input_count(s), n_out = mx_session_output_count(s);
  if (n_in > MXF_MAX_IO || n_out > MXF_MAX_IO) return;
  mx_tensor in[MXF_MAX_IO], out[MXF_MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  size_t total = 0;
  bool ok = true;
  for (size_t i = 0; i < n_in && ok; i++) {
    mx_io_info info;
    mx_tensor probe = {0};
    size_t nbytes = 0;
    ok = mx_session_input_info(s, i, &info) && parse_shape(info.shape, &probe.rank, probe.dims);
    probe.dtype = ok ? info.dtype : MX_DTYPE_UNDEFINED;
    ok = ok && mx_tensor_nbytes(&probe, &nbytes) && (total += nbytes) <= MXF_MAX_TENSOR_BYTES;
    ok = ok && mx_tensor_alloc(probe.dtype, probe.rank, probe.dims, &in[i]) == MX_OK;
  }
  if (ok && mx_session_run(s, in, n_in, out, n_out) == MX_OK)
    for (size_t k = 0; k < n_out; k++) mx_tensor_release(&out[k]);
  for (size_t i = 0; i < n_in; i++) mx_tensor_release(&in[i]);
}

/* A session on a new device of `kind` with the harnesses' memory limit. */
static mx_session *new_session(mx_device_kind kind, uint32_t streams, mx_executor_kind ex,
                               const mx_symbol_range *ranges, size_t n_ranges) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.kind = kind;
  o.device_options.memory_limit = MXF_DEVICE_LIMIT;
  o.device_options.fault_from_env = false;
  o.streams = streams;
  o.executor = ex;
  o.executor_threads = 2;
  o.symbol_ranges = ranges;
  o.n_symbol_ranges = n_ranges;
  mx_session *s = NULL;
  mx_error err;
  if (mx_session_create(&o, &s, &err) != MX_OK) die("cannot create a session", err.message);
  return s;
}

/* --- persistent state ----------------------------------------------------------------------- */

/* One model of the session_run target: its session and the result of its good step. */
typedef struct run_model {
  mx_session *s;
  size_t n_in, n_out;
  mx_tensor good_in[MXF_MAX_IO];  /* a well-formed step's inputs (owned) */
  mx_tensor good_out[MXF_MAX_IO]; /* what the session gave for them first (owned) */
} run_model;

static struct {
  mx_session *loader; /* the onnx and session_mxm targets' session */
  run_model run[MXF_RUN_MODELS];
} state;

static void remove_mxm_dir(void);

void mxf_release(void) {
  remove_mxm_dir();
  mx_session_destroy(state.loader);
  for (int m = 0; m < MXF_RUN_MODELS; m++) {
    run_model *rm = &state.run[m];
    for (size_t i = 0; i < MXF_MAX_IO; i++) {
      mx_tensor_release(&rm->good_in[i]);
      mx_tensor_release(&rm->good_out[i]);
    }
    mx_session_destroy(rm->s);
  }
  memset(&state, 0, sizeof state);
}

static mx_session *loader(void) {
  if (!state.loader) state.loader = new_session(MX_DEVICE_INLINE, 1, MX_EXECUTOR_SEQUENTIAL, NULL, 0);
  return state.loader;
}

/* --- onnx ----------------------------------------------------------------------------------- */

int mxf_onnx(const uint8_t *data, size_t size) {
  mx_graph *g = NULL;
  mx_partition *part = NULL;
  mx_error err;
  if (mx_onnx_load_memory(data, size, NULL, &g, &err) != MX_OK) goto done;
  if (mx_graph_optimize(g, NULL) != MX_OK) goto done;
  mx_partition_options po;
  mx_partition_options_init(&po);
  if (mx_partition_create(g, &po, &part, &err) != MX_OK) goto done;
  /* The whole pipeline accepted it: compile it in a session and run a step. */
  mx_session *s = loader();
  if (mx_session_load_memory(s, data, size) == MX_OK) zero_step(s);
done:
  mx_partition_destroy(part);
  mx_graph_destroy(g);
  return 0;
}

/* --- tensor_pb ------------------------------------------------------------------------------ */

int mxf_tensor_pb(const uint8_t *data, size_t size) {
  mx_tensor t = {0};
  char *name = NULL;
  mx_error err;
  if (mx_tensor_parse_pb(data, size, &t, &name, &err) == MX_OK) {
    /* Every byte the record claims must be readable. */
    size_t nbytes = 0;
    if (!mx_tensor_nbytes(&t, &nbytes)) die("a parsed tensor has invalid dims", NULL);
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < nbytes; i++) sum ^= ((const unsigned char *)t.data)[i];
    (void)sum;
  }
  mx_tensor_release(&t);
  free(name);
  return 0;
}

/* --- mxm (static plans) --------------------------------------------------------------------- */

/* Loads a plan onto a fresh inline device and runs it once with zeroed host tensors. */
static void run_plan(const mx_static_plan *plan) {
  size_t n_in = mx__static_plan_input_count(plan), n_out = mx__static_plan_output_count(plan);
  if (n_in > MXF_MAX_IO || n_out > MXF_MAX_IO) return;
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = MX_DEVICE_INLINE;
  o.memory_limit = MXF_DEVICE_LIMIT;
  o.fault_from_env = false;
  mx_device *dev = NULL;
  mx_stream *stream = NULL;
  mx_static_model *m = NULL;
  mx_tensor in[MXF_MAX_IO], out[MXF_MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  mx_error err;
  if (mx_device_create(&o, &dev, &err) != MX_OK) die("cannot create a device", err.message);
  if (mx_stream_create(dev, 0, &stream) != MX_OK) die("cannot create a stream", mx_device_last_error(dev));
  if (mx__static_model_create(dev, plan, NULL, &m, &err) != MX_OK) goto done;
  size_t total = 0;
  for (size_t k = 0; k < n_in + n_out; k++) {
    mx_static_io io;
    bool input = k < n_in;
    if (!(input ? mx__static_model_input(m, k, &io) : mx__static_model_output(m, k - n_in, &io))) goto done;
    if (io.nbytes > MXF_MAX_TENSOR_BYTES || (total += io.nbytes) > MXF_MAX_TENSOR_BYTES) goto done;
    if (mx_tensor_alloc(io.dtype, io.rank, io.dims, input ? &in[k] : &out[k - n_in]) != MX_OK) goto done;
  }
  if (mx__static_model_update_args(m, in, n_in, out, n_out) != MX_OK) goto done;
  if (mx__static_model_execute(m, stream) != MX_OK) goto done;
  MX_IGNORE_STATUS(mx_stream_synchronize(stream)); /* any status is fine */
done:
  MX_IGNORE_STATUS(mx_stream_synchronize(stream));
  mx__static_model_destroy(m);
  for (size_t k = 0; k < MXF_MAX_IO; k++) {
    mx_tensor_release(&in[k]);
    mx_tensor_release(&out[k]);
  }
  mx_stream_destroy(stream);
  mx_device_destroy(dev);
}

/* .mxm files carry checksums of their header and payload, which almost every mutation would
 * break: the loaders would then never look further. The harnesses therefore recompute them
 * (header payload size and checksum, then the header's own checksum) when the input has the
 * container layout, so mutations reach the message parsing and the plan checks. The checksum
 * paths themselves are covered by tests/static_exec. *out is malloc'd (free()) or NULL when the
 * input is passed on unchanged. */
static void mxm_fixup(const uint8_t *d, size_t n, uint8_t **out, size_t *out_n) {
  *out = NULL;
  *out_n = 0;
  if (n < 24 || memcmp(d, "MIXRTMXM", 8) != 0) return;
  uint32_t hsz = (uint32_t)d[12] | (uint32_t)d[13] << 8 | (uint32_t)d[14] << 16 | (uint32_t)d[15] << 24;
  if (hsz > n - 24) return;
  Mxm__FileHeader *h = mxm__file_header__unpack(NULL, hsz, d + 24);
  if (!h) return;
  size_t rest = n - 24 - hsz;
  h->payload_size = rest;
  h->payload_checksum = mx__mxm_checksum(d + 24 + hsz, rest);
  size_t nh = mxm__file_header__get_packed_size(h);
  uint8_t *b = malloc(24 + nh + rest);
  if (b) {
    memcpy(b, d, 24);
    mxm__file_header__pack(h, b + 24);
    for (int i = 0; i < 4; i++) b[12 + i] = (uint8_t)(nh >> (8 * i));
    uint64_t c = mx__mxm_checksum(b + 24, nh);
    for (int i = 0; i < 8; i++) b[16 + i] = (uint8_t)(c >> (8 * i));
    if (rest) memcpy(b + 24 + nh, d + 24 + hsz, rest);
    *out = b;
    *out_n = 24 + nh + rest;
  }
  mxm__file_header__free_unpacked(h, NULL);
}

int mxf_mxm(const uint8_t *data, size_t size) {
  mx_static_plan *plan = NULL;
  mx_error err;
  uint8_t *fixed;
  size_t n;
  mxm_fixup(data, size, &fixed, &n);
  if (mx__mxm_load_memory(fixed ? fixed : data, fixed ? n : size, "fuzz input", &plan, &err) == MX_OK)
    run_plan(plan);
  mx__static_plan_destroy(plan);
  free(fixed);
  return 0;
}

/* --- session_mxm ---------------------------------------------------------------------------- */

/* The directory the session_mxm target writes its file into (created once per process): a
 * weights side file named by a hostile .mxm can only be looked up in there. */
static char mxm_dir[256];

static void remove_mxm_dir(void) {
  if (mxm_dir[0]) rmdir(mxm_dir);
  mxm_dir[0] = '\0';
}

int mxf_session_mxm(const uint8_t *data, size_t size) {
  if (!mxm_dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(mxm_dir, sizeof mxm_dir, "%s/mixrt-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(mxm_dir)) die("cannot create a temporary directory", mxm_dir);
    static bool registered;
    if (!registered) atexit(remove_mxm_dir);
    registered = true;
  }
  char path[300];
  snprintf(path, sizeof path, "%s/model.mxm", mxm_dir);
  uint8_t *fixed;
  size_t n;
  mxm_fixup(data, size, &fixed, &n);
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot write", path);
  size_t want = fixed ? n : size;
  if (want && fwrite(fixed ? fixed : data, 1, want, f) != want) die("cannot write", path);
  if (fclose(f) != 0) die("cannot write", path);
  free(fixed);
  mx_session *s = loader();
  if (mx_session_load_file(s, path) == MX_OK) zero_step(s);
  unlink(path);
  return 0;
}

/* --- session_run ---------------------------------------------------------------------------- */

/* Symbols of a model's inputs, in order of first appearance (at most MXF_RUN_SYMS). */
enum { MXF_RUN_SYMS = 4 };

typedef struct io_decl {
  mx_dtype dtype;
  int32_t rank;
  int64_t dims[MX_MAX_RANK]; /* literal dims; -1 - k for the k-th symbol */
  const char *name;          /* borrowed from the session */
} io_decl;

typedef struct decl_set {
  io_decl in[MXF_MAX_IO], out[MXF_MAX_IO];
  size_t n_in, n_out;
  char syms[MXF_RUN_SYMS][32]; /* symbol names */
  size_t n_syms;
} decl_set;

/* Reads a printed shape into d, numbering its symbols in ds->syms. */
static bool parse_decl(decl_set *ds, const char *text, io_decl *d) {
  d->rank = 0;
  if (!text || text[0] != '[') return false;
  const char *p = text + 1;
  while (*p == ' ') p++;
  if (*p == ']') return true;
  for (;;) {
    if (d->rank >= MX_MAX_RANK || *p == '*') return false;
    const char *q = p;
    while (*q && *q != ',' && *q != ']') q++;
    char tok[32];
    size_t len = (size_t)(q - p);
    while (len && p[len - 1] == ' ') len--;
    if (len == 0 || len >= sizeof tok) return false;
    memcpy(tok, p, len);
    tok[len] = '\0';
    char *end;
    long long v = strtoll(tok, &end, 10);
    if (*end == '\0') {
      d->dims[d->rank++] = v;
    } else {
      size_t k = 0;
      while (k < ds->n_syms && strcmp(ds->syms[k], tok) != 0) k++;
      if (k == ds->n_syms) {
        if (k == MXF_RUN_SYMS) return false;
        snprintf(ds->syms[ds->n_syms++], sizeof ds->syms[0], "%s", tok);
      }
      d->dims[d->rank++] = -1 - (int64_t)k;
    }
    if (*q != ',') return *q == ']';
    p = q + 1;
    while (*p == ' ') p++;
  }
}

static bool describe(mx_session *s, decl_set *ds) {
  memset(ds, 0, sizeof *ds);
  ds->n_in = mx_session_input_count(s);
  ds->n_out = mx_session_output_count(s);
  if (ds->n_in > MXF_MAX_IO || ds->n_out > MXF_MAX_IO) return false;
  for (size_t k = 0; k < ds->n_in + ds->n_out; k++) {
    bool input = k < ds->n_in;
    io_decl *d = input ? &ds->in[k] : &ds->out[k - ds->n_in];
    mx_io_info info;
    if (!(input ? mx_session_input_info(s, k, &info) : mx_session_output_info(s, k - ds->n_in, &info)))
      return false;
    d->dtype = info.dtype;
    d->name = info.name;
    /* Output shapes may hold expressions ("past_len + 1"): those count as their own symbols. */
    if (!parse_decl(ds, info.shape, d)) {
      if (input) return false;
      d->rank = -1;
    }
  }
  return true;
}

static mx_status build_model(unsigned m, mx_graph **g) {
  mx_error err;
  switch (m) {
    case MXF_RUN_LLAMA:
    case MXF_RUN_LLAMA_MT: return mx_model_llama(NULL, g, &err);
    case MXF_RUN_MOE: return mx_model_moe(NULL, g, &err);
    default: return mx_model_encoder(NULL, g, &err);
  }
}

/* Values of a well-formed step, drawn from a seed. */
static uint64_t mix(uint64_t *st) {
  uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void fill_good(mx_tensor *t, uint64_t *st) {
  int64_t n = 0;
  mx_tensor_numel(t, &n);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = mix(st);
    if (t->dtype == MX_FLOAT32)
      ((float *)t->data)[i] = (float)(int)(r % 2001 - 1000) / 1000.0f;
    else if (t->dtype == MX_INT64)
      ((int64_t *)t->data)[i] = (int64_t)(r % 64);
  }
}

/* Creates the session of model m and runs its good step once (symbols 2) for the baseline. */
static run_model *run_model_get(unsigned m) {
  run_model *rm = &state.run[m];
  if (rm->s) return rm;
  static const mx_symbol_range llama_ranges[] = {{"past_len", 0, 512}};
  switch (m) {
    case MXF_RUN_LLAMA:
      rm->s = new_session(MX_DEVICE_INLINE, 1, MX_EXECUTOR_SEQUENTIAL, llama_ranges, 1);
      break;
    case MXF_RUN_LLAMA_MT: rm->s = new_session(MX_DEVICE_CPU, 2, MX_EXECUTOR_MULTI_THREAD, NULL, 0); break;
    case MXF_RUN_MOE: rm->s = new_session(MX_DEVICE_INLINE, 1, MX_EXECUTOR_SEQUENTIAL, NULL, 0); break;
    default: rm->s = new_session(MX_DEVICE_INLINE, 2, MX_EXECUTOR_TOPOLOGICAL, NULL, 0); break;
  }
  mx_graph *g = NULL;
  if (build_model(m, &g) != MX_OK) die("cannot build a model", NULL);
  if (mx_session_load_graph(rm->s, g) != MX_OK) die("cannot load a model", mx_session_last_error(rm->s));
  decl_set ds;
  if (!describe(rm->s, &ds)) die("cannot describe a model", NULL);
  rm->n_in = ds.n_in;
  rm->n_out = ds.n_out;
  uint64_t seed = 7 + m;
  for (size_t i = 0; i < ds.n_in; i++) {
    int64_t dims[MX_MAX_RANK];
    for (int32_t k = 0; k < ds.in[i].rank; k++) dims[k] = ds.in[i].dims[k] < 0 ? 2 : ds.in[i].dims[k];
    if (mx_tensor_alloc(ds.in[i].dtype, ds.in[i].rank, dims, &rm->good_in[i]) != MX_OK)
      die("out of memory", NULL);
    fill_good(&rm->good_in[i], &seed);
  }
  if (mx_session_run(rm->s, rm->good_in, rm->n_in, rm->good_out, rm->n_out) != MX_OK)
    die("the good step fails", mx_session_last_error(rm->s));
  return rm;
}

/* The property: after whatever the fuzz input did, the good step runs and equals the baseline. */
static void check_good(unsigned m, run_model *rm) {
  mx_tensor out[MXF_MAX_IO];
  memset(out, 0, sizeof out);
  if (mx_session_run(rm->s, rm->good_in, rm->n_in, out, rm->n_out) != MX_OK) {
    char why[300];
    snprintf(why, sizeof why, "model %u: %s", m, mx_session_last_error(rm->s));
    die("a session is unusable after a fuzz input", why);
  }
  for (size_t k = 0; k < rm->n_out; k++) {
    char why[256];
    if (!mx_tensor_allclose(&out[k], &rm->good_out[k], 0.0, 0.0, why, sizeof why))
      die("the good step's result changed after a fuzz input", why);
    mx_tensor_release(&out[k]);
  }
}

/* Dims a decoded "wild" choice takes: edges, the 2^40-element size of the limits tests,
 * overflowing products and negatives. */
static const int64_t wild_dims[] = {0,    1,       2,         3,         17,        255, 1024,
                                    4096, 1 << 20, 1ll << 31, 1ll << 40, INT64_MAX, -1,  INT64_MIN};
static const mx_dtype all_dtypes[] = {MX_FLOAT32,         MX_UINT8,    MX_INT8,      MX_INT16,   MX_INT32,
                                      MX_INT64,           MX_BOOL,     MX_FLOAT16,   MX_FLOAT64, MX_BFLOAT16,
                                      MX_DTYPE_UNDEFINED, (mx_dtype)4, (mx_dtype)200};

/* One caller tensor the harness built: what to free after the step. */
typedef struct owned_buf {
  void *host;   /* malloc'd host data */
  void *device; /* device allocation */
} owned_buf;

/* Allocates and fills the data of t (nbytes) as the mode asks. False: none given (too big). */
static bool give_data(mx_session *s, mx_tensor *t, size_t nbytes, uint8_t mode, reader *r, owned_buf *ob) {
  if (nbytes > MXF_MAX_TENSOR_BYTES) return false;
  unsigned char *h = malloc(nbytes ? nbytes : 1);
  if (!h) return false;
  int64_t n = 0;
  size_t es = mx_dtype_size(t->dtype);
  bool counted = mx_tensor_numel(t, &n) && es;
  for (size_t i = 0; i < nbytes; i++) h[i] = 0;
  if ((mode & 3) == 1) {
    for (size_t i = 0; i < nbytes; i++) h[i] = rd8(r); /* raw bytes: NaNs, huge ids */
  } else if (counted && (mode & 3) != 2) {
    for (int64_t i = 0; i < n; i++) {
      uint8_t b = rd8(r);
      switch (t->dtype) {
        case MX_FLOAT32: ((float *)h)[i] = (float)(int8_t)b / 64.0f; break;
        case MX_INT64: ((int64_t *)h)[i] = b % 64; break;
        case MX_INT32: ((int32_t *)h)[i] = b % 64; break;
        default: h[(size_t)i * es] = b; break;
      }
    }
  }
  if (mode & 8) {
    /* In device memory. */
    void *d = NULL;
    mx_device *dev = mx_session_device(s);
    if (mx_device_alloc(dev, nbytes ? nbytes : 1, 0, &d) != MX_OK) {
      free(h);
      return false;
    }
    MX_IGNORE_STATUS(
        mx_device_copy(dev, d, h, nbytes, MX_COPY_H2D)); /* a failed copy is a run input like any */
    free(h);
    t->data = d;
    t->placement = MX_DEVICE;
    ob->device = d;
    return true;
  }
  t->data = h;
  t->placement = MX_HOST;
  ob->host = h;
  return true;
}

/* Decodes one tensor of declaration d: mode byte, dtype, rank, dims (symbols from sym[]). */
static void decode_tensor(mx_session *s, const io_decl *d, const int64_t *sym, reader *r, mx_tensor *t,
                          owned_buf *ob, bool output) {
  uint8_t mode = rd8(r);
  memset(t, 0, sizeof *t);
  t->dtype = d->dtype;
  if ((mode & 0x70) == 0x70) t->dtype = all_dtypes[rd8(r) % (sizeof all_dtypes / sizeof all_dtypes[0])];
  t->rank = d->rank < 0 ? 1 : d->rank;
  if ((mode & 0xf0) == 0x60) {
    uint8_t rk = rd8(r);
    t->rank = (rk & 0x80) ? -(int32_t)(rk & 3) : (int32_t)(rk % (MX_MAX_RANK + 2));
  }
  for (int32_t k = 0; k < t->rank && k < MX_MAX_RANK; k++) {
    int64_t v = d->rank < 0 || k >= d->rank ? 1 : d->dims[k] >= 0 ? d->dims[k] : sym[-1 - d->dims[k]];
    if ((mode & 0xf0) == 0x50) {
      uint8_t b = rd8(r);
      if (b & 0x80)
        v = wild_dims[b % (sizeof wild_dims / sizeof wild_dims[0])];
      else if (b & 0x40)
        v = b & 0x3f;
    }
    t->dims[k] = v;
  }
  size_t nbytes = 0;
  bool sized = t->rank >= 0 && t->rank <= MX_MAX_RANK && mx_tensor_nbytes(t, &nbytes);
  if (output && !(mode & 4)) return; /* the session allocates it */
  if (sized) give_data(s, t, nbytes, mode, r, ob);
  if ((mode & 0xf0) == 0x40 && !output) {
    t->data = NULL; /* no data with a non-empty shape must be refused */
  }
}

int mxf_session_run(const uint8_t *data, size_t size) {
  reader r = {data, size, 0};
  unsigned m = rd8(&r) % MXF_RUN_MODELS;
  run_model *rm = run_model_get(m);
  mx_session *s = rm->s;
  decl_set ds;
  if (!describe(s, &ds)) die("cannot describe a model", NULL);
  int64_t sym[MXF_RUN_SYMS];
  for (size_t k = 0; k < MXF_RUN_SYMS; k++) {
    uint8_t b = rd8(&r);
    sym[k] = (b & 0x80) && (b & 0x40) ? wild_dims[b % (sizeof wild_dims / sizeof wild_dims[0])] : b;
  }
  uint8_t shape = rd8(&r); /* how the call is made: counts, names */
  mx_tensor in[MXF_MAX_IO + 1], out[MXF_MAX_IO + 1];
  owned_buf ob_in[MXF_MAX_IO + 1], ob_out[MXF_MAX_IO + 1];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  memset(ob_in, 0, sizeof ob_in);
  memset(ob_out, 0, sizeof ob_out);
  size_t n_in = ds.n_in, n_out = ds.n_out;
  if ((shape & 0x0f) == 1 && n_in) n_in--;
  if ((shape & 0x0f) == 2) n_in++;
  if ((shape & 0xf0) == 0x10 && n_out) n_out--;
  for (size_t i = 0; i < n_in; i++) {
    const io_decl *d = i < ds.n_in ? &ds.in[i] : &ds.in[0];
    decode_tensor(s, d, sym, &r, &in[i], &ob_in[i], false);
    if (shape & 0x20) in[i].name = (shape & 0x40) && i == 0 ? "no_such_input" : d->name;
  }
  for (size_t k = 0; k < n_out; k++) decode_tensor(s, &ds.out[k], sym, &r, &out[k], &ob_out[k], true);
  MX_IGNORE_STATUS(mx_session_run(s, in, n_in, out, n_out)); /* any status is fine; no crash, no leak */
  /* Outputs the session allocated are the caller's (released on failure by the session). */
  for (size_t k = 0; k < n_out; k++) {
    if (ob_out[k].host || ob_out[k].device) continue;
    mx_tensor_release(&out[k]);
  }
  mx_device *dev = mx_session_device(s);
  for (size_t k = 0; k <= MXF_MAX_IO; k++) {
    free(ob_in[k].host);
    free(ob_out[k].host);
    mx_device_free(dev, ob_in[k].device);
    mx_device_free(dev, ob_out[k].device);
  }
  check_good(m, rm);
  return 0;
}

size_t mxf_session_run_seed(unsigned model, const uint8_t *sym, size_t n_sym, uint64_t seed, uint8_t *out,
                            size_t cap) {
  /* The decoding of mxf_session_run, mirrored: model byte, MXF_RUN_SYMS symbol bytes, call-shape
   * byte 0 (every input and output by position), then per input a mode byte 0 (declared dtype,
   * rank and dims; small values) and one value byte per element, then per output a mode byte 0
   * (the session allocates it). */
  model %= MXF_RUN_MODELS;
  run_model *rm = run_model_get(model);
  decl_set ds;
  if (!describe(rm->s, &ds)) return 0;
  int64_t val[MXF_RUN_SYMS];
  size_t n = 0;
  if (cap < 2 + MXF_RUN_SYMS) return 0;
  out[n++] = (uint8_t)model;
  for (size_t k = 0; k < MXF_RUN_SYMS; k++) {
    uint8_t b = k < n_sym && sym[k] < 0xc0 ? sym[k] : 1;
    out[n++] = b;
    val[k] = b;
  }
  out[n++] = 0;
  uint64_t st = seed;
  for (size_t i = 0; i < ds.n_in; i++) {
    int64_t numel = 1;
    for (int32_t k = 0; k < ds.in[i].rank; k++)
      numel *= ds.in[i].dims[k] >= 0 ? ds.in[i].dims[k] : val[-1 - ds.in[i].dims[k]];
    if (n + 1 + (size_t)numel > cap) return 0;
    out[n++] = 0;
    for (int64_t e = 0; e < numel; e++) out[n++] = (uint8_t)mix(&st);
  }
  for (size_t k = 0; k < ds.n_out; k++) {
    if (n + 1 > cap) return 0;
    out[n++] = 0;
  }
  return n;
}

/* --- the table ------------------------------------------------------------------------------- */

const mxf_target mxf_targets[] = {
    {"onnx", mxf_onnx},
    {"tensor_pb", mxf_tensor_pb},
    {"mxm", mxf_mxm},
    {"session_mxm", mxf_session_mxm},
    {"session_run", mxf_session_run},
    {NULL, NULL},
};

const mxf_target *mxf_target_find(const char *name) {
  for (const mxf_target *t = mxf_targets; t->name; t++)
    if (name && strcmp(t->name, name) == 0) return t;
  return NULL;
}
