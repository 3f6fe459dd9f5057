/* Generator building blocks (see builder.h). */
#include "models/builder.h"

#include "common/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mx__mb_begin(mx_mb *b, const char *name, uint64_t seed) {
  memset(b, 0, sizeof *b);
  b->rng = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
  b->st = mx_graph_create(name, &b->g);
}

mx_status mx__mb_end(mx_mb *b, mx_graph **out, const char *what, mx_error *err) {
  free(b->scratch);
  b->scratch = NULL;
  if (b->st != MX_OK) {
    const char *msg = b->g ? mx_graph_last_error(b->g) : "";
    mx__fail(err, b->st, "building %s: %s", what, msg[0] ? msg : mx_status_string(b->st));
    mx_graph_destroy(b->g);
    b->g = NULL;
  }
  *out = b->g;
  return b->st;
}

void mx__mb_node_n(mx_mb *b, const char *op, const char *name, const mx_value_id *in, size_t n,
                   const mx_attr *attrs, size_t n_attrs, const char *const *out_names, size_t n_out,
                   mx_value_id *outs) {
  for (size_t i = 0; i < n_out; i++) outs[i] = MX_NO_VALUE;
  if (b->st != MX_OK) return;
  mx_node_desc d = {.op_type = op,
                    .name = name,
                    .inputs = in,
                    .n_inputs = n,
                    .attrs = attrs,
                    .n_attrs = n_attrs,
                    .output_names = out_names,
                    .n_outputs = n_out};
  b->st = mx_graph_add_node(b->g, &d, outs);
}

mx_value_id mx__mb_node(mx_mb *b, const char *op, const char *name, const mx_value_id *in, size_t n,
                        const mx_attr *attrs, size_t n_attrs, const char *out_name) {
  const char *names[1] = {out_name};
  mx_value_id out;
  mx__mb_node_n(b, op, name, in, n, attrs, n_attrs, out_name ? names : NULL, 1, &out);
  return out;
}

mx_value_id mx__mb_input(mx_mb *b, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  if (b->st != MX_OK) return MX_NO_VALUE;
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v = MX_NO_VALUE;
  b->st = mx_graph_add_input(b->g, name, dt, &s, &v);
  return v;
}

void mx__mb_output(mx_mb *b, mx_value_id v) {
  if (b->st == MX_OK) b->st = mx_graph_add_output(b->g, v);
}

mx_value_id mx__mb_const(mx_mb *b, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                         const void *data) {
  if (b->st != MX_OK) return MX_NO_VALUE;
  mx_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v = MX_NO_VALUE;
  b->st = mx_graph_add_constant(b->g, name, &t, &v);
  return v;
}

mx_value_id mx__mb_ints(mx_mb *b, const char *name, const int64_t *vals, int64_t n) {
  return mx__mb_const(b, name, MX_INT64, 1, &n, vals);
}

mx_value_id mx__mb_scalar_i64(mx_mb *b, const char *name, int64_t v) {
  return mx__mb_const(b, name, MX_INT64, 0, NULL, &v);
}

mx_value_id mx__mb_scalar_f32(mx_mb *b, const char *name, float v) {
  return mx__mb_const(b, name, MX_FLOAT32, 0, NULL, &v);
}

/* Makes room for n floats of weight values. */
static float *scratch(mx_mb *b, int32_t rank, const int64_t *dims, size_t *n_out) {
  size_t n = 1;
  if (b->st != MX_OK) return NULL;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] < 0 || (dims[i] && n > SIZE_MAX / sizeof(float) / (size_t)dims[i])) {
      b->st = MX_ERR_LIMIT;
      return NULL;
    }
    n *= (size_t)dims[i];
  }
  if (n > b->scratch_cap) {
    float *p = realloc(b->scratch, (n ? n : 1) * sizeof *p);
    if (!p) {
      b->st = MX_ERR_OUT_OF_MEMORY;
      return NULL;
    }
    b->scratch = p;
    b->scratch_cap = n;
  }
  *n_out = n;
  return b->scratch;
}

float *mx__mb_scratch(mx_mb *b, int32_t rank, const int64_t *dims, size_t *n) {
  return scratch(b, rank, dims, n);
}

/* Next uniform value in [-1, 1) of the xorshift generator. */
static float next_uniform(mx_mb *b) {
  uint64_t x = b->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  b->rng = x;
  return (float)(x >> 40) / (float)(1ull << 24) * 2.0f - 1.0f;
}

mx_value_id mx__mb_weights(mx_mb *b, const char *name, int32_t rank, const int64_t *dims, float scale) {
  return mx__mb_weights_around(b, name, rank, dims, 0.0f, scale);
}

mx_value_id mx__mb_weights_around(mx_mb *b, const char *name, int32_t rank, const int64_t *dims, float center,
                                  float spread) {
  if (b->st != MX_OK) return MX_NO_VALUE;
  size_t n;
  float *w = scratch(b, rank, dims, &n);
  if (!w) return MX_NO_VALUE;
  for (size_t i = 0; i < n; i++) w[i] = center + next_uniform(b) * spread;
  return mx__mb_const(b, name, MX_FLOAT32, rank, dims, w);
}

const char *mx__mb_name(char *buf, size_t cap, const char *prefix, const char *what) {
  snprintf(buf, cap, "%s%s", prefix, what);
  return buf;
}

mx_value_id mx__mb_fill(mx_mb *b, const char *name, int32_t rank, const int64_t *dims, float value) {
  if (b->st != MX_OK) return MX_NO_VALUE;
  size_t n;
  float *w = scratch(b, rank, dims, &n);
  if (!w) return MX_NO_VALUE;
  for (size_t i = 0; i < n; i++) w[i] = value;
  return mx__mb_const(b, name, MX_FLOAT32, rank, dims, w);
}
