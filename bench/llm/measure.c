/* The measurement of `mixrt bench llm`: decode-step latency of the Llama-style decode model
 * (mx_model_llama) at several KV-cache lengths, for mixrt hybrid (static models + dynamic ops),
 * mixrt all-dynamic (static_min_ops -1), the mixrt reference interpreter, and ONNX Runtime.
 *
 * Each configuration is written once as an ONNX file (mx_onnx_save_file) into a work directory;
 * every system loads that same file and gets the same inputs (token 7, seeded random past keys
 * and values of the chosen length). Every system first runs the step once for the correctness
 * comparison (check.c), then warm-up steps, then the timed rounds: in each round every system
 * runs its block of steps (a few untimed steps first), in an order that changes from round to
 * round (round_position), so slow drifts of the machine hit every system alike, and each
 * round's blocks are also compared pairwise (rounds_compared). A sample is the wall time of one
 * step as its caller sees it: around mx_session_run (inputs and outputs in device buffers
 * prepared beforehand, or host tensors with --io host) or mx_reference_run for mixrt (steps.c),
 * around `await session.run(feeds)` inside the Node process for ONNX Runtime (peer.c). Every
 * timed step repeats the same inputs (--mode fixed), or each system decodes from them, feeding
 * its presents back (--mode decode). */
#include <stdlib.h>
#include <string.h>

#include "bench/llm/llm_impl.h"
#include "common/clock.h"
#include "mixrt/onnx.h"
#include "mixrt/partition.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/sysmem.h"

/* Which of the n systems runs k-th in round r. The rounds cycle through the rows of a Williams
 * square (and, for odd n, their reverses): every system runs at every position equally often,
 * and right after every other system equally often. A plain rotation would always put a system
 * after the same one, so whatever that one leaves behind in the caches and predictors (ONNX
 * Runtime's process, or the session sharing its inputs) would fall on it every round. */
static int round_position(int64_t r, int k, int n) {
  const int64_t rows = n % 2 ? 2 * (int64_t)n : n;
  int64_t row = r % rows;
  if (row >= n) { /* odd n: the second half reverses the first */
    row -= n;
    k = n - 1 - k;
  }
  /* Offsets 0, 1, n - 1, 2, n - 2, ... */
  int w = k % 2 ? (k + 1) / 2 : (n - k / 2) % n;
  return (int)((row + w) % n);
}

/* Whether round r (past --rounds) should run: in fixed mode while the point has taken less than
 * --min-time, and then on to the end of the cycle of orders, so every order runs equally often. */
static bool more_rounds(const llm_args *a, int64_t r, int n_sys, uint64_t t_start) {
  if (a->decode || a->min_time <= 0.0) return false;
  const int64_t cycle = n_sys % 2 ? 2 * (int64_t)n_sys : n_sys;
  if (r % cycle != 0) return true;
  return (double)(mx__now_ns() - t_start) * 1e-9 < a->min_time;
}

/* Doubles the rounds every system's sample array holds. */
static bool grow_samples(uint64_t *samples[SYS_COUNT], int64_t *cap_rounds, int64_t steps) {
  int64_t cap = *cap_rounds * 2;
  for (int s = 0; s < SYS_COUNT; s++) {
    if (!samples[s]) continue;
    uint64_t *p = realloc(samples[s], (size_t)(cap * steps) * sizeof *p);
    if (!p) return false;
    samples[s] = p;
  }
  *cap_rounds = cap;
  return true;
}

/* Before the rounds: `warmup` untimed steps of system s (ONNX Runtime's in its process); in
 * decode mode the system then starts again from the point's inputs (in, or in_dir for ONNX
 * Runtime). */
static int warm_up(bench_ctx *c, int s, const mx_tensor *in, size_t n, const char *in_dir, int64_t past) {
  const llm_args *a = c->a;
  char why[600];
  mx_status st;
  if (s == SYS_ORT) {
    if ((a->warmup && !mx__llm_peer_call(c->p, "%s %s %lld", a->decode ? "decode" : "run", c->name,
                                         (long long)a->warmup)) ||
        (a->decode && !mx__llm_peer_call(c->p, "feed %s %s", c->name, in_dir)))
      return mx_cli_runtime_error(CMD, "ONNX Runtime, %s: %s", c->name, c->p->line);
    return MX_EXIT_OK;
  }
  if (a->decode && (st = mx__llm_state_init(c, s, in, n)) != MX_OK)
    return mx_cli_runtime_error(CMD, "%s: the decode state: %s", sys_names[s], mx_status_string(st));
  if (mx__llm_run_block(c, s, in, n, a->warmup, NULL, why, sizeof why) != MX_OK)
    return mx_cli_runtime_error(CMD, "%s past %lld: %s", c->name, (long long)past, why);
  /* Decode mode: the timed steps start again from the point's inputs. */
  if (a->decode) {
    mx__llm_state_free(c, s, n);
    if ((st = mx__llm_state_init(c, s, in, n)) != MX_OK)
      return mx_cli_runtime_error(CMD, "%s: the decode state: %s", sys_names[s], mx_status_string(st));
  }
  return MX_EXIT_OK;
}

/* System s's block of one round: block_warmup untimed steps, then `steps` timed into dst. */
static int run_timed_block(bench_ctx *c, int s, const mx_tensor *in, size_t n, uint64_t *dst, int64_t past) {
  const llm_args *a = c->a;
  char why[600];
  if (s == SYS_ORT) {
    if (!mx__llm_peer_call(c->p, "%s %s %lld", a->decode ? "decode" : "run", c->name,
                           (long long)(a->block_warmup + a->steps)) ||
        !mx__llm_peer_times(c->p, a->block_warmup, dst, a->steps))
      return mx_cli_runtime_error(CMD, "ONNX Runtime, %s: %s", c->name, c->p->line);
    return MX_EXIT_OK;
  }
  if ((a->block_warmup && mx__llm_run_block(c, s, in, n, a->block_warmup, NULL, why, sizeof why) != MX_OK) ||
      mx__llm_run_block(c, s, in, n, a->steps, dst, why, sizeof why) != MX_OK)
    return mx_cli_runtime_error(CMD, "%s past %lld: %s", c->name, (long long)past, why);
  return MX_EXIT_OK;
}

/* A session's counters per step: the difference of two mx_session_stats over `steps` steps. */
static session_step per_step(const mx_session_stats *b, const mx_session_stats *after, double steps) {
  return (session_step){
      .static_executes = (double)(after->static_executes - b->static_executes) / steps,
      .dynamic_launches = (double)(after->dynamic_launches - b->dynamic_launches) / steps,
      .kernels = (double)(after->kernels_run - b->kernels_run) / steps,
      .refreshed = (double)(after->refreshed_entries - b->refreshed_entries) / steps,
      .device_allocations = (double)(after->device_allocations - b->device_allocations) / steps,
      .static_us = (double)(after->static_ns - b->static_ns) / steps / 1e3,
      .dynamic_us = (double)(after->dynamic_ns - b->dynamic_ns) / steps / 1e3,
      .host_us = (double)(after->host_ns - b->host_ns) / steps / 1e3,
      .step_us = (double)(after->step_ns - b->step_ns) / steps / 1e3};
}

/* Measures one past length of one configuration: inputs, the correctness check, the warm-up,
 * the rounds, and the figures. */
static int measure_point(bench_ctx *c, const mx_llama_config *cfg, point *pt) {
  const llm_args *a = c->a;
  const size_t n = 1 + 2 * (size_t)cfg->layers;
  mx_tensor in[MAX_IO];
  mx_error err;
  int rc = MX_EXIT_OK;
  uint64_t *samples[SYS_COUNT] = {NULL};
  size_t counts[SYS_COUNT] = {0};
  mx_session_stats before[2] = {{0}}, after = {0};
  mx_status st = mx_cli_llm_inputs(cfg, TOKEN % cfg->vocab, pt->past, 1000 + (uint64_t)pt->past, in);
  if (st != MX_OK) return mx_cli_runtime_error(CMD, "allocating the inputs: %s", mx_status_string(st));
  if (c->device_io && (st = mx__llm_make_device_io(c, cfg, in, n)) != MX_OK) {
    rc = mx_cli_runtime_error(CMD, "device buffers for the inputs and outputs: %s", mx_status_string(st));
    goto release_inputs;
  }
  char in_dir[1200];
  snprintf(in_dir, sizeof in_dir, "%s/%s-%lld-in", c->dir, c->name, (long long)pt->past);
  if (c->ort) {
    if (mx__llm_write_inputs(c->sessions[0] ? c->sessions[0] : c->sessions[1], in_dir, in, n, &err) !=
        MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s", err.message);
      goto free_device;
    }
    if (!mx__llm_peer_call(c->p, "feed %s %s", c->name, in_dir)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, %s: %s", c->name, c->p->line);
      goto free_device;
    }
  }
  rc = mx__llm_check_point(c, in, n, pt);
  if (rc != MX_EXIT_OK) goto free_device;
  int order[SYS_COUNT], n_sys = 0;
  int64_t cap_rounds = a->rounds; /* rounds the sample arrays hold; --min-time grows them */
  for (int s = 0; s < SYS_COUNT; s++) {
    bool on = s == SYS_ORT ? c->ort : a->systems[s];
    if (!on) continue;
    order[n_sys++] = s;
    samples[s] = calloc((size_t)(cap_rounds * a->steps), sizeof **samples);
    if (!samples[s]) {
      rc = mx_cli_runtime_error(CMD, "out of memory");
      goto free_samples;
    }
    rc = warm_up(c, s, in, n, in_dir, pt->past);
    if (rc != MX_EXIT_OK) goto free_samples;
  }
  for (int s = 0; s < 2; s++)
    if (c->sessions[s] && mx_session_get_stats(c->sessions[s], NULL, &before[s]) != MX_OK)
      memset(&before[s], 0, sizeof before[s]);
  uint64_t session_steps[2] = {0, 0};
  const uint64_t t_start = mx__now_ns();
  int64_t r = 0;
  for (; r < a->rounds || more_rounds(a, r, n_sys, t_start); r++) {
    if (r == cap_rounds && !grow_samples(samples, &cap_rounds, a->steps)) {
      rc = mx_cli_runtime_error(CMD, "out of memory");
      goto free_samples;
    }
    for (int k = 0; k < n_sys; k++) {
      int s = order[round_position(r, k, n_sys)];
      rc = run_timed_block(c, s, in, n, samples[s] + counts[s], pt->past);
      if (rc != MX_EXIT_OK) goto free_samples;
      if (s == SYS_HYBRID || s == SYS_DYNAMIC) /* the stats count warm-up steps too */
        session_steps[s == SYS_DYNAMIC] += (uint64_t)(a->block_warmup + a->steps);
      counts[s] += (size_t)a->steps;
    }
  }
  for (int s = 0; s < 2; s++) {
    if (!c->sessions[s] || !session_steps[s]) continue;
    const mx_session_stats *b = &before[s];
    if (mx_session_get_stats(c->sessions[s], NULL, &after) != MX_OK) continue;
    pt->have_step[s] = true;
    pt->step[s] = per_step(b, &after, (double)session_steps[s]);
  }
  pt->rounds = r;
  if (samples[SYS_HYBRID])
    for (int s = SYS_HYBRID + 1; s < SYS_COUNT; s++)
      if (samples[s]) pt->vs[s] = mx__llm_compare_rounds(samples[SYS_HYBRID], samples[s], r, a->steps);
  for (int s = 0; s < SYS_COUNT; s++)
    if (samples[s]) pt->t[s] = mx__llm_summarize(samples[s], counts[s]);
free_samples:
  for (int s = 0; s < SYS_COUNT; s++) free(samples[s]);
  for (int s = 0; s < SYS_ORT; s++) mx__llm_state_free(c, s, n);
free_device:
  if (c->device_io) mx__llm_free_device_io(c, n);
release_inputs:
  mx_cli_llm_inputs_release(cfg, in);
  return rc;
}

/* private_weights: the session uploads weights of its own instead of sharing equal ones with
 * the sessions before it (the control, whose point is to land in memory of its own). */
mx_session *mx__llm_open_session(const llm_args *a, mx_device *dev, int64_t static_min_ops,
                                 bool private_weights, const char *path, int *rc) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device = dev;
  o.private_weights = private_weights;
  o.streams = (uint32_t)a->streams;
  o.executor = a->executor;
  o.static_min_ops = static_min_ops;
  mx_session *s;
  mx_error err;
  if (mx_session_create(&o, &s, &err) != MX_OK) {
    *rc = mx_cli_runtime_error(CMD, "%s", err.message);
    return NULL;
  }
  if (mx_session_load_file(s, path) != MX_OK) {
    *rc = mx_cli_runtime_error(CMD, "loading %s: %s", path, mx_session_last_error(s));
    mx_session_destroy(s);
    return NULL;
  }
  return s;
}

/* Writes configuration `which` as ONNX and measures every past length. */
int mx__llm_measure_config(const llm_args *a, peer *p, mx_device *dev, const char *dir, int which,
                           config_result *cr) {
  mx_cli_llm_size(config_names[which], &cr->cfg);
  cr->cfg.max_pos = mx__llm_rotary_rows(a, cr->cfg.max_pos);
  cr->run = true;
  bench_ctx c = {.a = a,
                 .p = p,
                 .dir = dir,
                 .dev = dev,
                 .name = config_names[which],
                 .ort = a->systems[SYS_ORT] && p->pid > 0,
                 .device_io = a->device_io,
                 .cfg = &cr->cfg};
  char path[1100];
  snprintf(path, sizeof path, "%s/%s.onnx", dir, c.name);
  mx_error err;
  int rc = MX_EXIT_OK;
  if (mx__llm_write_model(&cr->cfg, path, &cr->nodes, &err) != MX_OK)
    return mx_cli_runtime_error(CMD, "%s", err.message);
  if (a->systems[SYS_REFERENCE] && mx_onnx_load_file(path, &c.ref, &err) != MX_OK)
    return mx_cli_runtime_error(CMD, "%s", err.message);
  mx_device_memory_stats mem0, mem1;
  mx_device_memory_stats_get(dev, &mem0);
  const int64_t hybrid_min_ops = MX_PARTITION_DEFAULT_STATIC_MIN_OPS, all_dynamic = -1;
  if (a->systems[SYS_HYBRID] &&
      !(c.sessions[0] = mx__llm_open_session(a, dev, hybrid_min_ops, false, path, &rc)))
    goto close;
  if (a->systems[SYS_DYNAMIC] &&
      !(c.sessions[1] = mx__llm_open_session(a, dev, all_dynamic, false, path, &rc)))
    goto close;
  if (a->systems[SYS_CONTROL] &&
      !(c.sessions[SYS_CONTROL] = mx__llm_open_session(a, dev, hybrid_min_ops, true, path, &rc)))
    goto close;
  if (!c.sessions[0] && !c.sessions[1] && c.ort) {
    /* The .npy names come from a session's input list; open one that is only used for that. */
    if (!(c.sessions[1] = mx__llm_open_session(a, dev, all_dynamic, false, path, &rc))) goto close;
  }
  mx_device_memory_stats_get(dev, &mem1);
  cr->shared_hits = mem1.shared_hits - mem0.shared_hits;
  if (c.ort && !mx__llm_peer_call(p, "load %s %s", c.name, path)) {
    rc = mx_cli_runtime_error(CMD, "ONNX Runtime cannot load %s: %s", path, p->line);
    goto close;
  }
  for (size_t k = 0; k < a->n_past && rc == MX_EXIT_OK; k++) {
    cr->points[k].past = a->past[k];
    rc = measure_point(&c, &cr->cfg, &cr->points[k]);
  }
  if (c.ort) mx__llm_peer_call(p, "drop %s", c.name);
  cr->huge_kib = mx_cli_anon_huge_kib();
close:
  for (int s = 0; s < SYS_ORT; s++) mx_session_destroy(c.sessions[s]);
  mx_graph_destroy(c.ref);
  return rc;
}
