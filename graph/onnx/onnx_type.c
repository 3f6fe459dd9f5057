/* ONNX TypeProto <-> mixrt value types: tensors, sequences of tensors, optionals of a tensor or
 * of a sequence (mx_value_kind plus the tensors' element type and shape). Maps, sparse tensors
 * and deeper nestings (a sequence of sequences) are refused. Used for graph inputs and outputs
 * and for TYPE_PROTO attributes (Optional's 'type'), on import and on export. */
#include <string.h>

#include "common/error.h"
#include "graph/onnx/onnx_impl.h"

mx_status mx__onnx_type_read(const Onnx__TypeProto *tp, mx_value_kind *kind, mx_dtype *dtype,
                             const Onnx__TensorShapeProto **shape, const char *what, mx_error *err) {
  *kind = MX_KIND_TENSOR;
  *dtype = MX_DTYPE_UNDEFINED;
  *shape = NULL;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return MX_OK;
  bool optional = false, sequence = false;
  if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
    optional = true;
    tp = tp->optional_type ? tp->optional_type->elem_type : NULL;
    if (!tp) return mx__fail(err, MX_ERR_UNSUPPORTED, "%s is an optional without an element type", what);
  }
  if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
    sequence = true;
    tp = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
    if (!tp) return mx__fail(err, MX_ERR_UNSUPPORTED, "%s is a sequence without an element type", what);
  }
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    const char *k = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE        ? "a sequence of sequences"
                    : tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE           ? "a map"
                    : tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE      ? "a nested optional"
                    : tp->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE ? "a sparse tensor"
                                                                                   : "of no known type";
    return mx__fail(err, MX_ERR_UNSUPPORTED,
                    "%s is %s%s; mixrt supports tensors, sequences of tensors and optionals of those", what,
                    sequence || optional ? "or holds " : "", k);
  }
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt) {
    int32_t code = tt->has_elem_type ? tt->elem_type : 0;
    if (code != 0 && !mx_dtype_is_supported(code) && code != MX_STRING)
      return mx__fail(err, MX_ERR_UNSUPPORTED, "%s: element type %s (%d) is not supported", what,
                      mx__onnx_type_name(code), (int)code);
    *dtype = (mx_dtype)code;
    *shape = tt->shape;
  }
  *kind = optional ? (sequence ? MX_KIND_OPTIONAL_SEQUENCE : MX_KIND_OPTIONAL)
                   : (sequence ? MX_KIND_SEQUENCE : MX_KIND_TENSOR);
  return MX_OK;
}

/* A message of `desc` zeroed and initialized in arena a. */
static void *new_msg(mx_arena *a, const ProtobufCMessageDescriptor *desc) {
  void *p = mx__arena_alloc(a, desc->sizeof_message, 8);
  if (p) protobuf_c_message_init(desc, p);
  return p;
}

Onnx__TypeProto *mx__onnx_type_wrap(mx_arena *a, mx_value_kind kind, Onnx__TypeProto *tensor_type) {
  Onnx__TypeProto *tp = tensor_type;
  if (!tp) return NULL;
  if (kind == MX_KIND_SEQUENCE || kind == MX_KIND_OPTIONAL_SEQUENCE) {
    Onnx__TypeProto *s = new_msg(a, &onnx__type_proto__descriptor);
    Onnx__TypeProto__Sequence *sq = new_msg(a, &onnx__type_proto__sequence__descriptor);
    if (!s || !sq) return NULL;
    sq->elem_type = tp;
    s->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    s->sequence_type = sq;
    tp = s;
  }
  if (kind == MX_KIND_OPTIONAL || kind == MX_KIND_OPTIONAL_SEQUENCE) {
    Onnx__TypeProto *o = new_msg(a, &onnx__type_proto__descriptor);
    Onnx__TypeProto__Optional *op = new_msg(a, &onnx__type_proto__optional__descriptor);
    if (!o || !op) return NULL;
    op->elem_type = tp;
    o->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
    o->optional_type = op;
    tp = o;
  }
  return tp;
}

Onnx__TypeProto *mx__onnx_type_of_code(mx_arena *a, int64_t code) {
  Onnx__TypeProto *tp = new_msg(a, &onnx__type_proto__descriptor);
  Onnx__TypeProto__Tensor *tt = new_msg(a, &onnx__type_proto__tensor__descriptor);
  if (!tp || !tt) return NULL;
  tt->has_elem_type = 1;
  tt->elem_type = (int32_t)MX_TYPE_CODE_DTYPE(code);
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  return mx__onnx_type_wrap(a, MX_TYPE_CODE_KIND(code), tp);
}
