/* fuzz_seeds DIR: writes the generated part of the fuzz seed corpora into DIR/<target>/:
 *   onnx/         small llama, MoE and encoder models (mixrt's generators, shrunken so that
 *                 mutations stay fast) as ONNX, and a nested-graph model (an If inside a Loop
 *                 body, both branches reading outer-scope values) and an ImageDecoder of a
 *                 constant PPM
 *   tensor_pb/    onnx.TensorProto files of every dtype, raw and typed storage, empty and
 *                 scalar shapes
 *   mxm/          static-plan .mxm files of the llama step with past_len bound and of the
 *                 encoder with batch and seq bound
 *   session_run/  inputs that decode to well-formed steps of every session_run model
 * fuzz/corpus.sh adds the conformance models and tensors and the session .mxm files (written by
 * `mixrt compile`). Exit status 0 on success, 1 with a message otherwise. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "mixrt/graph.h"
#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "static_exec/static_exec.h"

static const char *root;

static int write_seed(const char *target, const char *name, const void *data, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", path, strerror(errno));
    return 1;
  }
  snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
  FILE *f = fopen(path, "wb");
  int rc = !f || fwrite(data, 1, size, f) != size;
  if (f && fclose(f) != 0) rc = 1;
  if (rc) fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
  return rc;
}

static void small_llama(mx_llama_config *c) {
  mx_llama_config_default(c);
  c->layers = 1;
  c->hidden = 16;
  c->heads = 2;
  c->kv_heads = 1;
  c->ffn = 24;
  c->vocab = 32;
  c->max_pos = 16;
}

static void small_moe(mx_moe_config *c) {
  mx_moe_config_default(c);
  c->hidden = 8;
  c->ffn = 8;
  c->experts = 3;
}

static void small_encoder(mx_encoder_config *c) {
  mx_encoder_config_default(c);
  c->hidden = 16;
  c->heads = 2;
  c->max_pos = 8;
}

/* Builds model `which` (0 llama, 1 moe, 2 encoder) in its small form. */
static mx_status build(int which, mx_graph **g, mx_error *err) {
  mx_llama_config lc;
  mx_moe_config mc;
  mx_encoder_config ec;
  small_llama(&lc);
  small_moe(&mc);
  small_encoder(&ec);
  if (which == 0) return mx_model_llama(&lc, g, err);
  if (which == 1) return mx_model_moe(&mc, g, err);
  return mx_model_encoder(&ec, g, err);
}

/* Nested graphs: Loop(m, cond, acc) whose body adds 1 to acc in its first two iterations and x
 * afterwards, through an If whose branches capture acc (from the body) and one / x (from the
 * root), so mutations reach subgraph import, captures and nested inference. */
static mx_status build_nested(mx_graph **out, mx_error *err) {
  mx_graph *g = NULL, *body = NULL, *th = NULL, *el = NULL;
  mx_status st = mx_graph_create("if_in_loop", &g);
  if (st != MX_OK) return st;
  int64_t trips = 4, two = 2;
  float zero = 0.0f, one = 1.0f;
  mx_tensor tm = {.dtype = MX_INT64, .rank = 0, .data = &trips};
  mx_tensor t2 = {.dtype = MX_INT64, .rank = 0, .data = &two};
  mx_tensor t0 = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &zero};
  mx_tensor t1 = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &one};
  mx_shape s1 = {.rank = 1, .dims = {1}}, s0 = {.rank = 0};
  mx_value_id m, acc0, x, c2, c1, it, ci, acc, small, y, acc1, keep, res;
  mx_graph *cur = g;
  if (st == MX_OK) st = mx_graph_add_input(g, "x", MX_FLOAT32, &s1, &x);
  if (st == MX_OK) st = mx_graph_add_constant(g, "m", &tm, &m);
  if (st == MX_OK) st = mx_graph_add_constant(g, "acc0", &t0, &acc0);
  if (st == MX_OK) st = mx_graph_add_constant(g, "one", &t1, &c1);
  if (st == MX_OK) st = mx_graph_add_constant(g, "two", &t2, &c2);
  if (st == MX_OK) st = mx_graph_create_subgraph(g, "body", &body);
  if (st == MX_OK) cur = body;
  if (st == MX_OK) st = mx_graph_add_input(body, "iter", MX_INT64, &s0, &it);
  if (st == MX_OK) st = mx_graph_add_input(body, "cond_in", MX_BOOL, &s0, &ci);
  if (st == MX_OK) st = mx_graph_add_input(body, "acc", MX_FLOAT32, &s1, &acc);
  if (st == MX_OK) st = mx_graph_add_outer(body, "two", &c2);
  if (st == MX_OK) st = mx_graph_add_op(body, "Less", (mx_value_id[]){it, c2}, 2, NULL, 0, &small);
  if (st == MX_OK) st = mx_graph_create_subgraph(body, "then", &th);
  if (st == MX_OK) cur = th;
  if (st == MX_OK) st = mx_graph_add_outer(th, "acc", &acc);
  if (st == MX_OK) st = mx_graph_add_outer(th, "one", &c1);
  if (st == MX_OK) st = mx_graph_add_op(th, "Add", (mx_value_id[]){acc, c1}, 2, NULL, 0, &y);
  if (st == MX_OK) st = mx_graph_add_output(th, y);
  if (st == MX_OK) st = mx_graph_create_subgraph(body, "else", &el);
  if (st == MX_OK) cur = el;
  if (st == MX_OK) st = mx_graph_add_outer(el, "acc", &acc);
  if (st == MX_OK) st = mx_graph_add_outer(el, "x", &x);
  if (st == MX_OK) st = mx_graph_add_op(el, "Add", (mx_value_id[]){acc, x}, 2, NULL, 0, &y);
  if (st == MX_OK) st = mx_graph_add_output(el, y);
  if (st == MX_OK) {
    cur = body;
    mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
    mx_node_desc d = {.op_type = "If",
                      .name = "inner_if",
                      .inputs = &small,
                      .n_inputs = 1,
                      .attrs = br,
                      .n_attrs = 2,
                      .n_outputs = 1};
    st = mx_graph_add_node(body, &d, &acc1);
  }
  if (st == MX_OK) st = mx_graph_add_op(body, "Identity", &ci, 1, NULL, 0, &keep);
  if (st == MX_OK) st = mx_graph_add_output(body, keep);
  if (st == MX_OK) st = mx_graph_add_output(body, acc1);
  if (st == MX_OK) {
    cur = g;
    mx_attr a = mx_attr_graph("body", body);
    mx_node_desc d = {.op_type = "Loop",
                      .name = "outer_loop",
                      .inputs = (mx_value_id[]){m, MX_NO_VALUE, acc0},
                      .n_inputs = 3,
                      .attrs = &a,
                      .n_attrs = 1,
                      .n_outputs = 1};
    st = mx_graph_add_node(g, &d, &res);
  }
  if (st == MX_OK) st = mx_graph_add_output(g, res);
  if (st == MX_OK) st = mx_graph_infer(g);
  if (st != MX_OK) {
    snprintf(err->message, sizeof err->message, "%s", mx_graph_last_error(cur));
    mx_graph_destroy(g);
    return st;
  }
  *out = g;
  return MX_OK;
}

/* ImageDecoder on a constant 2x2 binary PPM: mutations of the model reach the image decoders
 * through inference (which reads the header) and constant folding (which decodes). */
static mx_status build_image(mx_graph **out, mx_error *err) {
  static const uint8_t ppm[] = "P6\n2 2\n255\n\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0";
  mx_graph *g = NULL;
  mx_status st = mx_graph_create("image_decoder", &g);
  if (st != MX_OK) return st;
  mx_tensor t = {.dtype = MX_UINT8, .rank = 1, .dims = {(int64_t)sizeof ppm - 1}, .data = (void *)ppm};
  mx_attr a = mx_attr_string("pixel_format", "BGR");
  mx_value_id enc, y;
  st = mx_graph_add_constant(g, "encoded", &t, &enc);
  if (st == MX_OK) st = mx_graph_add_op(g, "ImageDecoder", &enc, 1, &a, 1, &y);
  if (st == MX_OK) st = mx_graph_add_output(g, y);
  if (st == MX_OK) st = mx_graph_infer(g);
  if (st != MX_OK) {
    snprintf(err->message, sizeof err->message, "%s", mx_graph_last_error(g));
    mx_graph_destroy(g);
    return st;
  }
  *out = g;
  return MX_OK;
}

static int onnx_seeds(void) {
  static const char *names[] = {"llama.onnx", "moe.onnx", "encoder.onnx", "if_in_loop.onnx",
                                "image_decoder.onnx"};
  int rc = 0;
  for (int w = 0; w < 5 && !rc; w++) {
    mx_graph *g = NULL;
    void *data = NULL;
    size_t size = 0;
    mx_error err;
    mx_status st = w == 4 ? build_image(&g, &err) : w == 3 ? build_nested(&g, &err) : build(w, &g, &err);
    if (st == MX_OK) st = mx_onnx_save_memory(g, &data, &size, &err);
    if (st != MX_OK) fprintf(stderr, "fuzz_seeds: %s: %s\n", names[w], err.message);
    rc = st != MX_OK || write_seed("onnx", names[w], data, size);
    free(data);
    mx_graph_destroy(g);
  }
  return rc;
}

/* One TensorProto of the given ONNX data type and dims, with its values in raw_data (raw) or
 * in the typed field of that type. */
static int tensor_seed(const char *name, int32_t data_type, const int64_t *dims, size_t rank, bool raw) {
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  int64_t n = 1;
  for (size_t k = 0; k < rank; k++) n *= dims[k];
  float f[64];
  int64_t i64[64];
  int32_t i32[64];
  double f64[64];
  uint8_t bytes[64 * 8];
  for (int64_t k = 0; k < n && k < 64; k++) {
    f[k] = (float)k * 0.5f - 3.0f;
    i64[k] = k * 7 - 20;
    i32[k] = (int32_t)(k * 3 - 5);
    f64[k] = (double)k / 3.0;
  }
  for (size_t k = 0; k < sizeof bytes; k++) bytes[k] = (uint8_t)(k * 37 + 11);
  t.name = (char *)name;
  t.n_dims = rank;
  t.dims = (int64_t *)dims;
  t.has_data_type = 1;
  t.data_type = data_type;
  size_t es = data_type == 1 || data_type == 6                       ? 4
              : data_type == 7 || data_type == 11                    ? 8
              : data_type == 10 || data_type == 16 || data_type == 5 ? 2
                                                                     : 1;
  if (raw) {
    t.has_raw_data = 1;
    t.raw_data.data = bytes;
    t.raw_data.len = (size_t)n * es;
  } else if (data_type == 1) {
    t.n_float_data = (size_t)n;
    t.float_data = f;
  } else if (data_type == 7) {
    t.n_int64_data = (size_t)n;
    t.int64_data = i64;
  } else if (data_type == 11) {
    t.n_double_data = (size_t)n;
    t.double_data = f64;
  } else {
    t.n_int32_data = (size_t)n; /* int32, int16, int8, uint8, bool, float16 and bfloat16 bits */
    t.int32_data = i32;
  }
  size_t size = onnx__tensor_proto__get_packed_size(&t);
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 1;
  onnx__tensor_proto__pack(&t, buf);
  char file[64];
  snprintf(file, sizeof file, "%s.pb", name);
  int rc = write_seed("tensor_pb", file, buf, size);
  free(buf);
  return rc;
}

static int tensor_seeds(void) {
  static const int32_t types[] = {1, 2, 3, 5, 6, 7, 9, 10, 11, 16};
  static const int64_t d23[] = {2, 3}, d4[] = {4}, d0[] = {0, 5}, d1111[] = {1, 1, 2, 1};
  int rc = 0;
  for (size_t k = 0; k < sizeof types / sizeof types[0] && !rc; k++) {
    char name[32];
    snprintf(name, sizeof name, "t%d_raw", (int)types[k]);
    rc = tensor_seed(name, types[k], d23, 2, true);
    snprintf(name, sizeof name, "t%d_typed", (int)types[k]);
    if (!rc) rc = tensor_seed(name, types[k], d4, 1, false);
  }
  if (!rc) rc = tensor_seed("scalar", 1, NULL, 0, false);
  if (!rc) rc = tensor_seed("empty", 7, d0, 2, true);
  if (!rc) rc = tensor_seed("rank4", 1, d1111, 4, true);
  return rc;
}

/* A static plan of model `which` with every symbol bound. */
static int mxm_seed(int which, const char *const *syms, const int64_t *vals, size_t n, const char *file) {
  mx_graph *g = NULL;
  mx_static_plan *plan = NULL;
  void *data = NULL;
  size_t size = 0;
  mx_error err = {0};
  mx_status st = build(which, &g, &err);
  for (size_t k = 0; k < n && st == MX_OK; k++) st = mx_graph_bind_symbol(g, syms[k], vals[k]);
  if (st == MX_OK) st = mx_graph_optimize(g, NULL);
  if (st == MX_OK) st = mx__static_compile(g, NULL, &plan, &err);
  if (st == MX_OK) st = mx__mxm_save_memory(plan, &data, &size, &err);
  if (st != MX_OK)
    fprintf(stderr, "fuzz_seeds: %s: %s %s\n", file, err.message, g ? mx_graph_last_error(g) : "");
  int rc = st != MX_OK || write_seed("mxm", file, data, size);
  free(data);
  mx__static_plan_destroy(plan);
  mx_graph_destroy(g);
  return rc;
}

static int mxm_seeds(void) {
  static const char *const llama_syms[] = {"past_len"}, *const enc_syms[] = {"batch", "seq"};
  static const int64_t llama_vals[] = {3}, enc_vals[] = {1, 4};
  int rc = mxm_seed(0, llama_syms, llama_vals, 1, "llama_past3.mxm");
  if (!rc) rc = mxm_seed(2, enc_syms, enc_vals, 2, "encoder_1x4.mxm");
  return rc;
}

static int run_seeds(void) {
  /* Symbols per model: llama past_len; moe tokens; encoder batch, seq. */
  static const uint8_t syms[][2] = {{0, 0}, {1, 0}, {3, 0}, {2, 3}, {1, 5}, {7, 2}};
  int rc = 0;
  for (unsigned m = 0; m < MXF_RUN_MODELS && !rc; m++) {
    for (size_t k = 0; k < sizeof syms / sizeof syms[0] && !rc; k++) {
      uint8_t buf[4096];
      size_t n = mxf_session_run_seed(m, syms[k], 2, 100 * m + k, buf, sizeof buf);
      if (!n) continue;
      char name[32];
      snprintf(name, sizeof name, "m%u_%zu", m, k);
      rc = write_seed("session_run", name, buf, n);
    }
  }
  mxf_release();
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  root = argv[1];
  if (mkdir(root, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", root, strerror(errno));
    return 1;
  }
  int rc = onnx_seeds();
  if (!rc) rc = tensor_seeds();
  if (!rc) rc = mxm_seeds();
  if (!rc) rc = run_seeds();
  return rc ? 1 : 0;
}
