/* Large constants held outside the arena (mx__const_store): every constant of 4 KiB and more is
 * stored, whether the importer, the builder, folding or a rewrite rule made it, and a rule that
 * rewrites a stored constant shared with another graph leaves that graph's bytes as they were. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/passes/passes.h"
#include "mixrt/graph.h"
#include "reference/reference.h"

#define C_OUT 16
#define C_IN  8
#define N_W   (C_OUT * C_IN * 3 * 3) /* 4608 bytes of float32: above MX__CONST_STORE_MIN */

static mx_value_id add_const(mx_graph *g, const char *name, int32_t rank, const int64_t *dims, const float *d) {
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = rank, .data = (void *)d};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v = MX_NO_VALUE;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static void fill_weights(float *w) {
  for (int i = 0; i < N_W; i++) w[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
}

Test(const_store, builder_and_folded_constants_are_stored) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("store", &g), MX_OK);
  static float w[N_W], small[4] = {1, 2, 3, 4};
  fill_weights(w);
  mx_value_id big = add_const(g, "w", 4, (const int64_t[]){C_OUT, C_IN, 3, 3}, w);
  mx_value_id tiny = add_const(g, "s", 1, (const int64_t[]){4}, small);
  cr_assert_not_null(g->values[big].store, "a large constant is held outside the arena");
  cr_assert_eq(g->values[big].data, &g->values[big].store->header);
  cr_assert_null(g->values[tiny].store, "a small one stays in the arena");
  /* Folding a node over the large constant stores its output too. */
  mx_value_id y = MX_NO_VALUE;
  cr_assert_eq(mx_graph_add_op(g, "Neg", (mx_value_id[]){big}, 1, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  size_t folded = 0;
  cr_assert_eq(mx__graph_fold_constants(g, mx__reference_fold_eval, NULL, (size_t)1 << 20, &folded), MX_OK,
               "%s", mx_graph_last_error(g));
  cr_assert_eq(folded, 1);
  mx_value_id out = g->outputs[0];
  cr_assert(g->values[out].flags & MX_VALUE_CONST, "Neg of a constant folds");
  cr_assert_not_null(g->values[out].store, "a large folded constant is held outside the arena");
  const float *o = g->values[out].data->data;
  for (int i = 0; i < N_W; i++) cr_assert_eq(o[i], -w[i]);
  const float *wb = g->values[big].data->data;
  cr_assert_eq(memcmp(wb, w, sizeof w), 0, "folding leaves the source constant alone");
  mx_graph_destroy(g);
}

/* Graph h reads g's stored weights through mx__graph_add_constant_shared (as partition bodies
 * do), then bn_fold rewrites them: g's constant keeps its bytes, header and storage. */
Test(const_store, bn_fold_of_shared_stored_weights_leaves_the_source_alone) {
  mx_graph *g = NULL, *h = NULL;
  cr_assert_eq(mx_graph_create("source", &g), MX_OK);
  cr_assert_eq(mx_graph_create("body", &h), MX_OK);
  static float w[N_W];
  fill_weights(w);
  mx_value_id gw = add_const(g, "w", 4, (const int64_t[]){C_OUT, C_IN, 3, 3}, w);
  mx__const_store *store = g->values[gw].store;
  cr_assert_not_null(store);
  const mx_tensor before = store->header;

  mx_value_id hw = MX_NO_VALUE, x = MX_NO_VALUE, y = MX_NO_VALUE, z = MX_NO_VALUE;
  cr_assert_eq(mx__graph_add_constant_shared(h, "w", &g->values[gw], &hw), MX_OK);
  cr_assert_eq(h->values[hw].store, store, "the body shares the source's storage");
  mx_shape xs = {.rank = 4, .dims = {1, C_IN, 5, 5}};
  cr_assert_eq(mx_graph_add_input(h, "x", MX_FLOAT32, &xs, &x), MX_OK);
  int64_t pads[] = {1, 1, 1, 1};
  mx_attr pa = mx_attr_ints("pads", pads, 4);
  cr_assert_eq(mx_graph_add_op(h, "Conv", (mx_value_id[]){x, hw}, 2, &pa, 1, &y), MX_OK);
  float sc[C_OUT], bi[C_OUT], mean[C_OUT], var[C_OUT];
  for (int c = 0; c < C_OUT; c++) {
    sc[c] = 0.5f + 0.125f * (float)c;
    bi[c] = 0.01f * (float)c;
    mean[c] = -0.02f * (float)c;
    var[c] = 1.0f + 0.25f * (float)c;
  }
  const int64_t cd[] = {C_OUT};
  mx_value_id bn_in[5] = {y, add_const(h, "sc", 1, cd, sc), add_const(h, "bi", 1, cd, bi),
                          add_const(h, "mean", 1, cd, mean), add_const(h, "var", 1, cd, var)};
  cr_assert_eq(mx_graph_add_op(h, "BatchNormalization", bn_in, 5, NULL, 0, &z), MX_OK);
  cr_assert_eq(mx_graph_add_output(h, z), MX_OK);
  cr_assert_eq(mx_graph_infer(h), MX_OK, "%s", mx_graph_last_error(h));
  mx_fuse_report r;
  cr_assert_eq(mx_graph_fuse(h, "bn_fold", &r), MX_OK, "%s", mx_graph_last_error(h));
  size_t hits = 0;
  for (size_t i = 0; i < r.n_rules; i++)
    if (strcmp(r.rules[i].name, "bn_fold") == 0) hits = r.rules[i].hits;
  cr_assert_eq(hits, 1, "the BatchNormalization folds into the Conv");

  /* The Conv now reads new, scaled weights held in h's own storage. */
  mx_value_id folded = MX_NO_VALUE;
  for (size_t n = 0; n < h->n_nodes; n++) {
    const mx_node *nd = &h->nodes[n];
    if (!(nd->flags & MX_NODE_DEAD) && strcmp(nd->op_type, "Conv") == 0) folded = nd->inputs[1];
  }
  cr_assert_neq(folded, MX_NO_VALUE);
  cr_assert_neq(folded, hw);
  cr_assert_not_null(h->values[folded].store);
  cr_assert_neq(h->values[folded].store, store);
  cr_assert_neq(h->values[folded].data->data, store->header.data);

  /* The source graph's constant: same storage, header and bytes as before the rewrite. */
  cr_assert_eq(g->values[gw].store, store);
  cr_assert_eq(g->values[gw].data, &store->header);
  cr_assert_eq(memcmp(&store->header, &before, sizeof before), 0, "the shared header is unchanged");
  cr_assert_eq(memcmp(store->header.data, w, sizeof w), 0, "the shared bytes are unchanged");
  mx_graph_destroy(h);
  cr_assert_eq(memcmp(g->values[gw].data->data, w, sizeof w), 0, "and stay so once the body is gone");
  mx_graph_destroy(g);
}
