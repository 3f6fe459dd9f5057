/* The public partition API (mixrt/partition.h): creation runs the steps in order (order and
 * checks, marking, merging, placement, root building) and times each; the readers expose the
 * clusters, boundary values, per-node reasons and totals. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/record.h"
#include "partitioner/partitioner_impl.h"

/* CPU time of the calling thread in nanoseconds. */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

mx_status mx__part_fail(mx_partition *p, mx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx__error_vfail(&p->err, status, fmt, ap);
  va_end(ap);
  return status;
}

void mx_partition_options_init(mx_partition_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->version = MX_PARTITION_OPTIONS_VERSION;
  o->static_min_ops = MX_PARTITION_DEFAULT_STATIC_MIN_OPS;
}

const char *mx_cluster_type_name(mx_cluster_type t) {
  switch (t) {
    case MX_CLUSTER_DATA: return "DATA";
    case MX_CLUSTER_INPUT: return "INPUT";
    case MX_CLUSTER_KNOWN: return "KNOWN";
    case MX_CLUSTER_UNKNOWN: return "UNKNOWN";
    case MX_CLUSTER_NETOUTPUT: return "NETOUTPUT";
  }
  return "?";
}

const char *mx_partition_reason_name(mx_partition_reason_kind k) {
  switch (k) {
    case MX_PART_KNOWN: return "known";
    case MX_PART_SYMBOLIC_DIM: return "symbolic_dim";
    case MX_PART_UNKNOWN_DIM: return "unknown_dim";
    case MX_PART_UNKNOWN_RANK: return "unknown_rank";
    case MX_PART_DATA_DEPENDENT: return "data_dependent";
    case MX_PART_VALUE_DEPENDENT: return "value_dependent";
    case MX_PART_HOST_PLACEMENT: return "host_placement";
    case MX_PART_FORCED: return "forced";
    case MX_PART_ALL_DYNAMIC: return "all_dynamic";
    case MX_PART_ABSORBED: return "absorbed";
    case MX_PART_SMALL_CLUSTER: return "small_cluster";
    case MX_PART_CONSTANT: return "constant";
    case MX_PART_CONTROL_FLOW: return "control_flow";
  }
  return "?";
}

void mx_partition_destroy(mx_partition *p) {
  if (!p) return;
  mx_graph_destroy(p->root);
  free(p->order);
  free(p->rank_of);
  free(p->compute);
  free(p->pos_of);
  free(p->consts);
  free(p->const_of_value);
  free(p->reason);
  free(p->marked_unknown);
  free(p->group_of);
  free(p->group_unknown);
  free(p->clusters);
  free(p->cluster_of_node);
  free(p->cluster_of_value);
  free(p->members);
  free(p->cluster_consts);
  free(p->bounds);
  free(p->links);
  free(p->spec);
  free(p->sym_kinds);
  free(p);
}

mx_status mx_partition_create(const mx_graph *g, const mx_partition_options *opts, mx_partition **out,
                              mx_error *err) {
  if (out) *out = NULL;
  if (!g || !out)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx_partition_create: %s is NULL", g ? "out" : "graph");
  mx_partition_options defaults;
  mx_partition_options_init(&defaults);
  const mx_partition_options *o = opts ? opts : &defaults;
  if (o->version != MX_PARTITION_OPTIONS_VERSION) /* older layouts get their own case here */
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "partition options version %u is not %u (fill them with mx_partition_options_init)",
                    o->version, MX_PARTITION_OPTIONS_VERSION);
  if (o->static_min_ops < -1)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "static_min_ops must be -1, 0 or positive, not %lld",
                    (long long)o->static_min_ops);
  mx_partition *p = calloc(1, sizeof *p);
  if (!p) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of memory partitioning graph '%s'", g->name);
  p->g = g;
  p->static_min_ops = o->static_min_ops;
  p->stable = o->stable;
  uint64_t w[5], c[5];
  w[0] = mx__now_ns();
  c[0] = thread_cpu_ns();
  mx_status st = mx__part_order(p);
  if (st == MX_OK) st = mx__part_mark(p, o);
  w[1] = mx__now_ns();
  c[1] = thread_cpu_ns();
  if (st == MX_OK) st = mx__part_merge(p);
  w[2] = mx__now_ns();
  c[2] = thread_cpu_ns();
  if (st == MX_OK) st = mx__part_place(p);
  if (st == MX_OK) st = mx__part_spec(p);
  w[3] = mx__now_ns();
  c[3] = thread_cpu_ns();
  if (st == MX_OK) st = mx__part_build(p);
  w[4] = mx__now_ns();
  c[4] = thread_cpu_ns();
  p->timings = (mx__part_timings){w[1] - w[0], c[1] - c[0], w[2] - w[1], c[2] - c[1],
                                  w[3] - w[2], c[3] - c[2], w[4] - w[3], c[4] - c[3]};
  if (st != MX_OK) {
    mx__error_copy(err, &p->err);
    mx_partition_destroy(p);
    return st;
  }
  *out = p;
  return MX_OK;
}

const char *mx_partition_last_error(const mx_partition *p) { return p ? p->err.message : ""; }

mx_graph *mx_partition_root(mx_partition *p) { return p ? p->root : NULL; }

mx_graph *mx_partition_detach_root(mx_partition *p) {
  if (!p) return NULL;
  mx_graph *r = p->root;
  p->root = NULL;
  for (uint32_t i = 0; i < p->n_clusters; i++) p->clusters[i].body = NULL;
  return r;
}

size_t mx_partition_cluster_count(const mx_partition *p) { return p ? p->n_clusters : 0; }

bool mx_partition_cluster(const mx_partition *p, size_t id, mx_partition_cluster_info *out) {
  if (!p || !out || id >= p->n_clusters) return false;
  const mx__part_cluster *c = &p->clusters[id];
  out->id = (uint32_t)id;
  out->type = c->type;
  out->n_nodes = c->n_nodes;
  out->n_constants = c->n_consts;
  out->min_rank = c->min_rank;
  out->max_rank = c->max_rank;
  out->n_inputs = c->n_in;
  out->n_outputs = c->n_out;
  out->call = p->root ? c->call : MX_NO_NODE;
  out->body = c->body;
  return true;
}

mx_node_id mx_partition_cluster_node(const mx_partition *p, size_t id, size_t k) {
  if (!p || id >= p->n_clusters || k >= p->clusters[id].n_nodes) return MX_NO_NODE;
  return p->members[p->clusters[id].first_node + k];
}

bool mx_partition_cluster_input(const mx_partition *p, size_t id, size_t k, mx_partition_boundary *out) {
  if (!p || !out || id >= p->n_clusters || k >= p->clusters[id].n_in) return false;
  *out = p->bounds[p->clusters[id].first_in + k];
  return true;
}

bool mx_partition_cluster_output(const mx_partition *p, size_t id, size_t k, mx_partition_boundary *out) {
  if (!p || !out || id >= p->n_clusters || k >= p->clusters[id].n_out) return false;
  *out = p->bounds[p->clusters[id].first_out + k];
  return true;
}

bool mx_partition_node(const mx_partition *p, mx_node_id n, mx_partition_node_info *out) {
  if (!p || !out || n >= p->g->n_nodes || p->cluster_of_node[n] == MX__PART_NONE) return false;
  out->cluster = p->cluster_of_node[n];
  out->unknown = p->clusters[out->cluster].type == MX_CLUSTER_UNKNOWN;
  out->reason = p->reason[n];
  return true;
}

size_t mx_partition_reason_format(const mx_partition *p, mx_node_id n, char *buf, size_t cap) {
  if (!p || n >= p->g->n_nodes || p->cluster_of_node[n] == MX__PART_NONE) {
    if (buf && cap) buf[0] = '\0';
    return 0;
  }
  return mx__part_reason_text(p, n, buf, cap);
}

void mx_partition_get_totals_sized(const mx_partition *p, mx_partition_totals *out, size_t record_size) {
  if (!out || record_size == 0) return;
  if (!p) {
    memset(out, 0, record_size);
    return;
  }
  mx__record_fill(out, record_size, &p->totals, sizeof p->totals); /* the caller's size (docs/abi.md) */
}

void mx__partition_timings(const mx_partition *p, mx__part_timings *out) {
  if (!out) return;
  if (!p) {
    memset(out, 0, sizeof *out);
    return;
  }
  *out = p->timings;
}
