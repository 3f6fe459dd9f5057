/* Private interface of the ONNX importer (the graph/onnx sources only).
 *
 * The importer is split by purpose: onnx_file.c reads model files and external-data regions,
 * onnx_wire.c pre-scans protobuf bytes (nesting depth, lengths) before protobuf-c unpacks them,
 * onnx_tensor.c turns TensorProtos into mx_tensors (and implements mx_tensor_load_pb /
 * mx_tensor_parse_pb), onnx_order.c finds the dependency order of a graph's nodes, onnx_node.c
 * imports nodes (attributes, Constant nodes, subgraphs) and onnx_import.c imports models and
 * graph bodies (inputs, initializers, outputs) and holds the public entry points.
 *
 * Every function here records a failure in the import's mx_error (never NULL inside the
 * importer) with a message naming the file, graph, node, tensor or attribute at fault. */
#ifndef MIXRT_GRAPH_ONNX_IMPL_H
#define MIXRT_GRAPH_ONNX_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/strmap.h"
#include "graph/ir.h"
#include "graph/onnx/onnx_refs.h"
#include "mixrt/status.h"
#include "mixrt/tensor.h"
#include "onnx/onnx.pb-c.h"

/* Largest model or tensor file read into memory: a protobuf message cannot exceed 2 GiB
 * (bigger models keep their weights in external data files). */
#define MX_ONNX_MAX_FILE_BYTES ((size_t)INT32_MAX)
/* Deepest nesting of protobuf messages accepted. A graph attribute costs three levels
 * (graph -> node -> attribute -> graph), so this allows about 30 levels of subgraphs. */
#define MX_ONNX_MAX_MESSAGE_DEPTH 96
/* Deepest nesting of subgraphs accepted (If/Loop bodies inside bodies). */
#define MX_ONNX_MAX_GRAPH_DEPTH 30
/* Most tensor bytes one load may decode in total (initializers, Constant nodes and tensor
 * attributes, including external data): 256 GiB. */
#define MX_ONNX_MAX_DECODED_BYTES ((uint64_t)1 << 38)
/* Most inputs, outputs or attributes per node (mx_graph_add_node's own limit). */
#define MX_ONNX_MAX_NODE_ARITY 1024
/* Value of a name in mx__onnx_scope.defined that no node produces (graph input, initializer). */
#define MX_ONNX_NOT_NODE UINT32_MAX

/* Where the data of TensorProtos may come from, and how much one load has decoded. */
typedef struct mx__onnx_src {
  const char *base_dir; /* directory external-data locations are relative to; NULL: refused */
  uint64_t decoded;     /* tensor bytes decoded so far (against MX_ONNX_MAX_DECODED_BYTES) */
  const uint8_t *blob;  /* a weights section external data at MX__ONNX_BLOB_LOCATION points into
                           (an .mxm file's), NULL: none */
  uint64_t blob_size;
  bool borrow_blob; /* floating-point tensors in blob are taken in place, not copied (decode
                       then returns data inside blob: the caller must not free it) */
  bool const_blocks; /* decode writes a tensor of a constant store's size (not a string, not in an
                        arena) into a block of mx__graph_const_block_alloc, for
                        mx__graph_add_constant_adopt (mx__onnx_decoded_in_block) */
} mx__onnx_src;

/* Whether decode with src->const_blocks put t's bytes into a block of mx__graph_const_block_alloc. */
bool mx__onnx_decoded_in_block(const mx__onnx_src *src, const mx_tensor *t);

/* Where in src->blob the external data of tp lies (*out): the location must be
 * MX__ONNX_BLOB_LOCATION and the region (offset, length == nbytes) inside the blob. */
MX_MUST_USE mx_status mx__onnx_blob_region(const mx__onnx_src *src, const Onnx__TensorProto *tp,
                                           size_t nbytes, const char *what, const uint8_t **out,
                                           mx_error *err);

/* State of one model import. */
typedef struct mx__onnx_import {
  mx__onnx_src src; /* tensor data sources and budget */
  mx_error *err;    /* where failures are recorded; never NULL */
  const uint8_t *views; /* the model's bytes when initializers' raw_data points into them
                           (mx__onnx_unpack_model_views), else NULL */
  size_t views_size;
  bool views_mapped; /* views is a read-only file mapping: pages of a consumed raw_data are
                        dropped from the process (madvise) once the graph holds a copy */
} mx__onnx_import;

/* The ONNX names of one graph level while it is imported. Scopes chain to their enclosing
 * graph so subgraphs can refer to outer values and generated names avoid every file name. */
typedef struct mx__onnx_scope {
  const struct mx__onnx_scope *parent; /* enclosing graph's scope; NULL for the main graph */
  const Onnx__GraphProto *gp;          /* the graph being imported (borrowed) */
  mx_graph *g;                         /* the mixrt graph it becomes (borrowed) */
  mx_strmap defined;                   /* value name -> index of the producing node in gp, or
                            MX_ONNX_NOT_NODE (graph input, initializer); keys borrowed from gp */
  mx_strmap node_names;                /* explicit node name -> index of its first node; keys borrowed */
  int depth;                           /* subgraph nesting level, 0 for the main graph */
  uint64_t name_counter;               /* suffix counter for generated names */
} mx__onnx_scope;

/* A set of names kept in first-seen order (strings borrowed). */
typedef struct mx__onnx_names {
  const char **v; /* names in first-seen order (malloc'd array, borrowed strings) */
  size_t n, cap;
  mx_strmap seen; /* name -> index in v */
} mx__onnx_names;

/* --- onnx_file.c ------------------------------------------------------------------------------ */

/* The directory part of `path` ("." when it has none); malloc'd, NULL when out of memory. */
char *mx__onnx_dirname(const char *path);

/* An external-data region, validated and open for reading. */
typedef struct mx__onnx_ext {
  int fd;          /* open file descriptor, -1 when closed */
  char *path;      /* resolved path of the file (malloc'd), for messages */
  uint64_t offset; /* first byte of the tensor's data in the file */
  size_t length;   /* bytes of the region (the tensor's byte size) */
} mx__onnx_ext;

/* Checks the external_data entries of tp (location inside base_dir, offset and length inside
 * the file, length == nbytes) and opens the file. `what` names the tensor in messages.
 * On failure nothing stays open. */
MX_MUST_USE mx_status mx__onnx_ext_open(const char *base_dir, const Onnx__TensorProto *tp, size_t nbytes,
                                        const char *what, mx__onnx_ext *ext, mx_error *err);
/* Reads the whole region into dst (ext->length bytes). */
MX_MUST_USE mx_status mx__onnx_ext_read(mx__onnx_ext *ext, void *dst, const char *what, mx_error *err);
/* Closes the file and frees the path. Safe on a closed or zeroed record. */
void mx__onnx_ext_close(mx__onnx_ext *ext);

/* --- onnx_wire.c ------------------------------------------------------------------------------ */

/* Walks the protobuf wire format of a message described by `desc` without building it: every
 * length must fit, and nested messages may not go deeper than MX_ONNX_MAX_MESSAGE_DEPTH
 * (protobuf-c unpacks recursively, so this keeps hostile files from exhausting the stack).
 * `what` names the message in messages ("ONNX model"). */
MX_MUST_USE mx_status mx__onnx_check_wire(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                          size_t size, const char *what, mx_error *err);

/* --- onnx_views.c ----------------------------------------------------------------------------- */

/* Unpacks the ModelProto in data[0, size) as onnx__model_proto__unpack does, except that the
 * raw_data of the main graph's initializers points into data instead of being copied: data
 * must outlive the message, and mx__onnx_views_clear must run before it is freed. NULL when
 * the layout is one this does not split, when the bytes do not decode or when out of memory:
 * the caller then unpacks in one call (which reports what is wrong). */
Onnx__ModelProto *mx__onnx_unpack_model_views(const uint8_t *data, size_t size);
/* Forgets every raw_data of m's main graph that points into data[0, size) (so freeing m does
 * not free it). */
void mx__onnx_views_clear(Onnx__ModelProto *m, const uint8_t *data, size_t size);

/* --- onnx_tensor.c ---------------------------------------------------------------------------- */

/* Name of an ONNX element type code for messages ("float32", "string", "uint16", "unknown"). */
const char *mx__onnx_type_name(int64_t code);

/* Decodes tp into *t (a host tensor; name NULL). Data comes from raw_data, the typed field of
 * the element type or an external file (src->base_dir). Its buffer is allocated from `arena`
 * when not NULL, else with malloc (the caller frees t->data; at least 1 byte, never NULL).
 * `what` names the tensor in messages ("initializer 'w'"). src->decoded grows by the bytes. */
MX_MUST_USE mx_status mx__onnx_tensor_decode(const Onnx__TensorProto *tp, const char *what, mx__onnx_src *src,
                                             mx_arena *arena, mx_tensor *t, mx_error *err);

/* Sub-byte element types (int4, uint4, float4e2m1, int2, uint2) between ONNX's packed bytes
 * (low bits first) and mixrt's one element per byte: unpack works in place on a buffer of n
 * bytes whose start holds the packed data; pack writes mx_dtype_packed_bytes(dtype, n) bytes. */
void mx__onnx_unpack_sub_byte(uint8_t *buf, mx_dtype dtype, size_t n);
void mx__onnx_pack_sub_byte(const uint8_t *src, mx_dtype dtype, size_t n, uint8_t *dst);

/* --- onnx_type.c ------------------------------------------------------------------------------ */

/* Reads a value type: *kind, the tensors' element type (UNDEFINED when not given) and their
 * declared shape (NULL when not given). No type at all is a tensor of unknown type. Maps,
 * sparse tensors and nestings mixrt has no kind for are MX_ERR_UNSUPPORTED naming `what`. */
MX_MUST_USE mx_status mx__onnx_type_read(const Onnx__TypeProto *tp, mx_value_kind *kind, mx_dtype *dtype,
                                         const Onnx__TensorShapeProto **shape, const char *what,
                                         mx_error *err);
/* Wraps a tensor TypeProto into the sequence / optional layers of `kind` (arena messages). */
Onnx__TypeProto *mx__onnx_type_wrap(mx_arena *a, mx_value_kind kind, Onnx__TypeProto *tensor_type);
/* The TypeProto of an MX_TYPE_CODE (a TYPE_PROTO attribute) in arena a; NULL when out of memory. */
Onnx__TypeProto *mx__onnx_type_of_code(mx_arena *a, int64_t code);

/* --- onnx_order.c ----------------------------------------------------------------------------- */

void mx__onnx_names_init(mx__onnx_names *s);
void mx__onnx_names_free(mx__onnx_names *s);
/* Adds name when new. False when out of memory. */
bool mx__onnx_names_add(mx__onnx_names *s, const char *name);

/* The attribute's type; files of IR version 1 carry none, then it is read off the field that
 * is set (MX_ATTR_UNDEFINED when nothing is). Values are ONNX AttributeType codes. */
int mx__onnx_attr_type(const Onnx__AttributeProto *a);
/* Adds to `out` every name gp uses (node inputs, graph outputs, names its own subgraphs use)
 * that gp does not define (inputs, initializers, node outputs): what it takes from
 * enclosing scopes. `depth` is gp's nesting level. */
MX_MUST_USE mx_status mx__onnx_free_names(const Onnx__GraphProto *gp, int depth, mx__onnx_names *out,
                                          mx_error *err);
/* True when `name` is defined by the graph of scope s or of an enclosing one. */
bool mx__onnx_scope_defines(const mx__onnx_scope *s, const char *name);
/* Orders the nodes of sc->gp so that every node comes after the producers of the names it
 * uses (inputs and the outer names of its subgraphs); among ready nodes the file order is
 * kept. *order receives n_node indices (malloc'd). A use of a name nothing defines, or a
 * cycle, is MX_ERR_INVALID_GRAPH naming the node and the name. */
MX_MUST_USE mx_status mx__onnx_order_nodes(mx__onnx_import *im, const mx__onnx_scope *sc, uint32_t **order);
/* "'name' (Op)" or "#index (Op)" for messages, into buf. */
const char *mx__onnx_node_label(const Onnx__NodeProto *np, size_t index, char *buf, size_t n);

/* --- onnx_node.c ------------------------------------------------------------------------------ */

/* Imports node gp->node[index] of scope sc into sc->g; its inputs already exist. */
MX_MUST_USE mx_status mx__onnx_import_node(mx__onnx_import *im, mx__onnx_scope *sc, size_t index);

/* --- onnx_import.c ---------------------------------------------------------------------------- */

/* Imports the body of gp (inputs, initializers, nodes, outputs) into the empty graph g, whose
 * opsets are already set. `parent` is the enclosing graph's scope (NULL for the main graph). */
MX_MUST_USE mx_status mx__onnx_import_graph(mx__onnx_import *im, const Onnx__GraphProto *gp, mx_graph *g,
                                            const mx__onnx_scope *parent, int depth);
/* The value called `name` in sc->g; a name of an enclosing graph becomes (once) a value of
 * sc->g flagged MX_VALUE_OUTER. MX_ERR_INVALID_GRAPH when no scope defines it. */
MX_MUST_USE mx_status mx__onnx_resolve(mx__onnx_import *im, mx__onnx_scope *sc, const char *name,
                                       mx_value_id *out);
/* A name that no value or node of sc->g uses and that no graph of the scope chain defines,
 * built from `hint` ("hint" or "hint_N"); allocated from `arena`. NULL when out of memory. */
const char *mx__onnx_fresh_name(mx__onnx_scope *sc, mx_arena *arena, const char *hint);
/* Copies the graph's last error into im->err (with status st) and returns st. */
mx_status mx__onnx_graph_failed(mx__onnx_import *im, mx_graph *g, mx_status st);

#endif /* MIXRT_GRAPH_ONNX_IMPL_H */
