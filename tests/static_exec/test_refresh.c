/* Address refresh: 100 steps in which inputs, outputs and the caller-supplied FM arena move
 * between buffers (some steps keep every address), with a frozen input, staged host outputs on
 * some steps, in both HAL model modes and on both devices. Every step's results equal the
 * reference interpreter's, and the counters name exactly the allocation entries whose address
 * changed; a step with the same addresses refreshes nothing (no id, no patched slot). */
#include <criterion/criterion.h>
#include <string.h>

#include "static_exec/static_exec_impl.h"
#include "support_static.h"

#define R    8
#define C    16
#define POOL 3

/* y1 = a * b + c, y2 = (tanh(a) - c) * 0.5; b is frozen. */
static mx_graph *build(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("refresh", &g), MX_OK);
  mx_shape sm = {2, {R, C}}, sv = {1, {C}};
  mx_value_id a, b, c, half, t1, y1, t2, t3, y2;
  cr_assert_eq(mx_graph_add_input(g, "a", MX_FLOAT32, &sm, &a), MX_OK);
  cr_assert_eq(mx_graph_add_input(g, "b", MX_FLOAT32, &sv, &b), MX_OK);
  cr_assert_eq(mx_graph_add_input(g, "c", MX_FLOAT32, &sm, &c), MX_OK);
  float h = 0.5f;
  mx_tensor ht = {.dtype = MX_FLOAT32, .rank = 0, .data = &h};
  cr_assert_eq(mx_graph_add_constant(g, "half", &ht, &half), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Mul", (mx_value_id[]){a, b}, 2, NULL, 0, &t1), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Add", (mx_value_id[]){t1, c}, 2, NULL, 0, &y1), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Tanh", &a, 1, NULL, 0, &t2), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Sub", (mx_value_id[]){t2, c}, 2, NULL, 0, &t3), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Mul", (mx_value_id[]){t3, half}, 2, NULL, 0, &y2), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y1), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y2), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void run_steps(mx_device_kind kind, mx_hal_model_mode mode) {
  mx_graph *g = build();
  mx_device *dev = st_device(kind, true);
  cr_assert(dev);
  mx_static_options o;
  mx__static_options_init(&o);
  o.mode = mode;
  o.frozen_inputs = (uint32_t[]){1};
  o.n_frozen = 1;
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_OK, "%s", err.message);
  mx_static_load_options lo;
  mx__static_load_options_init(&lo);
  lo.fm = MX_STATIC_FM_EXTERNAL;
  mx_static_model *m;
  cr_assert_eq(mx__static_model_create(dev, p, &lo, &m, &err), MX_OK, "%s", err.message);
  uint64_t fm_size = mx__static_model_fm_size(m);
  cr_assert_gt(fm_size, 0);
  mx__static_plan_destroy(p); /* the model must not need the plan */
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);

  const size_t mat = R * C * sizeof(float), vec = C * sizeof(float);
  void *a_buf[POOL], *b_buf[2], *c_buf[POOL], *y1_buf[POOL], *y2_buf[POOL], *fm_buf[2];
  for (int k = 0; k < POOL; k++) {
    cr_assert_eq(mx_device_alloc(dev, mat, 64, &a_buf[k]), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, mat, 64, &c_buf[k]), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, mat, 64, &y1_buf[k]), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, mat, 64, &y2_buf[k]), MX_OK);
  }
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(mx_device_alloc(dev, vec, 64, &b_buf[k]), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, (size_t)fm_size, 64, &fm_buf[k]), MX_OK);
  }
  float b_host[C], b_other[C], a_host[R * C], c_host[R * C], y2_host[R * C], y1_out[R * C], y2_out[R * C];
  for (int i = 0; i < C; i++) {
    b_host[i] = 0.25f * (float)(i % 5) - 0.5f;
    b_other[i] = 1000.0f;
  }
  cr_assert_eq(mx_device_copy(dev, b_buf[0], b_host, vec, MX_COPY_H2D), MX_OK);
  cr_assert_eq(mx_device_copy(dev, b_buf[1], b_other, vec, MX_COPY_H2D), MX_OK);

  const uint32_t id_a = MX__ID_INPUT0, id_b = MX__ID_INPUT0 + 1, id_c = MX__ID_INPUT0 + 2,
                 id_y1 = MX__ID_INPUT0 + 3, id_y2 = MX__ID_INPUT0 + 4;
  int ia = 0, ic = 0, iy1 = 0, iy2 = 0, ifm = 0;
  bool y2_on_host = false;
  uint64_t rng = 0x1234567ull + (uint64_t)mode * 77 + (uint64_t)kind;
  uint64_t total_expected = 0;
  for (int step = 0; step < 100; step++) {
    bool keep = step % 10 == 5; /* a step with every address unchanged */
    int pa = ia, pc = ic, py1 = iy1, py2 = iy2, pfm = ifm;
    bool p_host = y2_on_host;
    if (!keep) {
      if (rng_next(&rng) % 2) ia = (int)(rng_next(&rng) % POOL);
      if (rng_next(&rng) % 2) ic = (int)(rng_next(&rng) % POOL);
      if (rng_next(&rng) % 2) iy1 = (int)(rng_next(&rng) % POOL);
      if (rng_next(&rng) % 2) iy2 = (int)(rng_next(&rng) % POOL);
      if (rng_next(&rng) % 4 == 0) y2_on_host = !y2_on_host;
      if (step % 7 == 3) ifm = 1 - ifm;
    }
    for (int i = 0; i < R * C; i++) {
      a_host[i] = (float)((i * 37 + step * 11) % 101) / 50.0f - 1.0f;
      c_host[i] = (float)((i * 13 + step * 5) % 29) / 14.0f - 1.0f;
    }
    cr_assert_eq(mx_device_copy(dev, a_buf[ia], a_host, mat, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_copy(dev, c_buf[ic], c_host, mat, MX_COPY_H2D), MX_OK);
    /* The frozen input: its first address counts; later ones (with other data) are ignored. */
    void *b_addr = step == 0 || step % 3 ? b_buf[0] : b_buf[1];
    mx_tensor in[3] = {
        {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = a_buf[ia], .placement = MX_DEVICE},
        {.dtype = MX_FLOAT32, .rank = 1, .dims = {C}, .data = b_addr, .placement = MX_DEVICE},
        {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = c_buf[ic], .placement = MX_DEVICE}};
    mx_tensor out[2] = {
        {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = y1_buf[iy1], .placement = MX_DEVICE},
        {.dtype = MX_FLOAT32,
         .rank = 2,
         .dims = {R, C},
         .data = y2_on_host ? (void *)y2_host : y2_buf[iy2],
         .placement = y2_on_host ? MX_HOST : MX_DEVICE}};
    cr_assert_eq(mx__static_model_update_workspaces(m, fm_buf[ifm]), MX_OK, "%s",
                 mx__static_model_last_error(m));
    cr_assert_eq(mx__static_model_update_args(m, in, 3, out, 2), MX_OK, "%s", mx__static_model_last_error(m));
    cr_assert_eq(mx__static_model_execute(m, s), MX_OK, "%s", mx__static_model_last_error(m));
    cr_assert_eq(mx_stream_synchronize(s), MX_OK, "step %d", step);

    /* Expected refreshed entries: those whose address moved (b only at the first step). */
    uint32_t expect[8];
    size_t ne = 0;
    if (step == 0) {
      expect[ne++] = MX__ID_FM;
      expect[ne++] = id_a;
      expect[ne++] = id_b;
      expect[ne++] = id_c;
      expect[ne++] = id_y1;
      expect[ne++] = id_y2;
    } else {
      if (ifm != pfm) expect[ne++] = MX__ID_FM;
      if (ia != pa) expect[ne++] = id_a;
      if (ic != pc) expect[ne++] = id_c;
      if (iy1 != py1) expect[ne++] = id_y1;
      if (y2_on_host != p_host || (!y2_on_host && iy2 != py2)) expect[ne++] = id_y2;
    }
    uint32_t got[16];
    size_t ng = mx__static_model_last_refreshed(m, got, 16);
    cr_assert_eq(ng, ne, "step %d: %zu entries refreshed, %zu expected", step, ng, ne);
    for (size_t k = 0; k < ne; k++) cr_assert_eq(got[k], expect[k], "step %d: entry %zu", step, k);
    total_expected += ne;
    mx_static_model_stats st;
    mx__static_model_stats_get(m, &st);
    cr_assert_eq(st.last_refreshed, ne);
    cr_assert_eq(st.total_refreshed, total_expected);
    cr_assert_eq(st.executions, (uint64_t)step + 1);
    /* The first execution also applies the WEIGHT base installed at create. */
    cr_assert_eq(st.hal.last_refreshed_ids, ne + (step == 0), "step %d: the HAL applied %llu ids", step,
                 (unsigned long long)st.hal.last_refreshed_ids);
    if (ne == 0)
      cr_assert_eq(st.hal.last_patched_slots, 0, "step %d: a step without change patched slots", step);
    if (mode == MX_HAL_MODEL_INDIRECT) cr_assert_eq(st.hal.last_patched_slots, 0);

    /* Results against the reference interpreter with the first b. */
    cr_assert_eq(mx_device_copy(dev, y1_out, y1_buf[iy1], mat, MX_COPY_D2H), MX_OK);
    if (y2_on_host)
      memcpy(y2_out, y2_host, mat);
    else
      cr_assert_eq(mx_device_copy(dev, y2_out, y2_buf[iy2], mat, MX_COPY_D2H), MX_OK);
    mx_tensor rin[3] = {{.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = a_host},
                        {.dtype = MX_FLOAT32, .rank = 1, .dims = {C}, .data = b_host},
                        {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = c_host}};
    mx_tensor ref[2];
    cr_assert_eq(mx_reference_run(g, rin, 3, ref, 2, &err), MX_OK, "%s", err.message);
    cr_assert_eq(memcmp(ref[0].data, y1_out, mat), 0, "step %d: y1 differs", step);
    cr_assert_eq(memcmp(ref[1].data, y2_out, mat), 0, "step %d: y2 differs", step);
    mx_tensor_release(&ref[0]);
    mx_tensor_release(&ref[1]);
  }
  mx_stream_destroy(s);
  mx__static_model_destroy(m);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}

Test(static_refresh, patch_cpu) { run_steps(MX_DEVICE_CPU, MX_HAL_MODEL_PATCH); }
Test(static_refresh, indirect_cpu) { run_steps(MX_DEVICE_CPU, MX_HAL_MODEL_INDIRECT); }
Test(static_refresh, patch_inline) { run_steps(MX_DEVICE_INLINE, MX_HAL_MODEL_PATCH); }
Test(static_refresh, indirect_inline) { run_steps(MX_DEVICE_INLINE, MX_HAL_MODEL_INDIRECT); }

/* With the model's own FM and unchanged buffers, only the first step refreshes anything. */
Test(static_refresh, steady_state_refreshes_nothing) {
  mx_graph *g = build();
  mx_device *dev = st_device(MX_DEVICE_CPU, false);
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  mx_static_model *m;
  cr_assert_eq(mx__static_model_create(dev, p, NULL, &m, &err), MX_OK, "%s", err.message);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  void *bufs[5];
  const size_t sizes[5] = {R * C * 4, C * 4, R * C * 4, R * C * 4, R * C * 4};
  for (int k = 0; k < 5; k++) {
    cr_assert_eq(mx_device_alloc(dev, sizes[k], 64, &bufs[k]), MX_OK);
    cr_assert_eq(mx_device_memset(dev, bufs[k], 0, sizes[k]), MX_OK);
  }
  mx_tensor in[3] = {
      {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = bufs[0], .placement = MX_DEVICE},
      {.dtype = MX_FLOAT32, .rank = 1, .dims = {C}, .data = bufs[1], .placement = MX_DEVICE},
      {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = bufs[2], .placement = MX_DEVICE}};
  mx_tensor out[2] = {
      {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = bufs[3], .placement = MX_DEVICE},
      {.dtype = MX_FLOAT32, .rank = 2, .dims = {R, C}, .data = bufs[4], .placement = MX_DEVICE}};
  for (int step = 0; step < 20; step++) {
    cr_assert_eq(mx__static_model_update_args(m, in, 3, out, 2), MX_OK);
    cr_assert_eq(mx__static_model_execute(m, s), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    mx_static_model_stats st;
    mx__static_model_stats_get(m, &st);
    cr_assert_eq(st.last_refreshed, step == 0 ? 5u : 0u);
    if (step) cr_assert_eq(st.hal.last_patched_slots, 0);
  }
  mx_static_model_stats st;
  mx__static_model_stats_get(m, &st);
  cr_assert_eq(st.total_refreshed, 5);
  mx_stream_destroy(s);
  mx__static_model_destroy(m);
  mx__static_plan_destroy(p);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}
