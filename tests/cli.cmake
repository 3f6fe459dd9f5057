# ctest entries that drive the `mixrt` program.

# The ONNX node tests through the reference interpreter. The data folder comes from the
# MIXRT_ONNX_NODE_DIR environment variable at test time, defaulting to tests/data/onnx-node in the repository;
# when it is absent the test is reported as skipped (exit 77) with a loud message.
add_test(NAME conformance_reference
  COMMAND mixrt_cli conformance --quiet --skip-missing
          --gaps "${CMAKE_CURRENT_SOURCE_DIR}/conformance/KNOWN_GAPS.md")
set_tests_properties(conformance_reference PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)

# The PyTorch model zoo (bench/zoo/export.py, exported once into the build tree) through the hybrid
# runtime and the reference interpreter, compared with PyTorch eager at rtol 1e-3, atol 1e-4. Skipped
# (exit 77) with a loud message when /usr/bin/python3 cannot import torch. Sanitizer builds run the
# small models only: the large CNNs there would take minutes of sanitized im2col.
set(MIXRT_ZOO_SKIP "")
if(NOT "${MIXRT_SANITIZE}" STREQUAL "")
  set(MIXRT_ZOO_SKIP --skip resnet50,mobilenet_v3_large,lraspp_mobilenet_v3_large)
endif()
# MIXRT_ZOO_DIR: where the models are exported; `make asan` points it at the Release tree's
# build/zoo so that the export (a minute of PyTorch) runs once per `make test`, not once per tree.
set(MIXRT_ZOO_DIR "${CMAKE_BINARY_DIR}/zoo" CACHE PATH "Folder the zoo_models test exports the models into")
add_test(NAME zoo_models
  COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/zoo/run_zoo.sh" --mixrt $<TARGET_FILE:mixrt_cli>
          --dir "${MIXRT_ZOO_DIR}" ${MIXRT_ZOO_SKIP})
set_tests_properties(zoo_models PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
