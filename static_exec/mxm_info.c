/* What an .mxm file holds, read without restoring it: the container is checked as a load
 * checks it (preamble, header and payload checksums), the static plans are only described
 * (name, tasks, streams, weight and feature-map bytes), the external weights file is named but
 * not read, and the runtime record's partitioned root graph is imported and inferred so the
 * tools can print its inputs, outputs and partition calls; the control bodies stored compiled
 * are listed depth first, each with its control node (found in that graph) and its static plans. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "graph/ir.h"
#include "graph/onnx/onnx_refs.h"
#include "mixrt/onnx.h"
#include "static_exec/mxm_info.h"

bool mx__mxm_is_file(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char magic[8];
  bool yes = read(fd, magic, sizeof magic) == (ssize_t)sizeof magic && memcmp(magic, "MIXRTMXM", 8) == 0;
  close(fd);
  return yes;
}

void mx__mxm_info_release(mx__mxm_info *info) {
  if (!info) return;
  free(info->plans);
  free(info->calls);
  free(info->bodies);
  if (info->rt) mxm__runtime__free_unpacked(info->rt, NULL);
  mx_graph_destroy(info->root);
  if (info->mf) mxm__model_file__free_unpacked(info->mf, NULL);
  if (info->header) mxm__file_header__free_unpacked(info->header, NULL);
  memset(info, 0, sizeof *info);
}

typedef struct op_count {
  const char *op;
  size_t n;
} op_count;

static int by_count(const void *a, const void *b) {
  const op_count *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? 1 : -1;
  return strcmp(x->op, y->op);
}

/* Fills c from the body of a partition call. */
static bool describe_call(const mx_node *nd, mx__mxm_call_info *c) {
  c->name = nd->name;
  c->n_inputs = nd->n_inputs;
  c->n_outputs = nd->n_outputs;
  const mx_graph *body = NULL;
  for (uint32_t a = 0; a < nd->n_attrs; a++) {
    if (nd->attrs[a].type == MX_ATTR_GRAPH && strcmp(nd->attrs[a].name, "body") == 0)
      body = nd->attrs[a].graph;
    if (nd->attrs[a].type == MX_ATTR_INT && strcmp(nd->attrs[a].name, "unknown") == 0)
      c->unknown = nd->attrs[a].i != 0;
  }
  if (!body) return true;
  op_count *h = calloc(body->n_nodes ? body->n_nodes : 1, sizeof *h);
  if (!h) return false;
  size_t n = 0;
  for (size_t i = 0; i < body->n_nodes; i++) {
    const mx_node *bn = &body->nodes[i];
    if (bn->flags & MX_NODE_DEAD) continue;
    c->n_ops++;
    size_t k = 0;
    while (k < n && strcmp(h[k].op, bn->op_type) != 0) k++;
    if (k == n) h[n++].op = bn->op_type;
    h[k].n++;
  }
  qsort(h, n, sizeof *h, by_count);
  size_t used = 0;
  for (size_t k = 0; k < n && used < sizeof c->ops; k++) {
    int w = snprintf(c->ops + used, sizeof c->ops - used, "%s%s %zu", k ? ", " : "", h[k].op, h[k].n);
    if (w < 0 || (size_t)w >= sizeof c->ops - used) {
      /* Cut at a whole entry. */
      c->ops[used] = '\0';
      if (used + 6 < sizeof c->ops) snprintf(c->ops + used, sizeof c->ops - used, ", ...");
      break;
    }
    used += (size_t)w;
  }
  free(h);
  return true;
}

/* The node of g or of any graph nested in it named `node` that holds a graph attribute named
 * `body` (a wrapped control node's partition call has no such attribute); *attr gets the
 * attribute's name and *graph its graph. */
static const mx_node *find_control_node(const mx_graph *g, const char *node, const char *body,
                                        const char **attr, const mx_graph **graph) {
  for (size_t i = 0; g && i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    bool named = nd->name && strcmp(nd->name, node) == 0;
    for (uint32_t a = 0; a < nd->n_attrs; a++) {
      const mx_graph *sub = nd->attrs[a].type == MX_ATTR_GRAPH ? nd->attrs[a].graph : NULL;
      if (!sub) continue;
      if (named && sub->name && strcmp(sub->name, body) == 0) {
        *attr = nd->attrs[a].name;
        *graph = sub;
        return nd;
      }
      const mx_node *found = find_control_node(sub, node, body, attr, graph);
      if (found) return found;
    }
  }
  return NULL;
}

static size_t known_calls(const Mxm__Runtime *rt) {
  size_t n = 0;
  for (size_t c = 0; c < rt->n_call_unknown; c++) n += !rt->call_unknown[c];
  return n;
}

/* Where the bodies are walked: the info being filled and the next static plan to hand out. */
typedef struct body_walk {
  mx__mxm_info *out;
  size_t cap, next_plan;
} body_walk;

/* Adds the bodies rt stores (their control nodes searched for in scope, the graph of their
 * program), each followed by its own nested bodies, and hands each its static plans in file
 * order: its calls' plans, then its bodies'. */
static bool add_bodies(body_walk *w, const Mxm__Runtime *rt, const mx_graph *scope, int parent,
                       uint32_t depth) {
  for (size_t b = 0; b < rt->n_bodies; b++) {
    const Mxm__Body *m = rt->bodies[b];
    if (!m->runtime) continue;
    if (w->out->n_bodies == w->cap) {
      size_t cap = w->cap ? 2 * w->cap : 8;
      mx__mxm_body_info *v = realloc(w->out->bodies, cap * sizeof *v);
      if (!v) return false;
      w->out->bodies = v;
      w->cap = cap;
    }
    int index = (int)w->out->n_bodies++;
    mx__mxm_body_info *bi = &w->out->bodies[index];
    memset(bi, 0, sizeof *bi);
    bi->node = m->node ? m->node : "";
    bi->name = m->name ? m->name : "";
    bi->parent = parent;
    bi->depth = depth;
    const mx_graph *graph = NULL;
    const mx_node *nd = find_control_node(scope, bi->node, bi->name, &bi->attr, &graph);
    bi->op = nd ? nd->op_type : "?";
    if (!nd) bi->attr = "";
    for (size_t i = 0; graph && i < graph->n_nodes; i++) bi->n_ops += !(graph->nodes[i].flags & MX_NODE_DEAD);
    bi->n_calls = m->runtime->n_call_unknown;
    bi->n_unknown = bi->n_calls - known_calls(m->runtime);
    /* A file whose plans run out is the loader's to refuse; described, it owns what is left. */
    size_t avail = w->out->n_plans - w->next_plan;
    size_t want = bi->n_calls - bi->n_unknown;
    bi->first_plan = w->next_plan;
    bi->n_plans = want < avail ? want : avail;
    for (size_t p = 0; p < bi->n_plans; p++) w->out->plans[bi->first_plan + p].body = index;
    w->next_plan += bi->n_plans;
    if (!add_bodies(w, m->runtime, graph, index, depth + 1)) return false;
  }
  return true;
}

/* The file header, already checked by mx__mxm_parse_container. */
static Mxm__FileHeader *header_of(const unsigned char *d) {
  uint32_t hsz = (uint32_t)d[12] | (uint32_t)d[13] << 8 | (uint32_t)d[14] << 16 | (uint32_t)d[15] << 24;
  return mxm__file_header__unpack(NULL, hsz, d + 24);
}

mx_status mx__mxm_read_info(const char *path, mx__mxm_info *out, mx_error *err) {
  memset(out, 0, sizeof *out);
  unsigned char *d = NULL;
  size_t n = 0;
  mx_status st = mx__mxm_map_file(path, &d, &n, err);
  if (st != MX_OK) return st;
  Mxm__Runtime *rt = NULL;
  const unsigned char *sec = NULL;
  uint64_t sec_size = 0, sec_checksum = 0;
  unsigned char *side = NULL;
  size_t side_size = 0;
  st = mx__mxm_parse_sections(d, n, &out->mf, &sec, &sec_size, &sec_checksum, NULL, err);
  if (st != MX_OK) goto done;
  out->file_size = n;
  out->header = header_of(d);
  if (!out->header) {
    st = mx__fail(err, MX_ERR_MALFORMED, "corrupt header");
    goto done;
  }
  out->format_version = out->header->format_version;
  out->producer = out->header->producer ? out->header->producer : "";
  const Mxm__ModelFile *mf = out->mf;
  if (mf->external_weights) {
    out->weights_file = mf->external_weights->file ? mf->external_weights->file : "";
    out->weights_size = mf->external_weights->size;
  }
  out->n_plans = mf->n_static_plans;
  out->plans = calloc(mf->n_static_plans ? mf->n_static_plans : 1, sizeof *out->plans);
  if (!out->plans) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    goto done;
  }
  for (size_t i = 0; i < mf->n_static_plans; i++) {
    const Mxm__StaticPlan *m = mf->static_plans[i];
    mx__mxm_plan_info *pi = &out->plans[i];
    pi->name = m->name ? m->name : "";
    pi->body = -1;
    pi->n_tasks = (uint32_t)m->n_tasks;
    pi->n_streams = m->n_streams;
    pi->n_inputs = (uint32_t)m->n_inputs;
    pi->n_outputs = (uint32_t)m->n_outputs;
    pi->fm_bytes = m->memory ? m->memory->fm_bytes : 0;
    pi->weight_bytes = m->weights ? m->weights->size : 0;
    if (m->weights) out->inline_weights += m->weights->data.len;
  }
  out->inline_weights += sec_size;
  out->n_root_plans = out->n_plans; /* without a runtime record every plan is the root's */
  if (mf->runtime.len) {
    rt = mxm__runtime__unpack(NULL, mf->runtime.len, mf->runtime.data);
    if (!rt) {
      st = mx__fail(err, MX_ERR_MALFORMED, "corrupt runtime record");
      goto done;
    }
    /* The root's constants are in the weights section (the file's or the weights file). */
    if (mf->external_weights) {
      /* Describing the model needs no weights (only floating-point constants are in the weights
       * file, and inference reads none): zero pages of the recorded size stand in for them. */
      side_size = (size_t)mf->external_weights->size;
      void *z = side_size
                    ? mmap(NULL, side_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                    : NULL;
      if (z == MAP_FAILED) {
        side_size = 0;
        st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "cannot reserve %llu bytes for the weights",
                      (unsigned long long)mf->external_weights->size);
      }
      side = z == MAP_FAILED ? NULL : z;
      sec = side;
      sec_size = side_size;
    }
    if (st == MX_OK)
      st = mx__onnx_load_memory_blob(rt->root_onnx.data, rt->root_onnx.len, sec, sec_size, &out->root, err);
    if (st == MX_OK && mx_graph_infer(out->root) != MX_OK)
      st = mx__fail(err, MX_ERR_MALFORMED, "root graph: %s", mx_graph_last_error(out->root));
    const mx_graph *g = out->root;
    if (st == MX_OK && !(out->calls = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *out->calls)))
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; st == MX_OK && i < g->n_nodes; i++) {
      const mx_node *nd = &g->nodes[i];
      if ((nd->flags & MX_NODE_DEAD) || strcmp(nd->op_type, "PartitionedCall") != 0 ||
          strcmp(nd->domain, "mixrt") != 0)
        continue;
      if (!describe_call(nd, &out->calls[out->n_calls++]))
        st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    /* The root's plans: one per KNOWN call, then the declared gears ("<call>@<binding>");
     * the stored bodies' follow, depth first. */
    if (st == MX_OK) {
      size_t n_root = known_calls(rt);
      if (n_root > out->n_plans) n_root = out->n_plans;
      while (n_root < out->n_plans && strchr(out->plans[n_root].name, '@')) n_root++;
      out->n_root_plans = n_root;
      body_walk w = {.out = out, .next_plan = n_root};
      if (!add_bodies(&w, rt, out->root, -1, 1))
        st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    out->rt = rt; /* the bodies' strings point into it */
    rt = NULL;
  }
done:
  if (rt) mxm__runtime__free_unpacked(rt, NULL);
  mx__mxm_unmap(side, side_size);
  mx__mxm_unmap(d, n);
  if (st != MX_OK) {
    mx__error_prefix(err, "file '%s': ", path);
    mx__mxm_info_release(out);
  }
  return st;
}
