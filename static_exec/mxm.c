/* .mxm model files: writing static plans (mx__mxm_save*) and reading them back (mx__mxm_load*).
 *
 * A file is a fixed 24-byte preamble (magic, container version, header size, header checksum),
 * a FileHeader message (format versions, payload size and checksum), a ModelFile message
 * (proto/mixrt_model.proto) and the weights section: every weight block once, 64-byte aligned,
 * starting on a page boundary, with its own checksum. Static plans and the root graph's
 * initializers refer to it by offset, so a file holds each weight once, and a loader maps the
 * file and hands host-memory devices the mapped weights without a copy. With external weights
 * the section is a side file next to the .mxm (size and checksum recorded). In-memory images
 * keep their weights inline in the plan messages. Reading trusts nothing: the preamble, both checksums and the
 * sizes are checked before any message is parsed, every count is bounded before anything is
 * allocated for it, the allocation table must match the plan's inputs and outputs, and each
 * plan then goes through mx__plan_check (indices, ranges, kernels, params, inference). Any
 * failure is MX_ERR_MALFORMED naming the file, except a file written for a newer reader
 * (MX_ERR_UNSUPPORTED). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/progress.h"
#include "graph/ops/op.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/mxm_info.h"
#include "static_exec/static_exec_impl.h"

#define MXM_MAGIC          "MIXRTMXM"
#define MXM_CONTAINER      1u
#define MXM_PREAMBLE       24u
#define MXM_FORMAT_VERSION 3u    /* what this code writes (2: the weights section; 3: its chunked checksum) */
#define MXM_READER_VERSION 3u    /* the newest min_reader_version this code accepts */
#define MXM_MIN_READER     3u    /* what a file written now needs (the chunked checksum) */
#define MXM_OLDEST_FORMAT  2u    /* older files (weights inside the messages) are refused */
#define SECTION_ALIGN      4096u /* file offset of the weights section: a page */
#define ITEM_ALIGN         64u   /* each block inside the section */
#define MIN_REF_BYTES      64u   /* smaller root-graph constants stay inline in its ONNX */
#define N_BUCKETS          4096u
#define MXM_MAX_HEADER     (1u << 20)
#define MXM_MAX_PLANS      4096u
#define WEIGHTS_SUFFIX     ".weights"

#ifndef MIXRT_VERSION_STRING
#define MIXRT_VERSION_STRING "dev"
#endif

/* --- checksum and little-endian helpers ------------------------------------------------------- */

static uint64_t load_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static uint32_t load_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void store_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The checksum runs over 8-byte little-endian words, so it can be computed in pieces of whole
 * words (checksum_words) with progress lines in between. */
static uint64_t checksum_words(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    h = (h ^ load_le64(p + i)) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  }
  return h;
}

/* The checksum of n bytes; `stage` names the progress lines (NULL: none). */
static uint64_t checksum_with_progress(const void *data, size_t n, const char *stage) {
  const unsigned char *p = data;
  uint64_t h = 0x6a09e667f3bcc909ull ^ (uint64_t)n;
  size_t whole = n & ~(size_t)7, step = (size_t)64 << 20;
  for (size_t i = 0; i < whole; i += step) {
    size_t len = whole - i < step ? whole - i : step;
    h = checksum_words(h, p + i, len);
    if (stage) mx__progress_bytes(stage, i + len, n);
  }
  if (whole < n) {
    unsigned char tail[8] = {0};
    memcpy(tail, p + whole, n - whole);
    h = (h ^ load_le64(tail)) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

uint64_t mx__mxm_checksum(const void *data, size_t n) { return checksum_with_progress(data, n, NULL); }

/* --- plan -> messages ------------------------------------------------------------------------- */

/* A message of `size` bytes in the arena, initialised from *init (the type's INIT value). */
static void *new_msg(mx_arena *a, const void *init, size_t size) {
  void *m = mx__arena_alloc(a, size, 8);
  if (m) memcpy(m, init, size);
  return m;
}
#define NEW_MSG(arena, type, INIT) ((type *)new_msg((arena), &(type)INIT, sizeof(type)))

static char *str(const char *s) { return (char *)(s ? s : ""); }

static Mxm__TensorDesc *io_msg(mx_arena *a, const mx__pio *io) {
  Mxm__TensorDesc *d = NEW_MSG(a, Mxm__TensorDesc, MXM__TENSOR_DESC__INIT);
  if (!d) return NULL;
  d->name = str(io->name);
  d->dtype = (int32_t)io->dtype;
  d->n_dims = (size_t)io->rank;
  d->dims = (int64_t *)io->dims;
  d->frozen = io->frozen;
  return d;
}

static Mxm__Attribute *attr_msg(mx_arena *a, const mx_attr *at) {
  Mxm__Attribute *m = NEW_MSG(a, Mxm__Attribute, MXM__ATTRIBUTE__INIT);
  if (!m) return NULL;
  m->name = str(at->name);
  m->type = (int32_t)at->type;
  m->i = at->i;
  m->f = at->f;
  switch (at->type) {
    case MX_ATTR_STRING: m->s = str(at->s); break;
    case MX_ATTR_INTS:
      m->n_ints = at->count;
      m->ints = (int64_t *)at->ints;
      break;
    case MX_ATTR_FLOATS:
      m->n_floats = at->count;
      m->floats = (float *)at->floats;
      break;
    case MX_ATTR_STRINGS:
      m->n_strings = at->count;
      m->strings = (char **)at->strings;
      break;
    case MX_ATTR_TENSOR: {
      size_t nb = 0;
      mx_tensor_nbytes(at->tensor, &nb);
      m->tensor_dtype = (int32_t)at->tensor->dtype;
      m->n_tensor_dims = (size_t)at->tensor->rank;
      m->tensor_dims = (int64_t *)at->tensor->dims;
      m->tensor_data.len = nb;
      m->tensor_data.data = at->tensor->data;
      break;
    }
    default: break;
  }
  return m;
}

static Mxm__Task *task_msg(mx_arena *a, const mx__ptask *pt) {
  Mxm__Task *m = NEW_MSG(a, Mxm__Task, MXM__TASK__INIT);
  if (!m) return NULL;
  m->kind = pt->kind == MX__TASK_COPY ? MXM__TASK__KIND__COPY : MXM__TASK__KIND__KERNEL;
  m->name = str(pt->name);
  m->op = str(pt->op);
  m->domain = str(pt->domain);
  m->opset = pt->opset;
  m->key_dtype = pt->key_dtype;
  m->params.len = pt->params_size;
  m->params.data = pt->params;
  m->n_inputs = pt->n_in;
  m->workspace_offset = pt->ws_offset;
  m->workspace_size = pt->ws_size;
  m->stream = pt->stream;
  m->n_wait_events = pt->n_waits;
  m->wait_events = pt->waits;
  m->n_record_events = pt->n_records;
  m->record_events = pt->records;
  m->n_attributes = pt->n_attrs;
  m->attributes = mx__arena_array(a, pt->n_attrs ? pt->n_attrs : 1, sizeof *m->attributes, 8);
  uint32_t nt = pt->n_in + pt->n_out;
  m->n_tensors = nt;
  m->tensors = mx__arena_array(a, nt ? nt : 1, sizeof *m->tensors, 8);
  if (!m->attributes || !m->tensors) return NULL;
  for (uint32_t i = 0; i < pt->n_attrs; i++)
    if (!(m->attributes[i] = attr_msg(a, &pt->attrs[i]))) return NULL;
  for (uint32_t i = 0; i < nt; i++) {
    const mx__ptensor *t = &pt->t[i];
    Mxm__TaskTensor *tm = NEW_MSG(a, Mxm__TaskTensor, MXM__TASK_TENSOR__INIT);
    if (!tm) return NULL;
    tm->dtype = (int32_t)t->dtype;
    tm->n_dims = t->dtype == MX_DTYPE_UNDEFINED ? 0 : (size_t)t->rank;
    tm->dims = (int64_t *)t->dims;
    tm->has_data = t->alloc != MX__NO_ALLOC;
    tm->alloc_id = tm->has_data ? t->alloc : 0;
    tm->offset = tm->has_data ? t->offset : 0;
    tm->has_values = t->n_values >= 0;
    tm->n_values = t->n_values > 0 ? (size_t)t->n_values : 0;
    tm->values = t->values;
    m->tensors[i] = tm;
  }
  return m;
}

/* The message of plan p; weights inline unless ext_offset is not NULL (then their position in
 * the weights section). */
static Mxm__StaticPlan *plan_msg(mx_arena *a, const mx_static_plan *p, const uint64_t *ext_offset) {
  Mxm__StaticPlan *m = NEW_MSG(a, Mxm__StaticPlan, MXM__STATIC_PLAN__INIT);
  Mxm__MemoryPlan *mem = NEW_MSG(a, Mxm__MemoryPlan, MXM__MEMORY_PLAN__INIT);
  Mxm__Weights *w = NEW_MSG(a, Mxm__Weights, MXM__WEIGHTS__INIT);
  if (!m || !mem || !w) return NULL;
  m->name = str(p->name);
  m->n_streams = p->n_streams;
  m->n_events = p->n_events;
  m->cross_edges = p->cross_edges;
  m->hal_mode = (uint32_t)p->mode;
  m->fm_external = p->fm_external;
  m->n_inputs = p->n_inputs;
  m->n_outputs = p->n_outputs;
  m->inputs = mx__arena_array(a, p->n_inputs ? p->n_inputs : 1, sizeof *m->inputs, 8);
  m->outputs = mx__arena_array(a, p->n_outputs ? p->n_outputs : 1, sizeof *m->outputs, 8);
  uint32_t nid = mx__plan_ids(p);
  m->n_allocations = nid;
  m->allocations = mx__arena_array(a, nid, sizeof *m->allocations, 8);
  m->n_tasks = p->n_tasks;
  m->tasks = mx__arena_array(a, p->n_tasks ? p->n_tasks : 1, sizeof *m->tasks, 8);
  mem->n_buffers = p->n_buffers;
  mem->buffers = mx__arena_array(a, p->n_buffers ? p->n_buffers : 1, sizeof *mem->buffers, 8);
  if (!m->inputs || !m->outputs || !m->allocations || !m->tasks || !mem->buffers) return NULL;
  for (uint32_t i = 0; i < p->n_inputs; i++)
    if (!(m->inputs[i] = io_msg(a, &p->inputs[i]))) return NULL;
  for (uint32_t i = 0; i < p->n_outputs; i++)
    if (!(m->outputs[i] = io_msg(a, &p->outputs[i]))) return NULL;
  for (uint32_t id = 0; id < nid; id++) {
    Mxm__Allocation *al = NEW_MSG(a, Mxm__Allocation, MXM__ALLOCATION__INIT);
    if (!al) return NULL;
    uint32_t index;
    al->kind = (Mxm__Allocation__Kind)mx__plan_id_kind(p, id, &index);
    al->index = index;
    al->size = mx__plan_id_size(p, id);
    m->allocations[id] = al;
  }
  for (uint32_t t = 0; t < p->n_tasks; t++)
    if (!(m->tasks[t] = task_msg(a, &p->tasks[t]))) return NULL;
  mem->fm_bytes = p->fm_bytes;
  mem->lower_bound = p->lower_bound;
  mem->no_reuse = p->no_reuse;
  mem->placement = str(p->placement);
  mem->in_place = p->in_place;
  mem->aliases = p->aliases;
  for (uint32_t b = 0; b < p->n_buffers; b++) {
    const mx__pbuf *pb = &p->buffers[b];
    Mxm__Buffer *bm = NEW_MSG(a, Mxm__Buffer, MXM__BUFFER__INIT);
    if (!bm) return NULL;
    bm->offset = pb->offset;
    bm->size = pb->size;
    bm->n_users = pb->n_users;
    bm->users = pb->users;
    bm->workspace = pb->workspace;
    bm->name = str(pb->name);
    mem->buffers[b] = bm;
  }
  m->memory = mem;
  w->size = p->weight_bytes;
  if (ext_offset) {
    w->external_offset = *ext_offset;
  } else {
    w->data.len = (size_t)p->weight_bytes;
    w->data.data = p->weights;
  }
  m->weights = w;
  return m;
}

/* --- the weights section: layout at save ----------------------------------------------------- */

/* A block of the section: bytes owned elsewhere (a plan's weights, a graph constant) that stay
 * valid until the file is written. */
typedef struct witem {
  const void *data;
  uint64_t size, offset;
} witem;

/* A run of bytes in the section that a constant may be found in (a whole block, or one weight
 * tensor inside a plan's block), by size and checksum. */
typedef struct wrange {
  const unsigned char *data;
  uint64_t size, offset, hash;
  uint32_t next; /* next range of the bucket, UINT32_MAX: none */
} wrange;

struct mx__mxm_weights {
  witem *items; /* in section order */
  size_t n_items, cap_items;
  wrange *ranges;
  size_t n_ranges, cap_ranges;
  uint32_t bucket[N_BUCKETS]; /* first range of each hash bucket */
  uint64_t size;              /* bytes of the section */
  uint64_t *plan_offset;      /* per plan given to mx__mxm_weights_begin */
  size_t n_plans;
};

static bool grow(void **v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *nv = realloc(*v, c * elem);
  if (!nv) return false;
  *v = nv;
  *cap = c;
  return true;
}

static const wrange *find_range(const mx__mxm_weights *w, const void *data, uint64_t size, uint64_t hash) {
  for (uint32_t r = w->bucket[hash % N_BUCKETS]; r != UINT32_MAX; r = w->ranges[r].next) {
    const wrange *g = &w->ranges[r];
    if (g->size == size && g->hash == hash && memcmp(g->data, data, (size_t)size) == 0) return g;
  }
  return NULL;
}

static bool add_range(mx__mxm_weights *w, const void *data, uint64_t size, uint64_t offset, uint64_t hash) {
  if (w->n_ranges >= UINT32_MAX - 1 ||
      !grow((void **)&w->ranges, &w->cap_ranges, w->n_ranges + 1, sizeof *w->ranges))
    return false;
  wrange *g = &w->ranges[w->n_ranges];
  *g = (wrange){
      .data = data, .size = size, .offset = offset, .hash = hash, .next = w->bucket[hash % N_BUCKETS]};
  w->bucket[hash % N_BUCKETS] = (uint32_t)w->n_ranges++;
  return true;
}

static bool add_item(mx__mxm_weights *w, const void *data, uint64_t size, uint64_t *offset) {
  if (!grow((void **)&w->items, &w->cap_items, w->n_items + 1, sizeof *w->items)) return false;
  *offset = w->size;
  w->items[w->n_items++] = (witem){.data = data, .size = size, .offset = w->size};
  w->size += (size + ITEM_ALIGN - 1) & ~(uint64_t)(ITEM_ALIGN - 1);
  return true;
}

void mx__mxm_weights_free(mx__mxm_weights *w) {
  if (!w) return;
  free(w->items);
  free(w->ranges);
  free(w->plan_offset);
  free(w);
}

mx_status mx__mxm_weights_begin(const mx_static_plan *const *plans, size_t n, mx__mxm_weights **out,
                                mx_error *err) {
  *out = NULL;
  mx__mxm_weights *w = calloc(1, sizeof *w);
  if (!w || !(w->plan_offset = calloc(n ? n : 1, sizeof *w->plan_offset))) {
    free(w);
    return mx__fail_oom(err, ".mxm weights layout");
  }
  for (uint32_t b = 0; b < N_BUCKETS; b++) w->bucket[b] = UINT32_MAX;
  w->n_plans = n;
  mx__progress_stage("save: weights layout");
  for (size_t i = 0; i < n; i++) {
    const mx_static_plan *p = plans[i];
    if (!p->weight_bytes) continue;
    if (!add_item(w, p->weights, p->weight_bytes, &w->plan_offset[i])) goto oom;
    /* Each weight tensor of the plan, so the root graph's copy of that constant can point here. */
    for (uint32_t t = 0; t < p->n_tasks; t++) {
      const mx__ptask *pt = &p->tasks[t];
      for (uint32_t k = 0; k < pt->n_in + pt->n_out; k++) {
        const mx__ptensor *x = &pt->t[k];
        if (x->alloc != MX__ID_WEIGHT || x->nbytes < MIN_REF_BYTES || x->offset > p->weight_bytes ||
            x->nbytes > p->weight_bytes - x->offset)
          continue;
        const unsigned char *d = p->weights + x->offset;
        uint64_t h = mx__mxm_checksum(d, (size_t)x->nbytes);
        if (!find_range(w, d, x->nbytes, h) && !add_range(w, d, x->nbytes, w->plan_offset[i] + x->offset, h))
          goto oom;
      }
    }
  }
  *out = w;
  return MX_OK;
oom:
  mx__mxm_weights_free(w);
  return mx__fail_oom(err, ".mxm weights layout");
}

bool mx__mxm_weights_ref(mx__mxm_weights *w, const void *data, size_t nbytes, uint64_t *offset) {
  if (!w || !data || nbytes < MIN_REF_BYTES) return false;
  uint64_t h = mx__mxm_checksum(data, nbytes);
  const wrange *g = find_range(w, data, nbytes, h);
  if (g) {
    *offset = g->offset;
    return true;
  }
  uint64_t off;
  if (!add_item(w, data, nbytes, &off) || !add_range(w, data, nbytes, off, h)) return false;
  *offset = off;
  return true;
}

uint64_t mx__mxm_weights_size(const mx__mxm_weights *w) { return w ? w->size : 0; }

/* Serializes the header and payload of a ModelFile in memory: *pre receives the preamble and
 * header (malloc'd, *pre_size bytes), *payload the ModelFile bytes (malloc'd). */
static mx_status pack_file(const Mxm__ModelFile *mf, unsigned char **pre, size_t *pre_size,
                           unsigned char **payload, size_t *payload_size, mx_error *err);

/* Writes n bytes in pieces, with progress lines (stage) over `total` bytes starting at *done. */
static bool write_chunks(FILE *f, const void *data, size_t n, const char *stage, uint64_t *done,
                         uint64_t total) {
  const unsigned char *p = data;
  size_t step = (size_t)64 << 20;
  for (size_t i = 0; i < n; i += step) {
    size_t len = n - i < step ? n - i : step;
    if (fwrite(p + i, 1, len, f) != len) return false;
    *done += len;
    mx__progress_bytes(stage, *done, total);
  }
  return true;
}

/* Opens path's temporary file ("PATH.tmp", *tmp malloc'd). */
static FILE *open_tmp(const char *path, char **tmp, mx_error *err) {
  size_t plen = strlen(path);
  *tmp = malloc(plen + 8);
  if (!*tmp) {
    mx__fail_oom(err, "file name");
    return NULL;
  }
  snprintf(*tmp, plen + 8, "%s.tmp", path);
  FILE *f = fopen(*tmp, "wb");
  if (!f) mx__fail(err, MX_ERR_IO, "cannot create '%s': %s", *tmp, strerror(errno));
  return f;
}

/* Closes the temporary file and renames it to path (removed on any failure). */
static mx_status finish_tmp(FILE *f, bool ok, char *tmp, const char *path, mx_error *err) {
  mx_status st = MX_OK;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    st = mx__fail(err, MX_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    remove(tmp);
  }
  free(tmp);
  return st;
}

/* A protobuf-c output that writes the packed bytes straight to a file and computes their
 * checksum on the way (so a file is written without the whole message in memory). The
 * checksum takes whole 8-byte words: up to 7 bytes wait in `carry` for the next piece. */
typedef struct stream_out {
  ProtobufCBuffer base;
  FILE *f;
  bool ok;
  uint64_t h, done, total;
  unsigned char carry[8];
  size_t n_carry;
  bool section; /* the section checksum (ls) instead of the word hash */
  mx__mxm_sum ls;
} stream_out;

static void stream_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
  stream_out *o = (stream_out *)b;
  if (!o->ok || !len) return;
  o->ok = write_chunks(o->f, data, len, o->section ? "save: write weights" : "save: write .mxm", &o->done,
                       o->total);
  if (o->section) {
    mx__mxm_sum_update(&o->ls, data, len);
    return;
  }
  size_t i = 0;
  if (o->n_carry) {
    while (o->n_carry < 8 && i < len) o->carry[o->n_carry++] = data[i++];
    if (o->n_carry < 8) return;
    o->h = checksum_words(o->h, o->carry, 8);
    o->n_carry = 0;
  }
  size_t whole = (len - i) & ~(size_t)7;
  o->h = checksum_words(o->h, data + i, whole);
  i += whole;
  while (i < len) o->carry[o->n_carry++] = data[i++];
}

/* The checksum of everything appended (the same value mx__mxm_checksum gives). */
static uint64_t stream_checksum(stream_out *o) {
  if (o->section) return mx__mxm_sum_finish(&o->ls);
  uint64_t h = o->h;
  if (o->n_carry) {
    unsigned char tail[8] = {0};
    memcpy(tail, o->carry, o->n_carry);
    h = (h ^ load_le64(tail)) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

/* Where a file's weights section lies (all 0: none). */
typedef struct section_info {
  uint64_t offset, size, checksum;
} section_info;

/* Packs the preamble and header of a file whose payload has psz bytes and this checksum, and
 * whose weights section is sec (NULL: none) (malloc'd, *size bytes). */
static unsigned char *pack_preamble(size_t psz, uint64_t checksum, const section_info *sec, size_t *size) {
  Mxm__FileHeader hdr = MXM__FILE_HEADER__INIT;
  hdr.format_version = MXM_FORMAT_VERSION;
  hdr.min_reader_version = MXM_MIN_READER;
  hdr.payload_size = psz;
  hdr.payload_checksum = checksum;
  if (sec) {
    hdr.weights_offset = sec->offset;
    hdr.weights_size = sec->size;
    hdr.weights_checksum = sec->checksum;
    hdr.weights_checksum_kind = MX__MXM_SUM_CHUNKED;
  }
  hdr.producer = "mixrt " MIXRT_VERSION_STRING;
  size_t hsz = mxm__file_header__get_packed_size(&hdr);
  unsigned char *pr = malloc(MXM_PREAMBLE + hsz);
  if (!pr) return NULL;
  memcpy(pr, MXM_MAGIC, 8);
  store_le32(pr + 8, MXM_CONTAINER);
  store_le32(pr + 12, (uint32_t)hsz);
  mxm__file_header__pack(&hdr, pr + MXM_PREAMBLE);
  store_le64(pr + 16, mx__mxm_checksum(pr + MXM_PREAMBLE, hsz));
  *size = MXM_PREAMBLE + hsz;
  return pr;
}

static mx_status pack_file(const Mxm__ModelFile *mf, unsigned char **pre, size_t *pre_size,
                           unsigned char **payload, size_t *payload_size, mx_error *err) {
  *pre = NULL;
  *payload = NULL;
  size_t psz = mxm__model_file__get_packed_size(mf);
  unsigned char *pl = malloc(psz ? psz : 1);
  if (!pl) return mx__fail_oom(err, ".mxm payload");
  mxm__model_file__pack(mf, pl);
  *pre = pack_preamble(psz, mx__mxm_checksum(pl, psz), NULL, pre_size);
  if (!*pre) {
    free(pl);
    return mx__fail_oom(err, ".mxm header");
  }
  *payload = pl;
  *payload_size = psz;
  return MX_OK;
}

/* The ModelFile field that holds the runtime record (bytes, proto/mixrt_model.proto). */
#define MODEL_FILE_RUNTIME_FIELD 3u

/* Appends a base-128 varint to buf; returns its length. */
static size_t put_varint(uint64_t v, unsigned char *buf) {
  size_t k = 0;
  do {
    buf[k] = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v) buf[k] |= 0x80;
    k++;
  } while (v);
  return k;
}

/* Writes an .mxm file streaming the ModelFile (through a temporary file renamed at the end):
 * room for the header first, the payload packed straight into the file, then the header with
 * the payload's checksum written over the room left for it. A runtime record given as a message
 * (runtime, or NULL) goes out as the ModelFile's runtime bytes field, packed straight into the
 * file after the other fields (protobuf fields may come in any order), so neither the record
 * nor the file is ever held packed in memory. */
/* Writes the section's blocks in order with zero padding to o (checksum and progress on the way). */
static bool write_section(stream_out *o, const mx__mxm_weights *w) {
  static const unsigned char zeros[ITEM_ALIGN];
  for (size_t i = 0; i < w->n_items && o->ok; i++) {
    const witem *it = &w->items[i];
    o->base.append(&o->base, (size_t)it->size, it->data);
    uint64_t pad = ((it->size + ITEM_ALIGN - 1) & ~(uint64_t)(ITEM_ALIGN - 1)) - it->size;
    if (pad) o->base.append(&o->base, (size_t)pad, zeros);
  }
  return o->ok;
}

static mx_status stream_file(const char *path, const Mxm__ModelFile *mf, const ProtobufCMessage *runtime,
                             const mx__mxm_weights *w, mx_error *err) {
  unsigned char rt_prefix[16];
  size_t rt_prefix_len = 0, rt_size = 0;
  if (runtime) {
    rt_size = protobuf_c_message_get_packed_size(runtime);
    rt_prefix_len = put_varint((MODEL_FILE_RUNTIME_FIELD << 3) | 2u, rt_prefix);
    rt_prefix_len += put_varint(rt_size, rt_prefix + rt_prefix_len);
  }
  size_t psz = mxm__model_file__get_packed_size(mf) + rt_prefix_len + rt_size;
  /* A placeholder checksum with every byte non-zero packs to the same size as the real one
   * (fixed64); a real checksum of 0 would be left out and change the size: checked below. */
  /* The section's fields are fixed64: the header's size does not depend on their values, so its
   * offset follows from the header packed with placeholders. */
  section_info sec = {0}, *secp = NULL;
  if (w && w->size) {
    sec = (section_info){.offset = 1, .size = w->size, .checksum = ~(uint64_t)0};
    secp = &sec;
  }
  size_t room = 0;
  unsigned char *pre = pack_preamble(psz, ~(uint64_t)0, secp, &room);
  if (!pre) return mx__fail_oom(err, ".mxm header");
  if (secp) sec.offset = ((uint64_t)room + psz + SECTION_ALIGN - 1) & ~(uint64_t)(SECTION_ALIGN - 1);
  char *tmp;
  FILE *f = open_tmp(path, &tmp, err);
  if (!f) {
    free(tmp);
    free(pre);
    return err ? err->status : MX_ERR_IO;
  }
  stream_out o = {.base = {.append = stream_append}, .f = f, .ok = true, .total = psz};
  o.h = 0x6a09e667f3bcc909ull ^ (uint64_t)psz;
  bool ok = fwrite(pre, 1, room, f) == room;
  free(pre);
  if (ok) {
    size_t packed = mxm__model_file__pack_to_buffer(mf, &o.base);
    if (runtime) {
      o.base.append(&o.base, rt_prefix_len, rt_prefix);
      packed += rt_prefix_len + protobuf_c_message_pack_to_buffer(runtime, &o.base);
    }
    ok = o.ok && packed == psz;
  }
  uint64_t payload_checksum = stream_checksum(&o);
  if (ok && secp) {
    /* Zero padding up to the page the section starts on, then the section. */
    uint64_t pad = sec.offset - room - psz;
    ok = fseek(f, (long)pad, SEEK_CUR) == 0;
    stream_out so = {.base = {.append = stream_append}, .f = f, .ok = ok, .total = w->size};
    so.section = true;
    mx__mxm_sum_init(&so.ls, MX__MXM_SUM_CHUNKED, w->size);
    mx__progress_stage("save: write weights");
    ok = ok && write_section(&so, w);
    sec.checksum = stream_checksum(&so);
    if (sec.checksum == 0) ok = false; /* would pack smaller than the room left for it */
  }
  size_t size = 0;
  pre = ok ? pack_preamble(psz, payload_checksum, secp, &size) : NULL;
  ok = ok && pre && size == room && fseek(f, 0, SEEK_SET) == 0 && fwrite(pre, 1, size, f) == size;
  free(pre);
  return finish_tmp(f, ok, tmp, path, err);
}

/* Writes the weights section as the side file (no gathered copy); *checksum receives the
 * file's checksum (computed as the pieces go out). */
static mx_status write_weights(const char *wpath, const mx__mxm_weights *w, uint64_t *checksum,
                               mx_error *err) {
  char *tmp;
  FILE *f = open_tmp(wpath, &tmp, err);
  if (!f) {
    free(tmp);
    return err ? err->status : MX_ERR_IO;
  }
  stream_out so = {.base = {.append = stream_append}, .f = f, .ok = true, .total = w->size};
  so.section = true;
  mx__mxm_sum_init(&so.ls, MX__MXM_SUM_CHUNKED, w->size);
  bool ok = write_section(&so, w);
  *checksum = stream_checksum(&so);
  return finish_tmp(f, ok, tmp, wpath, err);
}

/* The side file's name for an .mxm path: its base name + ".weights". */
static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

mx_status mx__mxm_save_plans(const mx_static_plan *const *plans, size_t n, const char *path,
                             const mx_mxm_save_options *o, mx_error *err) {
  return mx__mxm_save_model(plans, n, NULL, 0, path, o, err);
}

/* Saves the plans with the runtime record given as bytes (runtime, runtime_size) or as a message
 * packed straight into the file (runtime_msg), and the weights section laid out in w (NULL: the
 * plans' weights alone). */
static mx_status save_model(const mx_static_plan *const *plans, size_t n, const void *runtime,
                            size_t runtime_size, const ProtobufCMessage *runtime_msg, mx__mxm_weights *w,
                            const char *path, const mx_mxm_save_options *o, mx_error *err) {
  if ((!plans && n) || !path || n > MXM_MAX_PLANS || (runtime_size && !runtime))
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__mxm_save_plans: invalid arguments");
  for (size_t i = 0; i < n; i++)
    if (!plans[i]) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__mxm_save_plans: plan %zu is NULL", i);
  if (w && w->n_plans != n)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__mxm_save_plans: weights layout of other plans");
  bool external = o && o->external_weights;
  mx_arena a;
  mx__arena_init(&a, 64 * 1024);
  mx_status st = MX_OK;
  char *wpath = NULL;
  mx__mxm_weights *own = NULL;
  Mxm__ModelFile mf = MXM__MODEL_FILE__INIT;
  Mxm__ExternalWeights ew = MXM__EXTERNAL_WEIGHTS__INIT;
  mf.n_static_plans = n;
  mf.static_plans = mx__arena_array(&a, n ? n : 1, sizeof *mf.static_plans, 8);
  mf.runtime.data = (uint8_t *)runtime;
  mf.runtime.len = runtime_size;
  if (!mf.static_plans) {
    st = mx__fail_oom(err, ".mxm messages");
    goto free_all;
  }
  if (!w) {
    st = mx__mxm_weights_begin(plans, n, &own, err);
    if (st != MX_OK) goto free_all;
    w = own;
  }
  if (external) {
    size_t wl = strlen(path) + sizeof WEIGHTS_SUFFIX;
    wpath = malloc(wl);
    if (!wpath) {
      st = mx__fail_oom(err, ".mxm weights");
      goto free_all;
    }
    snprintf(wpath, wl, "%s%s", path, WEIGHTS_SUFFIX);
    ew.file = (char *)base_name(wpath);
    ew.size = w->size;
    ew.checksum_kind = MX__MXM_SUM_CHUNKED;
    mx__progress_stage("save: write weights");
    st = write_weights(wpath, w, &ew.checksum, err);
    if (st != MX_OK) goto free_all;
    mf.external_weights = &ew;
  }
  for (size_t i = 0; i < n; i++) {
    mf.static_plans[i] = plan_msg(&a, plans[i], &w->plan_offset[i]);
    if (!mf.static_plans[i]) {
      st = mx__fail_oom(err, ".mxm messages");
      goto free_all;
    }
  }
  mx__progress_stage("save: write .mxm");
  st = stream_file(path, &mf, runtime_msg, external ? NULL : w, err);

free_all:
  mx__mxm_weights_free(own);
  free(wpath);
  mx__arena_release(&a);
  return st;
}

mx_status mx__mxm_save_model(const mx_static_plan *const *plans, size_t n, const void *runtime,
                             size_t runtime_size, const char *path, const mx_mxm_save_options *o,
                             mx_error *err) {
  return save_model(plans, n, runtime, runtime_size, NULL, NULL, path, o, err);
}

mx_status mx__mxm_save_with_runtime(const mx_static_plan *const *plans, size_t n,
                                    const ProtobufCMessage *runtime, mx__mxm_weights *w, const char *path,
                                    const mx_mxm_save_options *o, mx_error *err) {
  return save_model(plans, n, NULL, 0, runtime, w, path, o, err);
}

mx_status mx__mxm_save(const mx_static_plan *plan, const char *path, const mx_mxm_save_options *o,
                       mx_error *err) {
  return mx__mxm_save_plans(&plan, 1, path, o, err);
}

mx_status mx__mxm_save_memory(const mx_static_plan *plan, void **data, size_t *size, mx_error *err) {
  if (data) *data = NULL;
  if (!plan || !data || !size)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__mxm_save_memory: NULL argument");
  mx_arena a;
  mx__arena_init(&a, 64 * 1024);
  Mxm__ModelFile mf = MXM__MODEL_FILE__INIT;
  Mxm__StaticPlan *pm = plan_msg(&a, plan, NULL);
  unsigned char *pre = NULL, *payload = NULL;
  size_t pre_size = 0, payload_size = 0;
  mx_status st = pm ? MX_OK : mx__fail_oom(err, ".mxm messages");
  if (st == MX_OK) {
    mf.n_static_plans = 1;
    mf.static_plans = &pm;
    st = pack_file(&mf, &pre, &pre_size, &payload, &payload_size, err);
  }
  if (st == MX_OK) {
    unsigned char *buf = malloc(pre_size + payload_size);
    if (!buf) {
      st = mx__fail_oom(err, ".mxm buffer");
    } else {
      memcpy(buf, pre, pre_size);
      memcpy(buf + pre_size, payload, payload_size);
      *data = buf;
      *size = pre_size + payload_size;
    }
  }
  free(payload);
  free(pre);
  mx__arena_release(&a);
  return st;
}

/* --- messages -> plan ------------------------------------------------------------------------- */

#define BAD(...) mx__fail(err, MX_ERR_MALFORMED, __VA_ARGS__)

static mx_status dims_from(const int64_t *src, size_t n, int32_t *rank, int64_t *dims, mx_error *err,
                           const char *what) {
  if (n > MX_MAX_RANK) return BAD("%s: rank %zu exceeds %d", what, n, MX_MAX_RANK);
  *rank = (int32_t)n;
  memset(dims, 0, MX_MAX_RANK * sizeof *dims);
  for (size_t k = 0; k < n; k++) {
    if (src[k] < 0) return BAD("%s: negative dim", what);
    dims[k] = src[k];
  }
  return MX_OK;
}

static mx_status io_from(mx_static_plan *p, const Mxm__TensorDesc *d, mx__pio *io, mx_error *err,
                         const char *what, size_t i) {
  char label[64];
  snprintf(label, sizeof label, "%s %zu", what, i);
  if (!d) return BAD("%s: missing", label);
  io->name = mx__arena_strdup(&p->arena, d->name ? d->name : "");
  if (!io->name) return mx__fail_oom(err, "plan names");
  io->dtype = (mx_dtype)d->dtype;
  io->frozen = d->frozen;
  mx_status st = dims_from(d->dims, d->n_dims, &io->rank, io->dims, err, label);
  if (st != MX_OK) return st;
  if (!mx_dtype_is_supported(d->dtype) || !mx__dims_nbytes(io->dtype, io->rank, io->dims, &io->nbytes))
    return BAD("%s ('%s'): invalid dtype or size", label, io->name);
  return MX_OK;
}

static mx_status attr_from(mx_static_plan *p, const Mxm__Attribute *m, mx_attr *at, mx_error *err,
                           uint32_t ti) {
  if (!m) return BAD("task %u: missing attribute", ti);
  memset(at, 0, sizeof *at);
  at->name = mx__arena_strdup(&p->arena, m->name ? m->name : "");
  if (!at->name) return mx__fail_oom(err, "plan attributes");
  at->type = (mx_attr_type)m->type;
  at->i = m->i;
  at->f = m->f;
  switch (m->type) {
    case MX_ATTR_INT:
    case MX_ATTR_FLOAT: break;
    case MX_ATTR_STRING:
      at->s = mx__arena_strdup(&p->arena, m->s ? m->s : "");
      if (!at->s) return mx__fail_oom(err, "plan attributes");
      break;
    case MX_ATTR_INTS:
      at->count = m->n_ints;
      at->ints = mx__arena_memdup(&p->arena, m->ints, m->n_ints * sizeof *m->ints, 8);
      if (!at->ints) return mx__fail_oom(err, "plan attributes");
      break;
    case MX_ATTR_FLOATS:
      at->count = m->n_floats;
      at->floats = mx__arena_memdup(&p->arena, m->floats, m->n_floats * sizeof *m->floats, 8);
      if (!at->floats) return mx__fail_oom(err, "plan attributes");
      break;
    case MX_ATTR_STRINGS: {
      const char **s = mx__arena_array(&p->arena, m->n_strings ? m->n_strings : 1, sizeof *s, 8);
      if (!s) return mx__fail_oom(err, "plan attributes");
      for (size_t k = 0; k < m->n_strings; k++) {
        s[k] = mx__arena_strdup(&p->arena, m->strings[k] ? m->strings[k] : "");
        if (!s[k]) return mx__fail_oom(err, "plan attributes");
      }
      at->strings = s;
      at->count = m->n_strings;
      break;
    }
    case MX_ATTR_TENSOR: {
      mx_tensor *t = mx__arena_alloc(&p->arena, sizeof *t, 8);
      if (!t) return mx__fail_oom(err, "plan attributes");
      char label[64];
      snprintf(label, sizeof label, "task %u attribute tensor", ti);
      mx_status st = dims_from(m->tensor_dims, m->n_tensor_dims, &t->rank, t->dims, err, label);
      if (st != MX_OK) return st;
      t->dtype = (mx_dtype)m->tensor_dtype;
      uint64_t nb;
      if (!mx_dtype_is_supported(m->tensor_dtype) || !mx__dims_nbytes(t->dtype, t->rank, t->dims, &nb) ||
          nb != m->tensor_data.len)
        return BAD("task %u attribute '%s': tensor size does not match its data", ti, at->name);
      t->data = mx__arena_memdup(&p->arena, m->tensor_data.data, (size_t)nb, 16);
      if (!t->data) return mx__fail_oom(err, "plan attributes");
      at->tensor = t;
      break;
    }
    default: return BAD("task %u attribute '%s': unsupported type %d", ti, at->name, (int)m->type);
  }
  return MX_OK;
}

static mx_status tensor_from(mx_static_plan *p, const Mxm__TaskTensor *m, mx__ptensor *t, mx_error *err,
                             uint32_t ti, size_t i) {
  char label[64];
  snprintf(label, sizeof label, "task %u tensor %zu", ti, i);
  if (!m) return BAD("%s: missing", label);
  memset(t, 0, sizeof *t);
  t->dtype = (mx_dtype)m->dtype;
  t->alloc = MX__NO_ALLOC;
  t->n_values = -1;
  mx_status st = dims_from(m->dims, m->n_dims, &t->rank, t->dims, err, label);
  if (st != MX_OK) return st;
  if (m->dtype != 0) {
    if (!mx_dtype_is_supported(m->dtype) || !mx__dims_nbytes(t->dtype, t->rank, t->dims, &t->nbytes))
      return BAD("%s: invalid dtype or size", label);
  }
  if (m->has_data) {
    t->alloc = m->alloc_id;
    t->offset = m->offset;
    if (t->alloc == MX__NO_ALLOC) return BAD("%s: invalid alloc id", label);
  }
  if (m->has_values) {
    if (m->n_values > MX_SV_MAX) return BAD("%s: %zu stored values", label, m->n_values);
    /* No stored value: a one-byte placeholder, nothing copied (m->values is NULL then). */
    t->values = mx__arena_memdup(&p->arena, m->values, m->n_values * sizeof *m->values, 8);
    if (!t->values) return mx__fail_oom(err, "plan tensors");
    t->n_values = (int32_t)m->n_values;
  }
  return MX_OK;
}

static mx_status task_from(mx_static_plan *p, const Mxm__Task *m, mx__ptask *pt, uint32_t ti, mx_error *err) {
  if (!m) return BAD("task %u: missing", ti);
  if (m->kind != MXM__TASK__KIND__KERNEL && m->kind != MXM__TASK__KIND__COPY)
    return BAD("task %u: unknown kind %d", ti, (int)m->kind);
  if (m->n_tensors > MX__MAX_TASK_TENSORS || m->n_inputs > m->n_tensors)
    return BAD("task %u: %zu tensors, %u inputs", ti, m->n_tensors, m->n_inputs);
  if (m->params.len > MX__MAX_PARAMS_BYTES || m->n_attributes > 4096 || m->n_wait_events > MX__MAX_TASKS ||
      m->n_record_events > MX__MAX_TASKS)
    return BAD("task %u: too many params, attributes or events", ti);
  pt->kind = m->kind == MXM__TASK__KIND__COPY ? MX__TASK_COPY : MX__TASK_KERNEL;
  pt->name = mx__arena_strdup(&p->arena, m->name ? m->name : "");
  pt->op = mx__arena_strdup(&p->arena, m->op ? m->op : "");
  pt->domain = mx__arena_strdup(&p->arena, m->domain ? m->domain : "");
  if (!pt->name || !pt->op || !pt->domain) return mx__fail_oom(err, "plan tasks");
  pt->opset = m->opset;
  pt->key_dtype = m->key_dtype;
  if (m->params.len) {
    pt->params = mx__arena_memdup(&p->arena, m->params.data, m->params.len, 16);
    if (!pt->params) return mx__fail_oom(err, "plan params");
    pt->params_size = (uint32_t)m->params.len;
  }
  pt->n_attrs = (uint32_t)m->n_attributes;
  if (pt->n_attrs) {
    pt->attrs = mx__arena_array(&p->arena, pt->n_attrs, sizeof *pt->attrs, 8);
    if (!pt->attrs) return mx__fail_oom(err, "plan attributes");
    for (uint32_t k = 0; k < pt->n_attrs; k++) {
      mx_status st = attr_from(p, m->attributes[k], &pt->attrs[k], err, ti);
      if (st != MX_OK) return st;
    }
  }
  pt->n_in = m->n_inputs;
  pt->n_out = (uint32_t)m->n_tensors - m->n_inputs;
  pt->t = mx__arena_array(&p->arena, m->n_tensors ? m->n_tensors : 1, sizeof *pt->t, 8);
  if (!pt->t) return mx__fail_oom(err, "plan tensors");
  for (size_t i = 0; i < m->n_tensors; i++) {
    mx_status st = tensor_from(p, m->tensors[i], &pt->t[i], err, ti, i);
    if (st != MX_OK) return st;
  }
  pt->ws_offset = m->workspace_offset;
  pt->ws_size = m->workspace_size;
  pt->stream = m->stream;
  pt->n_waits = (uint32_t)m->n_wait_events;
  pt->n_records = (uint32_t)m->n_record_events;
  if (pt->n_waits) {
    pt->waits = mx__arena_memdup(&p->arena, m->wait_events, pt->n_waits * sizeof *pt->waits, 4);
    if (!pt->waits) return mx__fail_oom(err, "plan events");
  }
  if (pt->n_records) {
    pt->records = mx__arena_memdup(&p->arena, m->record_events, pt->n_records * sizeof *pt->records, 4);
    if (!pt->records) return mx__fail_oom(err, "plan events");
  }
  return MX_OK;
}

/* Builds a plan from its message; weights come from the message (inline) or from the weights
 * section sec (sec_size bytes, or NULL): taken in place when the section is mapped (map not
 * NULL: the plan holds the mapping), copied otherwise. */
static mx_status plan_from(const Mxm__StaticPlan *m, const unsigned char *sec, uint64_t sec_size,
                           mx__mxm_mapping *map, mx_static_plan **out, mx_error *err) {
  *out = NULL;
  if (!m->memory || !m->weights) return BAD("plan: missing memory plan or weights record");
  if (m->n_tasks > MX__MAX_TASKS || m->n_inputs + m->n_outputs > MX__MAX_IO ||
      m->memory->n_buffers > 2u * MX__MAX_TASKS)
    return BAD("plan: too many tasks, inputs, outputs or buffers");
  if (m->hal_mode > MX_HAL_MODEL_INDIRECT) return BAD("plan: unknown HAL mode %u", m->hal_mode);
  mx_static_plan *p = mx__plan_new();
  if (!p) return mx__fail_oom(err, "plan");
  mx_status st = MX_OK;
  p->name = mx__arena_strdup(&p->arena, m->name ? m->name : "");
  p->placement = mx__arena_strdup(&p->arena, m->memory->placement ? m->memory->placement : "");
  p->n_streams = m->n_streams;
  p->n_events = m->n_events;
  p->cross_edges = m->cross_edges;
  p->mode = (mx_hal_model_mode)m->hal_mode;
  p->fm_external = m->fm_external;
  p->n_inputs = (uint32_t)m->n_inputs;
  p->n_outputs = (uint32_t)m->n_outputs;
  p->n_tasks = (uint32_t)m->n_tasks;
  p->n_buffers = (uint32_t)m->memory->n_buffers;
  p->fm_bytes = m->memory->fm_bytes;
  p->lower_bound = m->memory->lower_bound;
  p->no_reuse = m->memory->no_reuse;
  p->in_place = m->memory->in_place;
  p->aliases = m->memory->aliases;
  p->inputs = mx__arena_array(&p->arena, p->n_inputs ? p->n_inputs : 1, sizeof *p->inputs, 8);
  p->outputs = mx__arena_array(&p->arena, p->n_outputs ? p->n_outputs : 1, sizeof *p->outputs, 8);
  p->tasks = mx__arena_array(&p->arena, p->n_tasks ? p->n_tasks : 1, sizeof *p->tasks, 8);
  p->buffers = mx__arena_array(&p->arena, p->n_buffers ? p->n_buffers : 1, sizeof *p->buffers, 8);
  if (!p->name || !p->placement || !p->inputs || !p->outputs || !p->tasks || !p->buffers) {
    st = mx__fail_oom(err, "plan records");
    goto free_plan;
  }
  for (uint32_t i = 0; i < p->n_inputs && st == MX_OK; i++)
    st = io_from(p, m->inputs[i], &p->inputs[i], err, "input", i);
  for (uint32_t i = 0; i < p->n_outputs && st == MX_OK; i++)
    st = io_from(p, m->outputs[i], &p->outputs[i], err, "output", i);
  for (uint32_t t = 0; t < p->n_tasks && st == MX_OK; t++)
    st = task_from(p, m->tasks[t], &p->tasks[t], t, err);
  if (st != MX_OK) goto free_plan;
  for (uint32_t b = 0; b < p->n_buffers; b++) {
    const Mxm__Buffer *bm = m->memory->buffers[b];
    mx__pbuf *pb = &p->buffers[b];
    if (!bm || bm->n_users > MX__MAX_TASKS) {
      st = BAD("plan: buffer %u is invalid", b);
      goto free_plan;
    }
    pb->offset = bm->offset;
    pb->size = bm->size;
    pb->workspace = bm->workspace;
    pb->n_users = (uint32_t)bm->n_users;
    pb->name = mx__arena_strdup(&p->arena, bm->name ? bm->name : "");
    pb->users = mx__arena_memdup(&p->arena, bm->users, bm->n_users * sizeof *bm->users, 4);
    if (!pb->name || !pb->users) {
      st = mx__fail_oom(err, "plan buffers");
      goto free_plan;
    }
  }
  /* Weights. */
  p->weight_bytes = m->weights->size;
  const unsigned char *wsrc = NULL;
  bool in_section = !m->weights->data.len && p->weight_bytes;
  if (in_section) {
    if (!sec || m->weights->external_offset > sec_size ||
        p->weight_bytes > sec_size - m->weights->external_offset) {
      st = BAD("plan: weights outside the weights section");
      goto free_plan;
    }
    wsrc = sec + m->weights->external_offset;
  } else {
    if (m->weights->data.len != p->weight_bytes) {
      st = BAD("plan: %zu bytes of inline weights, %llu announced", m->weights->data.len,
               (unsigned long long)p->weight_bytes);
      goto free_plan;
    }
    wsrc = m->weights->data.data;
  }
  if (in_section && map && ((uintptr_t)wsrc & (ITEM_ALIGN - 1)) == 0) {
    p->weights = (uint8_t *)wsrc; /* in place: the mapping outlives the plan */
    p->weights_map = mx__mxm_mapping_retain(map);
  } else if (p->weight_bytes) {
    if (p->weight_bytes > SIZE_MAX - 63) {
      st = BAD("plan: weights too large");
      goto free_plan;
    }
    p->weights = aligned_alloc(64, ((size_t)p->weight_bytes + 63) & ~(size_t)63);
    if (!p->weights) {
      st = mx__fail_oom(err, "plan weights");
      goto free_plan;
    }
    memcpy(p->weights, wsrc, (size_t)p->weight_bytes);
  }
  /* The allocation table must be the one the inputs and outputs imply. */
  if (m->n_allocations != mx__plan_ids(p)) {
    st = BAD("plan: %zu allocation entries, %u expected", m->n_allocations, mx__plan_ids(p));
    goto free_plan;
  }
  for (uint32_t id = 0; id < mx__plan_ids(p); id++) {
    const Mxm__Allocation *al = m->allocations[id];
    uint32_t index;
    mx_static_alloc_kind kind = mx__plan_id_kind(p, id, &index);
    if (!al || (int)al->kind != (int)kind || al->index != index || al->size != mx__plan_id_size(p, id)) {
      st = BAD("plan: allocation entry %u does not match the plan", id);
      goto free_plan;
    }
  }
  p->trusted = false;
  st = mx__plan_check(p, err);
  if (st != MX_OK) goto free_plan;
  *out = p;
  return MX_OK;

free_plan:
  mx__static_plan_destroy(p);
  return st;
}

/* Maps a whole file read-only (*data; release with mx__mxm_unmap). The file is opened without
 * blocking and must be a regular file: a FIFO planted where a model or its weights should be
 * (nobody writing to it) fails at once instead of blocking the open forever. The size is taken
 * once here and every later check is against it, so a file cut short afterwards is refused by
 * those checks rather than read past its end. When kept_fd is not NULL it receives the open
 * file (the caller closes it; -1 on failure), so later reads check the very file mapped even
 * if another one has been renamed over the path since. */
mx_status mx__mxm_map_file_fd(const char *path, unsigned char **data, size_t *size, int *kept_fd,
                              mx_error *err) {
  *data = NULL;
  *size = 0;
  if (kept_fd) *kept_fd = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return mx__fail(err, MX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  mx_status st = MX_OK;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 0 ||
      (uint64_t)sb.st_size > (uint64_t)SIZE_MAX - 1) {
    st = mx__fail(err, MX_ERR_IO, "'%s' is not a readable regular file", path);
    goto close_file;
  }
  size_t n = (size_t)sb.st_size;
  if (n == 0) {
    *data = (unsigned char *)"";
    goto close_file;
  }
  /* Not populated: the weights checksum reads the file with pread (mx__mxm_section_checksum_fd),
   * which costs less than a first touch of every page of a fresh mapping; pages are mapped as
   * the weights are used. */
  void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) {
    st = mx__fail(err, MX_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    goto close_file;
  }
  madvise(m, n, MADV_SEQUENTIAL);
  *data = m;
  *size = n;
close_file:
  if (kept_fd && st == MX_OK)
    *kept_fd = fd;
  else
    close(fd);
  return st;
}

mx_status mx__mxm_map_file(const char *path, unsigned char **data, size_t *size, mx_error *err) {
  return mx__mxm_map_file_fd(path, data, size, NULL, err);
}

void mx__mxm_unmap(unsigned char *data, size_t size) {
  if (data && size) munmap(data, size);
}

/* --- mappings -------------------------------------------------------------------------------- */

struct mx__mxm_mapping {
  unsigned char *data; /* the whole mapped file, or a heap block (heap) */
  size_t size;
  bool heap; /* data came from aligned_alloc: freed, not unmapped, with the last holder */
  _Atomic size_t holders;
  mx__mxm_populater *populater; /* filling the weights' page tables; joined before the unmap */
};

/* Wraps a mapping made by mx__mxm_map_file (taken over; one holder). */
static mx__mxm_mapping *mapping_new(unsigned char *data, size_t size) {
  mx__mxm_mapping *m = malloc(sizeof *m);
  if (!m) return NULL;
  m->data = data;
  m->size = size;
  m->heap = false;
  m->populater = NULL;
  atomic_init(&m->holders, 1);
  return m;
}

mx__mxm_mapping *mx__mxm_mapping_wrap_heap(void *data, size_t size) {
  mx__mxm_mapping *m = mapping_new(data, size);
  if (m) m->heap = true;
  return m;
}

mx__mxm_mapping *mx__mxm_mapping_retain(mx__mxm_mapping *m) {
  if (m) atomic_fetch_add(&m->holders, 1);
  return m;
}

void mx__mxm_mapping_release(mx__mxm_mapping *m) {
  if (!m || atomic_fetch_sub(&m->holders, 1) != 1) return;
  mx__mxm_populate_stop(m->populater);
  if (m->heap)
    free(m->data);
  else
    mx__mxm_unmap(m->data, m->size);
  free(m);
}

/* --- reading ---------------------------------------------------------------------------------- */

/* Parses the container of an .mxm image; *mf receives the unpacked ModelFile. */
mx_status mx__mxm_parse_container(const unsigned char *d, size_t n, Mxm__ModelFile **mf, mx_error *err) {
  const unsigned char *sec;
  uint64_t sec_size, sec_checksum;
  return mx__mxm_parse_sections(d, n, mf, &sec, &sec_size, &sec_checksum, NULL, err);
}

/* True for the checksum kinds this reader computes. */
static bool known_sum_kind(uint32_t kind) { return kind == MX__MXM_SUM_LANES || kind == MX__MXM_SUM_CHUNKED; }

mx_status mx__mxm_parse_sections(const unsigned char *d, size_t n, Mxm__ModelFile **mf,
                                 const unsigned char **sec, uint64_t *sec_size, uint64_t *sec_checksum,
                                 uint32_t *sec_kind, mx_error *err) {
  *mf = NULL;
  *sec = NULL;
  *sec_size = 0;
  *sec_checksum = 0;
  if (sec_kind) *sec_kind = MX__MXM_SUM_LANES;
  if (n < MXM_PREAMBLE) return BAD("truncated: %zu bytes, not even the %u-byte preamble", n, MXM_PREAMBLE);
  if (memcmp(d, MXM_MAGIC, 8) != 0) return BAD("not an .mxm file (bad magic)");
  if (load_le32(d + 8) != MXM_CONTAINER) return BAD("unknown container version %u", load_le32(d + 8));
  uint32_t hsz = load_le32(d + 12);
  if (hsz > MXM_MAX_HEADER || hsz > n - MXM_PREAMBLE)
    return BAD("truncated or corrupt: header of %u bytes in a %zu-byte file", hsz, n);
  if (mx__mxm_checksum(d + MXM_PREAMBLE, hsz) != load_le64(d + 16)) return BAD("header checksum mismatch");
  Mxm__FileHeader *h = mxm__file_header__unpack(NULL, hsz, d + MXM_PREAMBLE);
  if (!h) return BAD("corrupt header");
  mx_status st = MX_OK;
  size_t rest = n - MXM_PREAMBLE - hsz;
  uint64_t payload_end = rest; /* bytes after the header the payload may take */
  if (h->weights_size)
    payload_end = h->weights_offset >= MXM_PREAMBLE + hsz ? h->weights_offset - MXM_PREAMBLE - hsz : 0;
  if (h->min_reader_version > MXM_READER_VERSION) {
    st = mx__fail(err, MX_ERR_UNSUPPORTED, "written by a newer mixrt (needs reader format %u, this is %u)",
                  h->min_reader_version, MXM_READER_VERSION);
  } else if (h->format_version < MXM_OLDEST_FORMAT) {
    st = mx__fail(err, MX_ERR_UNSUPPORTED,
                  "written by an older mixrt (.mxm format %u, weights inside the plans; this mixrt reads "
                  "format %u and newer): compile the model again",
                  h->format_version, MXM_OLDEST_FORMAT);
  } else if (!known_sum_kind(h->weights_checksum_kind)) {
    st = BAD("corrupt: unknown weights checksum kind %u", h->weights_checksum_kind);
  } else if (h->weights_size && (h->weights_offset % SECTION_ALIGN ||
                                 h->weights_offset < MXM_PREAMBLE + hsz || h->payload_size > payload_end)) {
    st = BAD("corrupt: weights section at offset %llu", (unsigned long long)h->weights_offset);
  } else if (h->weights_size && (h->weights_offset > n || h->weights_size != n - h->weights_offset)) {
    st = BAD("%s: the weights section needs %llu bytes at offset %llu, the file has %zu bytes",
             h->weights_offset > n || h->weights_size > n - h->weights_offset ? "truncated" : "corrupt",
             (unsigned long long)h->weights_size, (unsigned long long)h->weights_offset, n);
  } else if (h->weights_size ? h->payload_size > payload_end : h->payload_size != rest) {
    st = BAD("%s: payload of %llu bytes announced, %zu present",
             h->payload_size > rest ? "truncated" : "corrupt", (unsigned long long)h->payload_size, rest);
  } else if (mx__mxm_checksum(d + MXM_PREAMBLE + hsz, (size_t)h->payload_size) != h->payload_checksum) {
    st = BAD("payload checksum mismatch");
  } else {
    *mf = mxm__model_file__unpack(NULL, (size_t)h->payload_size, d + MXM_PREAMBLE + hsz);
    if (!*mf) st = BAD("corrupt payload");
    if (h->weights_size) {
      *sec = d + h->weights_offset;
      *sec_size = h->weights_size;
      *sec_checksum = h->weights_checksum;
      if (sec_kind) *sec_kind = h->weights_checksum_kind;
    }
  }
  mxm__file_header__free_unpacked(h, NULL);
  return st;
}

/* The checksum of kind `kind` of the n bytes at p, which are bytes [offset, offset + n) of the file
 * open as fd (the one mapped, never re-opened by name: a file renamed over the path since is not
 * the one the plans will read; -1 for an in-memory image): read from the file when it can be,
 * else from p. */
static uint64_t checked_sum(uint32_t kind, int fd, const unsigned char *p, uint64_t offset, size_t n,
                            const char *stage) {
  uint64_t sum = 0;
  bool ok = fd >= 0 && mx__mxm_section_checksum_fd(kind, fd, offset, n, stage, &sum);
  return ok ? sum : mx__mxm_section_checksum(kind, p, n, stage);
}

/* The weights file path for an .mxm path and a file name: name in the .mxm's directory
 * (malloc'd). */
static char *sibling_path(const char *path, const char *name) {
  const char *slash = strrchr(path, '/');
  size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
  size_t wl = dl + strlen(name) + 1;
  char *w = malloc(wl);
  if (!w) return NULL;
  memcpy(w, path, dl);
  snprintf(w + dl, wl - dl, "%s", name);
  return w;
}

static bool is_regular_file(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Loads the side weights file of the .mxm at path into *side (mapped: release with
 * mx__mxm_unmap). The file is looked up next to the .mxm, relative to it, under two names: the
 * .mxm's own name + ".weights" first (so a pair renamed or moved together still loads), then
 * the name recorded at save (so an .mxm renamed alone still finds its weights). Whichever is
 * found must have the recorded size and checksum; a mismatch names both files. */
mx_status mx__mxm_map_weights_file(const Mxm__ExternalWeights *ew, const char *path, unsigned char **side,
                                   size_t *side_size, mx_error *err) {
  *side = NULL;
  *side_size = 0;
  if (!path) return BAD("the weights are in an external file, which an in-memory image cannot name");
  if (!ew->file || !ew->file[0] || strchr(ew->file, '/') || strcmp(ew->file, ".") == 0 ||
      strcmp(ew->file, "..") == 0)
    return BAD("invalid weights file name");
  size_t pl = strlen(path) + sizeof WEIGHTS_SUFFIX;
  char *paired = malloc(pl);
  char *recorded = sibling_path(path, ew->file);
  if (!paired || !recorded) {
    free(paired);
    free(recorded);
    return mx__fail_oom(err, "weights file name");
  }
  snprintf(paired, pl, "%s%s", path, WEIGHTS_SUFFIX);
  const char *wpath = is_regular_file(paired) || !is_regular_file(recorded) ? paired : recorded;
  mx_status st = MX_OK;
  if (!is_regular_file(wpath)) {
    st = mx__fail(err, MX_ERR_IO, "its weights file is missing: neither '%s' nor '%s' exists", paired,
                  recorded);
    goto done;
  }
  int side_fd;
  st = mx__mxm_map_file_fd(wpath, side, side_size, &side_fd, err);
  if (st != MX_OK) goto done;
  if (*side_size != ew->size) {
    st =
        BAD("weights file '%s' has %zu bytes, '%s' expects %llu (a weights file of another "
            "model or a truncated copy)",
            wpath, *side_size, path, (unsigned long long)ew->size);
  } else {
    if (!known_sum_kind(ew->checksum_kind))
      st = BAD("corrupt: unknown checksum kind %u for weights file '%s'", ew->checksum_kind, wpath);
    else if (checked_sum(ew->checksum_kind, side_fd, *side, 0, *side_size, "load: check weights") != ew->checksum)
      st =
          BAD("weights file '%s' does not match '%s' (checksum differs: a weights file of "
              "another model or a damaged copy)",
              wpath, path);
  }
  if (side_fd >= 0) close(side_fd);
  if (st != MX_OK) {
    mx__mxm_unmap(*side, *side_size);
    *side = NULL;
    *side_size = 0;
  }
done:
  free(paired);
  free(recorded);
  return st;
}

/* The weights section the loaded plans and root graph refer to. */
typedef struct loaded_section {
  mx__mxm_mapping *map; /* the mapping it lies in (held), NULL for an in-memory image */
  const unsigned char *data;
  uint64_t size;
} loaded_section;

/* Decodes an .mxm image (path NULL for memory: no side file allowed); file_map is the image's
 * mapping and fd the file mapped (NULL and -1 for memory). When runtime is not NULL it receives the runtime record (malloc'd;
 * NULL when the file has none). When section is not NULL it receives the weights section (its
 * mapping held: the caller releases it). */
static mx_status load_image(const unsigned char *d, size_t n, const char *path, const char *label,
                            mx__mxm_mapping *file_map, int fd, mx_static_plan ***plans, size_t *n_plans,
                            void **runtime, size_t *runtime_size, loaded_section *section, mx_error *err) {
  *plans = NULL;
  *n_plans = 0;
  if (runtime) {
    *runtime = NULL;
    *runtime_size = 0;
  }
  if (section) *section = (loaded_section){0};
  Mxm__ModelFile *mf = NULL;
  mx__mxm_mapping *side_map = NULL;
  mx_static_plan **out = NULL;
  size_t made = 0;
  const unsigned char *sec = NULL;
  uint64_t sec_size = 0, sec_checksum = 0;
  uint32_t sec_kind = MX__MXM_SUM_LANES;
  mx__mxm_mapping *sec_map = NULL;
  mx_status st = mx__mxm_parse_sections(d, n, &mf, &sec, &sec_size, &sec_checksum, &sec_kind, err);
  if (st != MX_OK) goto fail;
  /* The unpacked messages hold copies of everything before the section: those pages of a
   * mapped image can go now rather than stay resident for the rest of the load. */
  if (path && n) madvise((void *)d, sec ? (size_t)(sec - d) : n, MADV_DONTNEED);
  if (mf->n_static_plans > MXM_MAX_PLANS) {
    st = BAD("%zu static plans", mf->n_static_plans);
    goto fail;
  }
  if (mf->external_weights) {
    if (sec) {
      st = BAD("weights both in the file and in a weights file");
      goto fail;
    }
    unsigned char *side = NULL;
    size_t side_size = 0;
    st = mx__mxm_map_weights_file(mf->external_weights, path, &side, &side_size, err);
    if (st != MX_OK) goto fail;
    if (!(side_map = mapping_new(side, side_size))) {
      mx__mxm_unmap(side, side_size);
      st = mx__fail_oom(err, "weights mapping");
      goto fail;
    }
    sec = side;
    sec_size = side_size;
    sec_map = side_map;
  } else if (sec) {
    if (checked_sum(sec_kind, fd, sec, (uint64_t)(sec - d), (size_t)sec_size, "load: check weights") !=
        sec_checksum) {
      st = BAD("weights section checksum mismatch");
      goto fail;
    }
    sec_map = file_map;
  }
  /* Checked: the section's page tables are filled ahead of the steps that will read it. */
  if (sec_map && !sec_map->heap && !sec_map->populater)
    sec_map->populater = mx__mxm_populate_start(sec, (size_t)sec_size, mx__mxm_populate_mode_from_env());
  out = calloc(mf->n_static_plans ? mf->n_static_plans : 1, sizeof *out);
  if (!out) {
    st = mx__fail_oom(err, "plans");
    goto fail;
  }
  for (; made < mf->n_static_plans; made++) {
    st = plan_from(mf->static_plans[made], sec, sec_size, sec_map, &out[made], err);
    if (st != MX_OK) {
      mx__error_prefix(err, "static plan %zu: ", made);
      goto fail;
    }
  }
  if (runtime && mf->runtime.len) {
    /* Taken over from the unpacked message (malloc'd by its default allocator), not copied. */
    *runtime = mf->runtime.data;
    *runtime_size = mf->runtime.len;
    mf->runtime.data = NULL;
    mf->runtime.len = 0;
  }
  if (section) *section = (loaded_section){mx__mxm_mapping_retain(sec_map), sec, sec_size};
  *plans = out;
  *n_plans = made;
  mx__mxm_mapping_release(side_map);
  mxm__model_file__free_unpacked(mf, NULL);
  return MX_OK;

fail:
  for (size_t i = 0; out && i < made; i++) mx__static_plan_destroy(out[i]);
  free(out);
  mx__mxm_mapping_release(side_map);
  if (mf) mxm__model_file__free_unpacked(mf, NULL);
  mx__error_prefix(err, "%s '%s': ", path ? "file" : "image", label);
  if (st == MX_ERR_OUT_OF_MEMORY || st == MX_ERR_IO || st == MX_ERR_UNSUPPORTED) return st;
  if (err) err->status = MX_ERR_MALFORMED;
  return MX_ERR_MALFORMED;
}

mx_status mx__mxm_load_plans(const char *path, mx_static_plan ***plans, size_t *n, mx_error *err) {
  return mx__mxm_load_model(path, plans, n, NULL, NULL, err);
}

mx_status mx__mxm_load_mapped(const char *path, mx_static_plan ***plans, size_t *n, void **runtime,
                              size_t *runtime_size, mx__mxm_mapping **section_map,
                              const unsigned char **section, uint64_t *section_size, mx_error *err) {
  if (plans) *plans = NULL;
  if (n) *n = 0;
  if (section_map) *section_map = NULL;
  if (!path || !plans || !n || (runtime && !runtime_size) || (section_map && (!section || !section_size)))
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__mxm_load_model: NULL argument");
  unsigned char *d;
  size_t size;
  mx__progress_stage("load: map .mxm");
  int fd;
  mx_status st = mx__mxm_map_file_fd(path, &d, &size, &fd, err);
  if (st != MX_OK) return st;
  mx__mxm_mapping *map = size ? mapping_new(d, size) : NULL;
  if (size && !map) {
    mx__mxm_unmap(d, size);
    close(fd);
    return mx__fail_oom(err, ".mxm mapping");
  }
  loaded_section ls;
  st = load_image(d, size, path, path, map, fd, plans, n, runtime, runtime_size, section_map ? &ls : NULL,
                  err);
  close(fd);
  /* The plans whose weights lie in the file hold the mapping; it goes with the last of them. */
  mx__mxm_mapping_release(map);
  if (st == MX_OK && section_map) {
    *section_map = ls.map;
    *section = ls.data;
    *section_size = ls.size;
  }
  if (st == MX_OK) mx__progress_stage("load: static plans restored");
  return st;
}

mx_status mx__mxm_load_model(const char *path, mx_static_plan ***plans, size_t *n, void **runtime,
                             size_t *runtime_size, mx_error *err) {
  return mx__mxm_load_mapped(path, plans, n, runtime, runtime_size, NULL, NULL, NULL, err);
}

/* Keeps plan 0 of a one-plan image. */
static mx_status single(mx_static_plan **plans, size_t n, const char *label, mx_static_plan **out,
                        mx_error *err) {
  if (n == 1) {
    *out = plans[0];
    free(plans);
    return MX_OK;
  }
  for (size_t i = 0; i < n; i++) mx__static_plan_destroy(plans[i]);
  free(plans);
  return mx__fail(err, MX_ERR_UNSUPPORTED, "'%s' holds %zu static plans, not one (use mx__mxm_load_plans)",
                  label, n);
}

mx_status mx__mxm_load(const char *path, mx_static_plan **out, mx_error *err) {
  if (out) *out = NULL;
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__mxm_load: NULL argument");
  mx_static_plan **plans;
  size_t n;
  mx_status st = mx__mxm_load_plans(path, &plans, &n, err);
  if (st != MX_OK) return st;
  return single(plans, n, path, out, err);
}

mx_status mx__mxm_load_memory(const void *data, size_t size, const char *label, mx_static_plan **out,
                              mx_error *err) {
  if (out) *out = NULL;
  if (!out || (!data && size))
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__mxm_load_memory: NULL argument");
  if (!label) label = "memory";
  mx_static_plan **plans;
  size_t n;
  mx_status st =
      load_image(data ? data : (const void *)"", size, NULL, label, NULL, -1, &plans, &n, NULL, NULL, NULL, err);
  if (st != MX_OK) return st;
  return single(plans, n, label, out, err);
}
