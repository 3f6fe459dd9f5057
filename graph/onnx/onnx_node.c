/* Import of one ONNX node: inputs by name, outputs, node name, attributes of every kind
 * (subgraphs imported recursively) and Constant nodes, which become constants.
 *
 * Names: an empty input name is an omitted optional input (MX_NO_VALUE); an empty output name
 * is an omitted optional output, which still gets a value (mx_graph_add_node gives every output
 * one) under a generated name. Nodes without a name, and nodes repeating a name used earlier in
 * the file, get generated unique names. Generated names avoid every name the file defines, so
 * they never capture a later reference.
 *
 * Each node's temporary data (attribute copies, tensors, strings) lives in a scratch arena
 * released when the node is done; mx_graph_add_node copies what it keeps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/onnx/onnx_impl.h"

/* Name of an ONNX attribute type code for messages. */
static const char *attr_type_name(int type) {
  switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return "FLOAT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return "INT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return "STRING";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return "TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "GRAPH";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "SPARSE_TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "TYPE_PROTO";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return "FLOATS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return "INTS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return "STRINGS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "GRAPHS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "TYPE_PROTOS";
    default: return "UNDEFINED";
  }
}

/* Copies protobuf bytes into a NUL-terminated string from the arena. Text with a NUL byte
 * inside cannot become a C string. */
static mx_status bytes_to_string(mx__onnx_import *im, mx_arena *a, const ProtobufCBinaryData *b,
                                 const char *what, const char **out) {
  if (b->len && memchr(b->data, '\0', b->len))
    return mx__fail(im->err, MX_ERR_UNSUPPORTED, "%s contains a NUL byte", what);
  char *s = mx__arena_alloc(a, b->len + 1, 1);
  if (!s) return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
  if (b->len) memcpy(s, b->data, b->len);
  s[b->len] = '\0';
  *out = s;
  return MX_OK;
}

/* Imports a GRAPH attribute's body as a subgraph of sc->g (owned by sc->g from creation). */
static mx_status import_subgraph(mx__onnx_import *im, mx__onnx_scope *sc, const char *node_name,
                                 const Onnx__AttributeProto *a, mx_graph **out) {
  char name[256];
  mx_graph *sub = NULL;
  if (sc->depth + 1 > MX_ONNX_MAX_GRAPH_DEPTH)
    return mx__fail(im->err, MX_ERR_LIMIT, "subgraphs are nested more than %d levels deep",
                    MX_ONNX_MAX_GRAPH_DEPTH);
  if (a->g->name && *a->g->name)
    snprintf(name, sizeof name, "%.250s", a->g->name);
  else
    snprintf(name, sizeof name, "%.120s/%.120s", node_name, a->name);
  mx_status st = mx__graph_create_subgraph(sc->g, name, &sub);
  if (st != MX_OK) return mx__onnx_graph_failed(im, sc->g, st);
  st = mx__onnx_import_graph(im, a->g, sub, sc, sc->depth + 1);
  if (st != MX_OK) {
    mx__error_prefix(im->err, "subgraph '%.100s': ", name);
    return st;
  }
  *out = sub;
  return MX_OK;
}

/* Converts attribute `a` of a node into *out (temporaries from `scratch`). `label` names the
 * node in messages. */
static mx_status convert_attr(mx__onnx_import *im, mx__onnx_scope *sc, mx_arena *scratch, const char *label,
                              const char *node_name, const Onnx__AttributeProto *a, mx_attr *out) {
  char what[400];
  mx_status st;
  int type = mx__onnx_attr_type(a);
  snprintf(what, sizeof what, "node %s: attribute '%.100s'", label, a->name);
  memset(out, 0, sizeof *out);
  out->name = a->name;
  switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
      out->type = MX_ATTR_FLOAT;
      out->f = a->f;
      return MX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
      out->type = MX_ATTR_INT;
      out->i = a->i;
      return MX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
      out->type = MX_ATTR_STRING;
      return bytes_to_string(im, scratch, &a->s, what, &out->s);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
      out->type = MX_ATTR_FLOATS;
      out->floats = a->floats;
      out->count = a->n_floats;
      return MX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
      out->type = MX_ATTR_INTS;
      out->ints = a->ints;
      out->count = a->n_ints;
      return MX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
      const char **ss = mx__arena_array(scratch, a->n_strings ? a->n_strings : 1, sizeof *ss, 8);
      if (!ss) return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
      for (size_t i = 0; i < a->n_strings; i++) {
        st = bytes_to_string(im, scratch, &a->strings[i], what, &ss[i]);
        if (st != MX_OK) return st;
      }
      out->type = MX_ATTR_STRINGS;
      out->strings = ss;
      out->count = a->n_strings;
      return MX_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
      if (!a->t) return mx__fail(im->err, MX_ERR_MALFORMED, "%s has type TENSOR but no tensor", what);
      mx_tensor *t = mx__arena_alloc(scratch, sizeof *t, 8);
      if (!t) return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
      st = mx__onnx_tensor_decode(a->t, what, &im->src, scratch, t, im->err);
      if (st != MX_OK) return st;
      out->type = MX_ATTR_TENSOR;
      out->tensor = t;
      return MX_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
      if (!a->g) return mx__fail(im->err, MX_ERR_MALFORMED, "%s has type GRAPH but no graph", what);
      st = import_subgraph(im, sc, node_name, a, &out->graph);
      if (st != MX_OK) {
        mx__error_prefix(im->err, "%s: ", what);
        return st;
      }
      out->type = MX_ATTR_GRAPH;
      return MX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: {
      /* A value type (Optional's 'type'): kept as one MX_TYPE_CODE. */
      mx_value_kind kind;
      mx_dtype dtype;
      const Onnx__TensorShapeProto *shape;
      char twhat[450];
      snprintf(twhat, sizeof twhat, "%s (type TYPE_PROTO)", what);
      st = mx__onnx_type_read(a->tp, &kind, &dtype, &shape, twhat, im->err);
      if (st != MX_OK) return st;
      if (dtype == MX_DTYPE_UNDEFINED)
        return mx__fail(im->err, MX_ERR_UNSUPPORTED, "%s has type TYPE_PROTO without an element type", what);
      out->type = MX_ATTR_TYPE_PROTO;
      out->i = MX_TYPE_CODE(kind, dtype);
      return MX_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
      return mx__fail(im->err, MX_ERR_UNSUPPORTED, "%s has type %s, which mixrt does not support", what,
                      attr_type_name(type));
    default: return mx__fail(im->err, MX_ERR_MALFORMED, "%s has no valid type (%d)", what, type);
  }
}

/* The value attribute of a Constant node, as a tensor in *t (data borrowed from the proto or
 * allocated from `scratch`). */
static mx_status constant_value(mx__onnx_import *im, mx_arena *scratch, const Onnx__NodeProto *np,
                                const char *label, mx_tensor *t) {
  char what[400];
  const Onnx__AttributeProto *value = NULL;
  memset(t, 0, sizeof *t);
  for (size_t k = 0; k < np->n_attribute; k++) {
    const Onnx__AttributeProto *a = np->attribute[k];
    const char *n = a->name ? a->name : "";
    if (strncmp(n, "value", 5) != 0 && strcmp(n, "sparse_value") != 0) continue;
    if (value)
      return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                      "Constant node %s has two values ('%.100s' and '%.100s')", label, value->name, n);
    value = a;
  }
  if (!value)
    return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "Constant node %s has no value attribute", label);
  const char *n = value->name;
  int type = mx__onnx_attr_type(value);
  snprintf(what, sizeof what, "Constant node %s: attribute '%.100s'", label, n);
  int want;
  if (strcmp(n, "value") == 0)
    want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  else if (strcmp(n, "value_float") == 0)
    want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  else if (strcmp(n, "value_floats") == 0)
    want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  else if (strcmp(n, "value_int") == 0)
    want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  else if (strcmp(n, "value_ints") == 0)
    want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  else if (strcmp(n, "value_string") == 0 || strcmp(n, "value_strings") == 0 ||
           strcmp(n, "sparse_value") == 0)
    return mx__fail(im->err, MX_ERR_UNSUPPORTED, "%s: %s constants are not supported", what,
                    n[0] == 's' ? "sparse" : "string");
  else
    return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "%s is not a Constant attribute", what);
  if (type != want)
    return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "%s has type %s, expected %s", what, attr_type_name(type),
                    attr_type_name(want));
  switch (want) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
      if (!value->t) return mx__fail(im->err, MX_ERR_MALFORMED, "%s has no tensor", what);
      return mx__onnx_tensor_decode(value->t, what, &im->src, scratch, t, im->err);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: {
      bool f = want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
      void *d = mx__arena_alloc(scratch, 8, 8);
      if (!d) return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
      if (f)
        *(float *)d = value->f;
      else
        *(int64_t *)d = value->i;
      t->dtype = f ? MX_FLOAT32 : MX_INT64;
      t->rank = 0;
      t->data = d;
      return MX_OK;
    }
    default: { /* FLOATS, INTS: 1-D */
      bool f = want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
      t->dtype = f ? MX_FLOAT32 : MX_INT64;
      t->rank = 1;
      t->dims[0] = (int64_t)(f ? value->n_floats : value->n_ints);
      t->data = f ? (void *)value->floats : (void *)value->ints;
      return MX_OK;
    }
  }
}

/* A Constant node becomes a constant value named after its output. */
static mx_status import_constant(mx__onnx_import *im, mx__onnx_scope *sc, mx_arena *scratch,
                                 const Onnx__NodeProto *np, const char *label) {
  mx_tensor t;
  for (size_t k = 0; k < np->n_input; k++)
    if (np->input[k] && *np->input[k])
      return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "Constant node %s takes no inputs", label);
  if (np->n_output != 1)
    return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                    "Constant node %s has %zu outputs; it must have exactly one", label, np->n_output);
  mx_status st = constant_value(im, scratch, np, label, &t);
  if (st != MX_OK) return st;
  const char *name = np->output[0];
  if (!name || !*name) {
    name = mx__onnx_fresh_name(sc, scratch, np->name && *np->name ? np->name : "Constant");
    if (!name) return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "node %s: out of host memory", label);
  }
  st = mx_graph_add_constant(sc->g, name, &t, NULL);
  if (st != MX_OK) {
    mx__onnx_graph_failed(im, sc->g, st);
    mx__error_prefix(im->err, "Constant node %s: ", label);
  }
  return st;
}

static bool is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

mx_status mx__onnx_import_node(mx__onnx_import *im, mx__onnx_scope *sc, size_t index) {
  char label[200];
  mx_status st = MX_OK;
  const Onnx__NodeProto *np = sc->gp->node[index];
  mx_arena scratch;
  mx__arena_init(&scratch, 0);
  mx__onnx_node_label(np, index, label, sizeof label);

  if (!np->op_type || !*np->op_type) {
    st = mx__fail(im->err, MX_ERR_MALFORMED, "node %s has no op_type", label);
    goto release;
  }
  if (np->n_input > MX_ONNX_MAX_NODE_ARITY || np->n_output > MX_ONNX_MAX_NODE_ARITY ||
      np->n_attribute > MX_ONNX_MAX_NODE_ARITY) {
    st = mx__fail(im->err, MX_ERR_LIMIT,
                  "node %s has %zu inputs, %zu outputs and %zu attributes; at most %d of each", label,
                  np->n_input, np->n_output, np->n_attribute, MX_ONNX_MAX_NODE_ARITY);
    goto release;
  }
  for (size_t k = 0; k < np->n_attribute; k++) {
    const Onnx__AttributeProto *a = np->attribute[k];
    if (!a->name || !*a->name) {
      st = mx__fail(im->err, MX_ERR_MALFORMED, "node %s: attribute #%zu has no name", label, k);
      goto release;
    }
    if (a->ref_attr_name && *a->ref_attr_name) {
      st = mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                    "node %s: attribute '%.100s' refers to function attribute '%.100s', which only "
                    "nodes inside function bodies may do",
                    label, a->name, a->ref_attr_name);
      goto release;
    }
  }
  if (is_default_domain(np->domain) && strcmp(np->op_type, "Constant") == 0) {
    st = import_constant(im, sc, &scratch, np, label);
    goto release;
  }

  /* Node name: the file's, unless empty or already used by an earlier node. */
  const char *name = np->name;
  uint32_t first;
  if (!name || !*name || !mx__strmap_get(&sc->node_names, name, &first) || first != index)
    name = mx__onnx_fresh_name(sc, &scratch, name && *name ? name : np->op_type);
  if (!name) goto oom;

  mx_value_id *ins = mx__arena_array(&scratch, np->n_input + 1, sizeof *ins, 8);
  mx_value_id *outs = mx__arena_array(&scratch, np->n_output + 1, sizeof *outs, 8);
  const char **out_names = mx__arena_array(&scratch, np->n_output + 1, sizeof *out_names, 8);
  mx_attr *attrs = mx__arena_array(&scratch, np->n_attribute + 1, sizeof *attrs, 8);
  if (!ins || !outs || !out_names || !attrs) goto oom;
  for (size_t k = 0; k < np->n_input; k++) {
    if (!np->input[k] || !*np->input[k]) {
      ins[k] = MX_NO_VALUE;
      continue;
    }
    st = mx__onnx_resolve(im, sc, np->input[k], &ins[k]);
    if (st != MX_OK) {
      mx__error_prefix(im->err, "node %s: ", label);
      goto release;
    }
  }
  for (size_t k = 0; k < np->n_output; k++) {
    if (np->output[k] && *np->output[k]) {
      out_names[k] = np->output[k];
      continue;
    }
    char hint[300];
    snprintf(hint, sizeof hint, "%.200s:%zu", name, k);
    out_names[k] = mx__onnx_fresh_name(sc, &scratch, hint);
    if (!out_names[k]) goto oom;
  }
  for (size_t k = 0; k < np->n_attribute; k++) {
    st = convert_attr(im, sc, &scratch, label, name, np->attribute[k], &attrs[k]);
    if (st != MX_OK) goto release;
  }

  mx_node_desc desc = {0};
  desc.op_type = np->op_type;
  desc.domain = np->domain;
  desc.name = name;
  desc.inputs = ins;
  desc.n_inputs = np->n_input;
  desc.attrs = attrs;
  desc.n_attrs = np->n_attribute;
  desc.output_names = out_names;
  desc.n_outputs = np->n_output;
  st = mx_graph_add_node(sc->g, &desc, outs);
  if (st != MX_OK) {
    /* Subgraphs made for this node stay registered with sc->g, which frees them. */
    mx__onnx_graph_failed(im, sc->g, st);
    goto release;
  }
  goto release;
oom:
  st = mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "node %s: out of host memory", label);
release:
  mx__arena_release(&scratch);
  return st;
}
