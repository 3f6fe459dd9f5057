/* A libFuzzer program around one harness of harness.c: CMake builds this file once per target
 * with MXF_TARGET set to the harness function (fuzz_onnx calls mxf_onnx, and so on). */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

#ifndef MXF_TARGET
#error "MXF_TARGET names the harness function (set by fuzz/CMakeLists.txt)"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return MXF_TARGET(data, size); }
