# ctest entries of the packaging: the install-and-consume test (cmake/InstallTest.cmake) and the
# Python package's pytest suite (python/tests). Sanitizer builds skip both: their libmixrt.so
# needs the sanitizer runtime preloaded into the consumer and into Python.
if(NOT MIXRT_BUILD_SHARED OR NOT MIXRT_SANITIZE STREQUAL "" OR MIXRT_FUZZ)
  return()
endif()

add_test(NAME install_consumer
  COMMAND "${CMAKE_COMMAND}" -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DWORK_DIR=${PROJECT_BINARY_DIR}/install_consumer -DC_COMPILER=${CMAKE_C_COMPILER}
          -DPYTHON=${MIXRT_PYTHON}
          -P "${CMAKE_CURRENT_LIST_DIR}/InstallTest.cmake")
set_tests_properties(install_consumer PROPERTIES TIMEOUT 600 LABELS packaging)

# The public-API fence (cmake/CheckExports.cmake): libmixrt.so exports exactly the MX_API
# declarations of include/mixrt/, and no header of the library's modules declares an mx_ function.
set(module_dirs "")
foreach(m ${MIXRT_MODULE_TARGETS})
  string(REGEX REPLACE "^mixrt_" "" dir "${m}")
  if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/${dir}")
    list(APPEND module_dirs "${dir}")
  endif()
endforeach()
add_test(NAME exports
  COMMAND "${CMAKE_COMMAND}" -DLIBRARY=$<TARGET_FILE:mixrt_shared> -DNM=${CMAKE_NM}
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DGENERATED_INCLUDE=${MIXRT_GENERATED_INCLUDE}
          "-DMODULES=${module_dirs}" -P "${CMAKE_CURRENT_LIST_DIR}/CheckExports.cmake")
set_tests_properties(exports PROPERTIES TIMEOUT 60 LABELS packaging)

# Debian's python3 with python3-numpy and python3-pytest (scripts/deps.sh), not whatever python3
# comes first on PATH.
set(MIXRT_PYTHON "/usr/bin/python3" CACHE FILEPATH "Python with NumPy and pytest for the python/ tests")
if(NOT EXISTS "${PROJECT_SOURCE_DIR}/python/tests")
  return()
endif()
add_test(NAME python
  COMMAND "${MIXRT_PYTHON}" -m pytest -q -p no:cacheprovider "${PROJECT_SOURCE_DIR}/python/tests")
set_tests_properties(python PROPERTIES TIMEOUT 900 LABELS packaging
  ENVIRONMENT "MIXRT_LIBRARY=$<TARGET_FILE:mixrt_shared>;MIXRT_CLI=$<TARGET_FILE:mixrt_cli>;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;MIXRT_TEST_TMP=${PROJECT_BINARY_DIR}/python_tests")
