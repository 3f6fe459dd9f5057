/* Random static graphs for the static-executor tests and bench/static: float32 values of a few
 * 2-D shapes, chains with side branches of elementwise ops, MatMul with constant weights,
 * Transpose, alias Reshapes and Softmax (which needs a workspace); graph outputs include the last
 * value and a few random ones, plus (corner_outputs) a repeat, a graph input and a constant.
 * Header-only (static functions) so that tests and the benchmark share it. */
#ifndef MIXRT_TESTS_STATIC_EXEC_RANDOM_GRAPH_H
#define MIXRT_TESTS_STATIC_EXEC_RANDOM_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mixrt/graph.h"

static inline uint64_t mxt_rg_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* Builder state of one random graph. */
typedef struct mxt_rg {
  mx_graph *g;
  mx_status st;
  uint64_t rng;
  mx_value_id vals[512];
  int64_t shape[512][2]; /* dims of vals[i] */
  int nv;
  int n_const;
} mxt_rg;

static inline int mxt_rg_rnd(mxt_rg *r, int n) { return (int)(mxt_rg_next(&r->rng) % (uint64_t)n); }

static inline mx_value_id mxt_rg_const(mxt_rg *r, int64_t d0, int64_t d1) {
  mx_value_id v = MX_NO_VALUE;
  if (r->st != MX_OK) return v;
  float *data = malloc((size_t)(d0 * d1) * sizeof *data);
  if (!data) {
    r->st = MX_ERR_OUT_OF_MEMORY;
    return v;
  }
  for (int64_t i = 0; i < d0 * d1; i++) data[i] = (float)(mxt_rg_rnd(r, 2001) - 1000) / 4000.0f;
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = 2, .dims = {d0, d1}, .data = data};
  char name[32];
  snprintf(name, sizeof name, "c%d", r->n_const++);
  r->st = mx_graph_add_constant(r->g, name, &t, &v);
  free(data);
  return v;
}

static inline mx_value_id mxt_rg_op(mxt_rg *r, const char *op, const mx_value_id *in, size_t n,
                                    const mx_attr *a, size_t na) {
  mx_value_id v = MX_NO_VALUE;
  if (r->st == MX_OK) r->st = mx_graph_add_op(r->g, op, in, n, a, na, &v);
  return v;
}

/* A value of the given shape among the recent ones, or MX_NO_VALUE. */
static inline mx_value_id mxt_rg_pick_shape(mxt_rg *r, int64_t d0, int64_t d1) {
  for (int tries = 0; tries < 8 && r->nv; tries++) {
    int lo = r->nv > 24 ? r->nv - 24 : 0;
    int i = lo + mxt_rg_rnd(r, r->nv - lo);
    if (r->shape[i][0] == d0 && r->shape[i][1] == d1) return r->vals[i];
  }
  return MX_NO_VALUE;
}

/* Builds and infers a graph of about n_ops ops; *out is owned by the caller (mx_graph_destroy). */
static inline mx_status mxt_random_graph(uint64_t seed, int n_ops, bool corner_outputs, mx_graph **out) {
  static const int64_t sizes[] = {4, 8, 16, 32, 48};
  static const char *unary[] = {"Relu", "Neg", "Sigmoid", "Tanh", "Abs"};
  static const char *binary[] = {"Add", "Mul", "Sub", "Max"};
  mxt_rg r = {.st = MX_OK, .rng = seed * 0x2545f4914f6cdd1dull + 99};
  *out = NULL;
  mx_status st = mx_graph_create("random", &r.g);
  if (st != MX_OK) return st;
  int n_in = 1 + mxt_rg_rnd(&r, 3);
  for (int i = 0; i < n_in && r.st == MX_OK; i++) {
    char name[16];
    snprintf(name, sizeof name, "in%d", i);
    mx_shape s = {2, {sizes[mxt_rg_rnd(&r, 5)], sizes[mxt_rg_rnd(&r, 5)]}};
    r.st = mx_graph_add_input(r.g, name, MX_FLOAT32, &s, &r.vals[r.nv]);
    r.shape[r.nv][0] = s.dims[0];
    r.shape[r.nv][1] = s.dims[1];
    r.nv++;
  }
  if (n_ops > 400) n_ops = 400;
  for (int k = 0; k < n_ops && r.st == MX_OK; k++) {
    /* Mostly recent values: chains with side branches. */
    int lo = r.nv > 12 ? r.nv - 12 : 0;
    int ai = lo + mxt_rg_rnd(&r, r.nv - lo);
    mx_value_id a = r.vals[ai];
    int64_t d0 = r.shape[ai][0], d1 = r.shape[ai][1], y0 = d0, y1 = d1;
    mx_value_id y = MX_NO_VALUE;
    switch (mxt_rg_rnd(&r, 8)) {
      case 0:
      case 1: y = mxt_rg_op(&r, unary[mxt_rg_rnd(&r, 5)], &a, 1, NULL, 0); break;
      case 2:
      case 3: {
        mx_value_id b = mxt_rg_pick_shape(&r, d0, d1);
        if (b == MX_NO_VALUE) b = mxt_rg_rnd(&r, 2) ? mxt_rg_const(&r, d0, d1) : mxt_rg_const(&r, 1, d1);
        y = mxt_rg_op(&r, binary[mxt_rg_rnd(&r, 4)], (mx_value_id[]){a, b}, 2, NULL, 0);
        break;
      }
      case 4: {
        y1 = sizes[mxt_rg_rnd(&r, 5)];
        mx_value_id w = mxt_rg_const(&r, d1, y1);
        y = mxt_rg_op(&r, "MatMul", (mx_value_id[]){a, w}, 2, NULL, 0);
        break;
      }
      case 5: {
        static const int64_t perm[] = {1, 0};
        mx_attr at = mx_attr_ints("perm", perm, 2);
        y = mxt_rg_op(&r, "Transpose", &a, 1, &at, 1);
        y0 = d1;
        y1 = d0;
        break;
      }
      case 6: {
        mx_value_id shape = MX_NO_VALUE;
        int64_t sh[2] = {d1, d0};
        mx_tensor t = {.dtype = MX_INT64, .rank = 1, .dims = {2}, .data = sh};
        if (r.st == MX_OK) r.st = mx_graph_add_constant(r.g, NULL, &t, &shape);
        y = mxt_rg_op(&r, "Reshape", (mx_value_id[]){a, shape}, 2, NULL, 0);
        y0 = d1;
        y1 = d0;
        break;
      }
      default: {
        mx_attr at = mx_attr_int("axis", -1);
        y = mxt_rg_op(&r, "Softmax", &a, 1, &at, 1);
        break;
      }
    }
    if (r.st == MX_OK && r.nv < 512) {
      r.shape[r.nv][0] = y0;
      r.shape[r.nv][1] = y1;
      r.vals[r.nv++] = y;
    }
  }
  /* Outputs: the last value, a few random ones (repeats possible). */
  if (r.st == MX_OK) r.st = mx_graph_add_output(r.g, r.vals[r.nv - 1]);
  int extra = mxt_rg_rnd(&r, 3);
  for (int k = 0; k < extra && r.st == MX_OK; k++)
    r.st = mx_graph_add_output(r.g, r.vals[mxt_rg_rnd(&r, r.nv)]);
  if (corner_outputs && r.st == MX_OK) {
    r.st = mx_graph_add_output(r.g, r.vals[r.nv - 1]);             /* a repeat */
    if (r.st == MX_OK) r.st = mx_graph_add_output(r.g, r.vals[0]); /* a graph input */
    mx_value_id c = mxt_rg_const(&r, 2, 3);
    if (r.st == MX_OK) r.st = mx_graph_add_output(r.g, c); /* a constant */
  }
  if (r.st == MX_OK) r.st = mx_graph_infer(r.g);
  if (r.st != MX_OK) {
    fprintf(stderr, "random graph %llu: %s\n", (unsigned long long)seed, mx_graph_last_error(r.g));
    mx_graph_destroy(r.g);
    return r.st;
  }
  *out = r.g;
  return MX_OK;
}

#endif /* MIXRT_TESTS_STATIC_EXEC_RANDOM_GRAPH_H */
