/* Element-type template of the pooling core, included by kernels/pool.c once per type with PT
 * (float or double) and PT_FN(name) (the name with a type suffix) defined.
 *
 * Every output position visits its window's taps; taps outside the image are skipped (max,
 * average, Lp) and counted for AveragePool's count_include_pad divisor when they fall inside
 * the explicit padding. Sums accumulate in double. */

static void PT_FN(pool_all)(const pool_plan *pl, const PT *x, PT *y, int64_t *idx) {
  const mx_kwin *w = &pl->w;
  const int op = pl->op;
  for (int64_t pi = 0; pi < pl->planes; pi++) {
    const PT *xp = x + pi * w->img_size;
    PT *yp = y + pi * w->grid_size;
    int64_t *ip = idx ? idx + pi * w->grid_size : NULL;
    int64_t o = 0;
    for (int64_t od = 0; od < w->grid[0]; od++)
      for (int64_t oh = 0; oh < w->grid[1]; oh++)
        for (int64_t ow = 0; ow < w->grid[2]; ow++, o++) {
          PT best = 0;
          int64_t best_at = -1;
          double sum = 0.0;
          int64_t valid = 0, padded = 0;
          for (int64_t kd = 0; kd < w->k[0]; kd++) {
            int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
            if (id >= w->img[0] + w->pe[0]) break;
            bool in_d = id >= 0 && id < w->img[0];
            for (int64_t kh = 0; kh < w->k[1]; kh++) {
              int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
              if (ih >= w->img[1] + w->pe[1]) break;
              bool in_h = in_d && ih >= 0 && ih < w->img[1];
              for (int64_t kw = 0; kw < w->k[2]; kw++) {
                int64_t iw = ow * w->s[2] - w->pb[2] + kw * w->d[2];
                if (iw >= w->img[2] + w->pe[2]) break;
                padded++;
                if (!in_h || iw < 0 || iw >= w->img[2]) continue;
                int64_t at = (id * w->img[1] + ih) * w->img[2] + iw;
                PT v = xp[at];
                valid++;
                if (op == MX_CONVOP_MAX_POOL) {
                  if (best_at < 0 || v > best) {
                    best = v;
                    best_at = pl->storage_order ? id + ih * w->img[0] + iw * w->img[0] * w->img[1] : at;
                  }
                } else if (op == MX_CONVOP_LP_POOL) {
                  double a = fabs((double)v);
                  sum += pl->p == 2.0 ? a * a : pl->p == 1.0 ? a : pow(a, pl->p);
                } else {
                  sum += (double)v;
                }
              }
            }
          }
          if (op == MX_CONVOP_MAX_POOL) {
            yp[o] = best_at >= 0 ? best : (PT)NAN;
            if (ip) ip[o] = best_at >= 0 ? pi * w->img_size + best_at : 0;
          } else if (op == MX_CONVOP_LP_POOL) {
            yp[o] = (PT)(pl->p == 2.0 ? sqrt(sum) : pl->p == 1.0 ? sum : pow(sum, 1.0 / pl->p));
          } else {
            int64_t div = pl->count_include_pad ? padded : valid;
            yp[o] = div ? (PT)(sum / (double)div) : (PT)NAN;
          }
        }
  }
}
