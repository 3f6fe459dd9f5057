/* The weights section checksums of .mxm files: the chunked sum (format 3) is the same whether
 * computed in pieces while writing or by the parallel check at load, files of format 2 (the
 * lanes sum over the whole section) still load, and an unknown checksum kind is refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/mxm_info.h"
#include "static_exec/static_exec_impl.h"

/* Bytes that differ from chunk to chunk and inside each. */
static unsigned char *pattern(size_t n) {
  unsigned char *p = malloc(n);
  cr_assert(p);
  uint64_t x = 0x243f6a8885a308d3ull;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (unsigned char)(x >> 56);
  }
  return p;
}

/* The sum of p written in pieces of `piece` bytes, as a file is written. */
static uint64_t streamed(uint32_t kind, const unsigned char *p, size_t n, size_t piece) {
  mx__mxm_sum s;
  mx__mxm_sum_init(&s, kind, n);
  for (size_t i = 0; i < n; i += piece) mx__mxm_sum_update(&s, p + i, n - i < piece ? n - i : piece);
  return mx__mxm_sum_finish(&s);
}

Test(mxm_checksum, parallel_check_equals_streamed_sum) {
  /* Three chunks, the last one partial, and an odd piece size that straddles chunk ends. */
  size_t n = (size_t)(2 * MX__MXM_SUM_CHUNK + 12345);
  unsigned char *p = pattern(n);
  uint64_t whole = mx__mxm_section_checksum(MX__MXM_SUM_CHUNKED, p, n, "test");
  cr_assert_eq(whole, streamed(MX__MXM_SUM_CHUNKED, p, n, 1000003));
  cr_assert_eq(whole, streamed(MX__MXM_SUM_CHUNKED, p, n, n));
  cr_assert_eq(mx__mxm_section_checksum(MX__MXM_SUM_LANES, p, n, "test"), streamed(MX__MXM_SUM_LANES, p, n, 777));
  cr_assert_neq(whole, mx__mxm_section_checksum(MX__MXM_SUM_LANES, p, n, "test"));
  /* One flipped bit in the last chunk, and two chunks swapped, change the sum. */
  p[n - 5] ^= 0x10;
  cr_assert_neq(whole, mx__mxm_section_checksum(MX__MXM_SUM_CHUNKED, p, n, "test"));
  p[n - 5] ^= 0x10;
  unsigned char *q = malloc(n);
  cr_assert(q);
  memcpy(q, p + MX__MXM_SUM_CHUNK, (size_t)MX__MXM_SUM_CHUNK);
  memcpy(q + MX__MXM_SUM_CHUNK, p, (size_t)MX__MXM_SUM_CHUNK);
  memcpy(q + 2 * MX__MXM_SUM_CHUNK, p + 2 * MX__MXM_SUM_CHUNK, n - (size_t)(2 * MX__MXM_SUM_CHUNK));
  cr_assert_neq(whole, mx__mxm_section_checksum(MX__MXM_SUM_CHUNKED, q, n, "test"));
  free(q);
  free(p);
  /* An empty section has a sum too (both ways). */
  cr_assert_eq(mx__mxm_section_checksum(MX__MXM_SUM_CHUNKED, (const unsigned char *)"", 0, "test"),
               streamed(MX__MXM_SUM_CHUNKED, (const unsigned char *)"", 0, 1));
}

static char *temp_path(const char *leaf) {
  char *p = malloc(512);
  snprintf(p, 512, "%s/mixrt_test_%d_%s", P_tmpdir, (int)getpid(), leaf);
  return p;
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *d = malloc(*n);
  cr_assert_eq(fread(d, 1, *n, f), *n);
  fclose(f);
  return d;
}

static void write_all(const char *path, const unsigned char *d, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  cr_assert_eq(fwrite(d, 1, n, f), n);
  fclose(f);
}

/* Saves a small compiled block to path (weights in the file's section). */
static void save_block(const char *path) {
  mxt_block_config cfg = mxt_block_default();
  cfg.seq = 8;
  cfg.hidden = 32;
  cfg.ffn = 64;
  mx_graph *g;
  cr_assert_eq(mxt_block_build(&cfg, &g), MX_OK);
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  mx_mxm_save_options so = {0};
  cr_assert_eq(mx__mxm_save(p, path, &so, &err), MX_OK, "%s", err.message);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

/* Rewrites the header of the file image d with `edit`, keeping its size (the producer string
 * absorbs the difference), and its checksum. */
typedef void (*header_edit)(Mxm__FileHeader *h, const unsigned char *d);
static void edit_header(unsigned char *d, header_edit edit) {
  uint32_t hsz = (uint32_t)d[12] | (uint32_t)d[13] << 8 | (uint32_t)d[14] << 16 | (uint32_t)d[15] << 24;
  Mxm__FileHeader *h = mxm__file_header__unpack(NULL, hsz, d + 24);
  cr_assert(h);
  cr_assert_eq(h->format_version, 3);
  cr_assert_eq(h->weights_checksum_kind, MX__MXM_SUM_CHUNKED);
  cr_assert_gt(h->weights_size, 0);
  edit(h, d);
  char producer[128];
  char *old_producer = h->producer;
  snprintf(producer, sizeof producer, "%s", old_producer);
  h->producer = producer;
  while (mxm__file_header__get_packed_size(h) < hsz) strcat(producer, " ");
  cr_assert_eq(mxm__file_header__get_packed_size(h), hsz);
  mxm__file_header__pack(h, d + 24);
  uint64_t hc = mx__mxm_checksum(d + 24, hsz);
  for (int i = 0; i < 8; i++) d[16 + i] = (unsigned char)(hc >> (8 * i));
  h->producer = old_producer;
  mxm__file_header__free_unpacked(h, NULL);
}

/* A format 2 header: the lanes sum over the whole section, no kind recorded. */
static void as_format_2(Mxm__FileHeader *h, const unsigned char *d) {
  h->format_version = 2;
  h->min_reader_version = 2;
  h->weights_checksum_kind = MX__MXM_SUM_LANES;
  h->weights_checksum = mx__mxm_section_checksum(MX__MXM_SUM_LANES, d + h->weights_offset,
                                                 (size_t)h->weights_size, "test");
}

static void unknown_kind(Mxm__FileHeader *h, const unsigned char *d) {
  (void)d;
  h->weights_checksum_kind = 7;
}

Test(mxm_checksum, format_2_lanes_sum_still_loads) {
  char *path = temp_path("format2.mxm");
  save_block(path);
  size_t n;
  unsigned char *d = read_all(path, &n);
  edit_header(d, as_format_2);
  write_all(path, d, n);
  mx_static_plan *q = NULL;
  mx_error err;
  cr_assert_eq(mx__mxm_load(path, &q, &err), MX_OK, "%s", err.message);
  mx__static_plan_destroy(q);
  /* The lanes sum is checked: a damaged section is still refused. */
  d[n - 1] ^= 1;
  write_all(path, d, n);
  cr_assert_eq(mx__mxm_load(path, &q, &err), MX_ERR_MALFORMED);
  cr_assert(strstr(err.message, "checksum"), "%s", err.message);
  remove(path);
  free(d);
  free(path);
}

Test(mxm_checksum, unknown_kind_refused) {
  char *path = temp_path("kind7.mxm");
  save_block(path);
  size_t n;
  unsigned char *d = read_all(path, &n);
  edit_header(d, unknown_kind);
  write_all(path, d, n);
  mx_static_plan *q = NULL;
  mx_error err;
  cr_assert_eq(mx__mxm_load(path, &q, &err), MX_ERR_MALFORMED);
  cr_assert(strstr(err.message, "unknown weights checksum kind 7"), "%s", err.message);
  cr_assert(strstr(err.message, path), "%s", err.message);
  remove(path);
  free(d);
  free(path);
}
