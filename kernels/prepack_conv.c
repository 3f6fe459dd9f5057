/* The pre-packed weights of a float32 Conv (mx_kernel_def.prepack of kernels/conv.c): W [M,
 * C/group, taps] in the own GEMM's row panels (mx__kgemm_f32_pre_a_pack), group after group, the
 * layout conv_fast.c packs into its workspace on every run when no pre-packed copy is given.
 * The panel height follows the plan a run makes for the pool's threads (a 7x7 map's narrow
 * products read 32-row panels, the others the register tile's 14 or 6): a run whose plan cuts
 * other panels (the pool resized since) packs per run as before. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/conv_winograd.h"
#include "kernels/gemm_f32.h"
#include "kernels/prepack.h"

/* The Conv of call as conv_fast.c runs it (data pointers as in call), or false when it is not a
 * float32 Conv the fast cores take. */
static bool conv_job(const mx_kernel_call *call, mx_kwin *w, mx_kconv_f32 *j) {
  const mx_conv_params *p = call->params;
  if (!p || call->n_in < 2 || call->n_out < 1) return false;
  const mx_ktensor *x = &call->t[0], *wt = &call->t[1], *y = &call->t[call->n_in];
  if (x->dtype != MX_FLOAT32 || wt->dtype != MX_FLOAT32 || y->dtype != MX_FLOAT32) return false;
  if (x->rank < 3 || wt->rank != x->rank || y->rank != x->rank || p->group < 1) return false;
  if (!mx__kwin_forward(p, x->rank - 2, x->dims + 2, y->dims + 2, wt->dims + 2, w)) return false;
  memset(j, 0, sizeof *j);
  j->w = w;
  j->n = x->dims[0];
  j->c = x->dims[1];
  j->m = wt->dims[0];
  j->group = p->group;
  j->x = x->data;
  j->wt = wt->data;
  j->y = y->data;
  if (j->c != wt->dims[1] * p->group || j->m % p->group || y->dims[1] != j->m || j->n < 1) return false;
  if (mx__ktensor_numel(x) == 0 || mx__ktensor_numel(wt) == 0 || mx__ktensor_numel(y) == 0) return false;
  return true;
}

static mx_kernel_prepack_layout conv_layout(const mx_kconv_f32 *j, int64_t kdim, int64_t mr) {
  mx_kernel_prepack_layout l = {{MX_KPREPACK_CONV_A, j->m, kdim, j->group * 256 + mr}};
  return l;
}

size_t mx__kconv_prepack(const mx_kernel_call *call, void *dst, mx_kernel_prepack_layout *layout) {
  mx_kwin w;
  mx_kconv_f32 j;
  if (!conv_job(call, &w, &j)) return 0;
  if (mx__kconv_wino_chosen(&w, j.n, j.c, j.m, j.group)) {
    /* the Winograd core reads the weights transformed (36 x M x C) in the GEMM's row panels */
    const int64_t wmr = mx__kconv_wino_mr();
    const size_t wbytes = mx__kprepack_block_bytes(mx__kconv_wino_packed_floats(j.m, j.c) * sizeof(float));
    *layout = (mx_kernel_prepack_layout){{MX_KPREPACK_CONV_WINO, j.m, j.c, wmr}};
    if (!dst) return wbytes;
    float *plain = malloc(mx__kconv_wino_u_floats(j.m, j.c) * sizeof(float)); /* at load, not per run */
    if (!plain) return 0;
    float *u = mx__kprepack_begin(dst, wbytes, call, 1, layout);
    mx__kconv_wino_transform_weights(j.wt, j.m, j.c, 0, j.m, plain);
    mx__kconv_wino_pack_weights(plain, j.m, j.c, wmr, 0, j.m, u);
    free(plain);
    return wbytes;
  }
  const int64_t mr = mx__kconv_f32_pre_mr(&j);
  if (mr <= 0 || mr >= 256) return 0;
  const int64_t mg = j.m / j.group, kdim = j.c / j.group * w.k_size;
  const size_t gsize = mx__kgemm_f32_pre_a_floats(mg, kdim, mr);
  const size_t bytes = mx__kprepack_block_bytes(gsize * (size_t)j.group * sizeof(float));
  *layout = conv_layout(&j, kdim, mr);
  if (!dst) return bytes;
  float *ap = mx__kprepack_begin(dst, bytes, call, 1, layout);
  for (int64_t g = 0; g < j.group; g++)
    mx__kgemm_f32_pre_a_pack(j.wt + g * mg * kdim, kdim, mg, kdim, mr, 0, mg, ap + (size_t)g * gsize);
  return bytes;
}

const float *mx__kconv_prepacked(const mx_kernel_call *call, const float *wt, int64_t *mr) {
  *mr = 0;
  const mx_kprepack_hdr *h = mx__kprepack_of(call, 1);
  if (!h || wt != call->t[1].data || h->layout.v[0] != MX_KPREPACK_CONV_A) return NULL;
  mx_kwin w;
  mx_kconv_f32 j;
  if (!conv_job(call, &w, &j)) return NULL;
  const int64_t kdim = j.c / j.group * w.k_size, panel = h->layout.v[3] % 256;
  mx_kernel_prepack_layout want = conv_layout(&j, kdim, panel);
  if (memcmp(&want, &h->layout, sizeof want) != 0) return NULL;
  *mr = panel;
  return mx__kprepack_data(h);
}
