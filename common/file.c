/* Reading a whole file into memory (see common/file.h). */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"

/* strerror text of errno value e (thread-safe; GNU strerror_r, the build defines _GNU_SOURCE). */
static const char *errno_text(int e, char *buf, size_t n) { return strerror_r(e, buf, n); }

mx_status mx__read_file(const char *path, size_t limit, uint8_t **data, size_t *size, mx_error *err) {
  char eb[128];
  mx_status st = MX_OK;
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  *data = NULL;
  *size = 0;
  if (!path) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "file path is NULL");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return mx__fail(err, MX_ERR_IO, "cannot open '%s': %s", path, errno_text(errno, eb, sizeof eb));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    st = mx__fail(err, MX_ERR_IO, "cannot stat '%s': %s", path, errno_text(errno, eb, sizeof eb));
    goto close_fd;
  }
  if (S_ISDIR(sb.st_mode)) {
    st = mx__fail(err, MX_ERR_IO, "cannot read '%s': %s", path, errno_text(EISDIR, eb, sizeof eb));
    goto close_fd;
  }
  if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > (uint64_t)limit) {
    st = mx__fail(err, MX_ERR_LIMIT, "'%s' is %lld bytes, more than the %zu bytes mixrt reads", path,
                  (long long)sb.st_size, limit);
    goto close_fd;
  }
  /* Read to the end rather than trusting st_size: pipes have none, and files may change. */
  cap = S_ISREG(sb.st_mode) && sb.st_size > 0 ? (size_t)sb.st_size + 1 : 65536;
  buf = malloc(cap);
  if (!buf) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory reading '%s'", path);
    goto close_fd;
  }
  for (;;) {
    if (len == cap) {
      if (cap > limit) {
        st = mx__fail(err, MX_ERR_LIMIT, "'%s' is more than the %zu bytes mixrt reads", path, limit);
        goto free_buf;
      }
      size_t ncap = cap > limit / 2 ? limit + 1 : cap * 2;
      uint8_t *nb = realloc(buf, ncap);
      if (!nb) {
        st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory reading '%s'", path);
        goto free_buf;
      }
      buf = nb;
      cap = ncap;
    }
    ssize_t r = read(fd, buf + len, cap - len);
    if (r < 0) {
      if (errno == EINTR) continue;
      st = mx__fail(err, MX_ERR_IO, "cannot read '%s': %s", path, errno_text(errno, eb, sizeof eb));
      goto free_buf;
    }
    if (r == 0) break;
    len += (size_t)r;
  }
  if (len > limit) {
    st = mx__fail(err, MX_ERR_LIMIT, "'%s' is more than the %zu bytes mixrt reads", path, limit);
    goto free_buf;
  }
  if (len == cap) { /* room for the terminating NUL */
    uint8_t *nb = realloc(buf, cap + 1);
    if (!nb) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory reading '%s'", path);
      goto free_buf;
    }
    buf = nb;
  }
  buf[len] = 0;
  close(fd);
  *data = buf;
  *size = len;
  return MX_OK;
free_buf:
  free(buf);
close_fd:
  close(fd);
  return st;
}
