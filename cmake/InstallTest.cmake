# ctest entry `install_consumer` (cmake -P): installs the build tree into a temporary prefix, then
# builds and runs examples/c_decode twice against it, once through find_package(mixrt) and once
# through pkg-config, and checks that both print the same tokens; then examples/decode_state.c
# (pkg-config) must print them too; then the installed Python package must import (-DPYTHON).
#   -DBUILD_DIR=<build tree> -DSOURCE_DIR=<mixrt source> -DWORK_DIR=<scratch> -DC_COMPILER=<cc>
#   [-DPYTHON=<python3 with NumPy>]
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "InstallTest.cmake needs -D${v}=...")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run_step("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f include/mixrt/mixrt.h include/mixrt/version.h bin/mixrt)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
file(GLOB libdirs LIST_DIRECTORIES true "${prefix}/lib*")
list(GET libdirs 0 libdir)

# find_package(mixrt) -> mixrt::mixrt
set(cmake_build "${WORK_DIR}/find_package")
run_step("configure the consumer" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/c_decode" -B "${cmake_build}"
         "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_C_COMPILER=${C_COMPILER}" -DCMAKE_BUILD_TYPE=Release)
run_step("build the consumer" "${CMAKE_COMMAND}" --build "${cmake_build}")
run_step("run the find_package consumer" "${cmake_build}/decode" 4)
set(by_cmake "${step_output}")

# pkg-config --cflags --libs mixrt
set(ENV{PKG_CONFIG_PATH} "${libdir}/pkgconfig")
find_program(PKG_CONFIG pkg-config REQUIRED)
run_step("pkg-config" "${PKG_CONFIG}" --cflags --libs mixrt)
string(STRIP "${step_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run_step("compile the pkg-config consumer" "${C_COMPILER}" -std=c11 -Wall -Werror
         "${SOURCE_DIR}/examples/c_decode/decode.c" -o "${WORK_DIR}/decode_pc" ${flags})
set(ENV{LD_LIBRARY_PATH} "${libdir}")
run_step("run the pkg-config consumer" "${WORK_DIR}/decode_pc" 4)
set(by_pkgconfig "${step_output}")

if(NOT by_cmake MATCHES "tokens: [0-9]+ [0-9]+ [0-9]+ [0-9]+")
  message(FATAL_ERROR "the consumer printed no tokens:\n${by_cmake}")
endif()
if(NOT by_cmake STREQUAL by_pkgconfig)
  message(FATAL_ERROR "find_package and pkg-config consumers differ:\n${by_cmake}\n${by_pkgconfig}")
endif()

# examples/decode_state.c (binding + KV cache as state) through pkg-config: it checks itself
# against the copying loop, and its tokens must be the ones examples/c_decode printed.
run_step("compile the state example" "${C_COMPILER}" -std=c11 -Wall -Werror
         "${SOURCE_DIR}/examples/decode_state.c" -o "${WORK_DIR}/decode_state" ${flags})
run_step("run the state example" "${WORK_DIR}/decode_state" 4)
string(REGEX MATCH "tokens:[0-9 ]+" state_tokens "${step_output}")
string(REGEX MATCH "tokens:[0-9 ]+" copy_tokens "${by_cmake}")
if(NOT state_tokens STREQUAL copy_tokens)
  message(FATAL_ERROR "examples/decode_state printed other tokens than examples/c_decode:\n${step_output}")
endif()

# The installed Python package, with its C extension when the build made one: it must find the
# installed libmixrt.so and load the extension installed beside it.
file(GLOB step_modules "${prefix}/lib/python3/dist-packages/mixrt/_step*.so")
if(DEFINED PYTHON AND EXISTS "${PYTHON}" AND EXISTS "${prefix}/lib/python3/dist-packages/mixrt/__init__.py")
  if(step_modules)
    set(want_step "True")
  else()
    set(want_step "False")
  endif()
  # (no ';' in the program: run_step's arguments are a CMake list)
  unset(ENV{MIXRT_LIBRARY})
  unset(ENV{PYTHONPATH})
  run_step("import the installed Python package" "${CMAKE_COMMAND}" -E env
           "PYTHONPATH=${prefix}/lib/python3/dist-packages" "${PYTHON}" -c
           "import mixrt, mixrt.session as s, mixrt._lib as l\nassert l.lib.path.startswith('${prefix}'), l.lib.path\nassert (s._step is not None) == ${want_step}, s._step\nprint(mixrt.version(), 'extension' if s._step else 'ctypes only')")
  message(STATUS "install_consumer: Python package ${step_output}")
endif()
message(STATUS "install_consumer: ${by_cmake}")
