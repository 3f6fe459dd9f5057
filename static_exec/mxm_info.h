/* Reading what an .mxm file holds without restoring it (for `mixrt inspect` and `mixrt
 * partition`), and the file helpers the .mxm reader shares with it. */
#ifndef MIXRT_STATIC_EXEC_MXM_INFO_H
#define MIXRT_STATIC_EXEC_MXM_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "mixrt/graph.h"
#include "proto/mixrt_model.pb-c.h"

/* One static plan as recorded in the file. */
typedef struct mx__mxm_plan_info {
  const char *name;      /* points into the info's unpacked file */
  uint64_t weight_bytes; /* its WEIGHT region */
  uint64_t fm_bytes;     /* its feature-map arena */
  uint32_t n_tasks, n_streams, n_inputs, n_outputs;
  int body; /* index into mx__mxm_info.bodies of the control body it belongs to, -1 for the root */
} mx__mxm_plan_info;

/* One control body stored compiled (Runtime.bodies), in the order the loader meets them: depth
 * first, a body's nested bodies right after it (the order its static plans take in the file). */
typedef struct mx__mxm_body_info {
  const char *node;  /* the control node holding it (points into the unpacked runtime record) */
  const char *op;    /* that node's op type ("Loop", "If", "Scan"; "?" when not in the graph) */
  const char *attr;  /* the attribute holding it ("body", "then_branch", ...; "" when not found) */
  const char *name;  /* the body graph's name */
  int parent;        /* index of the body whose program holds the control node, -1: the root */
  uint32_t depth;    /* 1 for the bodies of the root's control nodes */
  size_t first_plan; /* its own static plans are plans[first_plan, first_plan + n_plans) */
  size_t n_plans;
  size_t n_calls;   /* partition calls of its program */
  size_t n_unknown; /* of which UNKNOWN (run op by op) */
  size_t n_ops;     /* live nodes of the body graph (0 when it is not found) */
} mx__mxm_body_info;

/* One partition call of the root graph. */
typedef struct mx__mxm_call_info {
  const char *name; /* the call node's name (root graph arena) */
  bool unknown;     /* UNKNOWN cluster (run op by op) rather than a static model */
  size_t n_ops;     /* live nodes of its body */
  uint32_t n_inputs, n_outputs;
  char ops[256]; /* op histogram, most frequent first: "MatMul 4, Add 2, ..." */
} mx__mxm_call_info;

typedef struct mx__mxm_info {
  uint64_t file_size;
  uint32_t format_version;
  const char *producer; /* "mixrt 0.x" */
  size_t n_plans;
  mx__mxm_plan_info *plans; /* malloc'd */
  const char *weights_file; /* recorded side file name, NULL when the weights are inline */
  uint64_t weights_size;    /* bytes of the side file (0 when inline) */
  uint64_t inline_weights;  /* bytes of weights held in the .mxm itself */
  mx_graph *root;           /* the partitioned root graph, inferred; NULL for plans only */
  size_t n_calls;
  mx__mxm_call_info *calls; /* malloc'd, in root node order */
  size_t n_root_plans;      /* plans[0, n_root_plans): the root calls' and gears' plans */
  size_t n_bodies;
  mx__mxm_body_info *bodies; /* malloc'd, depth first */
  Mxm__Runtime *rt;          /* the unpacked runtime record (owns the bodies' strings) */
  Mxm__ModelFile *mf;       /* the unpacked file (owns the strings above) */
  Mxm__FileHeader *header;
} mx__mxm_info;

/* True when path names a readable file that starts with the .mxm magic. */
bool mx__mxm_is_file(const char *path);

/* Reads and checks the container of path (preamble, checksums) and the runtime record's root
 * graph; the static plans are described, not restored, and the weights are not loaded. */
MX_MUST_USE mx_status mx__mxm_read_info(const char *path, mx__mxm_info *out, mx_error *err);
void mx__mxm_info_release(mx__mxm_info *info);

/* Maps a whole regular file read-only; mx__mxm_unmap releases it. */
MX_MUST_USE mx_status mx__mxm_map_file(const char *path, unsigned char **data, size_t *size, mx_error *err);
void mx__mxm_unmap(unsigned char *data, size_t size);
/* mx__mxm_map_file that also keeps the file open (*kept_fd, closed by the caller; -1 on
 * failure): reads that check the mapped bytes go through it, never through the path again. */
MX_MUST_USE mx_status mx__mxm_map_file_fd(const char *path, unsigned char **data, size_t *size, int *kept_fd,
                                          mx_error *err);

/* Checks an .mxm image's preamble, header and payload checksums and unpacks its ModelFile. */
MX_MUST_USE mx_status mx__mxm_parse_container(const unsigned char *d, size_t n, Mxm__ModelFile **mf,
                                              mx_error *err);

/* mx__mxm_parse_container that also gives the weights section (*sec NULL and 0 bytes when the
 * file has none), its recorded checksum (not verified here) and how that checksum is computed
 * (*sec_kind, may be NULL; an unknown kind is refused). The section is checked to lie inside
 * the image: a truncated file is refused. */
MX_MUST_USE mx_status mx__mxm_parse_sections(const unsigned char *d, size_t n, Mxm__ModelFile **mf,
                                             const unsigned char **sec, uint64_t *sec_size,
                                             uint64_t *sec_checksum, uint32_t *sec_kind, mx_error *err);

/* --- mxm_checksum.c: checksums of a weights section ------------------------------------------- */

#define MX__MXM_SUM_LANES   0u /* format 2: four lanes over the whole section */
#define MX__MXM_SUM_CHUNKED 1u /* format 3: chunks of MX__MXM_SUM_CHUNK bytes, checked in parallel */
#define MX__MXM_SUM_CHUNK   ((uint64_t)64 << 20)

/* The four-lane sum of a byte stream (pieces of any size; up to 31 bytes wait in carry). */
typedef struct mx__mxm_lanes {
  uint64_t lane[4];
  uint64_t n; /* total bytes (part of the seed) */
  unsigned char carry[32];
  size_t n_carry;
} mx__mxm_lanes;

/* A section checksum computed as the bytes are written. */
typedef struct mx__mxm_sum {
  uint32_t kind;
  uint64_t total;         /* bytes the section will have */
  uint64_t start, in_chunk; /* the current chunk's first byte and bytes summed into it */
  uint64_t h;             /* chunk sums folded so far */
  mx__mxm_lanes cur;      /* the current chunk (kind 0: the whole section) */
} mx__mxm_sum;

void mx__mxm_sum_init(mx__mxm_sum *s, uint32_t kind, uint64_t total);
void mx__mxm_sum_update(mx__mxm_sum *s, const unsigned char *p, size_t n);
uint64_t mx__mxm_sum_finish(mx__mxm_sum *s);
/* The checksum of kind `kind` of n bytes at p, with progress lines (stage). */
uint64_t mx__mxm_section_checksum(uint32_t kind, const unsigned char *p, size_t n, const char *stage);
/* The same checksum of bytes [offset, offset + n) of the open file fd, read with pread (on
 * several threads for the chunked kind) rather than through a mapping. False when the file
 * cannot be read or memory is short: the caller checks the mapped bytes instead. */
bool mx__mxm_section_checksum_fd(uint32_t kind, int fd, uint64_t offset, uint64_t n, const char *stage,
                                 uint64_t *out);

/* The weights section of a file being written: the static plans' weights, then every constant
 * of the root graph not found among them (by size and checksum, bytes compared), each block
 * once and 64-byte aligned. */
typedef struct mx__mxm_weights mx__mxm_weights;
struct mx_static_plan;
struct mx_mxm_save_options;
MX_MUST_USE mx_status mx__mxm_weights_begin(const struct mx_static_plan *const *plans, size_t n,
                                            mx__mxm_weights **out, mx_error *err);
/* Where nbytes at data are in the section (added when new; data must stay valid until the file
 * is written); false for constants too small to refer to, or out of memory (then they stay
 * where they are). */
bool mx__mxm_weights_ref(mx__mxm_weights *w, const void *data, size_t nbytes, uint64_t *offset);
uint64_t mx__mxm_weights_size(const mx__mxm_weights *w);
void mx__mxm_weights_free(mx__mxm_weights *w);

/* Maps the weights file of the .mxm at path (found next to it under its own name + ".weights",
 * else under the recorded name) and checks its size and checksum; mx__mxm_unmap releases it. */
MX_MUST_USE mx_status mx__mxm_map_weights_file(const Mxm__ExternalWeights *ew, const char *path,
                                               unsigned char **side, size_t *side_size, mx_error *err);

/* mx__mxm_save_model with the runtime record as a message (an Mxm__Runtime) packed straight into
 * the file instead of bytes packed beforehand: the same file, one copy of the record less. w is
 * the weights layout the record refers to (from mx__mxm_weights_begin over the same plans). */
MX_MUST_USE mx_status mx__mxm_save_with_runtime(const struct mx_static_plan *const *plans, size_t n,
                                                const ProtobufCMessage *runtime, mx__mxm_weights *w,
                                                const char *path, const struct mx_mxm_save_options *o,
                                                mx_error *err);

/* --- mxm_populate.c: the weights mapping's page tables filled ahead of the first step ---------- */

typedef enum mx__mxm_populate_mode {
  MX__MXM_POPULATE_OFF,        /* the steps fault the pages in */
  MX__MXM_POPULATE_BACKGROUND, /* a thread started at load, stopped and joined with the mapping */
  MX__MXM_POPULATE_LOAD,       /* the whole section, inside the load */
} mx__mxm_populate_mode;
typedef struct mx__mxm_populater mx__mxm_populater;
/* MIXRT_MXM_POPULATE: "background" (default), "load" or "off". */
mx__mxm_populate_mode mx__mxm_populate_mode_from_env(void);
/* Populates size mapped bytes at data (page-aligned) as mode says; the running thread of
 * MX__MXM_POPULATE_BACKGROUND is returned (NULL otherwise, or when it could not start). */
mx__mxm_populater *mx__mxm_populate_start(const unsigned char *data, size_t size, mx__mxm_populate_mode mode);
/* Stops the thread after its current piece and joins it (NULL: nothing). */
void mx__mxm_populate_stop(mx__mxm_populater *p);

/* mx__mxm_load_model that also hands over the weights section (mapped; in the .mxm or its
 * weights file) for the root graph's constants: *section_map holds it until
 * mx__mxm_mapping_release (NULL when the file has no section). */
typedef struct mx__mxm_mapping mx__mxm_mapping;
void mx__mxm_mapping_release(mx__mxm_mapping *m);
MX_MUST_USE mx_status mx__mxm_load_mapped(const char *path, struct mx_static_plan ***plans, size_t *n,
                                          void **runtime, size_t *runtime_size, mx__mxm_mapping **section_map,
                                          const unsigned char **section, uint64_t *section_size,
                                          mx_error *err);

#endif /* MIXRT_STATIC_EXEC_MXM_INFO_H */
