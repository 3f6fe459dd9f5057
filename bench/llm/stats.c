/* The statistics of `mixrt bench llm`: medians and quantiles of the samples, the round-by-round
 * comparison of two systems' blocks with its sign test, and the Mann-Whitney test --processes
 * uses to tell two systems' ratios apart from the machine's own spread. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/llm/llm_impl.h"
#include "tools/bench.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double mx__llm_median(const double *v, size_t n) {
  double *s = malloc((n ? n : 1) * sizeof *s);
  if (!s) return NAN;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) s[m++] = v[i];
  qsort(s, m, sizeof *s, cmp_double);
  double r = m == 0 ? NAN : m % 2 ? s[m / 2] : (s[m / 2 - 1] + s[m / 2]) / 2;
  free(s);
  return r;
}

/* Median of one block of samples, left in place (the quantile helper sorts). */
static double block_median(const uint64_t *block, int64_t steps, uint64_t *scratch) {
  memcpy(scratch, block, (size_t)steps * sizeof *block);
  return (double)mx_cli_quantile(scratch, (size_t)steps, 0.5);
}

double mx__llm_sign_test(int64_t k, int64_t n) {
  if (n <= 0) return 1.0;
  int64_t lo = k < n - k ? k : n - k;
  double tail = 0.0;
  for (int64_t i = 0; i <= lo; i++)
    tail += exp(lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) -
                (double)n * log(2.0));
  double p = 2.0 * tail;
  return p < 1.0 ? p : 1.0;
}

/* Compares the hybrid's block with the other system's block of the same round, round by round.
 * Without the scratch memory it reports nothing rather than fail the benchmark. */
round_pairs mx__llm_compare_rounds(const uint64_t *hybrid, const uint64_t *other, int64_t rounds,
                                   int64_t steps) {
  round_pairs rp = {0};
  uint64_t *scratch = malloc((size_t)steps * sizeof *scratch);
  double *ratio = malloc((size_t)rounds * sizeof *ratio);
  if (scratch && ratio) {
    for (int64_t r = 0; r < rounds; r++) {
      double h = block_median(hybrid + r * steps, steps, scratch);
      double o = block_median(other + r * steps, steps, scratch);
      ratio[r] = o > 0 ? h / o : 1.0;
      if (h < o) rp.hybrid_faster++;
    }
    rp.median_ratio = mx__llm_median(ratio, (size_t)rounds);
    rp.rounds = rounds;
    rp.sign_test_p = mx__llm_sign_test(rp.hybrid_faster, rounds);
    rp.have = true;
  }
  free(scratch);
  free(ratio);
  return rp;
}

timing mx__llm_summarize(uint64_t *samples, size_t n) {
  timing t = {.have = n > 0, .samples = n};
  t.median = (double)mx_cli_quantile(samples, n, 0.5) / 1e3;
  t.p10 = (double)mx_cli_quantile(samples, n, 0.1) / 1e3;
  t.p90 = (double)mx_cli_quantile(samples, n, 0.9) / 1e3;
  return t;
}

/* Two-sided Mann-Whitney test of whether the finite values of x[0..n) and y[0..n) come from
 * one distribution: exact (by counting the orders of the two samples) while both have at most
 * 20 values, the normal approximation beyond. Ties count a half. NAN with fewer than 2 each. */
double mx__llm_mann_whitney_p(const double *x, const double *y, int n) {
  int m1 = 0, m2 = 0;
  double u = 0.0; /* pairs with x above y */
  for (int i = 0; i < n; i++) {
    if (!isfinite(x[i])) continue;
    m1++;
    for (int j = 0; j < n; j++)
      if (isfinite(y[j])) u += x[i] > y[j] ? 1.0 : x[i] == y[j] ? 0.5 : 0.0;
  }
  for (int j = 0; j < n; j++) m2 += isfinite(y[j]);
  if (m1 < 2 || m2 < 2) return NAN;
  const int umax = m1 * m2;
  double p;
  if (m1 <= 20 && m2 <= 20) {
    /* ways[a][b][k]: orders of a x's and b y's with k pairs of x above y. */
    const int w = umax + 1;
    double *ways = calloc((size_t)(m1 + 1) * (size_t)(m2 + 1) * (size_t)w, sizeof *ways);
    if (!ways) return NAN;
#define WAYS(a, b, k) ways[((size_t)(a) * (size_t)(m2 + 1) + (size_t)(b)) * (size_t)w + (size_t)(k)]
    for (int a = 0; a <= m1; a++)
      for (int b = 0; b <= m2; b++) {
        if (a == 0 || b == 0) {
          WAYS(a, b, 0) = 1.0;
          continue;
        }
        for (int k = 0; k <= a * b; k++) /* the largest value is an x (above all b y's) or a y */
          WAYS(a, b, k) = (k >= b ? WAYS(a - 1, b, k - b) : 0.0) + WAYS(a, b - 1, k);
      }
    double total = 0.0, low = 0.0, high = 0.0;
    for (int k = 0; k <= umax; k++) {
      total += WAYS(m1, m2, k);
      if (k <= floor(u)) low += WAYS(m1, m2, k);
      if (k >= ceil(u)) high += WAYS(m1, m2, k);
    }
#undef WAYS
    free(ways);
    p = 2.0 * (low < high ? low : high) / total;
  } else {
    double mean = umax / 2.0, sd = sqrt((double)m1 * m2 * (m1 + m2 + 1) / 12.0);
    double z = (fabs(u - mean) - 0.5) / sd;
    p = z > 0 ? erfc(z / sqrt(2.0)) : 1.0;
  }
  return p < 1.0 ? p : 1.0;
}
