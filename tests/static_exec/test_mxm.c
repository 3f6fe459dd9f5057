/* .mxm files: a round trip (inline and external weights, several plans per file) gives the same
 * results bit for bit; every truncation and every single flipped byte of a file is rejected
 * with MX_ERR_MALFORMED naming the file; a file asking for a newer reader is refused; crafted
 * plans with bad indices, ranges or params are refused by the load checks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/static_exec_impl.h"
#include "support/onnx_node.h"
#include "support_static.h"

static mx_graph *small_block(void) {
  mxt_block_config cfg = mxt_block_default();
  cfg.seq = 8;
  cfg.hidden = 32;
  cfg.ffn = 64;
  mx_graph *g;
  cr_assert_eq(mxt_block_build(&cfg, &g), MX_OK);
  return g;
}

/* Compiles g (default options) into *p and saves it to a malloc'd in-memory image of *n bytes
 * (free it). */
static unsigned char *compiled_image(mx_graph *g, mx_static_plan **p, size_t *n) {
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, p, &err), MX_OK);
  unsigned char *img;
  cr_assert_eq(mx__mxm_save_memory(*p, (void **)&img, n, &err), MX_OK);
  return img;
}

/* Runs plan p on seeded inputs; returns outputs (host, caller releases). */
static void run_plan(mx_device *dev, const mx_static_plan *p, const mx_graph *g, mx_tensor *out) {
  mx_static_model *m;
  mx_error err;
  cr_assert_eq(mx__static_model_create(dev, p, NULL, &m, &err), MX_OK, "%s", err.message);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  mx_tensor in[4];
  cr_assert_eq(st_random_inputs(g, 5, in), MX_OK);
  char why[256];
  cr_assert_eq(st_run_device(m, s, in, out, why, sizeof why), MX_OK, "%s", why);
  for (size_t i = 0; i < mx_graph_input_count(g); i++) mx_tensor_release(&in[i]);
  mx_stream_destroy(s);
  mx__static_model_destroy(m);
}

static char *temp_path(const char *leaf) {
  char *p = malloc(512);
  snprintf(p, 512, "%s/mixrt_test_%d_%s", P_tmpdir, (int)getpid(), leaf);
  return p;
}

static void round_trip(bool external) {
  mx_graph *g = small_block();
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  mx_static_options o;
  mx__static_options_init(&o);
  o.max_streams = 2;
  mx_static_plan *p, *q;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_OK, "%s", err.message);
  char *path = temp_path(external ? "ext.mxm" : "inline.mxm");
  mx_mxm_save_options so = {.external_weights = external};
  cr_assert_eq(mx__mxm_save(p, path, &so, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx__mxm_load(path, &q, &err), MX_OK, "%s", err.message);
  mx_static_report a, b;
  mx__static_plan_report(p, &a);
  mx__static_plan_report(q, &b);
  cr_assert_eq(a.fm_bytes, b.fm_bytes);
  cr_assert_eq(a.tasks, b.tasks);
  cr_assert_eq(a.events, b.events);
  cr_assert_eq(a.weight_bytes, b.weight_bytes);
  mx_tensor x[1], y[1];
  run_plan(dev, p, g, x);
  run_plan(dev, q, g, y);
  char why[256];
  cr_assert(st_same_bits(&x[0], &y[0], why, sizeof why), "%s", why);
  mx_tensor_release(&x[0]);
  mx_tensor_release(&y[0]);
  if (external) {
    /* A damaged side file is refused. */
    char wpath[600];
    snprintf(wpath, sizeof wpath, "%s.weights", path);
    FILE *f = fopen(wpath, "r+b");
    cr_assert(f);
    fseek(f, 100, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    mx_static_plan *bad = NULL;
    cr_assert_eq(mx__mxm_load(path, &bad, &err), MX_ERR_MALFORMED);
    cr_assert(strstr(err.message, path), "%s", err.message);
    remove(wpath);
  }
  remove(path);
  free(path);
  mx__static_plan_destroy(q);
  mx__static_plan_destroy(p);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}

Test(static_mxm, round_trip_inline) { round_trip(false); }
Test(static_mxm, round_trip_external_weights) { round_trip(true); }

Test(static_mxm, several_plans) {
  mx_graph *g = small_block();
  mx_static_plan *p[2];
  mx_error err;
  mx_static_options o;
  mx__static_options_init(&o);
  cr_assert_eq(mx__static_compile(g, &o, &p[0], &err), MX_OK);
  o.max_streams = 4;
  o.name = "second";
  cr_assert_eq(mx__static_compile(g, &o, &p[1], &err), MX_OK);
  char *path = temp_path("two.mxm");
  cr_assert_eq(mx__mxm_save_plans((const mx_static_plan *const *)p, 2, path, NULL, &err), MX_OK, "%s",
               err.message);
  mx_static_plan **q;
  size_t n;
  cr_assert_eq(mx__mxm_load_plans(path, &q, &n, &err), MX_OK, "%s", err.message);
  cr_assert_eq(n, 2);
  cr_assert_str_eq(mx__static_plan_name(q[1]), "second");
  mx_static_plan *one;
  cr_assert_eq(mx__mxm_load(path, &one, &err), MX_ERR_UNSUPPORTED);
  for (size_t i = 0; i < n; i++) mx__static_plan_destroy(q[i]);
  free(q);
  remove(path);
  free(path);
  mx__static_plan_destroy(p[0]);
  mx__static_plan_destroy(p[1]);
  mx_graph_destroy(g);
}

Test(static_mxm, truncated_and_flipped_files_are_rejected) {
  mx_graph *g;
  mxt_block_config cfg = mxt_block_default();
  cfg.seq = 4;
  cfg.hidden = 8;
  cfg.heads = 2;
  cfg.ffn = 8;
  cr_assert_eq(mxt_block_build(&cfg, &g), MX_OK);
  mx_static_plan *p;
  mx_error err;
  size_t n;
  unsigned char *img = compiled_image(g, &p, &n);
  mx_static_plan *q = NULL;
  cr_assert_eq(mx__mxm_load_memory(img, n, "good", &q, &err), MX_OK, "%s", err.message);
  mx__static_plan_destroy(q);
  for (size_t len = 0; len < n; len += 1 + len / 64) {
    q = NULL;
    cr_assert_eq(mx__mxm_load_memory(img, len, "cut", &q, &err), MX_ERR_MALFORMED, "truncated at %zu", len);
    cr_assert_null(q);
    cr_assert(strstr(err.message, "'cut'"), "%s", err.message);
  }
  for (size_t i = 0; i < n; i++) {
    img[i] ^= (unsigned char)(1u << (i % 8));
    q = NULL;
    mx_status st = mx__mxm_load_memory(img, n, "flipped", &q, &err);
    cr_assert_eq(st, MX_ERR_MALFORMED, "byte %zu flipped: %s", i, mx_status_name(st));
    cr_assert_null(q);
    img[i] ^= (unsigned char)(1u << (i % 8));
  }
  /* Trailing bytes are refused too. */
  unsigned char *longer = malloc(n + 1);
  memcpy(longer, img, n);
  longer[n] = 0;
  cr_assert_eq(mx__mxm_load_memory(longer, n + 1, "long", &q, &err), MX_ERR_MALFORMED);
  free(longer);
  /* The file form names the file. */
  char *path = temp_path("cut.mxm");
  FILE *f = fopen(path, "wb");
  fwrite(img, 1, n / 2, f);
  fclose(f);
  cr_assert_eq(mx__mxm_load(path, &q, &err), MX_ERR_MALFORMED);
  cr_assert(strstr(err.message, path), "%s", err.message);
  remove(path);
  free(path);
  free(img);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

/* Re-packs an image after `edit` changed its ModelFile, with valid checksums, so the load checks
 * (not the checksums) have to catch the damage. */
typedef void (*edit_fn)(Mxm__ModelFile *mf);

static mx_status load_edited(const unsigned char *img, size_t n, edit_fn edit, mx_error *err) {
  uint32_t hsz =
      (uint32_t)img[12] | (uint32_t)img[13] << 8 | (uint32_t)img[14] << 16 | (uint32_t)img[15] << 24;
  Mxm__FileHeader *h = mxm__file_header__unpack(NULL, hsz, img + 24);
  cr_assert(h);
  Mxm__ModelFile *mf = mxm__model_file__unpack(NULL, n - 24 - hsz, img + 24 + hsz);
  cr_assert(mf);
  edit(mf);
  size_t psz = mxm__model_file__get_packed_size(mf);
  unsigned char *pl = malloc(psz + 1);
  mxm__model_file__pack(mf, pl);
  h->payload_size = psz;
  h->payload_checksum = mx__mxm_checksum(pl, psz);
  size_t nh = mxm__file_header__get_packed_size(h);
  unsigned char *out = malloc(24 + nh + psz);
  memcpy(out, img, 12);
  out[12] = (unsigned char)nh;
  out[13] = (unsigned char)(nh >> 8);
  out[14] = (unsigned char)(nh >> 16);
  out[15] = (unsigned char)(nh >> 24);
  mxm__file_header__pack(h, out + 24);
  uint64_t hc = mx__mxm_checksum(out + 24, nh);
  for (int i = 0; i < 8; i++) out[16 + i] = (unsigned char)(hc >> (8 * i));
  memcpy(out + 24 + nh, pl, psz);
  mx_static_plan *q = NULL;
  mx_status st = mx__mxm_load_memory(out, 24 + nh + psz, "edited", &q, err);
  mx__static_plan_destroy(q);
  free(out);
  free(pl);
  mxm__model_file__free_unpacked(mf, NULL);
  mxm__file_header__free_unpacked(h, NULL);
  return st;
}

static Mxm__Task *first_kernel(Mxm__ModelFile *mf, const char *op) {
  Mxm__StaticPlan *sp = mf->static_plans[0];
  for (size_t t = 0; t < sp->n_tasks; t++)
    if (strcmp(sp->tasks[t]->op, op) == 0) return sp->tasks[t];
  cr_assert_fail("no %s task", op);
  return NULL;
}

static void e_nothing(Mxm__ModelFile *mf) { (void)mf; }
static void e_alloc_id(Mxm__ModelFile *mf) { first_kernel(mf, "MatMul")->tensors[0]->alloc_id = 99; }
static void e_offset(Mxm__ModelFile *mf) { first_kernel(mf, "MatMul")->tensors[1]->offset += 1u << 20; }
static void e_dims(Mxm__ModelFile *mf) { first_kernel(mf, "MatMul")->tensors[2]->dims[0] += 1; }
static void e_stream(Mxm__ModelFile *mf) { first_kernel(mf, "MatMul")->stream = 7; }
static void e_event(Mxm__ModelFile *mf) {
  Mxm__Task *t = first_kernel(mf, "MatMul");
  free(t->wait_events); /* free_unpacked releases the array with free() */
  t->wait_events = malloc(sizeof *t->wait_events);
  t->wait_events[0] = 5;
  t->n_wait_events = 1;
}
static void e_params(Mxm__ModelFile *mf) {
  Mxm__Task *t = first_kernel(mf, "Transpose");
  cr_assert_gt(t->params.len, 0);
  t->params.data[0] ^= 1;
}
static void e_perm(Mxm__ModelFile *mf) {
  Mxm__Task *t = first_kernel(mf, "Transpose");
  for (size_t a = 0; a < t->n_attributes; a++)
    if (strcmp(t->attributes[a]->name, "perm") == 0) t->attributes[a]->ints[0] = 9;
}
static void e_workspace(Mxm__ModelFile *mf) { first_kernel(mf, "Softmax")->workspace_size = 0; }
static void e_writes_weights(Mxm__ModelFile *mf) {
  Mxm__Task *t = first_kernel(mf, "Gelu");
  t->tensors[t->n_inputs]->alloc_id = 0;
  t->tensors[t->n_inputs]->offset = 0;
}
static void e_allocation(Mxm__ModelFile *mf) { mf->static_plans[0]->allocations[1]->size += 64; }
static void e_op(Mxm__ModelFile *mf) { first_kernel(mf, "MatMul")->op[5] = 'X'; }
static void e_weights(Mxm__ModelFile *mf) { mf->static_plans[0]->weights->size += 1; }
static void e_dtype(Mxm__ModelFile *mf) { first_kernel(mf, "Gelu")->tensors[0]->dtype = 7; }
/* A stored value of one entry on a tensor of many elements. */
static void e_values_count(Mxm__ModelFile *mf) {
  Mxm__TaskTensor *t = first_kernel(mf, "Transpose")->tensors[0];
  t->has_values = true;
  free(t->values); /* free_unpacked releases the array with free() */
  t->values = malloc(sizeof *t->values);
  t->values[0] = 3;
  t->n_values = 1;
}

Test(static_mxm, crafted_plans_are_rejected) {
  mx_graph *g = small_block();
  mx_static_plan *p;
  mx_error err;
  size_t n;
  unsigned char *img = compiled_image(g, &p, &n);
  cr_assert_eq(load_edited(img, n, e_nothing, &err), MX_OK, "%s", err.message);
  static const struct {
    const char *what;
    edit_fn fn;
  } edits[] = {{"alloc id", e_alloc_id},
               {"offset", e_offset},
               {"dims", e_dims},
               {"stream", e_stream},
               {"event", e_event},
               {"params", e_params},
               {"perm", e_perm},
               {"workspace", e_workspace},
               {"writes weights", e_writes_weights},
               {"allocation", e_allocation},
               {"op", e_op},
               {"weights", e_weights},
               {"dtype", e_dtype},
               {"stored value count", e_values_count}};
  for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
    mx_status st = load_edited(img, n, edits[k].fn, &err);
    cr_assert_eq(st, MX_ERR_MALFORMED, "%s: %s", edits[k].what, mx_status_name(st));
    cr_assert(strstr(err.message, "'edited'"), "%s", err.message);
  }
  free(img);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

Test(static_mxm, newer_reader_needed) {
  mx_graph *g = small_block();
  mx_static_plan *p;
  mx_error err;
  size_t n;
  unsigned char *img = compiled_image(g, &p, &n);
  uint32_t hsz = (uint32_t)img[12] | (uint32_t)img[13] << 8;
  Mxm__FileHeader *h = mxm__file_header__unpack(NULL, hsz, img + 24);
  h->min_reader_version = 99;
  size_t nh = mxm__file_header__get_packed_size(h);
  cr_assert_eq(nh, hsz);
  mxm__file_header__pack(h, img + 24);
  uint64_t hc = mx__mxm_checksum(img + 24, nh);
  for (int i = 0; i < 8; i++) img[16 + i] = (unsigned char)(hc >> (8 * i));
  mx_static_plan *q;
  cr_assert_eq(mx__mxm_load_memory(img, n, "future", &q, &err), MX_ERR_UNSUPPORTED);
  cr_assert(strstr(err.message, "newer"), "%s", err.message);
  mxm__file_header__free_unpacked(h, NULL);
  free(img);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

/* Places output 0 of the first `op` task at its input 0's alloc and offset plus `shift` bytes. */
static void put_output_over_input(Mxm__ModelFile *mf, const char *op, uint64_t shift) {
  Mxm__Task *t = first_kernel(mf, op);
  Mxm__TaskTensor *in = t->tensors[0], *out = t->tensors[t->n_inputs];
  cr_assert_eq(in->alloc_id, 1, "%s's input 0 is in the FM arena",
               op); /* so the output may be written there */
  out->alloc_id = in->alloc_id;
  out->offset = in->offset + shift;
}
static void e_transpose_in_place(Mxm__ModelFile *mf) { put_output_over_input(mf, "Transpose", 0); }
static void e_gelu_in_place(Mxm__ModelFile *mf) { put_output_over_input(mf, "Gelu", 0); }
static void e_gelu_shifted(Mxm__ModelFile *mf) { put_output_over_input(mf, "Gelu", 64); }
static void e_workspace_over_output(Mxm__ModelFile *mf) {
  Mxm__Task *t = first_kernel(mf, "Softmax");
  cr_assert_gt(t->workspace_size, 0);
  Mxm__TaskTensor *out = t->tensors[t->n_inputs];
  cr_assert_eq(out->alloc_id, 1);
  t->workspace_offset = out->offset - out->offset % 64;
}

/* A kernel's output may share bytes with no other tensor of its task, except an elementwise
 * op's output lying exactly over an input (in place); its workspace with none. */
Test(static_mxm, overlapping_task_tensors_are_rejected) {
  mx_graph *g = small_block();
  mx_static_plan *p;
  mx_error err;
  size_t n;
  unsigned char *img = compiled_image(g, &p, &n);
  static const struct {
    const char *what;
    edit_fn fn;
    const char *says; /* NULL: accepted */
  } edits[] = {{"Transpose over its input", e_transpose_in_place, "output 0 shares bytes with input 0"},
               {"Gelu exactly over its input", e_gelu_in_place, NULL},
               {"Gelu 64 bytes into its input", e_gelu_shifted, "output 0 shares bytes with input 0"},
               {"Softmax workspace over its output", e_workspace_over_output, "its workspace shares bytes"}};
  for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
    mx_status st = load_edited(img, n, edits[k].fn, &err);
    if (!edits[k].says) {
      cr_assert_eq(st, MX_OK, "%s: %s", edits[k].what, err.message);
      continue;
    }
    cr_assert_eq(st, MX_ERR_MALFORMED, "%s: %s", edits[k].what, mx_status_name(st));
    cr_assert(strstr(err.message, edits[k].says), "%s: %s", edits[k].what, err.message);
  }
  free(img);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

/* The copy of a repeated output made to write over its own source. */
static void e_copy_over_source(Mxm__ModelFile *mf) {
  Mxm__StaticPlan *sp = mf->static_plans[0];
  for (size_t t = 0; t < sp->n_tasks; t++) {
    Mxm__Task *task = sp->tasks[t];
    if (task->kind != MXM__TASK__KIND__COPY) continue;
    task->tensors[1]->alloc_id = task->tensors[0]->alloc_id;
    task->tensors[1]->offset = task->tensors[0]->offset;
    return;
  }
  cr_assert_fail("no copy task");
}

Test(static_mxm, copy_over_its_source_is_rejected) {
  /* y = Relu(x), returned twice: the second output is a copy of the first. */
  mx_graph *g;
  cr_assert_eq(mx_graph_create("twice", &g), MX_OK);
  mx_shape s = {2, {3, 5}};
  mx_value_id x, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Relu", &x, 1, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK);
  mx_static_plan *p;
  mx_error err;
  size_t n;
  unsigned char *img = compiled_image(g, &p, &n);
  cr_assert_eq(load_edited(img, n, e_nothing, &err), MX_OK, "%s", err.message);
  cr_assert_eq(load_edited(img, n, e_copy_over_source, &err), MX_ERR_MALFORMED);
  cr_assert(strstr(err.message, "a copy's source and destination share bytes"), "%s", err.message);
  free(img);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

/* Removes every event wait of the first task that has some: its inputs from another stream are
 * no longer ordered after their producers. */
static void e_drop_waits(Mxm__ModelFile *mf) {
  Mxm__StaticPlan *sp = mf->static_plans[0];
  for (size_t t = 0; t < sp->n_tasks; t++) {
    Mxm__Task *task = sp->tasks[t];
    if (!task->n_wait_events) continue;
    task->n_wait_events = 0;
    return;
  }
  cr_assert_fail("no task waits for an event");
}

static uint64_t tensor_bytes(const Mxm__TaskTensor *t) {
  uint64_t n = mx_dtype_size((mx_dtype)t->dtype);
  for (size_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->dims[d];
  return n;
}

/* Gives the first kernel on stream 1 that follows a kernel on stream 0 in the plan's order the
 * output bytes of that kernel (when they are as large), so two tasks that no event orders write
 * the same bytes. */
static void e_shared_output(Mxm__ModelFile *mf) {
  Mxm__StaticPlan *sp = mf->static_plans[0];
  Mxm__Task *zero = NULL;
  for (size_t t = 0; t < sp->n_tasks; t++) {
    Mxm__Task *task = sp->tasks[t];
    if (task->kind != MXM__TASK__KIND__KERNEL || task->n_tensors <= task->n_inputs) continue;
    Mxm__TaskTensor *out = task->tensors[task->n_inputs];
    if (out->alloc_id != 1) continue;
    if (task->stream == 0) zero = task;
    if (task->stream != 1 || !zero) continue;
    Mxm__TaskTensor *z = zero->tensors[zero->n_inputs];
    if (tensor_bytes(z) < tensor_bytes(out)) continue;
    out->offset = z->offset;
    return;
  }
  cr_assert_fail("no pair of kernels on streams 0 and 1 writing the FM arena");
}

/* On several streams, tasks that share bytes must be ordered by events: the compiled plan
 * passes; without a task's waits, or with a task on stream 1 writing over an output of stream
 * 0, it is refused with both tasks named. */
Test(static_mxm, unordered_tasks_on_two_streams_are_rejected) {
  mx_graph *g = small_block();
  mx_static_options o;
  mx__static_options_init(&o);
  o.max_streams = 2;
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_OK, "%s", err.message);
  mx_static_report r;
  mx__static_plan_report(p, &r);
  cr_assert_eq(r.streams, 2, "the block's Q/K/V branches use both streams");
  cr_assert_gt(r.cross_edges, 0);
  unsigned char *img;
  size_t n;
  cr_assert_eq(mx__mxm_save_memory(p, (void **)&img, &n, &err), MX_OK, "%s", err.message);
  cr_assert_eq(load_edited(img, n, e_nothing, &err), MX_OK, "%s", err.message);
  static const struct {
    const char *what;
    edit_fn fn;
  } edits[] = {{"a task without its waits", e_drop_waits},
               {"two streams writing the same bytes", e_shared_output}};
  for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
    mx_status st = load_edited(img, n, edits[k].fn, &err);
    cr_assert_eq(st, MX_ERR_MALFORMED, "%s: %s", edits[k].what, mx_status_name(st));
    cr_assert(strstr(err.message, "no event orders them"), "%s: %s", edits[k].what, err.message);
    cr_assert(strstr(err.message, "stream 0") && strstr(err.message, "stream 1"), "%s: %s", edits[k].what,
              err.message);
  }
  free(img);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

/* mx__plan_check_order on hand-made plans of three tasks over 64 bytes of the FM arena: task 0
 * (stream 0) writes them, task 1 (stream 1) reads them after waiting for task 0's event, task 2
 * (stream 0) writes them again. Without an event from task 1 to task 2 the write may overtake
 * the read; with it the plan is ordered. Then task 1 reading without its wait races with the
 * first write. On one stream the order is the plan's, but a task that reads before anything
 * wrote is still refused. */
typedef struct tiny_plan {
  mx_static_plan p;
  mx__ptask tasks[3];
  mx__ptensor t[3];
  uint32_t ev[2]; /* event ids: 0 recorded by task 0, 1 by task 1 */
} tiny_plan;

static void tiny_plan_init(tiny_plan *tp, bool event_1_to_2, bool task_1_waits) {
  memset(tp, 0, sizeof *tp);
  tp->p.name = "tiny";
  tp->p.n_streams = 2;
  tp->p.n_events = 2;
  tp->p.n_tasks = 3;
  tp->p.tasks = tp->tasks;
  tp->p.fm_bytes = 64;
  tp->ev[0] = 0, tp->ev[1] = 1;
  static const char *const names[3] = {"first write", "read", "second write"};
  for (int i = 0; i < 3; i++) {
    tp->t[i] = (mx__ptensor){
        .dtype = MX_FLOAT32, .rank = 1, .dims = {16}, .nbytes = 64, .alloc = MX__ID_FM, .n_values = -1};
    tp->tasks[i] = (mx__ptask){.kind = MX__TASK_KERNEL,
                               .name = names[i],
                               .op = "Relu",
                               .domain = "",
                               .stream = i == 1,
                               .t = &tp->t[i]};
    if (i == 1)
      tp->tasks[i].n_in = 1;
    else
      tp->tasks[i].n_out = 1;
  }
  tp->tasks[0].records = &tp->ev[0], tp->tasks[0].n_records = 1;
  if (task_1_waits) tp->tasks[1].waits = &tp->ev[0], tp->tasks[1].n_waits = 1;
  tp->tasks[1].records = &tp->ev[1], tp->tasks[1].n_records = 1;
  if (event_1_to_2) tp->tasks[2].waits = &tp->ev[1], tp->tasks[2].n_waits = 1;
}

Test(static_mxm, order_check_read_then_write_and_write_then_read) {
  tiny_plan tp;
  mx_error err;
  tiny_plan_init(&tp, true, true);
  cr_assert_eq(mx__plan_check_order(&tp.p, &err), MX_OK, "%s", err.message);
  tiny_plan_init(&tp, false, true);
  cr_assert_eq(mx__plan_check_order(&tp.p, &err), MX_ERR_MALFORMED);
  cr_assert(strstr(err.message, "tasks 1 ('read', stream 1) and 2 ('second write', stream 0)"), "%s",
            err.message);
  cr_assert(strstr(err.message, "bytes 0..64 of the FM region 1, the second writing"), "%s", err.message);
  tiny_plan_init(&tp, true, false);
  cr_assert_eq(mx__plan_check_order(&tp.p, &err), MX_ERR_MALFORMED);
  cr_assert(strstr(err.message, "tasks 0 ('first write', stream 0) and 1 ('read', stream 1)"), "%s",
            err.message);
  cr_assert(strstr(err.message, "the first writing"), "%s", err.message);
  /* On one stream the same three tasks run in order. */
  tiny_plan_init(&tp, false, false);
  tp.tasks[1].stream = 0;
  tp.p.n_streams = 1;
  cr_assert_eq(mx__plan_check_order(&tp.p, &err), MX_OK, "%s", err.message);
  /* ... but a read of bytes nothing wrote yet in the execution is refused on any stream count. */
  tp.tasks[0].n_in = 1, tp.tasks[0].n_out = 0;
  cr_assert_eq(mx__plan_check_order(&tp.p, &err), MX_ERR_MALFORMED);
  cr_assert(
      strstr(err.message,
             "task 0 ('first write') reads bytes 0..64 of the FM region 1, which no earlier task writes"),
      "%s", err.message);
}
