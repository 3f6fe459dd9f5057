/* .mxm files of partitioned models: save from a session, load into a new one (no compile work),
 * identical results; truncated and corrupted files are rejected with a message, never run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/models.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/static_exec.h"
#include "session/session_support.h"
#include "support/onnx_node.h"

static char *temp_path(void) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/mixrt-test-%d-XXXXXX", (int)getpid());
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  return path;
}

/* Runs `steps` decode steps on two sessions side by side and expects identical outputs. */
static void same_decode(mx_session *a, mx_session *b, const mx_llama_config *cfg, int steps) {
  size_t n = mx_session_input_count(a);
  cr_assert_eq(n, mx_session_input_count(b));
  mx_tensor in[16] = {{0}};
  int64_t hd = cfg->hidden / cfg->heads;
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  for (size_t i = 1; i < n; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, cfg->kv_heads, 0, hd}, &in[i]), MX_OK);
  for (int k = 0; k < steps; k++) {
    ((int64_t *)in[0].data)[0] = (k * 7 + 3) % cfg->vocab;
    mx_tensor oa[16] = {{0}}, ob[16] = {{0}};
    cr_assert_eq(mx_session_run(a, in, n, oa, n), MX_OK, "%s", mx_session_last_error(a));
    cr_assert_eq(mx_session_run(b, in, n, ob, n), MX_OK, "%s", mx_session_last_error(b));
    for (size_t i = 0; i < n; i++) {
      char why[256];
      cr_assert(mxs_same(&ob[i], &oa[i], why, sizeof why), "step %d output %zu: %s", k, i, why);
    }
    for (size_t i = 1; i < n; i++) {
      mx_tensor_release(&in[i]);
      in[i] = oa[i];
      in[i].name = NULL;
      mx_tensor_release(&ob[i]);
    }
    mx_tensor_release(&oa[0]);
    mx_tensor_release(&ob[0]);
  }
  for (size_t i = 0; i < n; i++) mx_tensor_release(&in[i]);
}

Test(mxm, partitioned_llama_round_trip) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK);
  mx_session *a = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(a, g), MX_OK, "%s", mx_session_last_error(a));
  const char *path = temp_path();
  cr_assert_eq(mx_session_save(a, path, NULL), MX_OK, "%s", mx_session_last_error(a));
  for (int variant = 0; variant < 2; variant++) {
    mx_session *b = mxs_new_session(variant ? 2 : 1, variant ? MX_EXECUTOR_TOPOLOGICAL : MX_EXECUTOR_SEQUENTIAL, 4);
    cr_assert_eq(mx_session_load_file(b, path), MX_OK, "%s", mx_session_last_error(b));
    for (size_t i = 0; i < mx_session_output_count(a); i++) {
      mx_io_info ia, ib;
      cr_assert(mx_session_output_info(a, i, &ia) && mx_session_output_info(b, i, &ib));
      cr_assert_str_eq(ia.name, ib.name);
      cr_assert_str_eq(ia.shape, ib.shape, "output shapes keep their symbolic form");
    }
    same_decode(a, b, &cfg, 6);
    mx_session_destroy(b);
  }
  unlink(path);
  mx_session_destroy(a);
}

Test(mxm, moe_and_encoder_round_trip) {
  for (int which = 0; which < 2; which++) {
    mx_graph *g;
    mx_error err;
    if (which == 0) cr_assert_eq(mx_model_moe(NULL, &g, &err), MX_OK);
    else cr_assert_eq(mx_model_encoder(NULL, &g, &err), MX_OK);
    mx_session *a = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4), *b = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
    cr_assert_eq(mx_session_load_graph(a, g), MX_OK, "%s", mx_session_last_error(a));
    const char *path = temp_path();
    cr_assert_eq(mx_session_save(a, path, NULL), MX_OK, "%s", mx_session_last_error(a));
    cr_assert_eq(mx_session_load_file(b, path), MX_OK, "%s", mx_session_last_error(b));
    for (int k = 0; k < 3; k++) {
      mx_tensor x, ya = {0}, yb = {0};
      int64_t dims[3] = {which ? 2 : 3 + 4 * k, which ? 5 + k : 64, 64};
      cr_assert_eq(mxs_random_tensor(MX_FLOAT32, which ? 3 : 2, which ? dims : dims, 40 + k, &x), MX_OK);
      cr_assert_eq(mx_session_run(a, &x, 1, &ya, 1), MX_OK, "%s", mx_session_last_error(a));
      cr_assert_eq(mx_session_run(b, &x, 1, &yb, 1), MX_OK, "%s", mx_session_last_error(b));
      char why[256];
      cr_assert(mxs_same(&yb, &ya, why, sizeof why), "model %d step %d: %s", which, k, why);
      mx_tensor_release(&x);
      mx_tensor_release(&ya);
      mx_tensor_release(&yb);
    }
    unlink(path);
    mx_session_destroy(a);
    mx_session_destroy(b);
  }
}

/* A session with the default llama step loaded (1 stream, sequential executor). */
static mx_session *llama_session(void) {
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(NULL, &g, &err), MX_OK);
  mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

Test(mxm, damaged_files_are_rejected) {
  mx_session *a = llama_session();
  const char *path = temp_path();
  char good[80];
  snprintf(good, sizeof good, "%s", path);
  cr_assert_eq(mx_session_save(a, good, NULL), MX_OK, "%s", mx_session_last_error(a));
  unsigned char *data;
  size_t size;
  cr_assert(mxt_onnx_node_read_file(good, &data, &size));
  const char *bad = temp_path();
  size_t cuts[] = {9, 30, size / 3, size / 2, size - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    FILE *f = fopen(bad, "wb");
    fwrite(data, 1, cuts[i], f);
    fclose(f);
    cr_assert_neq(mx_session_load_file(a, bad), MX_OK, "truncated at %zu", cuts[i]);
    cr_assert(strstr(mx_session_last_error(a), bad), "%s", mx_session_last_error(a));
  }
  uint64_t rng = 7;
  for (int i = 0; i < 40; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    size_t at = 8 + (size_t)(rng >> 33) % (size - 8);
    data[at] ^= (unsigned char)(1u + (rng >> 20) % 255);
    FILE *f = fopen(bad, "wb");
    fwrite(data, 1, size, f);
    fclose(f);
    cr_assert_neq(mx_session_load_file(a, bad), MX_OK, "byte %zu flipped", at);
    data[at] ^= (unsigned char)(1u + (rng >> 20) % 255);
  }
  /* The session still loads and runs the good file. */
  cr_assert_eq(mx_session_load_file(a, good), MX_OK, "%s", mx_session_last_error(a));
  free(data);
  unlink(bad);
  unlink(good);
  mx_session_destroy(a);
}

/* Rewrites the runtime record of the .mxm at `good` into `bad` after edit(rt) changed it, keeping
 * the static plans (so checksums are right and only the execution graphs are wrong). */
static void rewrite_runtime(const char *good, const char *bad, void (*edit)(Mxm__Runtime *rt, void *tmp)) {
  mx_static_plan **plans;
  size_t n_plans, size;
  void *bytes;
  mx_error err;
  cr_assert_eq(mx_mxm_load_model(good, &plans, &n_plans, &bytes, &size, &err), MX_OK, "%s", err.message);
  Mxm__Runtime *rt = mxm__runtime__unpack(NULL, size, bytes);
  cr_assert(rt);
  /* The edit may swap in arrays of its own: keep the originals to free the message. */
  Mxm__ExeGraph keep_init = *rt->init, keep_main = *rt->main;
  void *tmp[64];
  if (edit) edit(rt, tmp);
  size_t n = mxm__runtime__get_packed_size(rt);
  uint8_t *packed = malloc(n);
  mxm__runtime__pack(rt, packed);
  *rt->init = keep_init;
  *rt->main = keep_main;
  cr_assert_eq(mx_mxm_save_model((const mx_static_plan *const *)plans, n_plans, packed, n, bad, NULL, &err), MX_OK,
               "%s", err.message);
  free(packed);
  mxm__runtime__free_unpacked(rt, NULL);
  free(bytes);
  for (size_t i = 0; i < n_plans; i++) mx_static_plan_destroy(plans[i]);
  free(plans);
}

/* The index of the first node of g running `kernel`. */
static size_t node_of(const Mxm__ExeGraph *g, const char *kernel) {
  for (size_t i = 0; i < g->n_nodes; i++)
    if (strcmp(g->nodes[i]->kernel, kernel) == 0) return i;
  cr_assert_fail("no %s node", kernel);
  return 0;
}

/* Appends node to g (through tmp, an array of 64 pointers the caller keeps alive). */
static void append_node(Mxm__ExeGraph *g, Mxm__ExeNode *node, void *tmp) {
  Mxm__ExeNode **nodes = tmp;
  cr_assert_lt(g->n_nodes, 64);
  memcpy(nodes, g->nodes, g->n_nodes * sizeof *nodes);
  nodes[g->n_nodes] = node;
  g->nodes = nodes;
  g->n_nodes++;
}

static void create_twice(Mxm__Runtime *rt, void *tmp) {
  append_node(rt->init, rt->init->nodes[node_of(rt->init, "StaticModelCreate")], tmp);
}

static void create_in_main(Mxm__Runtime *rt, void *tmp) {
  append_node(rt->main, rt->init->nodes[node_of(rt->init, "DynExecCreate")], tmp);
}

static void destroy_in_main(Mxm__Runtime *rt, void *tmp) {
  append_node(rt->main, rt->deinit->nodes[node_of(rt->deinit, "StaticModelDestroy")], tmp);
}

static void upload_twice(Mxm__Runtime *rt, void *tmp) {
  append_node(rt->init, rt->init->nodes[node_of(rt->init, "UploadConstant")], tmp);
}

/* A static model's create node pointed at the other static call: one call is created twice,
 * the other never. */
static void create_the_wrong_call(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  size_t first = node_of(rt->init, "StaticModelCreate");
  uint32_t calls[2];
  int found = 0;
  for (size_t i = 0; i < rt->init->n_nodes && found < 2; i++)
    if (strcmp(rt->init->nodes[i]->kernel, "StaticModelCreate") == 0)
      memcpy(&calls[found++], rt->init->nodes[i]->attr.data, sizeof calls[0]); /* mx_kattr starts with call */
  cr_assert_eq(found, 2);
  memcpy(rt->init->nodes[first]->attr.data, &calls[1], sizeof calls[1]);
}

Test(mxm, misplaced_lifecycle_kernels_are_rejected) {
  mx_session *a = llama_session();
  char good[80], bad[80];
  snprintf(good, sizeof good, "%s", temp_path());
  snprintf(bad, sizeof bad, "%s", temp_path());
  cr_assert_eq(mx_session_save(a, good, NULL), MX_OK, "%s", mx_session_last_error(a));
  struct {
    void (*edit)(Mxm__Runtime *, void *);
    const char *says;
  } cases[] = {
      {create_twice, "(StaticModelCreate): made a second time for the same partition call"},
      {create_in_main, "(DynExecCreate): this kernel has no place in the Main graph"},
      {destroy_in_main, "(StaticModelDestroy): this kernel has no place in the Main graph"},
      {upload_twice, "(UploadConstant): made a second time for the same constant"},
      {create_the_wrong_call, "made a second time for the same partition call"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rewrite_runtime(good, bad, cases[i].edit);
    cr_assert_eq(mx_session_load_file(a, bad), MX_ERR_MALFORMED, "case %zu: %s", i, mx_session_last_error(a));
    cr_assert(strstr(mx_session_last_error(a), cases[i].says), "case %zu: %s", i, mx_session_last_error(a));
    cr_assert(strstr(mx_session_last_error(a), bad), "the message names the file: %s", mx_session_last_error(a));
  }
  /* The unchanged record still loads and runs. */
  rewrite_runtime(good, bad, NULL);
  cr_assert_eq(mx_session_load_file(a, bad), MX_OK, "%s", mx_session_last_error(a));
  unlink(bad);
  unlink(good);
  mx_session_destroy(a);
}
