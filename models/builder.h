/* A small layer over the graph builder for the model generators: the first failure sticks, so
 * a generator reads as a straight list of nodes and checks the status once at the end. */
#ifndef MIXRT_MODELS_BUILDER_H
#define MIXRT_MODELS_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "mixrt/graph.h"

typedef struct mx_mb {
  mx_graph *g;    /* graph being built (owned by the generator until it returns it) */
  mx_status st;   /* first failure, MX_OK so far */
  uint64_t rng;   /* state of the weight generator */
  float *scratch; /* buffer for weight values (malloc'd, scratch_cap floats) */
  size_t scratch_cap;
} mx_mb;

/* Creates the graph; the status is in b->st. */
void mx__mb_begin(mx_mb *b, const char *name, uint64_t seed);
/* Frees the scratch; on failure also the graph, after copying its last error (prefixed with
 * `what`) into err. Returns the final status; *out receives the graph or NULL. */
MX_MUST_USE mx_status mx__mb_end(mx_mb *b, mx_graph **out, const char *what, mx_error *err);

/* A single-output node (name may be NULL: generated; out_name may be NULL: generated). */
mx_value_id mx__mb_node(mx_mb *b, const char *op, const char *name, const mx_value_id *in, size_t n,
                        const mx_attr *attrs, size_t n_attrs, const char *out_name);
/* A node with n_out outputs written to outs. */
void mx__mb_node_n(mx_mb *b, const char *op, const char *name, const mx_value_id *in, size_t n,
                   const mx_attr *attrs, size_t n_attrs, const char *const *out_names, size_t n_out,
                   mx_value_id *outs);
mx_value_id mx__mb_input(mx_mb *b, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims);
void mx__mb_output(mx_mb *b, mx_value_id v);
mx_value_id mx__mb_const(mx_mb *b, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                         const void *data);
mx_value_id mx__mb_ints(mx_mb *b, const char *name, const int64_t *vals, int64_t n);
mx_value_id mx__mb_scalar_i64(mx_mb *b, const char *name, int64_t v);
mx_value_id mx__mb_scalar_f32(mx_mb *b, const char *name, float v);
/* A float32 constant of the given dims with uniform values in [-scale, scale). */
mx_value_id mx__mb_weights(mx_mb *b, const char *name, int32_t rank, const int64_t *dims, float scale);
/* A float32 constant filled with one value. */
mx_value_id mx__mb_fill(mx_mb *b, const char *name, int32_t rank, const int64_t *dims, float value);
/* A float32 constant with uniform values in [center - spread, center + spread) (norm scales). */
mx_value_id mx__mb_weights_around(mx_mb *b, const char *name, int32_t rank, const int64_t *dims, float center,
                                  float spread);
/* Room for the float values of a constant of the given dims (the builder's scratch, valid until
 * the next weight call; fill it and pass it to mx__mb_const). NULL after a failure (then b->st
 * says why); *n receives the element count. */
float *mx__mb_scratch(mx_mb *b, int32_t rank, const int64_t *dims, size_t *n);
/* A node name "<prefix><what>" in buf (prefix may be ""), returned for direct use. */
const char *mx__mb_name(char *buf, size_t cap, const char *prefix, const char *what);

#endif /* MIXRT_MODELS_BUILDER_H */
