/* Hand-built ONNX models for the import tests (see onnx_build.h). Messages are assembled
 * field by field with protobuf-c's generated init functions; every block is tracked by the
 * builder and freed in one go. */
#include "graph/onnx/onnx_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mxb_free(mxb *b) {
  for (size_t i = 0; i < b->n; i++) free(b->allocs[i]);
  free(b->allocs);
  memset(b, 0, sizeof *b);
}

void *mxb_alloc(mxb *b, size_t size) {
  if (b->n == b->cap) {
    size_t ncap = b->cap ? b->cap * 2 : 64;
    void **na = realloc(b->allocs, ncap * sizeof *na);
    if (!na) abort();
    b->allocs = na;
    b->cap = ncap;
  }
  void *p = calloc(1, size ? size : 1);
  if (!p) abort();
  b->allocs[b->n++] = p;
  return p;
}

char *mxb_str(mxb *b, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *p = mxb_alloc(b, n);
  memcpy(p, s, n);
  return p;
}

/* Appends item to the pointer array whose address is arr_ptr (a `T **` field with *n
 * entries); the old array stays with the builder. The field is read and written with memcpy
 * because its pointer type differs from void **. */
static void push(mxb *b, void *arr_ptr, size_t *n, void *item) {
  void **old;
  memcpy(&old, arr_ptr, sizeof old);
  void **na = mxb_alloc(b, (*n + 1) * sizeof *na);
  if (*n) memcpy(na, old, *n * sizeof *na);
  na[(*n)++] = item;
  memcpy(arr_ptr, &na, sizeof na);
}

/* Splits a comma-separated list into builder strings (empty entries kept). */
static size_t split(mxb *b, const char *list, char ***out) {
  *out = NULL;
  if (!list) return 0;
  size_t n = 0;
  const char *p = list;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char *s = mxb_alloc(b, len + 1);
    memcpy(s, p, len);
    push(b, out, &n, s);
    if (!end) break;
    p = end + 1;
  }
  return n;
}

Onnx__GraphProto *mxb_graph(mxb *b, const char *name) {
  Onnx__GraphProto *g = mxb_alloc(b, sizeof *g);
  onnx__graph_proto__init(g);
  g->name = mxb_str(b, name);
  return g;
}

void mxb_opset(mxb *b, Onnx__ModelProto *m, const char *domain, int64_t version) {
  Onnx__OperatorSetIdProto *o = mxb_alloc(b, sizeof *o);
  onnx__operator_set_id_proto__init(o);
  o->domain = mxb_str(b, domain);
  o->has_version = 1;
  o->version = version;
  push(b, &m->opset_import, &m->n_opset_import, o);
}

Onnx__ModelProto *mxb_model(mxb *b, int64_t opset) {
  Onnx__ModelProto *m = mxb_alloc(b, sizeof *m);
  onnx__model_proto__init(m);
  m->has_ir_version = 1;
  m->ir_version = 8;
  m->producer_name = mxb_str(b, "mixrt-tests");
  mxb_opset(b, m, "", opset);
  m->graph = mxb_graph(b, "main");
  return m;
}

static Onnx__ValueInfoProto *value_info(mxb *b, const char *name, int elem, const char *dims) {
  Onnx__ValueInfoProto *vi = mxb_alloc(b, sizeof *vi);
  onnx__value_info_proto__init(vi);
  vi->name = mxb_str(b, name);
  if (elem == 0 && !dims) return vi;
  Onnx__TypeProto *tp = mxb_alloc(b, sizeof *tp);
  onnx__type_proto__init(tp);
  Onnx__TypeProto__Tensor *tt = mxb_alloc(b, sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  if (elem) {
    tt->has_elem_type = 1;
    tt->elem_type = elem;
  }
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  vi->type = tp;
  if (!dims) return vi;
  Onnx__TensorShapeProto *sp = mxb_alloc(b, sizeof *sp);
  onnx__tensor_shape_proto__init(sp);
  tt->shape = sp;
  char **parts;
  size_t n = *dims ? split(b, dims, &parts) : 0;
  for (size_t i = 0; i < n; i++) {
    Onnx__TensorShapeProto__Dimension *d = mxb_alloc(b, sizeof *d);
    onnx__tensor_shape_proto__dimension__init(d);
    const char *s = parts[i];
    if (strcmp(s, "?") == 0) {
      /* neither value nor param */
    } else if ((s[0] >= '0' && s[0] <= '9') || s[0] == '-') {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = strtoll(s, NULL, 10);
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = (char *)s;
    }
    push(b, &sp->dim, &sp->n_dim, d);
  }
  return vi;
}

Onnx__ValueInfoProto *mxb_input(mxb *b, Onnx__GraphProto *g, const char *name, int elem, const char *dims) {
  Onnx__ValueInfoProto *vi = value_info(b, name, elem, dims);
  push(b, &g->input, &g->n_input, vi);
  return vi;
}

Onnx__ValueInfoProto *mxb_output(mxb *b, Onnx__GraphProto *g, const char *name, int elem, const char *dims) {
  Onnx__ValueInfoProto *vi = value_info(b, name, elem, dims);
  push(b, &g->output, &g->n_output, vi);
  return vi;
}

Onnx__NodeProto *mxb_node(mxb *b, Onnx__GraphProto *g, const char *op, const char *name, const char *inputs,
                          const char *outputs) {
  Onnx__NodeProto *n = mxb_alloc(b, sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = mxb_str(b, op);
  n->name = mxb_str(b, name);
  n->n_input = split(b, inputs, &n->input);
  n->n_output = split(b, outputs, &n->output);
  push(b, &g->node, &g->n_node, n);
  return n;
}

Onnx__AttributeProto *mxb_attr(mxb *b, Onnx__NodeProto *n, const char *name,
                               Onnx__AttributeProto__AttributeType type) {
  Onnx__AttributeProto *a = mxb_alloc(b, sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = mxb_str(b, name);
  a->has_type = 1;
  a->type = type;
  push(b, &n->attribute, &n->n_attribute, a);
  return a;
}

void mxb_attr_int(mxb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = v;
}

void mxb_attr_float(mxb *b, Onnx__NodeProto *n, const char *name, float v) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = 1;
  a->f = v;
}

void mxb_attr_string(mxb *b, Onnx__NodeProto *n, const char *name, const char *v) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  a->has_s = 1;
  a->s.len = strlen(v);
  a->s.data = (uint8_t *)mxb_str(b, v);
}

void mxb_attr_ints(mxb *b, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->n_ints = count;
  a->ints = mxb_alloc(b, count * sizeof *a->ints);
  if (count) memcpy(a->ints, v, count * sizeof *a->ints);
}

void mxb_attr_floats(mxb *b, Onnx__NodeProto *n, const char *name, const float *v, size_t count) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
  a->n_floats = count;
  a->floats = mxb_alloc(b, count * sizeof *a->floats);
  if (count) memcpy(a->floats, v, count * sizeof *a->floats);
}

void mxb_attr_strings(mxb *b, Onnx__NodeProto *n, const char *name, const char *const *v, size_t count) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
  a->n_strings = count;
  a->strings = mxb_alloc(b, count * sizeof *a->strings);
  for (size_t i = 0; i < count; i++) {
    a->strings[i].len = strlen(v[i]);
    a->strings[i].data = (uint8_t *)mxb_str(b, v[i]);
  }
}

void mxb_attr_tensor(mxb *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  a->t = t;
}

void mxb_attr_graph(mxb *b, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g) {
  Onnx__AttributeProto *a = mxb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
  a->g = g;
}

Onnx__TensorProto *mxb_tensor(mxb *b, const char *name, int elem, const char *dims, const void *raw,
                              size_t raw_len) {
  Onnx__TensorProto *t = mxb_alloc(b, sizeof *t);
  onnx__tensor_proto__init(t);
  t->name = mxb_str(b, name);
  t->has_data_type = 1;
  t->data_type = elem;
  char **parts;
  size_t n = dims && *dims ? split(b, dims, &parts) : 0;
  t->n_dims = n;
  t->dims = mxb_alloc(b, (n ? n : 1) * sizeof *t->dims);
  for (size_t i = 0; i < n; i++) t->dims[i] = strtoll(parts[i], NULL, 10);
  if (raw) {
    t->has_raw_data = 1;
    t->raw_data.len = raw_len;
    t->raw_data.data = mxb_alloc(b, raw_len);
    if (raw_len) memcpy(t->raw_data.data, raw, raw_len);
  }
  return t;
}

void mxb_initializer(mxb *b, Onnx__GraphProto *g, Onnx__TensorProto *t) {
  push(b, &g->initializer, &g->n_initializer, t);
}

void mxb_external(mxb *b, Onnx__TensorProto *t, const char *key, const char *value) {
  Onnx__StringStringEntryProto *e = mxb_alloc(b, sizeof *e);
  onnx__string_string_entry_proto__init(e);
  e->key = mxb_str(b, key);
  e->value = mxb_str(b, value);
  push(b, &t->external_data, &t->n_external_data, e);
  t->has_data_location = 1;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

uint8_t *mxb_pack(mxb *b, const Onnx__ModelProto *m, size_t *size) {
  size_t n = onnx__model_proto__get_packed_size(m);
  uint8_t *buf = mxb_alloc(b, n);
  *size = onnx__model_proto__pack(m, buf);
  return buf;
}

uint8_t *mxb_pack_tensor(mxb *b, const Onnx__TensorProto *t, size_t *size) {
  size_t n = onnx__tensor_proto__get_packed_size(t);
  uint8_t *buf = mxb_alloc(b, n);
  *size = onnx__tensor_proto__pack(t, buf);
  return buf;
}

int mxb_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = size ? fwrite(data, 1, size, f) : 0;
  int rc = fclose(f);
  return w == size && rc == 0 ? 0 : -1;
}
