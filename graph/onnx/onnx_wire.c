/* A pre-scan of protobuf bytes before protobuf-c unpacks them.
 *
 * protobuf-c unpacks nested messages recursively and has no depth limit, so a few kilobytes
 * of nested graph attributes could exhaust the stack. This walk follows the message
 * descriptors (which fields hold sub-messages) with an explicit depth bound and checks every
 * tag and length on the way, so it also reports *where* a file is broken, which protobuf-c
 * does not. It decodes nothing and allocates nothing; protobuf-c still does the real parse
 * (wrong wire types for known fields, bad varints inside packed arrays, ...). */
#include <stdint.h>

#include "common/error.h"
#include "graph/onnx/onnx_impl.h"

/* Largest field number protobuf allows (2^29 - 1). */
#define MAX_FIELD_NUMBER 536870911u

typedef struct wire_scan {
  const uint8_t *base; /* start of the whole buffer, for byte offsets in messages */
  const char *what;    /* what the buffer holds, for messages */
  mx_error *err;
} wire_scan;

/* Reads a varint at *pos (< end). False when it is truncated or longer than 10 bytes. */
static bool read_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (*pos >= end) return false;
    uint8_t b = p[(*pos)++];
    if (shift == 63 && (b & 0x7e)) return false; /* more than 64 bits */
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

static mx_status bad(const wire_scan *ws, size_t at, const char *why) {
  return mx__fail(ws->err, MX_ERR_MALFORMED, "not a valid %s: protobuf encoding error at byte %zu: %s",
                  ws->what, at, why);
}

/* Scans the message in bytes [start, end) of ws->base, described by desc (NULL: an unknown
 * message, only lengths are checked). depth is its nesting level (the outermost is 1). */
static mx_status scan(const wire_scan *ws, const ProtobufCMessageDescriptor *desc, size_t start, size_t end,
                      int depth) {
  const uint8_t *p = ws->base;
  size_t pos = start;
  while (pos < end) {
    size_t at = pos;
    uint64_t tag;
    if (!read_varint(p, end, &pos, &tag)) return bad(ws, at, "truncated or overlong field tag");
    uint64_t field = tag >> 3;
    unsigned wire = (unsigned)(tag & 7);
    if (field == 0 || field > MAX_FIELD_NUMBER) return bad(ws, at, "invalid field number");
    switch (wire) {
      case 0: { /* varint */
        uint64_t v;
        if (!read_varint(p, end, &pos, &v)) return bad(ws, at, "truncated or overlong varint");
        break;
      }
      case 1: /* 64-bit */
        if (end - pos < 8) return bad(ws, at, "truncated 64-bit field");
        pos += 8;
        break;
      case 5: /* 32-bit */
        if (end - pos < 4) return bad(ws, at, "truncated 32-bit field");
        pos += 4;
        break;
      case 2: { /* length-delimited: bytes, string, packed array or sub-message */
        uint64_t len;
        if (!read_varint(p, end, &pos, &len)) return bad(ws, at, "truncated length");
        if (len > end - pos) return bad(ws, at, "length runs past the end of the data");
        const ProtobufCFieldDescriptor *fd =
            desc ? protobuf_c_message_descriptor_get_field(desc, (unsigned)field) : NULL;
        if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
          if (depth >= MX_ONNX_MAX_MESSAGE_DEPTH)
            return mx__fail(ws->err, MX_ERR_LIMIT, "%s nests messages more than %d levels deep (at byte %zu)",
                            ws->what, MX_ONNX_MAX_MESSAGE_DEPTH, at);
          mx_status st = scan(ws, fd->descriptor, pos, pos + (size_t)len, depth + 1);
          if (st != MX_OK) return st;
        }
        pos += (size_t)len;
        break;
      }
      default: /* 3, 4: groups (not used by ONNX); 6, 7: invalid */
        return bad(ws, at, "unsupported wire type");
    }
  }
  return MX_OK;
}

mx_status mx__onnx_check_wire(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size,
                              const char *what, mx_error *err) {
  wire_scan ws = {data, what, err};
  if (size && !data) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "%s: data is NULL", what);
  return scan(&ws, desc, 0, size, 1);
}
