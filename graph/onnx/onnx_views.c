/* Unpacking a ModelProto without copying the main graph's initializer bytes.
 *
 * protobuf-c copies every bytes field it unpacks, so decoding a model with inline weights
 * holds the weights twice (the file's bytes and the message's copies) until the graph has
 * taken them. Here the model is unpacked in pieces instead: the model's fields without the
 * graph, the graph's fields without its initializers, then each initializer without its
 * raw_data field; the pieces are joined into the message protobuf-c would have built, and
 * each initializer's raw_data points into the caller's bytes (a view). The importer copies a
 * view into the graph's constant store and then drops it (and, for a mapped file, the pages
 * behind it), so the weights are held about once.
 *
 * The pieces are concatenations of whole fields of one message, which protobuf decodes as
 * that message, so the result equals the one-call unpack. Layouts where it might not (the
 * graph field given twice, a tensor with raw_data twice) are left to the one-call unpack:
 * mx__onnx_unpack_model_views then returns NULL. The bytes must already
 * have passed mx__onnx_check_wire (every length fits), but each step re-checks bounds. */
#include <stdlib.h>
#include <string.h>

#include "graph/onnx/onnx_impl.h"

#define MODEL_GRAPH_FIELD       7u /* ModelProto.graph */
#define GRAPH_INITIALIZER_FIELD 5u /* GraphProto.initializer */
#define TENSOR_RAW_DATA_FIELD   9u /* TensorProto.raw_data */

/* One field of a message: its bytes [start, end) including the tag, and for a
 * length-delimited field its payload [body, end). */
typedef struct wire_field {
  uint64_t number;
  unsigned wire;
  size_t start, body, end;
} wire_field;

static bool varint_at(const uint8_t *p, size_t end, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*pos >= end) return false;
    uint8_t b = p[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* Reads the field at *pos (< end) into *f and moves *pos past it. False when malformed. */
static bool next_field(const uint8_t *p, size_t end, size_t *pos, wire_field *f) {
  uint64_t tag, v;
  f->start = *pos;
  if (!varint_at(p, end, pos, &tag)) return false;
  f->number = tag >> 3;
  f->wire = (unsigned)(tag & 7);
  switch (f->wire) {
    case 0:
      if (!varint_at(p, end, pos, &v)) return false;
      break;
    case 1:
      if (end - *pos < 8) return false;
      *pos += 8;
      break;
    case 5:
      if (end - *pos < 4) return false;
      *pos += 4;
      break;
    case 2:
      if (!varint_at(p, end, pos, &v) || v > end - *pos) return false;
      f->body = *pos;
      *pos += (size_t)v;
      break;
    default:
      return false;
  }
  f->end = *pos;
  return true;
}

/* Appends bytes to a growing buffer. */
typedef struct piece {
  uint8_t *b;
  size_t n, cap;
} piece;

static bool piece_add(piece *pc, const uint8_t *src, size_t n) {
  if (pc->n + n > pc->cap) {
    size_t cap = pc->cap ? pc->cap : 4096;
    while (cap < pc->n + n) cap *= 2;
    uint8_t *b = realloc(pc->b, cap);
    if (!b) return false;
    pc->b = b;
    pc->cap = cap;
  }
  if (n) memcpy(pc->b + pc->n, src, n);
  pc->n += n;
  return true;
}

/* The piece's bytes (never NULL, also when empty: protobuf-c reads nothing then). */
static const uint8_t *piece_bytes(const piece *pc) {
  static const uint8_t empty[1];
  return pc->b ? pc->b : empty;
}

/* Payload ranges of skipped fields (malloc'd arrays). */
typedef struct range_list {
  size_t *body, *len;
  size_t n, cap;
} range_list;

static bool ranges_add(range_list *r, size_t body, size_t len) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    size_t *b = realloc(r->body, cap * sizeof *b);
    if (!b) return false;
    r->body = b;
    size_t *l = realloc(r->len, cap * sizeof *l);
    if (!l) return false;
    r->len = l;
    r->cap = cap;
  }
  r->body[r->n] = body;
  r->len[r->n] = len;
  r->n++;
  return true;
}

/* Copies the fields of message [start, end) other than field `skip` (length-delimited) into pc
 * (emptied first). *first / *count receive the first skipped field and how many there were;
 * `ranges` (when not NULL) collects the payload of each skipped field. */
static bool split_fields(const uint8_t *p, size_t start, size_t end, uint64_t skip, piece *pc,
                         range_list *ranges, wire_field *first, size_t *count) {
  size_t pos = start;
  pc->n = 0;
  *count = 0;
  while (pos < end) {
    wire_field f;
    if (!next_field(p, end, &pos, &f)) return false;
    if (f.number == skip) {
      if (f.wire != 2) return false; /* not the message/bytes field the schema says */
      if (*count == 0) *first = f;
      (*count)++;
      if (ranges && !ranges_add(ranges, f.body, f.end - f.body)) return false;
      continue;
    }
    if (!piece_add(pc, p + f.start, f.end - f.start)) return false;
  }
  return true;
}

/* Drops every raw_data of gp's initializers that points into data[0, size). */
static void clear_graph_views(Onnx__GraphProto *gp, const uint8_t *data, size_t size) {
  for (size_t i = 0; gp && data && i < gp->n_initializer; i++) {
    Onnx__TensorProto *tp = gp->initializer[i];
    if (tp && tp->raw_data.data >= data && tp->raw_data.data < data + size) {
      tp->raw_data.data = NULL;
      tp->raw_data.len = 0;
    }
  }
}

void mx__onnx_views_clear(Onnx__ModelProto *m, const uint8_t *data, size_t size) {
  if (m) clear_graph_views(m->graph, data, size);
}

Onnx__ModelProto *mx__onnx_unpack_model_views(const uint8_t *data, size_t size) {
  bool done = false;
  piece pc = {0};
  range_list inits = {0};
  Onnx__ModelProto *m = NULL;
  Onnx__GraphProto *gp = NULL;
  wire_field graph_field = {0}, raw_field = {0};
  size_t n_graph = 0, n_raw = 0;
  if (!data || !split_fields(data, 0, size, MODEL_GRAPH_FIELD, &pc, NULL, &graph_field, &n_graph) ||
      n_graph != 1)
    goto out;
  m = onnx__model_proto__unpack(NULL, pc.n, piece_bytes(&pc));
  if (!m) goto out;
  if (!split_fields(data, graph_field.body, graph_field.end, GRAPH_INITIALIZER_FIELD, &pc, &inits,
                    &raw_field, &n_raw))
    goto out;
  gp = onnx__graph_proto__unpack(NULL, pc.n, piece_bytes(&pc));
  if (!gp || gp->n_initializer != 0) goto out;
  if (inits.n) {
    gp->initializer = calloc(inits.n, sizeof *gp->initializer);
    if (!gp->initializer) goto out;
  }
  for (size_t i = 0; i < inits.n; i++) {
    size_t body = inits.body[i], end = body + inits.len[i];
    if (!split_fields(data, body, end, TENSOR_RAW_DATA_FIELD, &pc, NULL, &raw_field, &n_raw) || n_raw > 1)
      goto out;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, pc.n, piece_bytes(&pc));
    if (!tp) goto out;
    gp->initializer[gp->n_initializer++] = tp;
    if (n_raw == 1) { /* a view, never freed (NULL when empty, as protobuf-c leaves it) */
      tp->has_raw_data = 1;
      tp->raw_data.len = raw_field.end - raw_field.body;
      tp->raw_data.data = tp->raw_data.len ? (uint8_t *)(uintptr_t)(data + raw_field.body) : NULL;
    }
  }
  m->graph = gp;
  gp = NULL;
  done = true;
out:
  if (!done) {
    if (gp) {
      clear_graph_views(gp, data, size);
      onnx__graph_proto__free_unpacked(gp, NULL);
    }
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    m = NULL;
  }
  free(pc.b);
  free(inits.body);
  free(inits.len);
  return m;
}
