# mixrt._step, the optional CPython extension of the Python package (python/mixrt/_step.c): the
# per-step packing of Session.run's records and the wrapping of its outputs as NumPy arrays in C.
# Built against Debian's python3-dev and python3-numpy headers when they are found; without them
# the package runs on ctypes alone (docs/python.md). The module does not link libmixrt.so: it
# gets the functions it calls from the library ctypes loaded, so it needs only mixrt's headers.
#
# Build tree: <build>/python/mixrt/_step<EXT_SUFFIX>, where python/mixrt/_lib.py looks beside the
# libmixrt.so it loaded. Install: next to the package's .py files.
# The Python the tests and the package use (Debian's), not whatever python3 comes first on PATH.
set(MIXRT_PYTHON "/usr/bin/python3" CACHE FILEPATH "Python with NumPy and pytest for the python/ tests")
option(MIXRT_BUILD_PYTHON_EXTENSION "Build the mixrt._step CPython extension (needs python3-dev, python3-numpy)" ON)
if(NOT MIXRT_BUILD_PYTHON_EXTENSION OR NOT MIXRT_BUILD_SHARED OR MIXRT_FUZZ OR NOT MIXRT_SANITIZE STREQUAL "")
  return()
endif()

if(NOT DEFINED Python3_EXECUTABLE AND EXISTS "${MIXRT_PYTHON}")
  set(Python3_EXECUTABLE "${MIXRT_PYTHON}")
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module NumPy QUIET)
if(NOT Python3_Development.Module_FOUND OR NOT Python3_NumPy_FOUND)
  message(STATUS "mixrt._step: not built (no Python headers or NumPy headers for ${Python3_EXECUTABLE}); the Python package uses ctypes only")
  return()
endif()

Python3_add_library(mixrt_python_step MODULE WITH_SOABI "${PROJECT_SOURCE_DIR}/python/mixrt/_step.c")
target_include_directories(mixrt_python_step PRIVATE
  "${PROJECT_SOURCE_DIR}/include" "${MIXRT_GENERATED_INCLUDE}")
target_link_libraries(mixrt_python_step PRIVATE Python3::NumPy mixrt_build_options)
set_target_properties(mixrt_python_step PROPERTIES
  OUTPUT_NAME _step PREFIX ""
  LIBRARY_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/python/mixrt"
  C_VISIBILITY_PRESET hidden)
install(TARGETS mixrt_python_step LIBRARY DESTINATION "${MIXRT_PYTHON_DIR}/mixrt" COMPONENT python)
