/* .mxm files of partitioned models: save from a session, load into a new one (no compile work),
 * identical results; truncated and corrupted files are rejected with a message, never run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/models.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/mxm_info.h"
#include "static_exec/static_exec.h"
#include "static_exec/static_exec_impl.h"
#include "support/onnx_node.h"
#include "v2runtime/session/session_support.h"

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
    mx_session *b =
        mxs_new_session(variant ? 2 : 1, variant ? MX_EXECUTOR_TOPOLOGICAL : MX_EXECUTOR_SEQUENTIAL, 4);
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
    if (which == 0)
      cr_assert_eq(mx_model_moe(NULL, &g, &err), MX_OK);
    else
      cr_assert_eq(mx_model_encoder(NULL, &g, &err), MX_OK);
    mx_session *a = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4),
               *b = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
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
 * the static plans and the weights section (so checksums are right and only the execution graphs
 * are wrong). */
static void rewrite_runtime(const char *good, const char *bad, void (*edit)(Mxm__Runtime *rt, void *tmp)) {
  unsigned char *d;
  size_t size;
  mx_error err;
  cr_assert_eq(mx__mxm_map_file(good, &d, &size, &err), MX_OK, "%s", err.message);
  Mxm__ModelFile *mf;
  const unsigned char *sec;
  uint64_t sec_size, sec_checksum;
  cr_assert_eq(mx__mxm_parse_sections(d, size, &mf, &sec, &sec_size, &sec_checksum, NULL, &err), MX_OK, "%s",
               err.message);
  Mxm__Runtime *rt = mxm__runtime__unpack(NULL, mf->runtime.len, mf->runtime.data);
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
  ProtobufCBinaryData keep_rt = mf->runtime;
  mf->runtime.data = packed;
  mf->runtime.len = n;
  size_t psz = mxm__model_file__get_packed_size(mf);
  uint8_t *payload = malloc(psz);
  mxm__model_file__pack(mf, payload);
  mf->runtime = keep_rt;
  /* The header with the new payload, the section after it on the next page. */
  uint32_t hsz = (uint32_t)d[12] | (uint32_t)d[13] << 8 | (uint32_t)d[14] << 16 | (uint32_t)d[15] << 24;
  Mxm__FileHeader *h = mxm__file_header__unpack(NULL, hsz, d + 24);
  cr_assert(h);
  h->payload_size = psz;
  h->payload_checksum = mx__mxm_checksum(payload, psz);
  size_t nh = mxm__file_header__get_packed_size(h);
  if (sec_size) h->weights_offset = (24 + nh + psz + 4095) & ~(uint64_t)4095;
  uint8_t *hb = malloc(24 + nh);
  memcpy(hb, d, 12);
  for (int i = 0; i < 4; i++) hb[12 + i] = (uint8_t)(nh >> (8 * i));
  mxm__file_header__pack(h, hb + 24);
  uint64_t hc = mx__mxm_checksum(hb + 24, nh);
  for (int i = 0; i < 8; i++) hb[16 + i] = (uint8_t)(hc >> (8 * i));
  FILE *f = fopen(bad, "wb");
  cr_assert(f);
  cr_assert_eq(fwrite(hb, 1, 24 + nh, f), 24 + nh);
  cr_assert_eq(fwrite(payload, 1, psz, f), psz);
  if (sec_size) {
    for (uint64_t at = 24 + nh + psz; at < h->weights_offset; at++) fputc(0, f);
    cr_assert_eq(fwrite(sec, 1, sec_size, f), sec_size);
  }
  cr_assert_eq(fclose(f), 0);
  free(hb);
  mxm__file_header__free_unpacked(h, NULL);
  free(payload);
  free(packed);
  mxm__runtime__free_unpacked(rt, NULL);
  mxm__model_file__free_unpacked(mf, NULL);
  mx__mxm_unmap(d, size);
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

/* An edit of a saved runtime record, and words the refusal of the edited file must contain. */
typedef struct edit_case {
  void (*edit)(Mxm__Runtime *rt, void *tmp);
  const char *says;
} edit_case;

/* The default llama step in a session, saved to `good`; `bad` is a second temporary path (both
 * 80 bytes). */
static mx_session *saved_llama(char *good, char *bad) {
  mx_session *a = llama_session();
  snprintf(good, 80, "%s", temp_path());
  snprintf(bad, 80, "%s", temp_path());
  cr_assert_eq(mx_session_save(a, good, NULL), MX_OK, "%s", mx_session_last_error(a));
  return a;
}

/* Each case's edit of `good` written to `bad` is refused by session a with MX_ERR_MALFORMED, its
 * words and the file's name. */
static void expect_refusals(mx_session *a, const char *good, const char *bad, const edit_case *cases,
                            size_t n) {
  for (size_t i = 0; i < n; i++) {
    rewrite_runtime(good, bad, cases[i].edit);
    cr_assert_eq(mx_session_load_file(a, bad), MX_ERR_MALFORMED, "case %zu: %s", i, mx_session_last_error(a));
    cr_assert(strstr(mx_session_last_error(a), cases[i].says), "case %zu: %s", i, mx_session_last_error(a));
    cr_assert(strstr(mx_session_last_error(a), bad), "the message names the file: %s",
              mx_session_last_error(a));
  }
}

Test(mxm, misplaced_lifecycle_kernels_are_rejected) {
  char good[80], bad[80];
  mx_session *a = saved_llama(good, bad);
  const edit_case cases[] = {
      {create_twice, "(StaticModelCreate): made a second time for the same partition call"},
      {create_in_main, "(DynExecCreate): this kernel has no place in the Main graph"},
      {destroy_in_main, "(StaticModelDestroy): this kernel has no place in the Main graph"},
      {upload_twice, "(UploadConstant): made a second time for the same constant"},
      {create_the_wrong_call, "made a second time for the same partition call"},
  };
  expect_refusals(a, good, bad, cases, sizeof cases / sizeof cases[0]);
  /* The unchanged record still loads and runs. */
  rewrite_runtime(good, bad, NULL);
  cr_assert_eq(mx_session_load_file(a, bad), MX_OK, "%s", mx_session_last_error(a));
  unlink(bad);
  unlink(good);
  mx_session_destroy(a);
}

/* --- the Main graph as a whole (v2runtime/mxm_main_check.c) ---------------------------------- */

/* Room for edited copies of a Main graph (static: the edits outlive the edit function until
 * rewrite_runtime packs the record). */
#define EDIT_CAP 4096
static Mxm__ExeNode *edit_nodes[EDIT_CAP];
static Mxm__ExeNode edit_copy[4];
static uint32_t edit_from[EDIT_CAP], edit_to[EDIT_CAP], edit_inputs[4][8];

/* Makes g's node and edge arrays editable copies (the originals stay for freeing). */
static void editable(Mxm__ExeGraph *g) {
  cr_assert_lt(g->n_nodes, EDIT_CAP);
  cr_assert_lt(g->n_edge_from, EDIT_CAP);
  memcpy(edit_nodes, g->nodes, g->n_nodes * sizeof *edit_nodes);
  memcpy(edit_from, g->edge_from, g->n_edge_from * sizeof *edit_from);
  memcpy(edit_to, g->edge_to, g->n_edge_to * sizeof *edit_to);
  g->nodes = edit_nodes;
  g->edge_from = edit_from;
  g->edge_to = edit_to;
}

/* Replaces node i by an editable copy (copy slot k) and returns it. */
static Mxm__ExeNode *edit_node(Mxm__ExeGraph *g, size_t i, int k) {
  edit_copy[k] = *g->nodes[i];
  g->nodes[i] = &edit_copy[k];
  return &edit_copy[k];
}

/* Drops every stored edge into node `to` (data edges come back from the slots at load). */
static void drop_edges_into(Mxm__ExeGraph *g, size_t to) {
  size_t n = 0;
  for (size_t e = 0; e < g->n_edge_from; e++)
    if (g->edge_to[e] != to) {
      g->edge_from[n] = g->edge_from[e];
      g->edge_to[n++] = g->edge_to[e];
    }
  g->n_edge_from = g->n_edge_to = n;
}

static void add_edge(Mxm__ExeGraph *g, uint32_t from, uint32_t to) {
  cr_assert_lt(g->n_edge_from, EDIT_CAP);
  g->edge_from[g->n_edge_from] = from;
  g->edge_to[g->n_edge_from] = to;
  g->n_edge_from = ++g->n_edge_to;
}

/* The index of the last node of g running `kernel`. */
static size_t last_node_of(const Mxm__ExeGraph *g, const char *kernel) {
  for (size_t i = g->n_nodes; i-- > 0;)
    if (strcmp(g->nodes[i]->kernel, kernel) == 0) return i;
  cr_assert_fail("no %s node", kernel);
  return 0;
}

/* A FreeValue node of g with a stored edge from a node other than its value's producer: the
 * value's last reader. Returns the FreeValue node, *reader the reader. */
static size_t free_with_reader(const Mxm__ExeGraph *g, uint32_t *reader) {
  for (size_t e = 0; e < g->n_edge_from; e++) {
    uint32_t f = g->edge_to[e], r = g->edge_from[e];
    if (strcmp(g->nodes[f]->kernel, "FreeValue") != 0) continue;
    const char *rk = g->nodes[r]->kernel;
    /* The producer writes the value's slot; a reader reads it or ends a call reading it. */
    bool writes = false;
    for (size_t j = 0; j < g->nodes[r]->n_outputs; j++)
      writes = writes || g->nodes[r]->outputs[j] == g->nodes[f]->inputs[0];
    if (!writes && (strcmp(rk, "StaticModelExecute") == 0 || strcmp(rk, "DynStepEnd") == 0)) {
      *reader = r;
      return f;
    }
  }
  cr_assert_fail("no FreeValue after a reader");
  return 0;
}

/* The last static call's StaticModelUpdateArgs keeps only its handle and allocation token: no
 * edge from the calls producing its inputs. */
static void args_before_inputs(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  size_t i = last_node_of(g, "StaticModelUpdateArgs");
  Mxm__ExeNode *n = edit_node(g, i, 0);
  cr_assert_gt(n->n_inputs, 2);
  n->n_inputs = 2;
  drop_edges_into(g, i);
}

/* A FreeValue without the edges from its value's readers. */
static void free_before_reader(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  uint32_t reader;
  drop_edges_into(g, free_with_reader(g, &reader));
}

/* A second StaticModelExecute of the same call (on a slot of its own, so only the check sees it). */
static void execute_twice(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  size_t i = last_node_of(g, "StaticModelExecute");
  edit_copy[0] = *g->nodes[i];
  edit_inputs[0][0] = rt->n_slots++;
  edit_copy[0].n_outputs = 1;
  edit_copy[0].outputs = edit_inputs[0];
  g->nodes[g->n_nodes++] = &edit_copy[0];
}

/* Removes node i (its edges with it; later nodes move down one). */
static void remove_node(Mxm__ExeGraph *g, size_t i) {
  memmove(&g->nodes[i], &g->nodes[i + 1], (g->n_nodes - i - 1) * sizeof *g->nodes);
  g->n_nodes--;
  size_t n = 0;
  for (size_t e = 0; e < g->n_edge_from; e++) {
    if (g->edge_from[e] == i || g->edge_to[e] == i) continue;
    g->edge_from[n] = g->edge_from[e] - (g->edge_from[e] > i);
    g->edge_to[n++] = g->edge_to[e] - (g->edge_to[e] > i);
  }
  g->n_edge_from = g->n_edge_to = n;
}

/* A static call whose StaticModelExecute is gone: its outputs would keep the last step's data. */
static void execute_missing(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  editable(rt->main);
  remove_node(rt->main, last_node_of(rt->main, "StaticModelExecute"));
}

/* A static call's StaticModelExecute renamed to its StaticAllocOutputs: that role twice. */
static void alloc_twice(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  Mxm__ExeNode *n = edit_node(g, last_node_of(g, "StaticModelExecute"), 0);
  n->kernel = (char *)"StaticAllocOutputs";
}

/* A dynamic op's Launch reading a slot nothing writes: nothing orders it after its InferShape. */
static void launch_before_infer(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  size_t i = last_node_of(g, "Launch");
  Mxm__ExeNode *n = edit_node(g, i, 0);
  edit_inputs[0][0] = rt->n_slots++;
  n->n_inputs = 1;
  n->inputs = edit_inputs[0];
  drop_edges_into(g, i);
}

/* A device op run as a host op. */
static void launch_as_host(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  Mxm__ExeNode *n = edit_node(g, last_node_of(g, "Launch"), 0);
  n->kernel = (char *)"HostCompute";
}

/* A FreeValue ordered after its reader through another FreeValue (no direct edge): valid. */
static void free_after_reader_through_another(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  uint32_t reader;
  size_t f = free_with_reader(g, &reader);
  size_t other = last_node_of(g, "FreeValue");
  if (other == f) other = node_of(g, "FreeValue");
  cr_assert_neq(other, f);
  drop_edges_into(g, f);
  add_edge(g, reader, (uint32_t)other);
  add_edge(g, (uint32_t)other, (uint32_t)f);
}

/* A FreeValue whose only stored edge comes from a FeedInput (which nothing precedes): not
 * direct, and no path from the reader either. */
static void free_after_unrelated_node(Mxm__Runtime *rt, void *tmp) {
  (void)tmp;
  Mxm__ExeGraph *g = rt->main;
  editable(g);
  uint32_t reader;
  size_t f = free_with_reader(g, &reader);
  drop_edges_into(g, f);
  add_edge(g, (uint32_t)node_of(g, "FeedInput"), (uint32_t)f);
}

Test(mxm, main_graph_roles_and_order_are_checked) {
  char good[80], bad[80];
  mx_session *a = saved_llama(good, bad);
  const edit_case cases[] = {
      {args_before_inputs, "does not order StaticModelUpdateArgs of partition"},
      {free_before_reader, "which reads"},
      {launch_before_infer, "does not order Launch of op"},
      {execute_twice, "runs StaticModelExecute of partition"},
      {execute_missing, "never runs StaticModelExecute of partition"},
      {alloc_twice, "runs StaticAllocOutputs of partition"},
      {launch_as_host, "which is a device op"},
      {free_after_unrelated_node, "which reads"},
  };
  expect_refusals(a, good, bad, cases, sizeof cases / sizeof cases[0]);
  /* An order through another node is an order: the file loads and decodes like the original. */
  rewrite_runtime(good, bad, free_after_reader_through_another);
  mx_session *b = mxs_new_session(1, MX_EXECUTOR_TOPOLOGICAL, 4);
  cr_assert_eq(mx_session_load_file(b, bad), MX_OK, "%s", mx_session_last_error(b));
  cr_assert_eq(mx_session_load_file(a, good), MX_OK, "%s", mx_session_last_error(a));
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  same_decode(a, b, &cfg, 4);
  mx_session_destroy(b);
  unlink(bad);
  unlink(good);
  mx_session_destroy(a);
}
