/* Files for the ONNX importer: locating, validating and reading the external-data regions that
 * large initializers live in (whole model and tensor files are read by common/file.c).
 *
 * External data is where a hostile model could reach outside its own files, so a location
 * must be a relative path without ".." components, and its resolved real path (symbolic links
 * followed) must still lie inside the model's directory. The region (offset, length) must lie
 * inside the file and its length must equal the tensor's byte size, so nothing is allocated
 * that the file cannot back. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "graph/onnx/onnx_impl.h"

/* strerror text of errno value e (thread-safe; GNU strerror_r, the build defines _GNU_SOURCE). */
static const char *errno_text(int e, char *buf, size_t n) { return strerror_r(e, buf, n); }

char *mx__onnx_dirname(const char *path) {
  const char *slash = path ? strrchr(path, '/') : NULL;
  if (!slash) return strdup(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path); /* "/model.onnx" -> "/" */
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, path, n);
  d[n] = '\0';
  return d;
}

/* --- external data ---------------------------------------------------------------------------- */

/* Parses a non-negative decimal integer that is the whole string. */
static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

/* True when the relative path has a ".." component (it could leave the base directory). */
static bool has_dotdot(const char *p) {
  while (*p) {
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

/* True when `path` is `dir` itself or lies below it (both canonical, from realpath). */
static bool path_inside(const char *dir, const char *path) {
  size_t n = strlen(dir);
  if (strncmp(dir, path, n) != 0) return false;
  if (n == 1 && dir[0] == '/') return true;
  return path[n] == '/' || path[n] == '\0';
}

/* The external_data entries of a tensor that reading it needs. */
typedef struct ext_entries {
  const char *location; /* borrowed from the tensor, NULL when absent */
  uint64_t offset, length;
  bool has_length;
} ext_entries;

/* Reads location, offset and length from tp's external_data ("checksum" and unknown keys are
 * not needed to read the data). */
static mx_status parse_entries(const Onnx__TensorProto *tp, const char *what, ext_entries *x, mx_error *err) {
  *x = (ext_entries){0};
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    if (!e || !e->key) continue;
    const char *v = e->value ? e->value : "";
    if (strcmp(e->key, "location") == 0) {
      x->location = v;
    } else if (strcmp(e->key, "offset") == 0) {
      if (!parse_u64(v, &x->offset))
        return mx__fail(err, MX_ERR_MALFORMED, "%s: external data offset '%.64s' is not a number", what, v);
    } else if (strcmp(e->key, "length") == 0) {
      if (!parse_u64(v, &x->length))
        return mx__fail(err, MX_ERR_MALFORMED, "%s: external data length '%.64s' is not a number", what, v);
      x->has_length = true;
    }
  }
  return MX_OK;
}

/* What the entries say alone must hold: a location relative to the model's directory that does
 * not leave it, and a length (when given) of the tensor's nbytes. */
static mx_status check_entries(const char *base_dir, const ext_entries *x, size_t nbytes, const char *what,
                               mx_error *err) {
  const char *location = x->location;
  if (!location || !*location)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: external data without a location", what);
  if (!base_dir)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "%s: data is in external file '%s', but the model was loaded from memory "
                    "without a base directory",
                    what, location);
  if (location[0] == '/')
    return mx__fail(err, MX_ERR_MALFORMED,
                    "%s: external data location '%s' is an absolute path (it must be relative to "
                    "the model's directory)",
                    what, location);
  if (has_dotdot(location))
    return mx__fail(err, MX_ERR_MALFORMED, "%s: external data location '%s' leaves the model's directory",
                    what, location);
  if (x->has_length && x->length != nbytes)
    return mx__fail(err, MX_ERR_MALFORMED,
                    "%s: external data length %llu does not match the %zu bytes its dims and "
                    "element type need",
                    what, (unsigned long long)x->length, nbytes);
  return MX_OK;
}

/* The real path (malloc'd, into *out) of base_dir/location, which must still lie inside the
 * model's directory once symbolic links are followed. */
static mx_status resolve_inside(const char *base_dir, const char *location, const char *what, char **out,
                                mx_error *err) {
  char eb[128];
  mx_status st = MX_OK;
  char *real_dir = NULL, *real_path = NULL;
  size_t nd = strlen(base_dir), nl = strlen(location);
  char *joined = malloc(nd + nl + 2);
  if (!joined) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
  memcpy(joined, base_dir, nd);
  joined[nd] = '/';
  memcpy(joined + nd + 1, location, nl + 1);

  real_dir = realpath(base_dir, NULL);
  if (!real_dir) {
    st = mx__fail(err, MX_ERR_IO, "%s: cannot resolve the model directory '%s': %s", what, base_dir,
                  errno_text(errno, eb, sizeof eb));
    goto free_joined;
  }
  real_path = realpath(joined, NULL);
  if (!real_path) {
    st = mx__fail(err, MX_ERR_IO, "%s: cannot open external data file '%s': %s", what, joined,
                  errno_text(errno, eb, sizeof eb));
    goto free_real_dir;
  }
  if (!path_inside(real_dir, real_path)) {
    st = mx__fail(err, MX_ERR_MALFORMED,
                  "%s: external data location '%s' resolves to '%s', outside the model's "
                  "directory",
                  what, location, real_path);
    free(real_path);
    goto free_real_dir;
  }
  *out = real_path;
free_real_dir:
  free(real_dir);
free_joined:
  free(joined);
  return st;
}

/* Opens real_path for reading; it must be a regular file. *fsize receives its size. */
static mx_status open_regular(const char *real_path, const char *what, int *out_fd, uint64_t *fsize,
                              mx_error *err) {
  char eb[128];
  /* O_NONBLOCK: a FIFO planted in the model's directory must not hang the load (it is
   * refused below as not a regular file); reads of regular files ignore the flag. */
  int fd = open(real_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return mx__fail(err, MX_ERR_IO, "%s: cannot open external data file '%s': %s", what, real_path,
                    errno_text(errno, eb, sizeof eb));
  struct stat sb;
  mx_status st = MX_OK;
  if (fstat(fd, &sb) != 0)
    st = mx__fail(err, MX_ERR_IO, "%s: cannot stat external data file '%s': %s", what, real_path,
                  errno_text(errno, eb, sizeof eb));
  else if (!S_ISREG(sb.st_mode))
    st = mx__fail(err, MX_ERR_IO, "%s: external data '%s' is not a regular file", what, real_path);
  if (st != MX_OK) {
    close(fd);
    return st;
  }
  *out_fd = fd;
  *fsize = (uint64_t)sb.st_size;
  return MX_OK;
}

/* The region (offset, and length or the rest of the file) must lie inside the file of fsize
 * bytes and hold exactly the tensor's nbytes. */
static mx_status check_region(const ext_entries *x, uint64_t fsize, size_t nbytes, const char *real_path,
                              const char *what, mx_error *err) {
  const uint64_t offset = x->offset;
  if (offset > fsize)
    return mx__fail(err, MX_ERR_MALFORMED,
                    "%s: external data offset %llu is past the end of '%s' (%llu bytes)", what,
                    (unsigned long long)offset, real_path, (unsigned long long)fsize);
  const uint64_t length = x->has_length ? x->length : fsize - offset;
  if (length > fsize - offset)
    return mx__fail(err, MX_ERR_MALFORMED,
                    "%s: external data region (offset %llu, length %llu) runs past the end of '%s' "
                    "(%llu bytes)",
                    what, (unsigned long long)offset, (unsigned long long)length, real_path,
                    (unsigned long long)fsize);
  if (length != nbytes)
    return mx__fail(err, MX_ERR_MALFORMED,
                    "%s: external data in '%s' holds %llu bytes from offset %llu, but its dims and "
                    "element type need %zu",
                    what, real_path, (unsigned long long)length, (unsigned long long)offset, nbytes);
  if (offset > (uint64_t)INT64_MAX - length)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: external data offset %llu is out of range", what,
                    (unsigned long long)offset);
  return MX_OK;
}

mx_status mx__onnx_ext_open(const char *base_dir, const Onnx__TensorProto *tp, size_t nbytes,
                            const char *what, mx__onnx_ext *ext, mx_error *err) {
  ext->fd = -1;
  ext->path = NULL;
  ext_entries x;
  mx_status st = parse_entries(tp, what, &x, err);
  if (st == MX_OK) st = check_entries(base_dir, &x, nbytes, what, err);
  char *real_path = NULL;
  if (st == MX_OK) st = resolve_inside(base_dir, x.location, what, &real_path, err);
  if (st != MX_OK) return st;
  int fd = -1;
  uint64_t fsize = 0;
  st = open_regular(real_path, what, &fd, &fsize, err);
  if (st == MX_OK) {
    st = check_region(&x, fsize, nbytes, real_path, what, err);
    if (st != MX_OK) close(fd);
  }
  if (st != MX_OK) {
    free(real_path);
    return st;
  }
  ext->fd = fd;
  ext->path = real_path;
  ext->offset = x.offset;
  ext->length = nbytes;
  return MX_OK;
}

mx_status mx__onnx_blob_region(const mx__onnx_src *src, const Onnx__TensorProto *tp, size_t nbytes,
                               const char *what, const uint8_t **out, mx_error *err) {
  ext_entries x;
  mx_status st = parse_entries(tp, what, &x, err);
  if (st != MX_OK) return st;
  if (!x.location || strcmp(x.location, MX__ONNX_BLOB_LOCATION) != 0)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: external data location '%.64s' is not the weights section",
                    what, x.location ? x.location : "");
  uint64_t length = x.has_length ? x.length : nbytes;
  if (length != nbytes || x.offset > src->blob_size || length > src->blob_size - x.offset)
    return mx__fail(err, MX_ERR_MALFORMED,
                    "%s: region (offset %llu, %llu bytes) is not inside the weights section of %llu bytes "
                    "or not the tensor's %zu bytes",
                    what, (unsigned long long)x.offset, (unsigned long long)length,
                    (unsigned long long)src->blob_size, nbytes);
  *out = src->blob + x.offset;
  return MX_OK;
}

mx_status mx__onnx_ext_read(mx__onnx_ext *ext, void *dst, const char *what, mx_error *err) {
  char eb[128];
  uint8_t *p = dst;
  size_t done = 0;
  while (done < ext->length) {
    size_t chunk = ext->length - done;
    if (chunk > ((size_t)1 << 30)) chunk = (size_t)1 << 30;
    ssize_t r = pread(ext->fd, p + done, chunk, (off_t)(ext->offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return mx__fail(err, MX_ERR_IO, "%s: cannot read external data file '%s': %s", what, ext->path,
                      errno_text(errno, eb, sizeof eb));
    }
    if (r == 0)
      return mx__fail(err, MX_ERR_IO, "%s: external data file '%s' ended after %llu of %zu bytes", what,
                      ext->path, (unsigned long long)done, ext->length);
    done += (size_t)r;
  }
  return MX_OK;
}

void mx__onnx_ext_close(mx__onnx_ext *ext) {
  if (!ext) return;
  if (ext->fd >= 0) close(ext->fd);
  free(ext->path);
  ext->fd = -1;
  ext->path = NULL;
}
