/* Sessions of one model on one device share its weights (mx_session_options.private_weights
 * false, the default): the second session's static-model weight blocks, dynamic constants and
 * execution-graph constants are the first one's shared blocks, not new copies. Checked through
 * the device's memory statistics, and by decoding with both sessions against the reference
 * interpreter: sharing must not change a bit of any output, in either session, while the other
 * runs, after the other is gone, or on two threads at once. Private sessions, all-dynamic
 * sessions, other weights and .mxm files are covered too. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { MAX_IO = 16, STEPS = 6 };

/* A device of `kind` with the Nth allocation failing (0: none) and a memory limit (0: none). */
static mx_device *device_with(mx_device_kind kind, uint64_t fail_alloc, uint64_t limit) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.fault_from_env = false;
  o.fault_nth[MX_FAULT_ALLOC] = fail_alloc;
  o.memory_limit = limit;
  mx_device *dev;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK, "%s", err.message);
  return dev;
}

static mx_device *new_device(mx_device_kind kind) { return device_with(kind, 0, 0); }

static mx_device_memory_stats mem(const mx_device *dev) {
  mx_device_memory_stats st;
  mx_device_memory_stats_get(dev, &st);
  return st;
}

/* An empty session on dev. */
static mx_session *session_on(mx_device *dev, int64_t static_min_ops, bool private_weights) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device = dev;
  o.static_min_ops = static_min_ops;
  o.private_weights = private_weights;
  o.spec_cache_size = 0; /* specializations would add shared blocks of their own while decoding */
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}

/* A session on dev with the llama of `seed`, loaded from a built graph. */
static mx_session *open_llama(mx_device *dev, uint64_t seed, int64_t static_min_ops, bool private_weights) {
  mx_session *s = session_on(dev, static_min_ops, private_weights);
  mx_error err;
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.seed = seed;
  mx_graph *g;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

/* One decode loop: its own KV cache, compared with the reference of the same weights. */
typedef struct decoder {
  mx_session *s;
  mx_graph *ref;
  mx_tensor in[MAX_IO];
  size_t n;
  int step;
} decoder;

static void decoder_init(decoder *d, mx_session *s, uint64_t seed) {
  memset(d, 0, sizeof *d);
  d->s = s;
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.seed = seed;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &d->ref, &err), MX_OK, "%s", err.message);
  d->n = mx_session_input_count(s);
  cr_assert(d->n <= MAX_IO && d->n == 1 + 2 * (size_t)cfg.layers);
  int64_t hd = cfg.hidden / cfg.heads;
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &d->in[0]), MX_OK);
  for (size_t i = 1; i < d->n; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, 0, hd}, &d->in[i]), MX_OK);
}

/* Runs one step in the session and in the reference; false with `why` on the first difference
 * (no Criterion assert: also called from threads). */
static bool decoder_step(decoder *d, char *why, size_t cap) {
  mx_tensor out[MAX_IO], want[MAX_IO];
  memset(out, 0, sizeof out);
  memset(want, 0, sizeof want);
  ((int64_t *)d->in[0].data)[0] = (d->step * 29 + 3) % 128;
  mx_error err;
  bool ok = true;
  if (mx_session_run(d->s, d->in, d->n, out, d->n) != MX_OK) {
    snprintf(why, cap, "step %d: %s", d->step, mx_session_last_error(d->s));
    ok = false;
  } else if (mx_reference_run(d->ref, d->in, d->n, want, d->n, &err) != MX_OK) {
    snprintf(why, cap, "step %d, reference: %s", d->step, err.message);
    ok = false;
  }
  for (size_t k = 0; ok && k < d->n; k++) {
    char w[256];
    if (!mxs_same(&out[k], &want[k], w, sizeof w)) {
      snprintf(why, cap, "step %d output %zu: %s", d->step, k, w);
      ok = false;
    }
  }
  for (size_t k = 0; k < d->n; k++) {
    if (ok && k > 0) { /* present -> past: the tensor moves, not released here */
      mx_tensor_release(&d->in[k]);
      d->in[k] = out[k];
      d->in[k].name = NULL;
    } else {
      mx_tensor_release(&out[k]);
    }
    mx_tensor_release(&want[k]);
  }
  d->step++;
  return ok;
}

static void decoder_steps(decoder *d, int steps) {
  char why[600];
  for (int i = 0; i < steps; i++) cr_assert(decoder_step(d, why, sizeof why), "%s", why);
}

static void decoder_fini(decoder *d) {
  for (size_t i = 0; i < d->n; i++) mx_tensor_release(&d->in[i]);
  mx_graph_destroy(d->ref);
}

/* Two hybrid sessions of one model: the second adds no shared block and only a fraction of the
 * first's memory; both decode exactly, interleaved, and the second still does after the first
 * is destroyed; destroying both returns every byte. */
static void two_sessions_share(mx_device_kind kind, int64_t static_min_ops) {
  mx_device *dev = new_device(kind);
  const mx_device_memory_stats start = mem(dev);
  mx_session *a = open_llama(dev, 1, static_min_ops, false);
  const mx_device_memory_stats one = mem(dev);
  cr_assert_gt(one.shared_blocks, 0, "the first session's weights are shared blocks");
  cr_assert_eq(one.shared_hits, start.shared_hits, "nothing to share with yet");
  const uint64_t first = one.bytes_in_use - start.bytes_in_use;
  cr_assert_gt(one.shared_bytes, first / 2,
               "the weights are most of a loaded session's memory (%llu of %llu)",
               (unsigned long long)one.shared_bytes, (unsigned long long)first);

  mx_session *b = open_llama(dev, 1, static_min_ops, false);
  const mx_device_memory_stats two = mem(dev);
  cr_assert_eq(two.shared_blocks, one.shared_blocks, "the second session adds no shared block");
  cr_assert_eq(two.shared_bytes, one.shared_bytes);
  cr_assert_eq(two.shared_hits - one.shared_hits, one.shared_blocks, "it holds every block of the first");
  const uint64_t second = two.bytes_in_use - one.bytes_in_use;
  cr_assert_leq(second + one.shared_bytes, first,
                "the second session costs the first's memory less its weights "
                "(%llu + %llu against %llu)",
                (unsigned long long)second, (unsigned long long)one.shared_bytes, (unsigned long long)first);

  decoder da, db;
  decoder_init(&da, a, 1);
  decoder_init(&db, b, 1);
  for (int i = 0; i < STEPS; i++) {
    decoder_steps(&da, 1);
    decoder_steps(&db, 2);
  }
  mx_session_destroy(a);
  const mx_device_memory_stats after_a = mem(dev);
  cr_assert_eq(after_a.shared_blocks, one.shared_blocks,
               "the blocks stay while the second session holds them");
  decoder_steps(&db, STEPS);
  mx_session_destroy(b);
  const mx_device_memory_stats end = mem(dev);
  cr_assert_eq(end.shared_blocks, 0);
  cr_assert_eq(end.bytes_in_use, start.bytes_in_use, "every byte returned");
  decoder_fini(&da);
  decoder_fini(&db);
  mx_device_destroy(dev);
}

Test(shared_weights, two_hybrid_sessions_hold_one_copy_inline) { two_sessions_share(MX_DEVICE_INLINE, 4); }
Test(shared_weights, two_hybrid_sessions_hold_one_copy_cpu) { two_sessions_share(MX_DEVICE_CPU, 4); }
Test(shared_weights, two_all_dynamic_sessions_hold_one_copy) { two_sessions_share(MX_DEVICE_INLINE, -1); }

/* private_weights: the session uploads its own copies and touches no shared block. */
Test(shared_weights, private_session_uploads_its_own) {
  mx_device *dev = new_device(MX_DEVICE_INLINE);
  mx_session *a = open_llama(dev, 1, 4, false);
  const mx_device_memory_stats one = mem(dev);
  mx_session *b = open_llama(dev, 1, 4, true);
  const mx_device_memory_stats two = mem(dev);
  cr_assert_eq(two.shared_hits, one.shared_hits, "the private session shares nothing");
  cr_assert_eq(two.shared_blocks, one.shared_blocks, "and adds no shared block");
  cr_assert_geq(two.bytes_in_use - one.bytes_in_use, one.shared_bytes, "it holds copies of its own");
  decoder d;
  decoder_init(&d, b, 1);
  decoder_steps(&d, STEPS);
  decoder_fini(&d);
  mx_session_destroy(b);
  mx_session_destroy(a);
  cr_assert_eq(mem(dev).shared_blocks, 0);
  mx_device_destroy(dev);
}

/* Models with other weights (another seed) share nothing, and each decodes its own way: a
 * block is shared only when every byte is equal. */
Test(shared_weights, other_weights_are_not_shared) {
  mx_device *dev = new_device(MX_DEVICE_INLINE);
  mx_session *a = open_llama(dev, 1, 4, false);
  const mx_device_memory_stats one = mem(dev);
  mx_session *b = open_llama(dev, 2, 4, false);
  const mx_device_memory_stats two = mem(dev);
  /* The rotary tables do not depend on the seed: those are shared, nothing else. The static
   * models' weights are no device blocks at all on a host-memory device (computed on in their
   * plans' block), so every block left may be one of those tables. */
  cr_assert_leq(two.shared_hits - one.shared_hits, one.shared_blocks,
                "blocks of other weights are not shared");
  cr_assert_geq(two.shared_bytes, one.shared_bytes, "the second model's weights are blocks of their own");
  decoder da, db;
  decoder_init(&da, a, 1);
  decoder_init(&db, b, 2);
  for (int i = 0; i < STEPS; i++) {
    decoder_steps(&da, 1);
    decoder_steps(&db, 1);
  }
  decoder_fini(&da);
  decoder_fini(&db);
  mx_session_destroy(a);
  mx_session_destroy(b);
  cr_assert_eq(mem(dev).shared_blocks, 0);
  mx_device_destroy(dev);
}

/* A session restored from an .mxm file shares with one compiled from the graph: the plans'
 * weights are the same bytes either way. */
Test(shared_weights, mxm_session_shares_with_compiled_one) {
  mx_device *dev = new_device(MX_DEVICE_INLINE);
  mx_session *a = open_llama(dev, 1, 4, false);
  char path[] = "/tmp/mixrt-shared-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(a, path, NULL), MX_OK, "%s", mx_session_last_error(a));
  const mx_device_memory_stats one = mem(dev);
  mx_session *b = session_on(dev, 4, false);
  cr_assert_eq(mx_session_load_file(b, path), MX_OK, "%s", mx_session_last_error(b));
  unlink(path);
  const mx_device_memory_stats two = mem(dev);
  cr_assert_eq(two.shared_blocks, one.shared_blocks, "the restored session adds no shared block");
  /* The restored plans use the file's mapped weights in place (no block at all); only the root's
   * constants can meet the compiled session's blocks. */
  cr_assert_leq(two.shared_hits - one.shared_hits, one.shared_blocks);
  decoder d;
  decoder_init(&d, b, 1);
  decoder_steps(&d, STEPS);
  decoder_fini(&d);
  mx_session_destroy(a);
  mx_session_destroy(b);
  mx_device_destroy(dev);
}

/* Loading another model into a session releases its holds on the old one's blocks. */
Test(shared_weights, reloading_releases_the_old_blocks) {
  mx_device *dev = new_device(MX_DEVICE_INLINE);
  mx_session *a = open_llama(dev, 1, 4, false);
  const mx_device_memory_stats one = mem(dev);
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.seed = 3;
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(a, g), MX_OK, "%s", mx_session_last_error(a));
  const mx_device_memory_stats two = mem(dev);
  cr_assert_eq(two.shared_bytes, one.shared_bytes, "the new model's blocks replace the old ones");
  decoder d;
  decoder_init(&d, a, 3);
  decoder_steps(&d, 2);
  decoder_fini(&d);
  mx_session_destroy(a);
  cr_assert_eq(mem(dev).shared_blocks, 0);
  mx_device_destroy(dev);
}

/* Two sessions sharing their weights decode on two threads at once, each exactly. */
typedef struct thread_job {
  decoder d;
  bool ok;
  char why[600];
} thread_job;

static void *decode_thread(void *arg) {
  thread_job *j = arg;
  j->ok = true;
  for (int i = 0; i < 3 * STEPS && j->ok; i++) j->ok = decoder_step(&j->d, j->why, sizeof j->why);
  return NULL;
}

Test(shared_weights, sessions_on_two_threads) {
  mx_device *dev = new_device(MX_DEVICE_CPU);
  mx_session *a = open_llama(dev, 1, 4, false), *b = open_llama(dev, 1, 4, false);
  cr_assert_gt(mem(dev).shared_hits, 0);
  thread_job ja, jb;
  decoder_init(&ja.d, a, 1);
  decoder_init(&jb.d, b, 1);
  pthread_t ta, tb;
  cr_assert_eq(pthread_create(&ta, NULL, decode_thread, &ja), 0);
  cr_assert_eq(pthread_create(&tb, NULL, decode_thread, &jb), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  cr_assert(ja.ok, "first session: %s", ja.why);
  cr_assert(jb.ok, "second session: %s", jb.why);
  decoder_fini(&ja.d);
  decoder_fini(&jb.d);
  mx_session_destroy(a);
  mx_session_destroy(b);
  mx_device_destroy(dev);
}

static mx_device *new_device_with(uint64_t fail_alloc, uint64_t limit) {
  return device_with(MX_DEVICE_INLINE, fail_alloc, limit);
}

/* A session that opens, or NULL with its message in why (the load failed; the session is
 * destroyed). */
static mx_session *try_open_llama(mx_device *dev, bool private_weights, char *why, size_t cap) {
  mx_session *s = session_on(dev, 4, private_weights);
  mx_error err;
  mx_graph *g;
  cr_assert_eq(mx_model_llama(NULL, &g, &err), MX_OK, "%s", err.message);
  if (mx_session_load_graph(s, g) == MX_OK) return s;
  snprintf(why, cap, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
  return NULL;
}

/* Every allocation of a second session's load failing in turn: the load fails with the device
 * out of memory, gives back every hold it took on the first session's blocks, and the first
 * session decodes on, exactly. */
Test(shared_weights, a_failed_second_load_gives_back_its_holds) {
  mx_device *probe = new_device_with(0, 0);
  mx_session *a = open_llama(probe, 1, 4, false);
  const uint64_t first = mem(probe).allocations;
  mx_session *b = open_llama(probe, 1, 4, false);
  const uint64_t second = mem(probe).allocations - first;
  mx_session_destroy(b);
  mx_session_destroy(a);
  mx_device_destroy(probe);
  cr_assert_gt(second, 0);
  for (uint64_t k = 1; k <= second; k++) {
    mx_device *dev = new_device_with(first + k, 0);
    a = open_llama(dev, 1, 4, false);
    const mx_device_memory_stats one = mem(dev);
    char why[MX_ERROR_MESSAGE_MAX];
    cr_assert_null(try_open_llama(dev, false, why, sizeof why),
                   "allocation %llu of the second load should fail", (unsigned long long)k);
    cr_assert(strstr(why, "injected fault"), "allocation %llu: %s", (unsigned long long)k, why);
    const mx_device_memory_stats after = mem(dev);
    cr_assert_eq(after.shared_blocks, one.shared_blocks, "allocation %llu", (unsigned long long)k);
    cr_assert_eq(after.bytes_in_use, one.bytes_in_use, "allocation %llu: the failed load left memory behind",
                 (unsigned long long)k);
    cr_assert_eq(after.live, one.live, "allocation %llu", (unsigned long long)k);
    decoder d;
    decoder_init(&d, a, 1);
    decoder_steps(&d, 2);
    decoder_fini(&d);
    mx_session_destroy(a);
    const mx_device_memory_stats end = mem(dev);
    cr_assert_eq(end.shared_blocks, 0, "allocation %llu: a hold was never given back", (unsigned long long)k);
    cr_assert_eq(end.bytes_in_use, 0, "allocation %llu", (unsigned long long)k);
    mx_device_destroy(dev);
  }
}

/* Under a memory limit that holds one session's weights but not two, a second sharing session
 * loads and a private one is refused for lack of device memory, naming it. */
Test(shared_weights, sharing_fits_a_second_session_into_a_memory_limit) {
  mx_device *probe = new_device_with(0, 0);
  mx_session *a = open_llama(probe, 1, 4, false);
  const mx_device_memory_stats one = mem(probe);
  mx_session_destroy(a);
  mx_device_destroy(probe);
  /* Room for two sessions' memory apart from the weights, and a little more, but not for a
   * second copy of the weights. */
  const uint64_t limit = 2 * one.peak_bytes - one.shared_bytes + one.shared_bytes / 4;
  cr_assert_lt(limit, 2 * one.peak_bytes);
  mx_device *dev = new_device_with(0, limit);
  a = open_llama(dev, 1, 4, false);
  char why[MX_ERROR_MESSAGE_MAX];
  cr_assert_null(try_open_llama(dev, true, why, sizeof why), "a private copy of the weights does not fit");
  cr_assert(strstr(why, "memory limit"), "%s", why);
  mx_session *b = try_open_llama(dev, false, why, sizeof why);
  cr_assert_not_null(b, "the sharing session fits: %s", why);
  decoder d;
  decoder_init(&d, b, 1);
  decoder_steps(&d, 3);
  decoder_fini(&d);
  mx_session_destroy(b);
  mx_session_destroy(a);
  cr_assert_eq(mem(dev).bytes_in_use, 0);
  mx_device_destroy(dev);
}
