/* bench_soak: a long decode run of the generated tiny llama through one session, watching for
 * leaks, drift and wrong results. Not part of the test suite (it runs for minutes); the figures
 * and the command are in docs/reliability.md and bench/RESULTS.md.
 *
 * Every step feeds one token and the KV cache and gets the logits and the new cache; the next
 * token is the argmax of the logits. With --io device (the default, how a serving loop keeps its
 * cache) the cache lives in two preallocated device buffers per past/present pair, sized for the
 * longest cache: the step reads the past from one and the session writes the present in place
 * into the other (zero copy), then they swap; the logits go to a fixed host buffer. With --io
 * host every past and present is a host tensor (the session allocates the presents, the caller
 * frees the pasts). The past length
 * cycles 0, 1, ..., max_past, then the cache is emptied and the cycle starts again, so the run
 * keeps revisiting every shape. Every check_every steps the same inputs also go through the
 * reference interpreter and every output must be bit-identical, and a sample is taken: the
 * process's resident memory (/proc/self/statm), the device's bytes in use, peak and live
 * allocations (mx_device_memory_stats_get), and the session allocator's bytes in use and cached.
 * The verdict compares the first sample at or after step first_sample with the last one: the
 * resident memory and the device bytes must be within 1%; the smallest and largest resident
 * memory over the samples in between are printed too (a leak shows as a trend, the cycle's
 * phase as noise: with host I/O the cache the caller holds at a sample depends on where in the
 * cycle it falls, which each sample also prints). Any step error stops the run.
 *
 * Usage: bench_soak [--steps N] [--max-past N] [--check-every N] [--first-sample N]
 *                   [--device cpu|inline] [--streams K] [--executor seq|topo|mt]
 *                   [--io device|host] [--progress]
 * Defaults: 200000 steps, max past 1024, a check and a sample every 10000 steps, verdict from
 * step 10000, CPU device, 1 stream, sequential executor, device I/O. Prints one JSON object on stdout;
 * exit status 0 when no step failed, every check matched and both figures stayed within 1%. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "mixrt/models.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"

enum { MAX_IO = 64, MAX_SAMPLES = 4096 };

typedef struct sample {
  uint64_t step;         /* steps done when sampled */
  int64_t past_len;      /* cache length at that point */
  uint64_t rss_bytes;    /* resident set size of the process */
  uint64_t cache_bytes;  /* host I/O: bytes of the cache tensors the caller holds (page-rounded) */
  uint64_t dev_in_use;   /* device bytes in use (allocator cache and device KV buffers included) */
  uint64_t dev_peak;     /* device peak bytes since creation */
  uint64_t dev_live;     /* live device allocations */
  uint64_t alloc_in_use; /* session allocator: bytes of blocks in use */
  uint64_t alloc_cached; /* session allocator: bytes of cached blocks */
  double steps_per_s;    /* since the previous sample */
} sample;

typedef struct options {
  uint64_t steps, check_every, first_sample;
  int64_t max_past;
  mx_device_kind device;
  uint32_t streams;
  mx_executor_kind executor;
  bool device_io; /* the cache in preallocated device buffers (else host tensors) */
  bool progress;
} options;

/* The run: model, session, the cache in whichever form, the samples. */
typedef struct soak {
  options o;
  mx_llama_config cfg;
  size_t n_io;           /* inputs = outputs: token / logits + 2 per layer */
  int64_t hd;            /* head_dim */
  mx_graph *ref;         /* the model for the reference interpreter (owned) */
  mx_session *s;         /* (owned) */
  mx_device *dev;        /* the session's device (borrowed) */
  mx_tensor in[MAX_IO];  /* token (host) and pasts; host I/O: the pasts are owned */
  mx_tensor out[MAX_IO]; /* logits (device I/O: fixed host buffer, owned) and presents */
  void *kv[MAX_IO][2];   /* device I/O: ping-pong buffers of each past/present (owned) */
  int cur;               /* device I/O: which of the two holds the past */
  int64_t past_len;
  sample *samples; /* (owned) */
  size_t n_samples;
  uint64_t step, checks;
  char failure[600]; /* the first error ("" if none) */
} soak;

static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int usage(void) {
  fprintf(stderr,
          "usage: bench_soak [--steps N] [--max-past N] [--check-every N] [--first-sample N]\n"
          "                  [--device cpu|inline] [--streams K] [--executor seq|topo|mt]\n"
          "                  [--io device|host] [--progress]\n");
  return 2;
}

static bool parse(int argc, char **argv, options *o) {
  *o = (options){200000, 10000, 10000, 1024, MX_DEVICE_CPU, 1, MX_EXECUTOR_SEQUENTIAL, true, false};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--progress") == 0) {
      o->progress = true;
      continue;
    }
    if (!v) return false;
    i++;
    if (strcmp(a, "--steps") == 0)
      o->steps = strtoull(v, NULL, 10);
    else if (strcmp(a, "--max-past") == 0)
      o->max_past = strtoll(v, NULL, 10);
    else if (strcmp(a, "--check-every") == 0)
      o->check_every = strtoull(v, NULL, 10);
    else if (strcmp(a, "--first-sample") == 0)
      o->first_sample = strtoull(v, NULL, 10);
    else if (strcmp(a, "--streams") == 0)
      o->streams = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(a, "--device") == 0 && strcmp(v, "cpu") == 0)
      o->device = MX_DEVICE_CPU;
    else if (strcmp(a, "--device") == 0 && strcmp(v, "inline") == 0)
      o->device = MX_DEVICE_INLINE;
    else if (strcmp(a, "--executor") == 0 && strcmp(v, "seq") == 0)
      o->executor = MX_EXECUTOR_SEQUENTIAL;
    else if (strcmp(a, "--executor") == 0 && strcmp(v, "topo") == 0)
      o->executor = MX_EXECUTOR_TOPOLOGICAL;
    else if (strcmp(a, "--executor") == 0 && strcmp(v, "mt") == 0)
      o->executor = MX_EXECUTOR_MULTI_THREAD;
    else if (strcmp(a, "--io") == 0 && strcmp(v, "device") == 0)
      o->device_io = true;
    else if (strcmp(a, "--io") == 0 && strcmp(v, "host") == 0)
      o->device_io = false;
    else
      return false;
  }
  return o->steps > 0 && o->check_every > 0 && o->max_past >= 0 && o->streams >= 1;
}

static bool fail(soak *k, const char *what, const char *detail) {
  snprintf(k->failure, sizeof k->failure, "step %llu (past_len %lld): %s: %s", (unsigned long long)k->step,
           (long long)k->past_len, what, detail);
  return false;
}

static int64_t argmax(const mx_tensor *logits) {
  int64_t n = 0;
  mx_tensor_numel(logits, &n);
  const float *v = logits->data;
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

static double drift_pct(uint64_t a, uint64_t b) {
  return a ? 100.0 * fabs((double)b - (double)a) / (double)a : (b ? 100.0 : 0.0);
}

static void set_dims(mx_tensor *t, const soak *k, int64_t rows) {
  t->dtype = MX_FLOAT32;
  t->rank = 4;
  t->dims[0] = 1;
  t->dims[1] = k->cfg.kv_heads;
  t->dims[2] = rows;
  t->dims[3] = k->hd;
}

/* Builds the model, the session and the cache buffers. */
static bool setup(soak *k) {
  mx_error err;
  mx_graph *g = NULL;
  if (mx_model_llama(&k->cfg, &g, &err) != MX_OK || mx_model_llama(&k->cfg, &k->ref, &err) != MX_OK) {
    mx_graph_destroy(g);
    return fail(k, "model", err.message);
  }
  mx_session_options so;
  mx_session_options_init(&so);
  so.device_options.kind = k->o.device;
  so.streams = k->o.streams;
  so.executor = k->o.executor;
  if (mx_session_create(&so, &k->s, &err) != MX_OK) {
    mx_graph_destroy(g);
    return fail(k, "session", err.message);
  }
  if (mx_session_load_graph(k->s, g) != MX_OK) return fail(k, "load", mx_session_last_error(k->s));
  k->dev = mx_session_device(k->s);
  if (mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &k->in[0]) != MX_OK)
    return fail(k, "setup", "out of memory");
  if (k->o.device_io) {
    if (mx_tensor_alloc(MX_FLOAT32, 3, (int64_t[]){1, 1, k->cfg.vocab}, &k->out[0]) != MX_OK)
      return fail(k, "setup", "out of memory");
    size_t bytes = (size_t)k->cfg.kv_heads * (size_t)(k->o.max_past + 1) * (size_t)k->hd * sizeof(float);
    for (size_t i = 1; i < k->n_io; i++)
      for (int b = 0; b < 2; b++)
        if (mx_device_alloc(k->dev, bytes, 64, &k->kv[i][b]) != MX_OK)
          return fail(k, "device KV buffers", mx_device_last_error(k->dev));
  }
  return true;
}

/* Empties the cache (past_len 0). */
static bool reset_cache(soak *k) {
  k->past_len = 0;
  for (size_t i = 1; i < k->n_io; i++) {
    if (k->o.device_io) {
      memset(&k->in[i], 0, sizeof k->in[i]);
      set_dims(&k->in[i], k, 0);
      k->in[i].placement = MX_DEVICE;
      k->in[i].data = k->kv[i][k->cur];
    } else {
      mx_tensor_release(&k->in[i]);
      if (mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, k->cfg.kv_heads, 0, k->hd}, &k->in[i]) != MX_OK)
        return fail(k, "cache", "out of host memory");
    }
  }
  return true;
}

/* A host copy of t (device or host). */
static bool host_copy(soak *k, const mx_tensor *t, mx_tensor *h) {
  if (mx_tensor_alloc(t->dtype, t->rank, t->dims, h) != MX_OK) return false;
  size_t n = 0;
  mx_tensor_nbytes(t, &n);
  if (!n) return true;
  if (t->placement == MX_HOST)
    memcpy(h->data, t->data, n);
  else if (mx_device_copy(k->dev, h->data, t->data, n, MX_COPY_D2H) != MX_OK)
    return false;
  return true;
}

/* Runs the step's inputs through the reference interpreter; every output must be identical. */
static bool check(soak *k) {
  mx_tensor hin[MAX_IO], hout[MAX_IO], want[MAX_IO];
  memset(hin, 0, sizeof hin);
  memset(hout, 0, sizeof hout);
  memset(want, 0, sizeof want);
  bool ok = true;
  mx_error err;
  for (size_t i = 0; i < k->n_io && ok; i++)
    ok = host_copy(k, &k->in[i], &hin[i]) && host_copy(k, &k->out[i], &hout[i]);
  if (!ok) {
    fail(k, "check", "cannot copy the step's tensors");
  } else if (mx_reference_run(k->ref, hin, k->n_io, want, k->n_io, &err) != MX_OK) {
    ok = fail(k, "reference", err.message);
  } else {
    for (size_t i = 0; i < k->n_io && ok; i++) {
      char why[256];
      if (!mx_tensor_allclose(&hout[i], &want[i], 0.0, 0.0, why, sizeof why))
        ok = fail(k, "differs from the reference", why);
    }
  }
  for (size_t i = 0; i < MAX_IO; i++) {
    mx_tensor_release(&hin[i]);
    mx_tensor_release(&hout[i]);
    mx_tensor_release(&want[i]);
  }
  k->checks += ok;
  return ok;
}

/* One decode step; checks it against the reference when asked. */
static bool step(soak *k, int64_t *token, bool verify) {
  ((int64_t *)k->in[0].data)[0] = *token;
  if (k->o.device_io) {
    for (size_t i = 1; i < k->n_io; i++) {
      memset(&k->out[i], 0, sizeof k->out[i]);
      set_dims(&k->out[i], k, k->past_len + 1);
      k->out[i].placement = MX_DEVICE;
      k->out[i].data = k->kv[i][1 - k->cur];
    }
  }
  if (mx_session_run(k->s, k->in, k->n_io, k->out, k->n_io) != MX_OK)
    return fail(k, "run", mx_session_last_error(k->s));
  k->step++;
  if (verify && !check(k)) return false;
  *token = argmax(&k->out[0]);
  if (k->o.device_io) {
    k->cur = 1 - k->cur;
    for (size_t i = 1; i < k->n_io; i++) {
      k->in[i] = k->out[i];
      k->in[i].name = NULL;
    }
  } else {
    mx_tensor_release(&k->out[0]);
    for (size_t i = 1; i < k->n_io; i++) {
      mx_tensor_release(&k->in[i]);
      k->in[i] = k->out[i];
      k->in[i].name = NULL;
      memset(&k->out[i], 0, sizeof k->out[i]);
    }
  }
  k->past_len++;
  return k->past_len <= k->o.max_past || reset_cache(k);
}

static void take_sample(soak *k, double steps_per_s) {
  if (k->n_samples == MAX_SAMPLES) return;
  mx_device_memory_stats ms;
  mx_device_memory_stats_get(k->dev, &ms);
  mx_session_stats total;
  if (mx_session_get_stats(k->s, NULL, &total) != MX_OK) {
    fail(k, "mx_session_get_stats", mx_session_last_error(k->s));
    return;
  }
  uint64_t cache = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
  for (size_t i = 1; !k->o.device_io && i < k->n_io; i++) {
    size_t n = 0;
    mx_tensor_nbytes(&k->in[i], &n);
    cache += (n + page - 1) / page * page;
  }
  k->samples[k->n_samples++] =
      (sample){k->step, k->past_len,        rss_bytes(),        cache,      ms.bytes_in_use, ms.peak_bytes,
               ms.live, total.bytes_in_use, total.bytes_cached, steps_per_s};
}

static void print_report(const soak *k, double elapsed_s, bool *within) {
  const options *o = &k->o;
  const sample *a = NULL, *b = k->n_samples ? &k->samples[k->n_samples - 1] : NULL;
  for (size_t i = 0; i < k->n_samples && !a; i++)
    if (k->samples[i].step >= o->first_sample) a = &k->samples[i];
  uint64_t rss_min = UINT64_MAX, rss_max = 0;
  for (const sample *x = a; a && x <= b; x++) {
    if (x->rss_bytes < rss_min) rss_min = x->rss_bytes;
    if (x->rss_bytes > rss_max) rss_max = x->rss_bytes;
  }
  if (!a) rss_min = 0;
  double rss_drift = a && b ? drift_pct(a->rss_bytes, b->rss_bytes) : 0.0;
  double dev_drift = a && b ? drift_pct(a->dev_in_use, b->dev_in_use) : 0.0;
  *within = a && b && a != b && !k->failure[0] && rss_drift <= 1.0 && dev_drift <= 1.0;
  printf("{\n  \"benchmark\": \"soak\",\n");
  printf(
      "  \"model\": {\"name\": \"llama\", \"layers\": %lld, \"hidden\": %lld, \"heads\": %lld, \"kv_heads\": "
      "%lld, "
      "\"vocab\": %lld},\n",
      (long long)k->cfg.layers, (long long)k->cfg.hidden, (long long)k->cfg.heads, (long long)k->cfg.kv_heads,
      (long long)k->cfg.vocab);
  printf("  \"session\": {\"device\": \"%s\", \"streams\": %u, \"executor\": \"%s\", \"io\": \"%s\"},\n",
         o->device == MX_DEVICE_CPU ? "cpu" : "inline", o->streams,
         o->executor == MX_EXECUTOR_SEQUENTIAL    ? "seq"
         : o->executor == MX_EXECUTOR_TOPOLOGICAL ? "topo"
                                                  : "mt",
         o->device_io ? "device" : "host");
  printf("  \"steps\": %llu,\n  \"steps_requested\": %llu,\n  \"max_past\": %lld,\n",
         (unsigned long long)k->step, (unsigned long long)o->steps, (long long)o->max_past);
  printf("  \"elapsed_s\": %.1f,\n  \"steps_per_s\": %.1f,\n", elapsed_s,
         elapsed_s > 0 ? (double)k->step / elapsed_s : 0.0);
  printf("  \"reference_checks\": %llu,\n  \"error\": ", (unsigned long long)k->checks);
  if (k->failure[0]) {
    printf("\"");
    for (const char *p = k->failure; *p; p++) printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    printf("\",\n");
  } else {
    printf("null,\n");
  }
  printf("  \"samples\": [\n");
  for (size_t i = 0; i < k->n_samples; i++) {
    const sample *x = &k->samples[i];
    printf(
        "    {\"step\": %llu, \"past_len\": %lld, \"rss_bytes\": %llu, \"caller_cache_bytes\": %llu, "
        "\"device_bytes_in_use\": %llu, \"device_peak_bytes\": %llu, \"device_live_allocations\": %llu, "
        "\"allocator_bytes_in_use\": %llu, \"allocator_bytes_cached\": %llu, \"steps_per_s\": %.1f}%s\n",
        (unsigned long long)x->step, (long long)x->past_len, (unsigned long long)x->rss_bytes,
        (unsigned long long)x->cache_bytes, (unsigned long long)x->dev_in_use,
        (unsigned long long)x->dev_peak, (unsigned long long)x->dev_live, (unsigned long long)x->alloc_in_use,
        (unsigned long long)x->alloc_cached, x->steps_per_s, i + 1 < k->n_samples ? "," : "");
  }
  printf("  ],\n");
  printf(
      "  \"verdict\": {\"from_step\": %llu, \"to_step\": %llu, \"rss_bytes\": [%llu, %llu], "
      "\"rss_drift_pct\": %.3f, "
      "\"rss_min_max_bytes\": [%llu, %llu], \"device_bytes\": [%llu, %llu], \"device_drift_pct\": %.3f, "
      "\"within_1pct\": %s}\n}\n",
      a ? (unsigned long long)a->step : 0ull, b ? (unsigned long long)b->step : 0ull,
      a ? (unsigned long long)a->rss_bytes : 0ull, b ? (unsigned long long)b->rss_bytes : 0ull, rss_drift,
      (unsigned long long)rss_min, (unsigned long long)rss_max, a ? (unsigned long long)a->dev_in_use : 0ull,
      b ? (unsigned long long)b->dev_in_use : 0ull, dev_drift, *within ? "true" : "false");
}

int main(int argc, char **argv) {
  soak k;
  memset(&k, 0, sizeof k);
  if (!parse(argc, argv, &k.o)) return usage();
  mx_llama_config_default(&k.cfg);
  if (k.o.max_past >= k.cfg.max_pos) {
    fprintf(stderr, "bench_soak: --max-past must be below the model's max_pos (%lld)\n",
            (long long)k.cfg.max_pos);
    return 2;
  }
  k.n_io = 1 + 2 * (size_t)k.cfg.layers;
  k.hd = k.cfg.head_dim ? k.cfg.head_dim : k.cfg.hidden / k.cfg.heads;
  k.samples = calloc(MAX_SAMPLES, sizeof *k.samples);
  uint64_t t_start = mx__now_ns(), t_prev = t_start, step_prev = 0;
  bool ok = k.samples && k.n_io <= MAX_IO && setup(&k) && reset_cache(&k);
  if (!k.samples) snprintf(k.failure, sizeof k.failure, "out of host memory");
  t_start = t_prev = mx__now_ns();
  int64_t token = 1;
  while (ok && k.step < k.o.steps) {
    bool at_sample = (k.step + 1) % k.o.check_every == 0 || k.step + 1 == k.o.steps;
    ok = step(&k, &token, at_sample);
    if (ok && at_sample) {
      uint64_t now = mx__now_ns();
      take_sample(&k, (double)(k.step - step_prev) * 1e9 / (double)(now - t_prev));
      if (k.o.progress) {
        const sample *x = &k.samples[k.n_samples - 1];
        fprintf(stderr, "bench_soak: step %llu: %.0f steps/s, rss %.2f MiB, device %.2f MiB\n",
                (unsigned long long)k.step, x->steps_per_s, (double)x->rss_bytes / 1048576.0,
                (double)x->dev_in_use / 1048576.0);
      }
      t_prev = now;
      step_prev = k.step;
    }
  }
  bool within = false;
  print_report(&k, (double)(mx__now_ns() - t_start) / 1e9, &within);
  for (size_t i = 0; i < MAX_IO; i++) {
    if (!k.o.device_io || i == 0) {
      mx_tensor_release(&k.in[i]);
      mx_tensor_release(&k.out[i]);
    }
    for (int b = 0; b < 2; b++)
      if (k.kv[i][b]) mx_device_free(k.dev, k.kv[i][b]);
  }
  mx_session_destroy(k.s);
  mx_graph_destroy(k.ref);
  free(k.samples);
  return ok && within ? 0 : 1;
}
