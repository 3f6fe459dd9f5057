/* ONNX ModelProto -> mx_graph: the public entry points (mx_onnx_load_file,
 * mx_onnx_load_memory), the model level (IR version, opset imports) and graph bodies (inputs,
 * initializers, node order, outputs), for the main graph and, recursively, for subgraphs.
 *
 * Import runs in three steps per graph. First every name the graph defines is collected
 * (inputs, initializers, node outputs; a name defined twice is an error naming both sites).
 * Then graph inputs and initializers become values, the nodes are ordered by their name
 * dependencies (onnx_order.c) and imported in that order (onnx_node.c). Last the graph
 * outputs are marked; an output may name a graph input, an initializer or, in a subgraph, a
 * value of an enclosing graph. Bytes are pre-scanned (onnx_wire.c) before protobuf-c unpacks
 * them, so hostile nesting cannot exhaust the stack.
 *
 * Graph input dims: dim_value is a concrete dim (-1, GE's encoding, is unknown), dim_param a
 * symbol of the graph's symbol table (equal names give equal dims) or, in the form mixrt prints
 * expressions ("past_len + 1"), that expression; anything else unknown; a
 * missing shape (or GE's single dim -2) is an unknown rank. A graph input that is also an
 * initializer is a constant. value_info and the types declared for graph outputs are not
 * imported: inference computes them. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "graph/onnx/onnx_impl.h"
#include "mixrt/onnx.h"

/* --- helpers shared with onnx_node.c ---------------------------------------------------------- */

mx_status mx__onnx_graph_failed(mx__onnx_import *im, mx_graph *g, mx_status st) {
  const char *m = mx_graph_last_error(g);
  return mx__fail(im->err, st, "%s", m && *m ? m : mx_status_string(st));
}

/* True when no value or node of sc->g is called n and no graph of the scope chain defines it. */
static bool name_is_free(const mx__onnx_scope *sc, const char *n) {
  if (mx_graph_find_value(sc->g, n) != MX_NO_VALUE || mx_graph_find_node(sc->g, n) != MX_NO_NODE)
    return false;
  for (const mx__onnx_scope *s = sc; s; s = s->parent)
    if (mx__strmap_get(&s->defined, n, NULL) || mx__strmap_get(&s->node_names, n, NULL)) return false;
  return true;
}

const char *mx__onnx_fresh_name(mx__onnx_scope *sc, mx_arena *arena, const char *hint) {
  char buf[256];
  if (!hint || !*hint) hint = "v";
  snprintf(buf, sizeof buf, "%.200s", hint);
  while (!name_is_free(sc, buf))
    snprintf(buf, sizeof buf, "%.200s_%llu", hint, (unsigned long long)++sc->name_counter);
  return mx__arena_strdup(arena, buf);
}

mx_status mx__onnx_resolve(mx__onnx_import *im, mx__onnx_scope *sc, const char *name, mx_value_id *out) {
  mx_value_id id = mx_graph_find_value(sc->g, name);
  if (id != MX_NO_VALUE) {
    *out = id;
    return MX_OK;
  }
  /* A value of an enclosing graph: the nearest one that has it. */
  const mx_value *outer = NULL;
  for (const mx__onnx_scope *p = sc->parent; p && !outer; p = p->parent) {
    mx_value_id oid = mx_graph_find_value(p->g, name);
    if (oid != MX_NO_VALUE) outer = mx__val(p->g, oid);
  }
  if (!outer)
    return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                    "'%s' is not defined in graph '%s' or in an enclosing graph", name, mx_graph_name(sc->g));
  mx_status st = mx__graph_new_value(sc->g, name, &id);
  if (st != MX_OK) return mx__onnx_graph_failed(im, sc->g, st);
  mx_value *v = mx__val(sc->g, id);
  v->flags |= MX_VALUE_OUTER;
  v->dtype = outer->dtype;
  v->shape = outer->shape;
  *out = id;
  return MX_OK;
}

/* --- graph inputs ----------------------------------------------------------------------------- */

/* Reads the declared shape of a graph input into *shape. */
static mx_status input_shape(mx__onnx_import *im, mx_graph *g, const Onnx__TensorShapeProto *sp,
                             const char *what, mx_shape *shape) {
  shape->rank = MX_RANK_UNKNOWN;
  if (sp->n_dim == 1 && sp->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
      sp->dim[0]->dim_value == -2)
    return MX_OK; /* GE's encoding of an unknown rank */
  if (sp->n_dim > MX_MAX_RANK)
    return mx__fail(im->err, MX_ERR_UNSUPPORTED, "%s has rank %zu; mixrt supports up to %d", what, sp->n_dim,
                    MX_MAX_RANK);
  shape->rank = (int32_t)sp->n_dim;
  for (size_t i = 0; i < sp->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
    mx_dim dim = MX_DIM_UNKNOWN;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < -1)
        return mx__fail(im->err, MX_ERR_MALFORMED, "%s: dim %zu is %lld", what, i, (long long)d->dim_value);
      dim = d->dim_value; /* -1 is MX_DIM_UNKNOWN */
    } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
               *d->dim_param) {
      /* An expression written by mixrt's export ("past_len + 1") parses back to itself; any
       * other text (a plain name, or one the parser does not take) is one symbol. */
      if (mx_sym_parse(mx_graph_symtab(g), d->dim_param, &dim) != MX_OK)
        dim = mx_sym_named(mx_graph_symtab(g), d->dim_param);
      if (dim == MX_DIM_UNKNOWN && mx_symtab_status(mx_graph_symtab(g)) != MX_OK)
        return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory for symbol '%s'", what,
                        d->dim_param);
    }
    shape->dims[i] = dim;
  }
  return MX_OK;
}

/* Declares graph input vi of sc->gp. */
static mx_status add_input(mx__onnx_import *im, mx__onnx_scope *sc, const Onnx__ValueInfoProto *vi) {
  char what[300];
  mx_status st;
  mx_dtype dtype = MX_DTYPE_UNDEFINED;
  mx_shape shape = {.rank = MX_RANK_UNKNOWN};
  snprintf(what, sizeof what, "graph '%.100s': input '%.150s'", mx_graph_name(sc->g), vi->name);
  mx_value_kind kind;
  const Onnx__TensorShapeProto *sp;
  st = mx__onnx_type_read(vi->type, &kind, &dtype, &sp, what, im->err);
  if (st != MX_OK) return st;
  if (sp) {
    st = input_shape(im, sc->g, sp, what, &shape);
    if (st != MX_OK) return st;
  }
  mx_value_id id;
  /* mx_graph_add_input insists on a known element type, but subgraph inputs (Loop bodies)
   * often declare none: such an input is declared with a placeholder type that is cleared
   * again, and inference takes it from the enclosing node. */
  st = mx_graph_add_input(sc->g, vi->name, dtype == MX_DTYPE_UNDEFINED ? MX_FLOAT32 : dtype, &shape, &id);
  if (st != MX_OK) return mx__onnx_graph_failed(im, sc->g, st);
  if (dtype == MX_DTYPE_UNDEFINED) mx__val(sc->g, id)->dtype = MX_DTYPE_UNDEFINED;
  mx__val(sc->g, id)->kind = (uint8_t)kind;
  return MX_OK;
}

/* --- graph bodies ----------------------------------------------------------------------------- */

/* Collects every name gp defines into sc->defined (and node names into sc->node_names);
 * `inputs` receives the graph inputs that are not initializers. */
static mx_status collect_names(mx__onnx_import *im, mx__onnx_scope *sc, mx_strmap *inputs) {
  char lb[200];
  const Onnx__GraphProto *gp = sc->gp;
  const char *gname = mx_graph_name(sc->g);
  if (gp->n_sparse_initializer) {
    const Onnx__SparseTensorProto *sp = gp->sparse_initializer[0];
    const char *n = sp->values && sp->values->name ? sp->values->name : "";
    return mx__fail(im->err, MX_ERR_UNSUPPORTED, "graph '%s': sparse initializer '%s' is not supported",
                    gname, n);
  }
  if (gp->n_initializer >= UINT32_MAX || gp->n_input >= UINT32_MAX || gp->n_node >= UINT32_MAX)
    return mx__fail(im->err, MX_ERR_LIMIT, "graph '%s' is too large", gname);
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const char *n = gp->initializer[i]->name;
    if (!n || !*n)
      return mx__fail(im->err, MX_ERR_MALFORMED, "graph '%s': initializer #%zu has no name", gname, i);
    if (mx__strmap_get(&sc->defined, n, NULL))
      return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "graph '%s': initializer '%s' is given twice", gname, n);
    if (!mx__strmap_put(&sc->defined, n, MX_ONNX_NOT_NODE)) goto oom;
  }
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *n = gp->input[i]->name;
    if (!n || !*n) return mx__fail(im->err, MX_ERR_MALFORMED, "graph '%s': input #%zu has no name", gname, i);
    if (mx__strmap_get(inputs, n, NULL))
      return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "graph '%s': input '%s' is declared twice", gname, n);
    if (mx__strmap_get(&sc->defined, n, NULL)) continue; /* an initializer: a constant */
    if (!mx__strmap_put(inputs, n, (uint32_t)i)) goto oom;
  }
  for (size_t i = 0; i < gp->n_input; i++)
    if (!mx__strmap_put(&sc->defined, gp->input[i]->name, MX_ONNX_NOT_NODE)) goto oom;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    if (np->name && *np->name && !mx__strmap_get(&sc->node_names, np->name, NULL) &&
        !mx__strmap_put(&sc->node_names, np->name, (uint32_t)i))
      goto oom;
    for (size_t k = 0; k < np->n_output; k++) {
      const char *n = np->output[k];
      if (!n || !*n) continue; /* omitted optional output */
      uint32_t prev;
      if (mx__strmap_get(&sc->defined, n, &prev)) {
        char lb2[200];
        if (prev == MX_ONNX_NOT_NODE)
          return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                          "node %s: output '%s' is already a graph input or initializer",
                          mx__onnx_node_label(np, i, lb, sizeof lb), n);
        return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "node %s: output '%s' is already produced by node %s",
                        mx__onnx_node_label(np, i, lb, sizeof lb), n,
                        mx__onnx_node_label(gp->node[prev], prev, lb2, sizeof lb2));
      }
      if (!mx__strmap_put(&sc->defined, n, (uint32_t)i)) goto oom;
    }
  }
  return MX_OK;
oom:
  return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "graph '%s': out of host memory", gname);
}

/* True when p points into the model's bytes (a raw_data view, not a copy). */
static bool is_view(const mx__onnx_import *im, const uint8_t *p) {
  return im->views && p >= im->views && p < im->views + im->views_size;
}

/* Drops the pages wholly inside [p, p + n) of a mapped model file from the process: they are
 * read again from the file if touched, but no longer count against its memory. */
static void release_view(const mx__onnx_import *im, const uint8_t *p, size_t n) {
  if (!im->views_mapped) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1), end = ((uintptr_t)p + n) & ~(page - 1);
  if (end > start) (void)madvise((void *)start, end - start, MADV_DONTNEED);
}

/* Adds the initializers of sc->gp as constants. */
static mx_status add_initializers(mx__onnx_import *im, mx__onnx_scope *sc) {
  char what[300];
  for (size_t i = 0; i < sc->gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = sc->gp->initializer[i];
    mx_tensor t;
    snprintf(what, sizeof what, "graph '%.100s': initializer '%.150s'", mx_graph_name(sc->g), tp->name);
    im->src.const_blocks = true; /* a large initializer is decoded into the block its store keeps */
    mx_status st = mx__onnx_tensor_decode(tp, what, &im->src, NULL, &t, im->err);
    bool in_block = st == MX_OK && mx__onnx_decoded_in_block(&im->src, &t);
    im->src.const_blocks = false;
    if (st != MX_OK) return st;
    const uint8_t *d = t.data;
    if (im->src.borrow_blob && d >= im->src.blob && d < im->src.blob + im->src.blob_size) {
      st = mx__graph_add_constant_borrowed(sc->g, tp->name, &t, NULL); /* in place in the mapped section */
    } else {
      if (in_block) {
        st = mx__graph_add_constant_adopt(sc->g, tp->name, &t, NULL); /* the block is the graph's */
      } else {
        st = mx_graph_add_constant(sc->g, tp->name, &t, NULL);
        mx_tensor_release(&t); /* the graph keeps its own copy (a string tensor's strings included) */
      }
      /* The message's bytes are not read again: a copy protobuf-c made is freed now, a view into
       * the model's bytes dropped (with its pages, when mapped), so the weights are held about
       * once while importing. */
      Onnx__TensorProto *mp = sc->gp->initializer[i];
      if (st == MX_OK && mp->has_raw_data && mp->raw_data.data) {
        if (is_view(im, mp->raw_data.data))
          release_view(im, mp->raw_data.data, mp->raw_data.len);
        else
          free(mp->raw_data.data);
        mp->raw_data.data = NULL;
        mp->raw_data.len = 0;
      }
    }
    if (st != MX_OK) return mx__onnx_graph_failed(im, sc->g, st);
  }
  return MX_OK;
}

/* Marks the graph outputs of sc->gp. */
static mx_status add_outputs(mx__onnx_import *im, mx__onnx_scope *sc) {
  for (size_t i = 0; i < sc->gp->n_output; i++) {
    const char *n = sc->gp->output[i]->name;
    if (!n || !*n)
      return mx__fail(im->err, MX_ERR_MALFORMED, "graph '%s': output #%zu has no name", mx_graph_name(sc->g),
                      i);
    mx_value_id v;
    if (!mx__strmap_get(&sc->defined, n, NULL) && !mx__onnx_scope_defines(sc->parent, n))
      return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                      "graph '%s': output '%s' is not produced by any node and is not a graph "
                      "input or initializer",
                      mx_graph_name(sc->g), n);
    mx_status st = mx__onnx_resolve(im, sc, n, &v);
    if (st != MX_OK) return st;
    st = mx_graph_add_output(sc->g, v);
    if (st != MX_OK) return mx__onnx_graph_failed(im, sc->g, st);
  }
  return MX_OK;
}

mx_status mx__onnx_import_graph(mx__onnx_import *im, const Onnx__GraphProto *gp, mx_graph *g,
                                const mx__onnx_scope *parent, int depth) {
  mx_status st;
  mx__onnx_scope sc;
  mx_strmap inputs;
  uint32_t *order = NULL;
  memset(&sc, 0, sizeof sc);
  sc.parent = parent;
  sc.gp = gp;
  sc.g = g;
  sc.depth = depth;
  mx__strmap_init(&sc.defined);
  mx__strmap_init(&sc.node_names);
  mx__strmap_init(&inputs);

  st = collect_names(im, &sc, &inputs);
  if (st != MX_OK) goto free_maps;
  for (size_t i = 0; i < gp->n_input; i++) {
    if (!mx__strmap_get(&inputs, gp->input[i]->name, NULL)) continue;
    st = add_input(im, &sc, gp->input[i]);
    if (st != MX_OK) goto free_maps;
  }
  st = add_initializers(im, &sc);
  if (st != MX_OK) goto free_maps;
  st = mx__onnx_order_nodes(im, &sc, &order);
  if (st != MX_OK) goto free_maps;
  for (size_t i = 0; i < gp->n_node; i++) {
    st = mx__onnx_import_node(im, &sc, order[i]);
    if (st != MX_OK) goto free_order;
  }
  st = add_outputs(im, &sc);
  if (st != MX_OK) goto free_order;
  if (mx_symtab_status(mx_graph_symtab(g)) != MX_OK)
    st = mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "graph '%s': out of host memory for symbols",
                  mx_graph_name(g));
free_order:
  free(order);
free_maps:
  mx__strmap_free(&inputs);
  mx__strmap_free(&sc.node_names);
  mx__strmap_free(&sc.defined);
  return st;
}

/* --- models ----------------------------------------------------------------------------------- */

/* Imports a serialized ModelProto; base_dir locates external data (NULL: refused), or blob holds
 * it (an .mxm weights section, blob_size bytes; NULL: none). *owned (when given) is data's malloc'd
 * buffer: freed and set to NULL as soon as nothing points into it. `mapped`: data is a read-only
 * file mapping whose pages may be dropped once read. The main graph's initializers are decoded
 * from views into data (mx__onnx_unpack_model_views), so the weights are not held twice. */
static mx_status load_model_owned(const uint8_t *data, size_t size, uint8_t **owned, bool mapped,
                                  const char *base_dir, const uint8_t *blob, uint64_t blob_size, bool borrow,
                                  mx_graph **out, mx_error *err) {
  mx_status st;
  mx__onnx_import im = {.src = {.base_dir = base_dir, .blob = blob, .blob_size = blob_size, .borrow_blob = borrow}, .err = err};
  mx_graph *g = NULL;
  if (size > MX_ONNX_MAX_FILE_BYTES)
    return mx__fail(err, MX_ERR_LIMIT, "%zu bytes is more than an ONNX model can hold", size);
  st = mx__onnx_check_wire(&onnx__model_proto__descriptor, data, size, "ONNX model", err);
  if (st != MX_OK) return st;
  Onnx__ModelProto *m = mx__onnx_unpack_model_views(data, size);
  if (m) {
    im.views = data;
    im.views_size = size;
    im.views_mapped = mapped;
  } else {
    m = onnx__model_proto__unpack(NULL, size, data);
    if (owned) { /* the decoded message holds copies of every byte it needs */
      free(*owned);
      *owned = NULL;
    }
  }
  if (!m) return mx__fail(err, MX_ERR_MALFORMED, "not a valid ONNX model (protobuf decoding failed)");
  if (!m->graph) {
    st = mx__fail(err, MX_ERR_MALFORMED, "the ONNX model has no graph");
    goto free_model;
  }
  const char *gname = m->graph->name && *m->graph->name ? m->graph->name : "main";
  st = mx_graph_create(gname, &g);
  if (st != MX_OK) {
    st = mx__fail(err, st, "cannot create graph '%.200s': %s", gname, mx_status_string(st));
    goto free_model;
  }
  g->ir_version = m->has_ir_version ? m->ir_version : 0;
  if (m->n_opset_import == 0) { /* models before opset imports existed use opset 1 */
    st = mx_graph_set_opset(g, "", 1);
    if (st != MX_OK) goto graph_failed;
  }
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *os = m->opset_import[i];
    const char *domain = os->domain ? os->domain : "";
    if (!os->has_version || os->version <= 0) {
      st = mx__fail(err, MX_ERR_MALFORMED, "opset import of domain '%.200s' has no valid version", domain);
      goto destroy_graph;
    }
    st = mx_graph_set_opset(g, domain, os->version);
    if (st != MX_OK) goto graph_failed;
  }
  st = mx__onnx_import_graph(&im, m->graph, g, NULL, 0);
  if (st != MX_OK) goto destroy_graph;
  *out = g;
  mx__onnx_views_clear(m, im.views, im.views_size);
  onnx__model_proto__free_unpacked(m, NULL);
  return MX_OK;
graph_failed:
  mx__onnx_graph_failed(&im, g, st);
destroy_graph:
  mx_graph_destroy(g);
free_model:
  mx__onnx_views_clear(m, im.views, im.views_size);
  onnx__model_proto__free_unpacked(m, NULL);
  return st;
}

static mx_status load_model(const uint8_t *data, size_t size, const char *base_dir, const uint8_t *blob,
                            uint64_t blob_size, bool borrow, mx_graph **out, mx_error *err) {
  return load_model_owned(data, size, NULL, false, base_dir, blob, blob_size, borrow, out, err);
}

/* Maps the regular file at path read-only (*data, *size; MAP_FAILED left untouched on failure).
 * False when it cannot be mapped (not a regular file, empty, too large, no mmap): the caller
 * reads it instead, which also reports why it cannot be opened. */
static bool map_model_file(const char *path, const uint8_t **data, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat sb;
  bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
            (uint64_t)sb.st_size <= MX_ONNX_MAX_FILE_BYTES;
  if (ok) {
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ok = p != MAP_FAILED;
    if (ok) {
      *data = p;
      *size = (size_t)sb.st_size;
    }
  }
  close(fd);
  return ok;
}

mx_status mx_onnx_load_memory(const void *data, size_t size, const char *base_dir, mx_graph **out,
                              mx_error *err) {
  mx_error local;
  mx_error *e = err ? err : &local;
  mx_error_clear(e);
  if (!out) return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx_onnx_load_memory: out is NULL");
  *out = NULL;
  if (!data && size) return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx_onnx_load_memory: data is NULL");
  return load_model(data, size, base_dir, NULL, 0, false, out, e);
}

mx_status mx__onnx_load_memory_blob(const void *data, size_t size, const void *blob, uint64_t blob_size,
                                    mx_graph **out, mx_error *err) {
  mx_error local;
  mx_error *e = err ? err : &local;
  mx_error_clear(e);
  if (!out) return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx__onnx_load_memory_blob: out is NULL");
  *out = NULL;
  if ((!data && size) || (!blob && blob_size))
    return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx__onnx_load_memory_blob: data is NULL");
  static const uint8_t empty[1];
  return load_model(data, size, NULL, blob ? blob : empty, blob_size, false, out, e);
}

mx_status mx__onnx_load_memory_borrow(const void *data, size_t size, const void *blob, uint64_t blob_size,
                                      mx_graph **out, mx_error *err) {
  mx_error local;
  mx_error *e = err ? err : &local;
  mx_error_clear(e);
  if (!out) return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx__onnx_load_memory_borrow: out is NULL");
  *out = NULL;
  if ((!data && size) || (!blob && blob_size))
    return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx__onnx_load_memory_borrow: data is NULL");
  static const uint8_t empty[1];
  return load_model(data, size, NULL, blob ? blob : empty, blob_size, true, out, e);
}

static _Atomic uint64_t files_loaded;

uint64_t mx__onnx_files_loaded(void) { return atomic_load(&files_loaded); }

mx_status mx_onnx_load_file(const char *path, mx_graph **out, mx_error *err) {
  mx_error local;
  mx_error *e = err ? err : &local;
  mx_status st;
  uint8_t *buf = NULL;
  size_t size = 0;
  mx_error_clear(e);
  if (!out) return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx_onnx_load_file: out is NULL");
  *out = NULL;
  if (!path) return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx_onnx_load_file: path is NULL");
  /* A regular file is mapped, so the pages of each initializer can be dropped once the graph
   * holds its bytes; anything else (a pipe) is read into memory. */
  const uint8_t *mapping = NULL;
  if (!map_model_file(path, &mapping, &size)) {
    st = mx__read_file(path, MX_ONNX_MAX_FILE_BYTES, &buf, &size, e);
    if (st != MX_OK) return st;
  }
  atomic_fetch_add(&files_loaded, 1);
  char *dir = mx__onnx_dirname(path);
  if (!dir) {
    st = mx__fail(e, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    goto free_buf;
  }
  if (mapping)
    st = load_model_owned(mapping, size, NULL, true, dir, NULL, 0, false, out, e);
  else
    st = load_model_owned(buf, size, &buf, false, dir, NULL, 0, false, out, e);
  if (st != MX_OK) mx__error_prefix(e, "%s: ", path);
  free(dir);
free_buf:
  if (mapping) munmap((void *)(uintptr_t)mapping, size);
  free(buf);
  return st;
}
