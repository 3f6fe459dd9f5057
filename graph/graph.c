/* Graph construction and bookkeeping: values, nodes, names, uses, constants, subgraphs and the
 * public builder/reader API over graph/ir.h. Passes live in graph/passes/. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/heap.h"
#include "graph/ir.h"

/* --- errors and logging --------------------------------------------------------------------- */

mx_status mx__graph_fail(mx_graph *g, mx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx__error_vfail(&g->err, status, fmt, ap);
  va_end(ap);
  return status;
}

mx_status mx__graph_fail_err(mx_graph *g, const mx_error *err) {
  if (&g->err != err) g->err = *err;
  return err->status;
}

mx_status mx__node_fail(mx_error *err, const mx_node *nd, mx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx__error_vfail(err, status, fmt, ap);
  va_end(ap);
  mx__error_prefix(err, "node '%s' (%s): ", nd->name, nd->op_type);
  return status;
}

void mx__graph_log(mx_graph *g, mx_log_level level, const char *fmt, ...) {
  mx_graph *root = g;
  while (root->parent && !root->log) root = root->parent;
  if (!root->log) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  root->log(root->log_user, level, line);
}

/* --- lifetime ------------------------------------------------------------------------------- */

static mx_status graph_alloc(const char *name, mx_symtab *shared_syms, mx_graph **out) {
  mx_graph *g = calloc(1, sizeof *g);
  if (!g) return MX_ERR_OUT_OF_MEMORY;
  mx__arena_init(&g->arena, 0);
  mx__strmap_init(&g->value_names);
  mx__strmap_init(&g->node_names);
  if (shared_syms) {
    g->syms = shared_syms;
  } else {
    if (mx_symtab_create(&g->syms) != MX_OK) goto fail_syms;
    g->owns_syms = true;
  }
  g->name = mx__arena_strdup(&g->arena, name ? name : "graph");
  if (!g->name) goto fail_name;
  *out = g;
  return MX_OK;
fail_name:
  if (g->owns_syms) mx_symtab_destroy(g->syms);
fail_syms:
  free(g);
  return MX_ERR_OUT_OF_MEMORY;
}

mx_status mx_graph_create(const char *name, mx_graph **out) {
  if (!out) return MX_ERR_INVALID_ARGUMENT;
  *out = NULL;
  mx_graph *g;
  mx_status st = graph_alloc(name, NULL, &g);
  if (st != MX_OK) return st;
  st = mx_graph_set_opset(g, "", MX_DEFAULT_OPSET);
  if (st != MX_OK) {
    mx_graph_destroy(g);
    return st;
  }
  *out = g;
  return MX_OK;
}

/* Releases a store's own copy of the bytes. */
static void store_free_heap(mx__const_store *s) {
  if (s->heap_mapped)
    munmap(s->heap, s->heap_mapped);
  else
    free(s->heap);
  s->heap = NULL;
  s->heap_mapped = 0;
}

void mx_graph_destroy(mx_graph *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_subgraphs; i++) mx_graph_destroy(g->subgraphs[i]);
  free(g->subgraphs);
  for (mx__const_store *s = g->stores, *next; s; s = next) {
    next = s->next;
    if (s->holder) s->release(s->holder);
    store_free_heap(s);
    free(s);
  }
  for (size_t i = 0; i < g->n_values; i++) free(g->values[i].consumers);
  free(g->values);
  free(g->nodes);
  free(g->inputs);
  free(g->outputs);
  free(g->opsets);
  free(g->topo);
  mx__strmap_free(&g->value_names);
  mx__strmap_free(&g->node_names);
  if (g->owns_syms) mx_symtab_destroy(g->syms);
  mx__arena_release(&g->arena);
  free(g);
}

mx_status mx__graph_create_subgraph(mx_graph *g, const char *name, mx_graph **out) {
  mx_graph *sub;
  mx_status st = graph_alloc(name, g->syms, &sub);
  if (st != MX_OK) return mx__graph_fail(g, st, "out of memory creating subgraph '%s'", name);
  st = mx__graph_adopt_subgraph(g, sub);
  if (st != MX_OK) {
    mx_graph_destroy(sub);
    return st;
  }
  /* A subgraph imports what its parent imports. */
  for (size_t i = 0; i < g->n_opsets; i++) {
    st = mx_graph_set_opset(sub, g->opsets[i].domain, g->opsets[i].version);
    if (st != MX_OK) return mx__graph_fail(g, st, "out of memory creating subgraph '%s'", name);
  }
  *out = sub;
  return MX_OK;
}

mx_status mx__graph_adopt_subgraph(mx_graph *g, mx_graph *sub) {
  if (!MX_GROW(g->subgraphs, g->cap_subgraphs, g->n_subgraphs + 1))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory adopting a subgraph");
  if (sub->owns_syms && sub->syms != g->syms) {
    /* The subgraph's symbols are re-created in the parent's table lazily by whoever built it;
     * a subgraph built standalone keeps its own table. */
  }
  sub->parent = g;
  g->subgraphs[g->n_subgraphs++] = sub;
  return MX_OK;
}

const char *mx_graph_last_error(const mx_graph *g) { return g ? g->err.message : ""; }
mx_symtab *mx_graph_symtab(mx_graph *g) { return g ? g->syms : NULL; }
const char *mx_graph_name(const mx_graph *g) { return g ? g->name : NULL; }

void mx_graph_set_log(mx_graph *g, mx_log_fn fn, void *user) {
  if (!g) return;
  g->log = fn;
  g->log_user = user;
}

static const char *norm_domain(const char *d) {
  if (!d || strcmp(d, "ai.onnx") == 0) return "";
  return d;
}

mx_status mx_graph_set_opset(mx_graph *g, const char *domain, int64_t version) {
  if (!g || version <= 0) return MX_ERR_INVALID_ARGUMENT;
  domain = norm_domain(domain);
  for (size_t i = 0; i < g->n_opsets; i++) {
    if (strcmp(g->opsets[i].domain, domain) == 0) {
      g->opsets[i].version = version;
      return MX_OK;
    }
  }
  const char *d = mx__arena_strdup(&g->arena, domain);
  if (!d || !MX_GROW(g->opsets, g->cap_opsets, g->n_opsets + 1))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory setting an opset");
  g->opsets[g->n_opsets].domain = d;
  g->opsets[g->n_opsets].version = version;
  g->n_opsets++;
  return MX_OK;
}

int64_t mx_graph_opset(const mx_graph *g, const char *domain) {
  if (!g) return 0;
  domain = norm_domain(domain);
  for (size_t i = 0; i < g->n_opsets; i++)
    if (strcmp(g->opsets[i].domain, domain) == 0) return g->opsets[i].version;
  return 0;
}

/* --- names ---------------------------------------------------------------------------------- */

static bool name_taken(const mx_graph *g, const char *name) {
  return mx__strmap_get(&g->value_names, name, NULL) || mx__strmap_get(&g->node_names, name, NULL);
}

const char *mx__graph_unique_name(mx_graph *g, const char *hint) {
  if (!hint || !*hint) hint = "v";
  if (!name_taken(g, hint)) return mx__arena_strdup(&g->arena, hint);
  char buf[256];
  for (;;) {
    snprintf(buf, sizeof buf, "%.200s_%llu", hint, (unsigned long long)++g->name_counter);
    if (!name_taken(g, buf)) return mx__arena_strdup(&g->arena, buf);
  }
}

/* --- values --------------------------------------------------------------------------------- */

static mx_status new_value_named(mx_graph *g, const char *name, bool must_be_new, mx_value_id *out) {
  if (g->n_values >= UINT32_MAX - 1)
    return mx__graph_fail(g, MX_ERR_LIMIT, "too many values in graph '%s'", g->name);
  const char *nm;
  if (name && *name) {
    if (mx__strmap_get(&g->value_names, name, NULL)) {
      if (must_be_new)
        return mx__graph_fail(g, MX_ERR_INVALID_GRAPH,
                              "duplicate value name '%s': every value must be produced once", name);
    }
    nm = mx__arena_strdup(&g->arena, name);
  } else {
    nm = mx__graph_unique_name(g, "v");
  }
  if (!nm || !MX_GROW(g->values, g->cap_values, g->n_values + 1))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory adding value '%s'", name ? name : "");
  mx_value_id id = (mx_value_id)g->n_values;
  if (!mx__strmap_put(&g->value_names, nm, id))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory adding value '%s'", nm);
  mx_value *v = &g->values[id];
  memset(v, 0, sizeof *v);
  v->name = nm;
  v->dtype = MX_DTYPE_UNDEFINED;
  v->shape.rank = MX_RANK_UNKNOWN;
  v->producer = MX_NO_NODE;
  v->sv_len = -1;
  g->n_values++;
  *out = id;
  return MX_OK;
}

mx_status mx__graph_new_value(mx_graph *g, const char *name, mx_value_id *out) {
  return new_value_named(g, name, true, out);
}

static _Atomic uint64_t tensor_bytes_copied;

uint64_t mx__graph_tensor_bytes_copied(void) { return atomic_load(&tensor_bytes_copied); }

mx_tensor *mx__graph_copy_tensor(mx_graph *g, const mx_tensor *t) {
  size_t nbytes;
  if (!mx_tensor_nbytes(t, &nbytes)) return NULL;
  atomic_fetch_add(&tensor_bytes_copied, (uint64_t)nbytes);
  mx_tensor *c = mx__arena_alloc(&g->arena, sizeof *c, 8);
  if (!c) return NULL;
  *c = *t;
  c->name = NULL;
  c->placement = MX_HOST;
  c->data = mx__arena_alloc(&g->arena, nbytes ? nbytes : 1, 64);
  if (!c->data) return NULL;
  if (t->dtype == MX_STRING) { /* deep: the strings move into the graph's arena too */
    for (size_t i = 0; i < nbytes / sizeof(char *); i++) {
      const char *s = ((char *const *)t->data)[i];
      if (!(((char **)c->data)[i] = mx__arena_strdup(&g->arena, s ? s : ""))) return NULL;
    }
    return c;
  }
  if (nbytes) memcpy(c->data, t->data, nbytes);
  return c;
}

/* Sets sv of a small integer constant to its values (design §4: constants are known values). */
static mx_status const_sv(mx_graph *g, mx_value *v) {
  const mx_tensor *t = v->data;
  int64_t n;
  v->sv = NULL;
  v->sv_len = -1;
  if (!(t->dtype == MX_INT64 || t->dtype == MX_INT32) || !mx_tensor_numel(t, &n) || n > 64) return MX_OK;
  mx_dim *sv = mx__arena_array(&g->arena, n ? (size_t)n : 1, sizeof *sv, 8);
  if (!sv) return MX_ERR_OUT_OF_MEMORY;
  for (int64_t i = 0; i < n; i++) {
    int64_t x = t->dtype == MX_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    sv[i] = mx_sym_const(g->syms, x);
  }
  v->sv = sv;
  v->sv_len = (int32_t)n;
  return MX_OK;
}

/* A copy of large tensor t held outside the arena (see mx__const_store), or NULL when out of memory.
 * Blocks of 64 KiB and more are anonymous mappings: released, they go back to the system at once
 * (a freed malloc block amid the heap would not, and compiling frees them in any order). */
#define CONST_BLOCK_MAPPED 65536 /* blocks of this size and more are anonymous mappings */

void *mx__graph_const_block_alloc(size_t nbytes) {
  if (nbytes >= CONST_BLOCK_MAPPED) {
    void *m = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
  }
  return aligned_alloc(64, ((nbytes ? nbytes : 1) + 63) & ~(size_t)63);
}

void mx__graph_const_block_free(void *block, size_t nbytes) {
  if (!block) return;
  if (nbytes >= CONST_BLOCK_MAPPED)
    munmap(block, nbytes);
  else
    free(block);
}

/* A store of g holding t (nbytes) in `heap`, a block of mx__graph_const_block_alloc it takes over,
 * or NULL when out of memory (heap then still the caller's). */
static mx__const_store *store_adopt(mx_graph *g, const mx_tensor *t, void *heap, size_t nbytes) {
  mx__const_store *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->heap = heap;
  s->heap_mapped = nbytes >= CONST_BLOCK_MAPPED ? nbytes : 0;
  s->header = *t;
  s->header.name = NULL;
  s->header.placement = MX_HOST;
  s->header.data = heap;
  s->next = g->stores;
  g->stores = s;
  return s;
}

static mx__const_store *store_new(mx_graph *g, const mx_tensor *t, size_t nbytes) {
  void *heap = mx__graph_const_block_alloc(nbytes);
  if (!heap) return NULL;
  mx__const_store *s = store_adopt(g, t, heap, nbytes);
  if (!s) {
    mx__graph_const_block_free(heap, nbytes);
    return NULL;
  }
  atomic_fetch_add(&tensor_bytes_copied, (uint64_t)nbytes);
  memcpy(heap, t->data, nbytes);
  return s;
}

/* Sets v's constant data: a copy in the graph's arena (outside it when large), or t's own bytes
 * when borrowed. */
static mx_status set_const(mx_graph *g, mx_value_id vid, const mx_tensor *t, bool borrow, bool stored) {
  mx_value *v = &g->values[vid];
  if (!mx_dtype_size(t->dtype) || t->rank < 0 || t->rank > MX_MAX_RANK)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "constant '%s': invalid dtype or rank", v->name);
  size_t nbytes;
  if (!mx_tensor_nbytes(t, &nbytes))
    return mx__graph_fail(g, MX_ERR_LIMIT, "constant '%s': size overflows", v->name);
  if (nbytes && !t->data)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "constant '%s': data is NULL", v->name);
  mx__const_store *store = stored && t->dtype != MX_STRING && nbytes >= MX__CONST_STORE_MIN
                              ? store_new(g, t, nbytes) : NULL;
  mx_tensor *c = store                                ? &store->header
                 : borrow && t->dtype != MX_STRING ? mx__arena_alloc(&g->arena, sizeof *c, 8)
                                                     : mx__graph_copy_tensor(g, t);
  if (!c) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory copying constant '%s'", v->name);
  v->store = store;
  if (borrow && t->dtype != MX_STRING) {
    *c = *t;
    c->name = NULL;
    c->placement = MX_HOST;
  }
  v->data = c;
  v->flags |= MX_VALUE_CONST;
  v->dtype = t->dtype;
  v->shape.rank = t->rank;
  for (int i = 0; i < MX_MAX_RANK; i++) v->shape.dims[i] = i < t->rank ? t->dims[i] : 0;
  if (const_sv(g, v) != MX_OK)
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory copying constant '%s'", v->name);
  return MX_OK;
}

mx_status mx__graph_set_const(mx_graph *g, mx_value_id vid, const mx_tensor *t) {
  return set_const(g, vid, t, false, true);
}

mx_status mx__graph_add_constant_borrowed(mx_graph *g, const char *name, const mx_tensor *t,
                                          mx_value_id *out) {
  mx_value_id id = MX_NO_VALUE;
  mx_status st = mx__graph_new_value(g, name, &id);
  if (st != MX_OK) return st;
  st = set_const(g, id, t, true, false);
  if (st != MX_OK) {
    mx__graph_remove_value(g, id);
    return st;
  }
  if (out) *out = id;
  return MX_OK;
}

mx_status mx__graph_add_constant_shared(mx_graph *g, const char *name, const mx_value *src,
                                        mx_value_id *out) {
  mx_value_id id = MX_NO_VALUE;
  mx_status st = mx__graph_add_constant_borrowed(g, name, src->data, &id);
  if (st != MX_OK) return st;
  if (src->store) { /* the same header: a holder taking the bytes over serves both graphs */
    g->values[id].data = &src->store->header;
    g->values[id].store = src->store;
  }
  if (out) *out = id;
  return MX_OK;
}

mx_status mx__graph_add_constant_adopt(mx_graph *g, const char *name, const mx_tensor *t, mx_value_id *out) {
  size_t nbytes = 0;
  bool adoptable = t->dtype != MX_STRING && mx_tensor_nbytes(t, &nbytes) && nbytes >= MX__CONST_STORE_MIN;
  if (!adoptable) { /* a copy in the arena, as mx_graph_add_constant makes */
    mx_status st = mx_graph_add_constant(g, name, t, out);
    mx__graph_const_block_free(t->data, nbytes);
    return st;
  }
  mx_value_id id = MX_NO_VALUE;
  mx_status st = mx__graph_new_value(g, name, &id);
  mx__const_store *s = st == MX_OK ? store_adopt(g, t, t->data, nbytes) : NULL;
  if (!s) {
    mx__graph_const_block_free(t->data, nbytes);
    if (id != MX_NO_VALUE) mx__graph_remove_value(g, id);
    return st != MX_OK ? st
                       : mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory adopting constant '%s'", name);
  }
  /* The store's header is the constant: set_const as a borrow of it, then the value owns it. */
  st = set_const(g, id, &s->header, true, false);
  if (st != MX_OK) { /* the store stays on g's list and is freed with g */
    mx__graph_remove_value(g, id);
    return st;
  }
  g->values[id].data = &s->header;
  g->values[id].store = s;
  if (out) *out = id;
  return MX_OK;
}

bool mx__graph_const_rehome(const mx_graph *g, mx_value_id vid, void *bytes, size_t nbytes, void *holder,
                            void (*release)(void *)) {
  mx__const_store *s = g->values[vid].store;
  size_t have;
  if (!s || s->pinned || !holder || !release || !mx_tensor_nbytes(&s->header, &have) || have != nbytes)
    return false;
  if (s->holder) s->release(s->holder);
  store_free_heap(s);
  s->holder = holder;
  s->release = release;
  s->header.data = bytes;
  return true;
}

void mx__graph_const_pin(const mx_graph *g, mx_value_id vid) {
  mx__const_store *s = g->values[vid].store;
  if (s) s->pinned = true;
}

mx_status mx__graph_add_use(mx_graph *g, mx_value_id vid, mx_node_id n) {
  mx_value *v = &g->values[vid];
  if (!MX_GROW(v->consumers, v->cap_consumers, v->n_consumers + 1))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory recording a use of '%s'", v->name);
  v->consumers[v->n_consumers++] = n;
  return MX_OK;
}

void mx__graph_remove_use(mx_graph *g, mx_value_id vid, mx_node_id n) {
  mx_value *v = &g->values[vid];
  for (size_t i = 0; i < v->n_consumers; i++) {
    if (v->consumers[i] == n) {
      memmove(&v->consumers[i], &v->consumers[i + 1], (v->n_consumers - i - 1) * sizeof *v->consumers);
      v->n_consumers--;
      return;
    }
  }
}

mx_status mx__graph_replace_uses(mx_graph *g, mx_value_id from, mx_value_id to) {
  if (from == to) return MX_OK;
  mx_value *vf = &g->values[from];
  /* Reserve first so the rewrite cannot fail half-way. */
  mx_value *vt = &g->values[to];
  if (!MX_GROW(vt->consumers, vt->cap_consumers, vt->n_consumers + vf->n_consumers))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory rewiring '%s'", vf->name);
  for (size_t i = 0; i < vf->n_consumers; i++) {
    mx_node *n = &g->nodes[vf->consumers[i]];
    for (uint32_t k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == from) n->inputs[k] = to;
  }
  /* Deduplicate: a node using `from` twice appears twice, and each input slot is one use. */
  for (size_t i = 0; i < vf->n_consumers; i++) vt->consumers[vt->n_consumers++] = vf->consumers[i];
  vf->n_consumers = 0;
  for (size_t i = 0; i < g->n_outputs; i++) {
    if (g->outputs[i] == from) {
      g->outputs[i] = to;
      vt->flags |= MX_VALUE_OUTPUT;
      vf->flags &= ~(uint32_t)MX_VALUE_OUTPUT;
    }
  }
  mx__graph_invalidate(g);
  return MX_OK;
}

void mx__graph_remove_node(mx_graph *g, mx_node_id nid) {
  mx_node *n = &g->nodes[nid];
  if (n->flags & MX_NODE_DEAD) return;
  for (uint32_t i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] != MX_NO_VALUE) mx__graph_remove_use(g, n->inputs[i], nid);
  for (uint32_t i = 0; i < n->n_outputs; i++) {
    mx_value *v = &g->values[n->outputs[i]];
    if (v->producer == nid) v->producer = MX_NO_NODE;
  }
  n->flags |= MX_NODE_DEAD;
  mx__strmap_del(&g->node_names, n->name);
  g->n_live_nodes--;
  mx__graph_invalidate(g);
}

void mx__graph_remove_value(mx_graph *g, mx_value_id vid) {
  mx_value *v = &g->values[vid];
  if (v->flags & MX_VALUE_DEAD) return;
  v->flags |= MX_VALUE_DEAD;
  mx__strmap_del(&g->value_names, v->name);
}

void mx__graph_invalidate(mx_graph *g) {
  free(g->topo);
  g->topo = NULL;
  g->n_topo = 0;
}

/* --- attributes ----------------------------------------------------------------------------- */

const mx_attr *mx__node_attr(const mx_node *n, const char *name) {
  for (uint32_t i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

mx_status mx__graph_copy_attrs(mx_graph *g, const mx_attr *src, size_t n, mx_attr **out) {
  *out = NULL;
  if (n == 0) return MX_OK;
  mx_attr *dst = mx__arena_array(&g->arena, n, sizeof *dst, 8);
  if (!dst) goto oom;
  for (size_t i = 0; i < n; i++) {
    const mx_attr *a = &src[i];
    mx_attr *d = &dst[i];
    if (!a->name || !*a->name)
      return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "attribute %zu has no name", i);
    for (size_t k = 0; k < i; k++)
      if (strcmp(src[k].name, a->name) == 0)
        return mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "duplicate attribute '%s'", a->name);
    d->name = mx__arena_strdup(&g->arena, a->name);
    d->type = a->type;
    if (!d->name) goto oom;
    switch (a->type) {
      case MX_ATTR_INT: d->i = a->i; break;
      case MX_ATTR_FLOAT: d->f = a->f; break;
      case MX_ATTR_STRING:
        d->s = mx__arena_strdup(&g->arena, a->s ? a->s : "");
        if (!d->s) goto oom;
        break;
      case MX_ATTR_INTS:
        d->count = a->count;
        if (a->count && !a->ints)
          return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "attribute '%s': ints is NULL", a->name);
        d->ints = mx__arena_memdup(&g->arena, a->ints, a->count * sizeof(int64_t), 8);
        if (!d->ints) goto oom;
        break;
      case MX_ATTR_FLOATS:
        d->count = a->count;
        if (a->count && !a->floats)
          return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "attribute '%s': floats is NULL", a->name);
        d->floats = mx__arena_memdup(&g->arena, a->floats, a->count * sizeof(float), 8);
        if (!d->floats) goto oom;
        break;
      case MX_ATTR_STRINGS: {
        d->count = a->count;
        const char **ss = mx__arena_array(&g->arena, a->count ? a->count : 1, sizeof *ss, 8);
        if (!ss) goto oom;
        for (size_t k = 0; k < a->count; k++) {
          ss[k] = mx__arena_strdup(&g->arena, a->strings && a->strings[k] ? a->strings[k] : "");
          if (!ss[k]) goto oom;
        }
        d->strings = ss;
        break;
      }
      case MX_ATTR_TENSOR:
        if (!a->tensor)
          return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "attribute '%s': tensor is NULL", a->name);
        if (!mx_dtype_size(a->tensor->dtype) || a->tensor->rank < 0 || a->tensor->rank > MX_MAX_RANK)
          return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "attribute '%s': invalid tensor", a->name);
        d->tensor = mx__graph_copy_tensor(g, a->tensor);
        if (!d->tensor) goto oom;
        break;
      case MX_ATTR_GRAPH:
        if (!a->graph)
          return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "attribute '%s': graph is NULL", a->name);
        d->graph = a->graph; /* adopted by the caller once the node exists */
        break;
      case MX_ATTR_TYPE_PROTO: d->i = a->i; break;
      default:
        return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "attribute '%s': unknown type %d", a->name,
                              (int)a->type);
    }
  }
  *out = dst;
  return MX_OK;
oom:
  return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory copying attributes");
}

/* --- public builder ------------------------------------------------------------------------- */

mx_status mx_graph_add_input(mx_graph *g, const char *name, mx_dtype dtype, const mx_shape *shape,
                             mx_value_id *out) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  if (!name || !*name) return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "graph input needs a name");
  if (!mx_dtype_is_supported(dtype) && dtype != MX_STRING) /* strings: host only, mixrt/dtype.h */
    return mx__graph_fail(g, MX_ERR_UNSUPPORTED, "graph input '%s': unsupported dtype %d", name, (int)dtype);
  if (shape && (shape->rank < MX_RANK_UNKNOWN || shape->rank > MX_MAX_RANK))
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "graph input '%s': rank %d out of range", name,
                          (int)shape->rank);
  if (!MX_GROW(g->inputs, g->cap_inputs, g->n_inputs + 1))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory adding input '%s'", name);
  mx_value_id id;
  mx_status st = mx__graph_new_value(g, name, &id);
  if (st != MX_OK) return st;
  mx_value *v = &g->values[id];
  v->flags |= MX_VALUE_INPUT;
  v->dtype = dtype;
  if (shape) {
    v->shape.rank = shape->rank;
    for (int i = 0; i < MX_MAX_RANK; i++) v->shape.dims[i] = i < shape->rank ? shape->dims[i] : 0;
  }
  g->inputs[g->n_inputs++] = id;
  mx__graph_invalidate(g);
  if (out) *out = id;
  return MX_OK;
}

mx_status mx_graph_add_constant(mx_graph *g, const char *name, const mx_tensor *t, mx_value_id *out) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  if (!t)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "constant '%s': tensor is NULL", name ? name : "");
  mx_value_id id = MX_NO_VALUE;
  mx_status st = mx__graph_new_value(g, name, &id);
  if (st != MX_OK) return st;
  st = mx__graph_set_const(g, id, t);
  if (st != MX_OK) {
    mx__graph_remove_value(g, id);
    return st;
  }
  if (out) *out = id;
  return MX_OK;
}

mx_status mx_graph_add_node(mx_graph *g, const mx_node_desc *desc, mx_value_id *outputs) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  if (!desc || !desc->op_type || !*desc->op_type)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "node needs an op type");
  const char *op = desc->op_type;
  if (desc->n_inputs > 1024 || desc->n_outputs > 1024 || desc->n_attrs > 1024)
    return mx__graph_fail(g, MX_ERR_LIMIT, "node of op %s: too many inputs, outputs or attributes", op);
  if (desc->n_inputs && !desc->inputs)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "node of op %s: inputs is NULL", op);
  if (desc->n_outputs && !outputs)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "node of op %s: outputs is NULL", op);
  const char *label = desc->name && *desc->name ? desc->name : op;
  for (size_t i = 0; i < desc->n_inputs; i++) {
    mx_value_id v = desc->inputs[i];
    if (v != MX_NO_VALUE && !mx__value_valid(g, v))
      return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT,
                            "node '%s' (%s): input %zu is not a value of graph '%s'", label, op, i, g->name);
  }
  if (desc->name && *desc->name && mx__strmap_get(&g->node_names, desc->name, NULL))
    return mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "duplicate node name '%s'", desc->name);
  for (size_t i = 0; i < desc->n_outputs; i++) {
    const char *on = desc->output_names ? desc->output_names[i] : NULL;
    if (on && *on && mx__strmap_get(&g->value_names, on, NULL))
      return mx__graph_fail(g, MX_ERR_INVALID_GRAPH,
                            "node '%s' (%s): output name '%s' is already used by another value", label, op,
                            on);
    for (size_t k = 0; on && *on && desc->output_names && k < i; k++)
      if (desc->output_names[k] && strcmp(desc->output_names[k], on) == 0)
        return mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "node '%s' (%s): output name '%s' given twice", label,
                              op, on);
  }
  if (!MX_GROW(g->nodes, g->cap_nodes, g->n_nodes + 1)) goto oom;

  /* Everything that can fail without changing the graph happens first. */
  mx_attr *attrs = NULL;
  mx_status st = mx__graph_copy_attrs(g, desc->attrs, desc->n_attrs, &attrs);
  if (st != MX_OK) {
    mx__error_prefix(&g->err, "node '%s' (%s): ", label, op);
    return st;
  }
  const char *name =
      desc->name && *desc->name ? mx__arena_strdup(&g->arena, desc->name) : mx__graph_unique_name(g, op);
  const char *op_type = mx__arena_strdup(&g->arena, op);
  const char *domain = mx__arena_strdup(&g->arena, norm_domain(desc->domain));
  mx_value_id *ins = mx__arena_memdup(&g->arena, desc->inputs, desc->n_inputs * sizeof *ins, 8);
  mx_value_id *outs = mx__arena_array(&g->arena, desc->n_outputs ? desc->n_outputs : 1, sizeof *outs, 8);
  if (!name || !op_type || !domain || !ins || !outs) goto oom;
  /* Reserve the consumer slots so recording uses cannot fail half-way. */
  for (size_t i = 0; i < desc->n_inputs; i++) {
    mx_value *v = desc->inputs[i] == MX_NO_VALUE ? NULL : &g->values[desc->inputs[i]];
    if (v && !MX_GROW(v->consumers, v->cap_consumers, v->n_consumers + desc->n_inputs)) goto oom;
  }
  if (!MX_GROW(g->values, g->cap_values, g->n_values + desc->n_outputs)) goto oom;
  for (size_t i = 0; i < desc->n_attrs; i++)
    if (attrs[i].type == MX_ATTR_GRAPH &&
        !MX_GROW(g->subgraphs, g->cap_subgraphs, g->n_subgraphs + desc->n_attrs))
      goto oom;

  mx_node_id nid = (mx_node_id)g->n_nodes;
  size_t first_value = g->n_values;
  for (size_t i = 0; i < desc->n_outputs; i++) {
    const char *on = desc->output_names ? desc->output_names[i] : NULL;
    char gen[300];
    if (!on || !*on) {
      snprintf(gen, sizeof gen, "%.250s:%zu", name, i);
      on = gen;
      if (mx__strmap_get(&g->value_names, on, NULL)) on = NULL; /* fall back to a unique name */
    }
    mx_value_id vid;
    st = on ? mx__graph_new_value(g, on, &vid) : mx__graph_new_value(g, NULL, &vid);
    if (st != MX_OK) {
      for (size_t k = first_value; k < g->n_values; k++) {
        mx__strmap_del(&g->value_names, g->values[k].name);
        free(g->values[k].consumers);
      }
      g->n_values = first_value;
      return st;
    }
    g->values[vid].producer = nid;
    g->values[vid].producer_slot = (uint32_t)i;
    outs[i] = vid;
  }
  if (!mx__strmap_put(&g->node_names, name, nid)) {
    for (size_t k = first_value; k < g->n_values; k++) mx__strmap_del(&g->value_names, g->values[k].name);
    g->n_values = first_value;
    goto oom;
  }
  mx_node *n = &g->nodes[nid];
  memset(n, 0, sizeof *n);
  n->name = name;
  n->op_type = op_type;
  n->domain = domain;
  n->opset = mx_graph_opset(g, domain);
  n->inputs = ins;
  n->n_inputs = (uint32_t)desc->n_inputs;
  n->outputs = outs;
  n->n_outputs = (uint32_t)desc->n_outputs;
  n->attrs = attrs;
  n->n_attrs = (uint32_t)desc->n_attrs;
  g->n_nodes++;
  g->n_live_nodes++;
  for (size_t i = 0; i < desc->n_inputs; i++) {
    mx_value_id v = desc->inputs[i];
    if (v != MX_NO_VALUE) g->values[v].consumers[g->values[v].n_consumers++] = nid;
  }
  for (size_t i = 0; i < desc->n_attrs; i++) {
    if (attrs[i].type != MX_ATTR_GRAPH) continue;
    /* A subgraph made with mx__graph_create_subgraph is already owned by g. */
    bool owned = false;
    for (size_t k = 0; k < g->n_subgraphs && !owned; k++) owned = g->subgraphs[k] == attrs[i].graph;
    attrs[i].graph->parent = g;
    if (!owned) g->subgraphs[g->n_subgraphs++] = attrs[i].graph;
  }
  for (size_t i = 0; i < desc->n_outputs; i++) outputs[i] = outs[i];
  mx__graph_invalidate(g);
  return MX_OK;
oom:
  return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory adding node '%s' (%s)", label, op);
}

mx_status mx_graph_add_op(mx_graph *g, const char *op_type, const mx_value_id *inputs, size_t n_inputs,
                          const mx_attr *attrs, size_t n_attrs, mx_value_id *output) {
  mx_node_desc d = {0};
  d.op_type = op_type;
  d.inputs = inputs;
  d.n_inputs = n_inputs;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = 1;
  mx_value_id tmp;
  return mx_graph_add_node(g, &d, output ? output : &tmp);
}

mx_status mx_graph_add_output(mx_graph *g, mx_value_id v) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  if (!mx__value_valid(g, v))
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "graph output: %u is not a value of graph '%s'",
                          (unsigned)v, g->name);
  if (!MX_GROW(g->outputs, g->cap_outputs, g->n_outputs + 1))
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory adding an output");
  g->outputs[g->n_outputs++] = v;
  g->values[v].flags |= MX_VALUE_OUTPUT;
  return MX_OK;
}

/* --- public readers ------------------------------------------------------------------------- */

size_t mx_graph_input_count(const mx_graph *g) { return g ? g->n_inputs : 0; }
mx_value_id mx_graph_input(const mx_graph *g, size_t i) {
  return g && i < g->n_inputs ? g->inputs[i] : MX_NO_VALUE;
}
size_t mx_graph_output_count(const mx_graph *g) { return g ? g->n_outputs : 0; }
mx_value_id mx_graph_output(const mx_graph *g, size_t i) {
  return g && i < g->n_outputs ? g->outputs[i] : MX_NO_VALUE;
}
size_t mx_graph_node_count(const mx_graph *g) { return g ? g->n_live_nodes : 0; }

mx_value_id mx_graph_find_value(const mx_graph *g, const char *name) {
  uint32_t id;
  if (!g || !name || !mx__strmap_get(&g->value_names, name, &id)) return MX_NO_VALUE;
  return id;
}

mx_node_id mx_graph_find_node(const mx_graph *g, const char *name) {
  uint32_t id;
  if (!g || !name || !mx__strmap_get(&g->node_names, name, &id)) return MX_NO_NODE;
  return id;
}

const char *mx_graph_value_name(const mx_graph *g, mx_value_id v) {
  return g && mx__value_valid(g, v) ? g->values[v].name : NULL;
}

mx_dtype mx_graph_value_dtype(const mx_graph *g, mx_value_id v) {
  return g && mx__value_valid(g, v) ? g->values[v].dtype : MX_DTYPE_UNDEFINED;
}

bool mx_graph_value_shape(const mx_graph *g, mx_value_id v, mx_shape *shape) {
  if (!g || !shape || !mx__value_valid(g, v)) return false;
  *shape = g->values[v].shape;
  return true;
}

const mx_tensor *mx_graph_value_constant(const mx_graph *g, mx_value_id v) {
  return g && mx__value_valid(g, v) ? g->values[v].data : NULL;
}

/* --- topological order ---------------------------------------------------------------------- */

bool mx__graph_order_nodes(const mx_graph *g, mx_node_id *out, size_t *n, const char **culprit) {
  size_t nn = g->n_nodes;
  uint32_t *indeg = calloc(nn ? nn : 1, sizeof *indeg);
  mx_node_id *heap = malloc((nn ? nn : 1) * sizeof *heap);
  /* A node holding subgraphs also waits for the values they read by name (rewrites add nodes
   * at the end of the node array, so the order of ids alone does not keep those first). */
  uint32_t *cap_first = NULL;
  mx_node_id *cap_to = NULL;
  if (!indeg || !heap || (g->n_subgraphs && !mx__graph_capture_edges(g, &cap_first, &cap_to))) {
    free(indeg);
    free(heap);
    return false;
  }
  for (size_t e = 0; cap_first && e < cap_first[nn]; e++) indeg[cap_to[e]]++;
  size_t n_live = 0;
  for (size_t i = 0; i < nn; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    n_live++;
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE) continue;
      mx_node_id p = g->values[v].producer;
      if (p != MX_NO_NODE && !(g->nodes[p].flags & MX_NODE_DEAD)) indeg[i]++;
    }
  }
  size_t hn = 0, on = 0;
  for (size_t i = 0; i < nn; i++)
    if (!(g->nodes[i].flags & MX_NODE_DEAD) && indeg[i] == 0) mx__heap_u32_push(heap, &hn, (mx_node_id)i);
  while (hn) {
    mx_node_id x = mx__heap_u32_pop(heap, &hn);
    out[on++] = x;
    const mx_node *nd = &g->nodes[x];
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      const mx_value *v = &g->values[nd->outputs[k]];
      for (size_t c = 0; c < v->n_consumers; c++) {
        mx_node_id cn = v->consumers[c];
        if (g->nodes[cn].flags & MX_NODE_DEAD) continue;
        if (--indeg[cn] == 0) mx__heap_u32_push(heap, &hn, cn);
      }
    }
    for (uint32_t e = cap_first ? cap_first[x] : 0; cap_first && e < cap_first[x + 1]; e++)
      if (--indeg[cap_to[e]] == 0) mx__heap_u32_push(heap, &hn, cap_to[e]);
  }
  *n = on;
  *culprit = "?";
  if (on < n_live)
    for (size_t i = 0; i < nn; i++)
      if (!(g->nodes[i].flags & MX_NODE_DEAD) && indeg[i] > 0) {
        *culprit = g->nodes[i].name;
        break;
      }
  free(indeg);
  free(heap);
  free(cap_first);
  free(cap_to);
  return true;
}

mx_status mx__graph_topo_order(mx_graph *g, const mx_node_id **order, size_t *n) {
  if (g->topo) {
    *order = g->topo;
    *n = g->n_topo;
    return MX_OK;
  }
  size_t nn = g->n_nodes, on;
  const char *culprit;
  mx_node_id *out = malloc((nn ? nn : 1) * sizeof *out);
  if (!out || !mx__graph_order_nodes(g, out, &on, &culprit)) {
    free(out);
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory ordering graph '%s'", g->name);
  }
  if (on != g->n_live_nodes) {
    free(out);
    return mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "graph '%s' has a cycle through node '%s'", g->name,
                          culprit);
  }
  g->topo = out;
  g->n_topo = on;
  *order = out;
  *n = on;
  return MX_OK;
}
