# ctest entries that drive the `mixrt` program.

# The ONNX node tests through the reference interpreter. The data folder comes from the
# MIXRT_ONNX_NODE_DIR environment variable at test time, defaulting to tests/data/onnx-node in the repository;
# when it is absent the test is reported as skipped (exit 77) with a loud message.
add_test(NAME conformance_reference
  COMMAND mixrt_cli conformance --quiet --skip-missing
          --gaps "${CMAKE_CURRENT_SOURCE_DIR}/conformance/KNOWN_GAPS.md")
set_tests_properties(conformance_reference PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
