/* Reading a whole file into memory: model and tensor files, and the documents the tools pass
 * between processes. */
#ifndef MIXRT_COMMON_FILE_H
#define MIXRT_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "mixrt/status.h"

/* Reads a whole file (at most `limit` bytes, else MX_ERR_LIMIT) into a malloc'd buffer (*data,
 * freed by the caller; never NULL on success). A NUL byte follows the *size bytes read, so a
 * text file can be used as a string. Reads to the end rather than trusting the file's size
 * (pipes have none). MX_ERR_IO names the path and the reason. */
MX_MUST_USE mx_status mx__read_file(const char *path, size_t limit, uint8_t **data, size_t *size,
                                    mx_error *err);

#endif /* MIXRT_COMMON_FILE_H */
