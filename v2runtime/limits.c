/* Memory limits of a step: before a step allocates anything, the sizes of its tensors are worked
 * out from the symbols its inputs bind, and a step that could not fit is refused with the value
 * and its size named. Without this check a huge symbolic dim (past_len = 10^8) is found out only
 * when the host runs out of memory, long after the first buffers were filled.
 *
 * What is checked (a lower bound of what the step needs, so nothing that fits is refused):
 * every single tensor of the model (a partition's inner values included when the compiled graph
 * is at hand) and the inputs together with the outputs, which all live at the end of a step.
 * The limit is the session's memory_limit option, else the physical memory available when the
 * model was loaded (MemAvailable), and never more than the device's own memory_limit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "v2runtime/session_impl.h"

/* One distinct byte size that depends on symbols (tensors of equal size share one entry, so a
 * step evaluates a handful of expressions, not every tensor's dims). */
typedef struct mem_entry {
  mx_dim bytes;   /* the size in bytes as one expression of the symbols */
  mx_dtype dtype; /* the first tensor of that size, for the message */
  int32_t rank;
  mx_dim dims[MX_MAX_RANK];
  const char *name; /* a value of that description (borrowed from the graph) */
} mem_entry;

struct mx_mem_limits {
  uint64_t limit;         /* bytes a step may take */
  const char *limit_what; /* where the limit comes from (static text) */
  mem_entry *entries;     /* symbolic tensor descriptions, each once */
  size_t n_entries;
  mx_dim output_bytes;    /* all graph outputs together, or MX_DIM_UNKNOWN */
  uint64_t largest_fixed; /* bytes of the largest tensor of concrete shape */
  const char *largest_fixed_name;
  int64_t *symbols; /* scratch: symbol values bound by the inputs */
  size_t n_symbols;
};

uint64_t mx__available_memory(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[128];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    if (found) return (uint64_t)kib * 1024u;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* Prints a byte count as "12.2 GiB (13107200000 bytes)". */
static const char *format_bytes(uint64_t n, char *buf, size_t cap) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) {
    snprintf(buf, cap, "%" PRIu64 " bytes", n);
    return buf;
  }
  double v = (double)n / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, cap, "%.1f %s (%" PRIu64 " bytes)", v, units[u], n);
  return buf;
}

static bool concrete_shape(const mx_shape *sh) {
  for (int32_t k = 0; k < sh->rank; k++)
    if (!mx_dim_is_concrete(sh->dims[k])) return false;
  return true;
}

/* The bytes of a value of symbolic shape as one expression (MX_DIM_UNKNOWN when a dim is). */
static mx_dim bytes_expression(mx_symtab *t, const mx_value *v) {
  mx_dim b = mx_sym_const(t, (int64_t)mx_dtype_size(v->dtype));
  for (int32_t k = 0; k < v->shape.rank && !mx_dim_is_unknown(b); k++)
    b = mx_dim_is_unknown(v->shape.dims[k]) ? MX_DIM_UNKNOWN : mx_sym_mul(t, b, v->shape.dims[k]);
  return b;
}

/* Bytes of a tensor of this description; false when it overflows. */
static bool description_bytes(mx_dtype dt, int32_t rank, const int64_t *dims, uint64_t *out) {
  /* As mx_tensor_nbytes, without building a tensor: this runs for every input of every step. */
  uint64_t n = mx_dtype_size(dt);
  if (!n || rank < 0 || rank > MX_MAX_RANK) return false;
  for (int32_t k = 0; k < rank; k++)
    if (dims[k] < 0 || __builtin_mul_overflow(n, (uint64_t)dims[k], &n)) return false;
  *out = n;
  return true;
}

/* Adds the tensors of g: symbolic descriptions once each, the largest concrete one. */
static mx_status collect(struct mx_mem_limits *L, const mx_graph *g) {
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    const mx_shape *sh = &val->shape;
    if (sh->rank < 0 || sh->rank > MX_MAX_RANK || mx_dtype_size(val->dtype) == 0 || val->dtype == MX_STRING)
      continue;
    if (concrete_shape(sh)) {
      int64_t dims[MX_MAX_RANK];
      for (int32_t k = 0; k < sh->rank; k++) dims[k] = sh->dims[k];
      uint64_t b = UINT64_MAX;
      description_bytes(val->dtype, sh->rank, dims, &b);
      if (b > L->largest_fixed) {
        L->largest_fixed = b;
        L->largest_fixed_name = val->name;
      }
      continue;
    }
    mx_dim bytes = bytes_expression(g->syms, val);
    if (mx_dim_is_unknown(bytes)) continue;
    size_t e = 0;
    while (e < L->n_entries && L->entries[e].bytes != bytes) e++;
    if (e < L->n_entries) continue;
    mem_entry *grown = realloc(L->entries, (L->n_entries + 1) * sizeof *grown);
    if (!grown) return MX_ERR_OUT_OF_MEMORY;
    L->entries = grown;
    mem_entry *ne = &L->entries[L->n_entries++];
    memset(ne, 0, sizeof *ne);
    ne->bytes = bytes;
    ne->dtype = val->dtype;
    ne->rank = sh->rank;
    memcpy(ne->dims, sh->dims, (size_t)sh->rank * sizeof ne->dims[0]);
    ne->name = val->name;
  }
  return MX_OK;
}

void mx__mem_limits_free(struct mx_mem_limits *L) {
  if (!L) return;
  free(L->entries);
  free(L->symbols);
  free(L);
}

mx_status mx__program_prepare_limits(mx_session *s, mx_program *p, mx_error *err) {
  mx__mem_limits_free(p->limits);
  p->limits = NULL;
  struct mx_mem_limits *L = calloc(1, sizeof *L);
  if (!L) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory preparing the memory limits");
  if (s->opts.memory_limit) {
    L->limit = s->opts.memory_limit;
    L->limit_what = "the session's memory_limit";
  } else {
    L->limit = mx__available_memory();
    L->limit_what = "the available physical memory";
  }
  mx_device_memory_stats ds;
  mx_device_memory_stats_get(s->dev, &ds);
  if (ds.limit_bytes && (!L->limit || ds.limit_bytes < L->limit)) {
    L->limit = ds.limit_bytes;
    L->limit_what = "the device's memory_limit";
  }
  L->n_symbols = mx_symtab_symbol_count(p->root->syms);
  L->symbols = malloc((L->n_symbols ? L->n_symbols : 1) * sizeof *L->symbols);
  mx_status st = L->symbols ? collect(L, p->root) : MX_ERR_OUT_OF_MEMORY;
  /* The compiled graph also holds the values inside the partitions (a restored .mxm has only
   * the root). */
  if (st == MX_OK && p->source && p->source->syms == p->root->syms) st = collect(L, p->source);
  const mx_graph *root = p->root;
  L->output_bytes = mx_sym_const(root->syms, 0);
  for (size_t k = 0; k < root->n_outputs && !mx_dim_is_unknown(L->output_bytes); k++) {
    const mx_value *v = &root->values[root->outputs[k]];
    bool sized = v->shape.rank >= 0 && v->shape.rank <= MX_MAX_RANK && mx_dtype_size(v->dtype) &&
                 v->dtype != MX_STRING;
    L->output_bytes =
        sized ? mx_sym_add(root->syms, L->output_bytes, bytes_expression(root->syms, v)) : MX_DIM_UNKNOWN;
  }
  if (st != MX_OK) {
    mx__mem_limits_free(L);
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory preparing the memory limits");
  }
  p->limits = L;
  return MX_OK;
}

uint64_t mx__program_memory_limit(const mx_program *p) { return p && p->limits ? p->limits->limit : 0; }

/* Bytes of the root value `id` given the bound symbols; false when a dim cannot be evaluated
 * (an unbound symbol: not known before the step runs). *overflow tells a size beyond int64. */
static bool value_bytes(const mx_program *p, const struct mx_mem_limits *L, mx_dtype dt, int32_t rank,
                        const mx_dim *dims, uint64_t *out, bool *overflow) {
  int64_t v[MX_MAX_RANK];
  *overflow = false;
  if (rank < 0 || rank > MX_MAX_RANK || mx_dtype_size(dt) == 0 || dt == MX_STRING) return false;
  for (int32_t k = 0; k < rank; k++) {
    mx_status st = mx_sym_eval(p->root->syms, dims[k], L->symbols, L->n_symbols, &v[k]);
    if (st == MX_ERR_LIMIT) {
      *overflow = true;
      *out = UINT64_MAX;
      return true;
    }
    if (st != MX_OK || v[k] < 0) return false;
  }
  if (!description_bytes(dt, rank, v, out)) {
    *overflow = true;
    *out = UINT64_MAX;
  }
  return true;
}

/* Prints "[1, 2, past_len + 1, 16] float32" for a description. */
static void describe(const mx_program *p, mx_dtype dt, int32_t rank, const mx_dim *dims, char *buf,
                     size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int32_t k = 0; k < rank && n < cap; k++) {
    if (k && n + 2 < cap) n += (size_t)snprintf(buf + n, cap - n, ", ");
    if (n < cap) n += mx_sym_format(p->root->syms, dims[k], buf + n, cap - n);
  }
  if (n < cap) snprintf(buf + n, cap - n, "] %s", mx_dtype_name(dt));
}

/* Prints the symbols the inputs bound (" with past_len = 100000000, ..."; "" when none). */
static void describe_symbols(const mx_program *p, const struct mx_mem_limits *L, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (size_t q = 0; q < L->n_symbols && n < cap; q++) {
    if (L->symbols[q] == INT64_MIN) continue;
    n += (size_t)snprintf(buf + n, cap - n, "%s%s = %" PRId64, n ? ", " : " with ",
                          mx_symtab_symbol_name(p->root->syms, q), L->symbols[q]);
  }
}

mx_status mx__step_check_memory(mx_session *s, mx_program *p, const mx_tensor *const *inputs) {
  struct mx_mem_limits *L = p->limits;
  if (!L || !L->limit) return MX_OK;
  const mx_graph *root = p->root;
  char a[64], b[64], what[256], syms[256];
  for (size_t q = 0; q < L->n_symbols; q++) L->symbols[q] = INT64_MIN;
  uint64_t in_bytes = 0, in_largest = 0;
  size_t in_largest_i = 0;
  for (size_t i = 0; i < root->n_inputs; i++) {
    const mx_tensor *t = inputs[i];
    if (!t || t->rank < 0 || t->rank > MX_MAX_RANK) continue;
    for (int32_t k = 0; k < t->rank; k++) {
      int32_t sym = p->input_dim_sym ? p->input_dim_sym[i * MX_MAX_RANK + (size_t)k] : -1;
      if (sym >= 0 && (size_t)sym < L->n_symbols) L->symbols[sym] = t->dims[k];
    }
    uint64_t nb = 0;
    if (!description_bytes(t->dtype, t->rank, t->dims, &nb)) continue;
    in_bytes = nb > UINT64_MAX - in_bytes ? UINT64_MAX : in_bytes + nb;
    if (nb > in_largest) {
      in_largest = nb;
      in_largest_i = i;
    }
  }
  if (L->largest_fixed > L->limit)
    return mx__fail(&s->err, MX_ERR_DEVICE_OOM, "value '%s' takes %s, more than %s, %s",
                    L->largest_fixed_name ? L->largest_fixed_name : "?",
                    format_bytes(L->largest_fixed, a, sizeof a), L->limit_what,
                    format_bytes(L->limit, b, sizeof b));
  for (size_t e = 0; e < L->n_entries; e++) {
    const mem_entry *en = &L->entries[e];
    int64_t size;
    mx_status es = mx_sym_eval(root->syms, en->bytes, L->symbols, L->n_symbols, &size);
    if (es != MX_ERR_LIMIT && (es != MX_OK || size <= 0 || (uint64_t)size <= L->limit)) continue;
    /* Over the limit (or beyond int64): the message gives the tensor's own dims. */
    uint64_t nb = UINT64_MAX;
    bool overflow = true;
    if (!value_bytes(p, L, en->dtype, en->rank, en->dims, &nb, &overflow)) overflow = true;
    describe(p, en->dtype, en->rank, en->dims, what, sizeof what);
    describe_symbols(p, L, syms, sizeof syms);
    return mx__fail(&s->err, MX_ERR_DEVICE_OOM, "value '%s' %s would take %s%s, more than %s, %s",
                    en->name ? en->name : "?", what,
                    overflow ? "more than 2^63 bytes" : format_bytes(nb, a, sizeof a), syms, L->limit_what,
                    format_bytes(L->limit, b, sizeof b));
  }
  /* The inputs and every output are alive together at the end of the step. */
  int64_t all_out;
  if (mx_sym_eval(root->syms, L->output_bytes, L->symbols, L->n_symbols, &all_out) == MX_OK && all_out >= 0 &&
      (uint64_t)all_out <= L->limit && in_bytes <= L->limit - (uint64_t)all_out)
    return MX_OK;
  uint64_t out_bytes = 0, largest = 0;
  size_t largest_k = 0;
  for (size_t k = 0; k < root->n_outputs; k++) {
    const mx_value *v = &root->values[root->outputs[k]];
    uint64_t nb;
    bool overflow;
    if (!value_bytes(p, L, v->dtype, v->shape.rank, v->shape.dims, &nb, &overflow)) continue;
    out_bytes = nb > UINT64_MAX - out_bytes ? UINT64_MAX : out_bytes + nb;
    if (nb > largest) {
      largest = nb;
      largest_k = k;
    }
  }
  uint64_t total = out_bytes > UINT64_MAX - in_bytes ? UINT64_MAX : out_bytes + in_bytes;
  if (total <= L->limit) return MX_OK;
  /* The largest tensor named, input or output: an oversized input is what the caller must fix. */
  bool big_input = in_largest > largest;
  const mx_value *big = &root->values[big_input ? root->inputs[in_largest_i] : root->outputs[largest_k]];
  describe_symbols(p, L, syms, sizeof syms);
  if (big_input) {
    const mx_tensor *t = inputs[in_largest_i];
    mx_dim dims[MX_MAX_RANK];
    for (int32_t k = 0; k < t->rank; k++) dims[k] = t->dims[k]; /* concrete: bytes were computable */
    describe(p, t->dtype, t->rank, dims, what, sizeof what);
  } else {
    describe(p, big->dtype, big->shape.rank, big->shape.dims, what, sizeof what);
  }
  char c[64], d[64];
  return mx__fail(&s->err, MX_ERR_DEVICE_OOM,
                  "the step's inputs take %s and its outputs %s%s, more than %s, %s; the largest is "
                  "%s '%s' %s, %s",
                  format_bytes(in_bytes, a, sizeof a), format_bytes(out_bytes, b, sizeof b), syms,
                  L->limit_what, format_bytes(L->limit, c, sizeof c), big_input ? "input" : "output",
                  big->name ? big->name : "?", what,
                  format_bytes(big_input ? in_largest : largest, d, sizeof d));
}

mx_status mx_session_check_memory(mx_session *s, const mx_tensor *inputs, size_t n_inputs) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = mx__session_enter(s);
  if (st != MX_OK) return st;
  mx_error_clear(&s->err);
  mx_program *p = s->prog;
  const mx_tensor **by_graph = NULL;
  if (!p) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "no model is loaded");
    goto out;
  }
  size_t n = p->root->n_inputs;
  if (n_inputs != n || (n && !inputs)) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "the model has %zu inputs, %zu given", n, n_inputs);
    goto out;
  }
  by_graph = calloc(n ? n : 1, sizeof *by_graph);
  if (!by_graph) {
    st = mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of host memory checking a step");
    goto out;
  }
  /* By name when every input is named, else by position (as mx_session_run). */
  bool named = n > 0;
  for (size_t i = 0; i < n; i++) named = named && inputs[i].name;
  for (size_t i = 0; i < n && st == MX_OK; i++) {
    size_t k = i;
    if (named)
      for (k = 0; k < n && strcmp(p->root->values[p->root->inputs[k]].name, inputs[i].name) != 0;) k++;
    if (k == n)
      st = mx__fail(&s->err, MX_ERR_NOT_FOUND, "the model has no input named '%s'", inputs[i].name);
    else
      by_graph[k] = &inputs[i];
  }
  if (st == MX_OK) st = mx__step_check_memory(s, p, by_graph);
out:
  free(by_graph);
  mx__session_leave(s);
  return st;
}

uint64_t mx_session_memory_limit(const mx_session *s) { return s ? mx__program_memory_limit(s->prog) : 0; }
