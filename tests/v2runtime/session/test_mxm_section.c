/* The weights section of .mxm files (format 2): a saved llama holds each weight once (file size
 * within 5% of the model's initializer bytes); a session restored from it on a host-memory
 * device uses the mapped weights in place (device memory well below the weights) and decodes as
 * the session that saved it; a file cut inside its weights section, or with a weights byte
 * changed, is refused naming the file, not read past its end. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/ir.h"
#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

static void temp_file(char *path, size_t cap) {
  snprintf(path, cap, "%s/mixrt_mxms_%d_XXXXXX", P_tmpdir, (int)getpid());
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
}

static uint64_t file_size(const char *path) {
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  return (uint64_t)sb.st_size;
}

/* Bytes of every constant of g (the initializers a model file must hold). */
static uint64_t constant_bytes(const mx_graph *g) {
  uint64_t total = 0;
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    size_t nb = 0;
    if ((val->flags & MX_VALUE_CONST) && !(val->flags & MX_VALUE_DEAD) && val->data &&
        mx_tensor_nbytes(val->data, &nb))
      total += nb;
  }
  return total;
}

static mx_device *host_device(void) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = MX_DEVICE_INLINE;
  o.fault_from_env = false;
  mx_device *dev;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK, "%s", err.message);
  return dev;
}

static mx_session *session_on(mx_device *dev) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device = dev;
  o.static_min_ops = 4;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}

static uint64_t device_bytes(const mx_device *dev) {
  mx_device_memory_stats st;
  mx_device_memory_stats_get(dev, &st);
  return st.bytes_in_use;
}

/* The "small" llama (14.5 MiB of weights) in a session on dev, saved to path; *weights receives
 * its initializer bytes. */
static mx_session *saved_small_llama(mx_device *dev, const char *path, uint64_t *weights) {
  mx_llama_config cfg;
  cr_assert(mx_llama_config_preset(&cfg, "small"));
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  *weights = constant_bytes(g);
  mx_session *a = session_on(dev);
  cr_assert_eq(mx_session_load_graph(a, g), MX_OK, "%s", mx_session_last_error(a));
  cr_assert_eq(mx_session_save(a, path, NULL), MX_OK, "%s", mx_session_last_error(a));
  return a;
}

/* Runs one decode step of the llama on s (token 3, empty cache); outputs into out[0..n). */
static void one_step(mx_session *s, mx_tensor *out, size_t n) {
  size_t ni = mx_session_input_count(s);
  cr_assert_leq(ni, 16);
  cr_assert_eq(ni, n);
  mx_tensor in[16] = {{0}};
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  ((int64_t *)in[0].data)[0] = 3;
  for (size_t i = 1; i < ni; i++) {
    int64_t dims[4] = {1, 4, 0, 64}; /* "small": 4 key/value heads of 64 */
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, dims, &in[i]), MX_OK);
  }
  cr_assert_eq(mx_session_run(s, in, ni, out, n), MX_OK, "%s", mx_session_last_error(s));
  for (size_t i = 0; i < ni; i++) mx_tensor_release(&in[i]);
}

Test(mxm_section, weights_stored_once_and_used_in_place) {
  char path[300];
  temp_file(path, sizeof path);
  mx_device *dev = host_device();
  uint64_t weights;
  mx_session *a = saved_small_llama(dev, path, &weights);
  uint64_t size = file_size(path);
  cr_assert_gt(weights, 10u << 20);
  cr_assert_leq((double)size / (double)weights, 1.05, "%llu-byte file for %llu bytes of weights",
                (unsigned long long)size, (unsigned long long)weights);

  /* Restored on a second host-memory device: the weights stay in the mapped file. */
  mx_device *dev2 = host_device();
  mx_session *b = session_on(dev2);
  cr_assert_eq(mx_session_load_file(b, path), MX_OK, "%s", mx_session_last_error(b));
  cr_assert_lt(device_bytes(dev2), weights / 4, "%llu device bytes after load",
               (unsigned long long)device_bytes(dev2));
  size_t n = mx_session_output_count(a);
  cr_assert_leq(n, 16);
  mx_tensor oa[16] = {{0}}, ob[16] = {{0}};
  one_step(a, oa, n);
  one_step(b, ob, n);
  for (size_t i = 0; i < n; i++) {
    char why[256];
    cr_assert(mxs_same(&ob[i], &oa[i], why, sizeof why), "output %zu: %s", i, why);
    mx_tensor_release(&oa[i]);
    mx_tensor_release(&ob[i]);
  }
  mx_session_destroy(b);
  mx_device_destroy(dev2);
  mx_session_destroy(a);
  mx_device_destroy(dev);
  unlink(path);
}

Test(mxm_section, cut_or_changed_section_is_refused) {
  char path[300];
  temp_file(path, sizeof path);
  mx_device *dev = host_device();
  uint64_t weights;
  mx_session *a = saved_small_llama(dev, path, &weights);
  uint64_t size = file_size(path);
  mx_session *b = session_on(dev);

  /* One weights byte changed (near the end of the file, inside the section). */
  FILE *f = fopen(path, "r+b");
  cr_assert(f);
  cr_assert_eq(fseek(f, (long)(size - 100), SEEK_SET), 0);
  int c = fgetc(f);
  cr_assert_eq(fseek(f, (long)(size - 100), SEEK_SET), 0);
  fputc(c ^ 0x41, f);
  cr_assert_eq(fclose(f), 0);
  cr_assert_eq(mx_session_load_file(b, path), MX_ERR_MALFORMED);
  cr_assert(
      strstr(mx_session_last_error(b), "weights section checksum") && strstr(mx_session_last_error(b), path),
      "%s", mx_session_last_error(b));

  /* Cut inside the section: refused by its recorded size before anything is read from it. */
  cr_assert_eq(truncate(path, (off_t)(size - size / 3)), 0);
  cr_assert_eq(mx_session_load_file(b, path), MX_ERR_MALFORMED);
  cr_assert(strstr(mx_session_last_error(b), "truncated") &&
                strstr(mx_session_last_error(b), "weights section") && strstr(mx_session_last_error(b), path),
            "%s", mx_session_last_error(b));
  /* Cut before the section: the payload is short too. */
  cr_assert_eq(truncate(path, 4096), 0);
  cr_assert_eq(mx_session_load_file(b, path), MX_ERR_MALFORMED);
  cr_assert(strstr(mx_session_last_error(b), "truncated"), "%s", mx_session_last_error(b));
  cr_assert_eq(mx_session_input_count(b), 0, "no model stays half loaded");
  mx_session_destroy(b);
  mx_session_destroy(a);
  mx_device_destroy(dev);
  unlink(path);
}
