/* NumPy .npy reading and writing, so `mixrt run` can take inputs from and write outputs to the
 * files ML users already have. Only what round-trips exactly is accepted: little-endian (or
 * byte-sized) element types, C order, and header dicts in the form NumPy writes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "mixrt/tensor.h"

/* A descr read back gives the last entry with it: NumPy has no bfloat16, float8 or 4/2-bit
 * types, so bfloat16 is written as its uint16 bits ("<u2", read back as bfloat16, which mixrt
 * models take far more often than uint16), and the one-byte narrow types as their bytes
 * ("|u1"/"|i1", read back as uint8/int8; int4/int2 sign-extended, as mixrt holds them). */
static const struct {
  const char *descr;
  mx_dtype dtype;
} npy_types[] = {
    {"<u4", MX_UINT32},         {"<u8", MX_UINT64},     {"<u2", MX_UINT16},         {"|u1", MX_FLOAT8E4M3FN},
    {"|u1", MX_FLOAT8E4M3FNUZ}, {"|u1", MX_FLOAT8E5M2}, {"|u1", MX_FLOAT8E5M2FNUZ}, {"|u1", MX_FLOAT8E8M0},
    {"|u1", MX_FLOAT4E2M1},     {"|u1", MX_UINT4},      {"|u1", MX_UINT2},          {"|i1", MX_INT4},
    {"|i1", MX_INT2},           {"<f4", MX_FLOAT32},    {"<f2", MX_FLOAT16},        {"<f8", MX_FLOAT64},
    {"|i1", MX_INT8},           {"|u1", MX_UINT8},      {"<i2", MX_INT16},          {"<i4", MX_INT32},
    {"<i8", MX_INT64},          {"|b1", MX_BOOL},       {"<u2", MX_BFLOAT16},
};

static const char *descr_of(mx_dtype dt) {
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (npy_types[i].dtype == dt) return npy_types[i].descr;
  return NULL;
}

/* Finds `'key':` in the header dict and returns a pointer just past the colon and spaces. */
static const char *dict_value(const char *hdr, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s':", key);
  const char *p = strstr(hdr, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  return p;
}

mx_status mx_tensor_load_npy(const char *path, mx_tensor *t, mx_error *err) {
  mx_status st;
  char *hdr = NULL;
  void *data = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return mx__fail(err, MX_ERR_IO, "%s: %s", path, strerror(errno));
  unsigned char pre[10];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    st = mx__fail(err, MX_ERR_MALFORMED, "%s: not a .npy file", path);
    goto close_file;
  }
  size_t hlen;
  if (pre[6] == 1) {
    hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
  } else if (pre[6] == 2 || pre[6] == 3) {
    unsigned char more[2];
    if (fread(more, 1, 2, f) != 2) {
      st = mx__fail(err, MX_ERR_MALFORMED, "%s: truncated header", path);
      goto close_file;
    }
    hlen = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)more[0] << 16) | ((size_t)more[1] << 24);
  } else {
    st = mx__fail(err, MX_ERR_UNSUPPORTED, "%s: .npy format version %d", path, pre[6]);
    goto close_file;
  }
  if (hlen > (1u << 20)) {
    st = mx__fail(err, MX_ERR_MALFORMED, "%s: header of %zu bytes", path, hlen);
    goto close_file;
  }
  hdr = malloc(hlen + 1);
  if (!hdr) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    goto close_file;
  }
  if (fread(hdr, 1, hlen, f) != hlen) {
    st = mx__fail(err, MX_ERR_MALFORMED, "%s: truncated header", path);
    goto free_hdr;
  }
  hdr[hlen] = '\0';
  const char *d = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"),
             *sh = dict_value(hdr, "shape");
  if (!d || !fo || !sh || *d != '\'' || *sh != '(') {
    st = mx__fail(err, MX_ERR_MALFORMED, "%s: header is not a NumPy dict", path);
    goto free_hdr;
  }
  if (strncmp(fo, "False", 5) != 0) {
    st = mx__fail(err, MX_ERR_UNSUPPORTED, "%s: Fortran-ordered arrays are not supported", path);
    goto free_hdr;
  }
  mx_tensor nt;
  memset(&nt, 0, sizeof nt);
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
    size_t n = strlen(npy_types[i].descr);
    if (strncmp(d + 1, npy_types[i].descr, n) == 0 && d[1 + n] == '\'') nt.dtype = npy_types[i].dtype;
  }
  if (strncmp(d + 1, "|b1'", 4) == 0 || strncmp(d + 1, "?'", 2) == 0) nt.dtype = MX_BOOL;
  if (!nt.dtype) {
    st = mx__fail(err, MX_ERR_UNSUPPORTED, "%s: element type %.8s is not supported", path, d);
    goto free_hdr;
  }
  const char *p = sh + 1;
  while (*p && *p != ')') {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0 || nt.rank == MX_MAX_RANK) {
      st = mx__fail(err, nt.rank == MX_MAX_RANK ? MX_ERR_UNSUPPORTED : MX_ERR_MALFORMED,
                    "%s: bad or too many dims in the shape", path);
      goto free_hdr;
    }
    nt.dims[nt.rank++] = v;
    p = end;
  }
  size_t nbytes;
  if (!mx_tensor_nbytes(&nt, &nbytes)) {
    st = mx__fail(err, MX_ERR_LIMIT, "%s: the array is too large", path);
    goto free_hdr;
  }
  data = malloc(nbytes ? nbytes : 1);
  if (!data) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", path, nbytes);
    goto free_hdr;
  }
  if (fread(data, 1, nbytes, f) != nbytes) {
    st = mx__fail(err, MX_ERR_MALFORMED, "%s: data is shorter than the shape says", path);
    goto free_data;
  }
  nt.data = data;
  nt.placement = MX_HOST;
  *t = nt;
  data = NULL;
  st = MX_OK;
free_data:
  free(data);
free_hdr:
  free(hdr);
close_file:
  fclose(f);
  return st;
}

mx_status mx_tensor_save_npy(const char *path, const mx_tensor *t, mx_error *err) {
  const char *descr = descr_of(t->dtype);
  size_t nbytes;
  if (!descr || !mx_tensor_nbytes(t, &nbytes))
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "%s: tensor has an invalid dtype or shape", path);
  char dict[512];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int32_t i = 0; i < t->rank; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s", (long long)t->dims[i],
                  t->rank == 1 ? "," : (i + 1 < t->rank ? ", " : ""));
  n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
  /* Pad with spaces so the data starts at a multiple of 64, ending the header with '\n'. */
  size_t total = 10 + (size_t)n + 1;
  size_t pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f) return mx__fail(err, MX_ERR_IO, "%s: %s", path, strerror(errno));
  size_t hlen = (size_t)n + pad + 1;
  unsigned char pre[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
  for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF && (nbytes == 0 || fwrite(t->data, 1, nbytes, f) == nbytes);
  if (fclose(f) != 0) ok = false;
  if (!ok) return mx__fail(err, MX_ERR_IO, "%s: write failed: %s", path, strerror(errno));
  return MX_OK;
}
