/* The correctness check of `mixrt bench llm` at one point: one step of every system on the
 * point's inputs; each mixrt system's logits and presents against ONNX Runtime's (largest
 * absolute and relative differences), and hybrid / all-dynamic against the reference
 * interpreter bit for bit. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/llm/llm_impl.h"
#include "mixrt/reference.h"
#include "tools/cli.h"

/* Largest |a - b| and largest |b| over a pair of float tensors of the same shape. */
static bool tensor_diff(const mx_tensor *a, const mx_tensor *b, double *max_abs, double *max_mag) {
  if (a->dtype != MX_FLOAT32 || b->dtype != MX_FLOAT32 || a->rank != b->rank) return false;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  int64_t n = 0;
  mx_tensor_numel(a, &n);
  const float *x = a->data, *y = b->data;
  for (int64_t k = 0; k < n; k++) {
    double e = fabs((double)x[k] - (double)y[k]), m = fabs((double)y[k]);
    if (e > *max_abs || isnan(e)) *max_abs = isnan(e) ? INFINITY : e;
    if (m > *max_mag) *max_mag = m;
  }
  return true;
}

/* Compares out[0..n) (logits first, then presents) with ONNX Runtime's. */
static bool compare(const mx_tensor *out, const mx_tensor *ort, size_t n, diff *d) {
  double la = 0, lm = 0, pa = 0, pm = 0;
  if (!tensor_diff(&out[0], &ort[0], &la, &lm)) return false;
  for (size_t k = 1; k < n; k++)
    if (!tensor_diff(&out[k], &ort[k], &pa, &pm)) return false;
  d->have = true;
  d->logits_abs = la;
  d->logits_rel = lm > 0 ? la / lm : la;
  d->present_abs = pa;
  d->present_rel = pm > 0 ? pa / pm : pa;
  return true;
}

/* Correctness: one step of every system on `in`, compared. */
int mx__llm_check_point(bench_ctx *c, const mx_tensor *in, size_t n, point *pt) {
  mx_tensor outs[SYS_ORT][MAX_IO], ort[MAX_IO];
  bool have[SYS_ORT] = {false};
  char why[600];
  int rc = MX_EXIT_OK;
  memset(ort, 0, sizeof ort);
  for (int s = 0; s < SYS_ORT; s++) {
    if (!c->a->systems[s]) continue;
    if (mx__llm_run_mixrt(c, s, in, n, outs[s], true, why, sizeof why) != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s past %lld: %s", c->name, (long long)pt->past, why);
      goto release;
    }
    have[s] = true;
  }
  if (c->ort) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s-%lld-ort", c->dir, c->name, (long long)pt->past);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
      rc = mx_cli_runtime_error(CMD, "cannot create %s: %s", dir, strerror(errno));
      goto release;
    }
    if (!mx__llm_peer_call(c->p, "save %s %s", c->name, dir)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, %s past %lld: %s", c->name, (long long)pt->past,
                                c->p->line);
      goto release;
    }
    for (size_t k = 0; k < n; k++) {
      mx_io_info info;
      mx_session_output_info(c->sessions[0] ? c->sessions[0] : c->sessions[1], k, &info);
      char path[1300];
      mx_error err;
      snprintf(path, sizeof path, "%s/%s.npy", dir, info.name);
      if (mx_tensor_load_npy(path, &ort[k], &err) != MX_OK) {
        rc = mx_cli_runtime_error(CMD, "reading ONNX Runtime's output: %s", err.message);
        goto release;
      }
    }
    for (int s = 0; s < SYS_ORT; s++) {
      if (have[s] && !compare(outs[s], ort, n, &pt->to_ort[s])) {
        rc = mx_cli_runtime_error(CMD,
                                  "%s past %lld: %s gives outputs of another type or shape than ONNX Runtime",
                                  c->name, (long long)pt->past, sys_names[s]);
        goto release;
      }
    }
  }
  for (int s = 0; s < 2; s++) {
    pt->same_as_ref[s] = -1;
    if (!have[s] || !have[SYS_REFERENCE]) continue;
    bool same = true;
    for (size_t k = 0; k < n && same; k++)
      same = mx_tensor_allclose(&outs[s][k], &outs[SYS_REFERENCE][k], 0, 0, NULL, 0);
    pt->same_as_ref[s] = same;
  }
release:
  for (int s = 0; s < SYS_ORT; s++)
    if (have[s]) mx__llm_release_all(outs[s], n);
  mx__llm_release_all(ort, n);
  return rc;
}
