/* ONNX export: writes a mixrt graph as an ONNX ModelProto (so generated models and test
 * fixtures can be read by mixrt and by other runtimes alike).
 *
 * Nodes go out in the graph's stable topological order, constants as initializers with
 * raw_data, inputs and outputs with their dtypes and (possibly symbolic) shapes: a symbol becomes
 * a dim_param with its name, any other expression a dim_param with its printed form, an unknown
 * dim a dimension without a value; a value without a dtype yet (the outputs of a graph not
 * inferred) goes out without a type. The message tree is built in a scratch arena and freed in one
 * go after packing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/error.h"
#include "graph/ir.h"
#include "graph/onnx/onnx_impl.h"
#include "graph/onnx/onnx_refs.h"
#include "mixrt/onnx.h"
#include "onnx/onnx.pb-c.h"

typedef struct exporter {
  mx_arena arena; /* every message of the tree */
  mx_error *err;
  mx__onnx_ref_fn ref; /* initializers it accepts go out as weights-section references (NULL: none) */
  void *ref_ctx;
  const char *ref_location; /* external_data location of the references (NULL: the weights section) */
} exporter;

/* A zeroed, initialized message of the given descriptor in the scratch arena (NULL on OOM). */
static void *new_msg(exporter *ex, const ProtobufCMessageDescriptor *desc) {
  void *p = mx__arena_alloc(&ex->arena, desc->sizeof_message, 8);
  if (p) protobuf_c_message_init(desc, p);
  return p;
}
#define NEW(ex, type, desc) ((type *)new_msg((ex), &(desc)))

static Onnx__TensorProto *export_tensor(exporter *ex, const char *name, const mx_tensor *t) {
  Onnx__TensorProto *tp = NEW(ex, Onnx__TensorProto, onnx__tensor_proto__descriptor);
  size_t nbytes;
  if (!tp || !mx_tensor_nbytes(t, &nbytes)) return NULL;
  tp->name = mx__arena_strdup(&ex->arena, name ? name : "");
  tp->has_data_type = 1;
  tp->data_type = (int32_t)t->dtype;
  tp->n_dims = (size_t)t->rank;
  tp->dims = mx__arena_array(&ex->arena, t->rank ? (size_t)t->rank : 1, sizeof(int64_t), 8);
  if (!tp->name || !tp->dims) return NULL;
  for (int32_t i = 0; i < t->rank; i++) tp->dims[i] = t->dims[i];
  if (t->dtype == MX_STRING) { /* strings go out in string_data (raw_data cannot hold them) */
    size_t n = nbytes / sizeof(char *);
    tp->n_string_data = n;
    tp->string_data = mx__arena_array(&ex->arena, n ? n : 1, sizeof *tp->string_data, 8);
    if (!tp->string_data) return NULL;
    for (size_t i = 0; i < n; i++) {
      const char *s = ((char *const *)t->data)[i];
      tp->string_data[i].data = (uint8_t *)(s ? s : ""); /* borrowed like raw_data below */
      tp->string_data[i].len = s ? strlen(s) : 0;
    }
    return tp;
  }
  tp->has_raw_data = 1;
  tp->raw_data.len = nbytes;
  tp->raw_data.data = (uint8_t *)t->data; /* borrowed from the graph for the time of packing */
  if (mx_dtype_bits(t->dtype) < 8) {      /* sub-byte types go out packed, as ONNX stores them */
    size_t n = nbytes;                    /* one element per byte in mixrt */
    tp->raw_data.len = mx_dtype_packed_bytes(t->dtype, n);
    tp->raw_data.data = mx__arena_alloc(&ex->arena, tp->raw_data.len ? tp->raw_data.len : 1, 8);
    if (!tp->raw_data.data) return NULL;
    mx__onnx_pack_sub_byte(t->data, t->dtype, n, tp->raw_data.data);
  }
  return tp;
}

/* One external_data entry in the scratch arena. */
static Onnx__StringStringEntryProto *ext_entry(exporter *ex, const char *key, const char *value) {
  Onnx__StringStringEntryProto *e =
      NEW(ex, Onnx__StringStringEntryProto, onnx__string_string_entry_proto__descriptor);
  if (!e) return NULL;
  e->key = (char *)key;
  e->value = mx__arena_strdup(&ex->arena, value);
  return e->value ? e : NULL;
}

/* Turns the raw data of tp (the initializer of t) into a reference into the weights section
 * when ex->ref accepts it (strings and sub-byte types always stay inline). */
static bool export_ref(exporter *ex, const mx_tensor *t, Onnx__TensorProto *tp) {
  uint64_t offset;
  if (!tp->has_raw_data || mx_dtype_bits(t->dtype) < 8 || !ex->ref(ex->ref_ctx, t, tp->raw_data.len, &offset))
    return true;
  char off[24], len[24];
  snprintf(off, sizeof off, "%llu", (unsigned long long)offset);
  snprintf(len, sizeof len, "%zu", tp->raw_data.len);
  tp->external_data = mx__arena_array(&ex->arena, 3, sizeof *tp->external_data, 8);
  if (!tp->external_data || !(tp->external_data[0] = ext_entry(ex, "location", ex->ref_location ? ex->ref_location : MX__ONNX_BLOB_LOCATION)) ||
      !(tp->external_data[1] = ext_entry(ex, "offset", off)) ||
      !(tp->external_data[2] = ext_entry(ex, "length", len)))
    return false;
  tp->n_external_data = 3;
  tp->has_data_location = 1;
  tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  tp->has_raw_data = 0;
  tp->raw_data.len = 0;
  tp->raw_data.data = NULL;
  return true;
}

static Onnx__ValueInfoProto *export_value_info(exporter *ex, const mx_graph *g, const mx_value *v) {
  Onnx__ValueInfoProto *vi = NEW(ex, Onnx__ValueInfoProto, onnx__value_info_proto__descriptor);
  if (!vi) return NULL;
  vi->name = mx__arena_strdup(&ex->arena, v->name);
  /* A value of a graph not yet inferred has no element type: ONNX has no valid code for that
   * (0 is rejected by readers), so it goes out without a type, which readers infer. */
  if (v->dtype == MX_DTYPE_UNDEFINED) return vi->name ? vi : NULL;
  Onnx__TypeProto *tp = NEW(ex, Onnx__TypeProto, onnx__type_proto__descriptor);
  Onnx__TypeProto__Tensor *tt = NEW(ex, Onnx__TypeProto__Tensor, onnx__type_proto__tensor__descriptor);
  if (!tp || !tt) return NULL;
  vi->type = tp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  tt->has_elem_type = 1;
  tt->elem_type = (int32_t)v->dtype;
  if (v->shape.rank >= 0) {
    Onnx__TensorShapeProto *sp = NEW(ex, Onnx__TensorShapeProto, onnx__tensor_shape_proto__descriptor);
    if (!sp) return NULL;
    sp->n_dim = (size_t)v->shape.rank;
    sp->dim = mx__arena_array(&ex->arena, sp->n_dim ? sp->n_dim : 1, sizeof *sp->dim, 8);
    if (!sp->dim) return NULL;
    for (int32_t k = 0; k < v->shape.rank; k++) {
      Onnx__TensorShapeProto__Dimension *d =
          NEW(ex, Onnx__TensorShapeProto__Dimension, onnx__tensor_shape_proto__dimension__descriptor);
      if (!d) return NULL;
      mx_dim dim = v->shape.dims[k];
      if (mx_dim_is_concrete(dim)) {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = dim;
      } else if (mx_dim_is_expr(dim)) {
        char text[256];
        mx_sym_format(g->syms, dim, text, sizeof text);
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = mx__arena_strdup(&ex->arena, text);
        if (!d->dim_param) return NULL;
      }
      sp->dim[k] = d;
    }
    tt->shape = sp;
  }
  if (v->kind != MX_KIND_TENSOR && !(vi->type = mx__onnx_type_wrap(&ex->arena, v->kind, tp))) return NULL;
  return vi->name ? vi : NULL;
}

static Onnx__GraphProto *export_graph(exporter *ex, mx_graph *g);

static Onnx__AttributeProto *export_attr(exporter *ex, const mx_attr *a) {
  Onnx__AttributeProto *ap = NEW(ex, Onnx__AttributeProto, onnx__attribute_proto__descriptor);
  if (!ap) return NULL;
  ap->name = mx__arena_strdup(&ex->arena, a->name);
  ap->has_type = 1;
  ap->type = (Onnx__AttributeProto__AttributeType)a->type;
  switch (a->type) {
    case MX_ATTR_INT:
      ap->has_i = 1;
      ap->i = a->i;
      break;
    case MX_ATTR_FLOAT:
      ap->has_f = 1;
      ap->f = a->f;
      break;
    case MX_ATTR_STRING:
      ap->has_s = 1;
      ap->s.data = (uint8_t *)a->s;
      ap->s.len = strlen(a->s);
      break;
    case MX_ATTR_INTS:
      ap->n_ints = a->count;
      ap->ints = (int64_t *)a->ints;
      break;
    case MX_ATTR_FLOATS:
      ap->n_floats = a->count;
      ap->floats = (float *)a->floats;
      break;
    case MX_ATTR_STRINGS:
      ap->n_strings = a->count;
      ap->strings = mx__arena_array(&ex->arena, a->count ? a->count : 1, sizeof *ap->strings, 8);
      if (!ap->strings) return NULL;
      for (size_t i = 0; i < a->count; i++) {
        ap->strings[i].data = (uint8_t *)a->strings[i];
        ap->strings[i].len = strlen(a->strings[i]);
      }
      break;
    case MX_ATTR_TENSOR:
      ap->t = export_tensor(ex, "", a->tensor);
      if (!ap->t) return NULL;
      break;
    case MX_ATTR_GRAPH:
      ap->g = export_graph(ex, a->graph);
      if (!ap->g) return NULL;
      break;
    case MX_ATTR_TYPE_PROTO:
      ap->tp = mx__onnx_type_of_code(&ex->arena, a->i);
      if (!ap->tp) return NULL;
      break;
    default: return NULL;
  }
  return ap->name ? ap : NULL;
}

static Onnx__GraphProto *export_graph(exporter *ex, mx_graph *g) {
  const mx_node_id *order;
  size_t n;
  if (mx__graph_topo_order(g, &order, &n) != MX_OK) {
    mx__fail(ex->err, MX_ERR_INVALID_GRAPH, "%s", g->err.message);
    return NULL;
  }
  Onnx__GraphProto *gp = NEW(ex, Onnx__GraphProto, onnx__graph_proto__descriptor);
  if (!gp) return NULL;
  gp->name = mx__arena_strdup(&ex->arena, g->name);
  gp->node = mx__arena_array(&ex->arena, n ? n : 1, sizeof *gp->node, 8);
  if (!gp->name || !gp->node) return NULL;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[order[i]];
    Onnx__NodeProto *np = NEW(ex, Onnx__NodeProto, onnx__node_proto__descriptor);
    if (!np) return NULL;
    np->name = (char *)nd->name;
    np->op_type = (char *)nd->op_type;
    np->domain = (char *)nd->domain;
    np->n_input = nd->n_inputs;
    np->input = mx__arena_array(&ex->arena, nd->n_inputs ? nd->n_inputs : 1, sizeof(char *), 8);
    np->n_output = nd->n_outputs;
    np->output = mx__arena_array(&ex->arena, nd->n_outputs ? nd->n_outputs : 1, sizeof(char *), 8);
    np->n_attribute = nd->n_attrs;
    np->attribute = mx__arena_array(&ex->arena, nd->n_attrs ? nd->n_attrs : 1, sizeof *np->attribute, 8);
    if (!np->input || !np->output || !np->attribute) return NULL;
    for (uint32_t k = 0; k < nd->n_inputs; k++)
      np->input[k] = nd->inputs[k] == MX_NO_VALUE ? "" : (char *)g->values[nd->inputs[k]].name;
    for (uint32_t k = 0; k < nd->n_outputs; k++) np->output[k] = (char *)g->values[nd->outputs[k]].name;
    for (uint32_t k = 0; k < nd->n_attrs; k++)
      if (!(np->attribute[k] = export_attr(ex, &nd->attrs[k]))) return NULL;
    gp->node[gp->n_node++] = np;
  }
  gp->input = mx__arena_array(&ex->arena, g->n_inputs ? g->n_inputs : 1, sizeof *gp->input, 8);
  gp->output = mx__arena_array(&ex->arena, g->n_outputs ? g->n_outputs : 1, sizeof *gp->output, 8);
  gp->initializer = mx__arena_array(&ex->arena, g->n_values ? g->n_values : 1, sizeof *gp->initializer, 8);
  if (!gp->input || !gp->output || !gp->initializer) return NULL;
  for (size_t i = 0; i < g->n_inputs; i++)
    if (!(gp->input[gp->n_input++] = export_value_info(ex, g, &g->values[g->inputs[i]]))) return NULL;
  for (size_t i = 0; i < g->n_outputs; i++)
    if (!(gp->output[gp->n_output++] = export_value_info(ex, g, &g->values[g->outputs[i]]))) return NULL;
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    if ((val->flags & (MX_VALUE_DEAD | MX_VALUE_INPUT)) || !(val->flags & MX_VALUE_CONST)) continue;
    Onnx__TensorProto *tp = export_tensor(ex, val->name, val->data);
    if (!tp || (ex->ref && !export_ref(ex, val->data, tp))) return NULL;
    gp->initializer[gp->n_initializer++] = tp;
  }
  return gp;
}

static int64_t ir_version_for(const mx_graph *g) {
  if (g->ir_version > 0) return g->ir_version;
  int64_t opset = mx_graph_opset(g, "");
  if (opset >= 23) return 11;
  if (opset >= 21) return 10;
  if (opset >= 19) return 9;
  return 8;
}

mx_status mx_onnx_save_memory(mx_graph *g, void **data, size_t *size, mx_error *err) {
  return mx__onnx_save_memory_refs(g, NULL, NULL, data, size, err);
}

static mx_status save_memory(mx_graph *g, mx__onnx_ref_fn ref, void *ctx, const char *location, void **data,
                             size_t *size, mx_error *err);

mx_status mx__onnx_save_memory_refs(mx_graph *g, mx__onnx_ref_fn ref, void *ctx, void **data, size_t *size,
                                    mx_error *err) {
  return save_memory(g, ref, ctx, NULL, data, size, err);
}

static mx_status save_memory(mx_graph *g, mx__onnx_ref_fn ref, void *ctx, const char *location, void **data,
                             size_t *size, mx_error *err) {
  if (!g || !data || !size)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "graph, data and size must not be NULL");
  exporter ex = {.err = err, .ref = ref, .ref_ctx = ctx, .ref_location = location};
  mx__arena_init(&ex.arena, 0);
  mx_status st;
  mx_error_clear(err);
  Onnx__ModelProto *mp = NEW(&ex, Onnx__ModelProto, onnx__model_proto__descriptor);
  if (!mp) goto oom;
  mp->has_ir_version = 1;
  mp->ir_version = ir_version_for(g);
  mp->producer_name = "mixrt";
  mp->producer_version = MIXRT_VERSION_STRING;
  mp->n_opset_import = g->n_opsets;
  mp->opset_import = mx__arena_array(&ex.arena, g->n_opsets ? g->n_opsets : 1, sizeof *mp->opset_import, 8);
  if (!mp->opset_import) goto oom;
  for (size_t i = 0; i < g->n_opsets; i++) {
    Onnx__OperatorSetIdProto *op =
        NEW(&ex, Onnx__OperatorSetIdProto, onnx__operator_set_id_proto__descriptor);
    if (!op) goto oom;
    op->domain = (char *)g->opsets[i].domain;
    op->has_version = 1;
    op->version = g->opsets[i].version;
    mp->opset_import[i] = op;
  }
  mp->graph = export_graph(&ex, g);
  if (!mp->graph) {
    if (err && err->status != MX_OK) {
      st = err->status;
      goto done;
    }
    goto oom;
  }
  size_t n = onnx__model_proto__get_packed_size(mp);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) goto oom;
  onnx__model_proto__pack(mp, buf);
  *data = buf;
  *size = n;
  st = MX_OK;
  goto done;
oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of memory exporting graph '%s'", g->name);
done:
  mx__arena_release(&ex.arena);
  return st;
}

mx_status mx_onnx_save_file(mx_graph *g, const char *path, mx_error *err) {
  if (!path) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "path is NULL");
  void *data;
  size_t size;
  mx_status st = mx_onnx_save_memory(g, &data, &size, err);
  if (st != MX_OK) return st;
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(data);
    return mx__fail(err, MX_ERR_IO, "%s: %s", path, strerror(errno));
  }
  bool ok = fwrite(data, 1, size, f) == size;
  if (fclose(f) != 0) ok = false;
  free(data);
  if (!ok) return mx__fail(err, MX_ERR_IO, "%s: write failed: %s", path, strerror(errno));
  return MX_OK;
}

/* --- external data ---------------------------------------------------------------------------- */

/* The data file being written by mx__onnx_save_file_external. */
typedef struct ext_writer {
  FILE *f;
  uint64_t offset;   /* bytes written so far */
  size_t min_bytes;  /* smaller initializers stay inline */
  bool failed;
} ext_writer;

/* Appends one initializer's bytes to the data file, 64-byte aligned (streamed: nothing is kept). */
static bool ext_write(void *ctx, const mx_tensor *t, size_t nbytes, uint64_t *offset) {
  ext_writer *w = ctx;
  if (w->failed || nbytes < w->min_bytes || nbytes < 1) return false;
  static const uint8_t zeros[64];
  size_t pad = (size_t)((64 - w->offset % 64) % 64);
  if ((pad && fwrite(zeros, 1, pad, w->f) != pad) || fwrite(t->data, 1, nbytes, w->f) != nbytes) {
    w->failed = true;
    return false;
  }
  *offset = w->offset + pad;
  w->offset += pad + nbytes;
  return true;
}

mx_status mx__onnx_save_file_external(mx_graph *g, const char *path, size_t min_bytes, mx_error *err) {
  if (!path) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "path is NULL");
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t plen = strlen(path), blen = strlen(base);
  char *data_path = malloc(plen + 5), *location = malloc(blen + 5);
  if (!data_path || !location) {
    free(data_path);
    free(location);
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of memory saving %s", path);
  }
  snprintf(data_path, plen + 5, "%s.bin", path); /* beside the model, named relative to its folder */
  snprintf(location, blen + 5, "%s.bin", base);
  ext_writer w = {.f = fopen(data_path, "wb"), .min_bytes = min_bytes ? min_bytes : 1};
  mx_status st;
  void *data = NULL;
  size_t size = 0;
  if (!w.f) {
    st = mx__fail(err, MX_ERR_IO, "%s: %s", data_path, strerror(errno));
    goto done;
  }
  st = save_memory(g, ext_write, &w, location, &data, &size, err);
  if (fclose(w.f) != 0) w.failed = true;
  if (st == MX_OK && w.failed) st = mx__fail(err, MX_ERR_IO, "%s: write failed: %s", data_path, strerror(errno));
  if (st != MX_OK) goto done;
  FILE *f = fopen(path, "wb");
  if (!f) {
    st = mx__fail(err, MX_ERR_IO, "%s: %s", path, strerror(errno));
    goto done;
  }
  bool ok = fwrite(data, 1, size, f) == size;
  if (fclose(f) != 0) ok = false;
  if (!ok) st = mx__fail(err, MX_ERR_IO, "%s: write failed: %s", path, strerror(errno));
done:
  free(data);
  free(data_path);
  free(location);
  return st;
}
