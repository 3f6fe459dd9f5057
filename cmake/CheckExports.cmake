# The public-API fence of libmixrt.so, checked on the built library (ctest `exports`, packaging
# label; cmake -P):
#  1. every symbol libmixrt.so exports is a function or variable declared MX_API in
#     include/mixrt/*.h or the configured version.h, and every MX_API function is exported
#     (a declaration without a definition fails here, not in a user's link);
#  2. no header of the library's modules (the folders that make up libmixrt) declares a function
#     spelled like the public API, mx_ with a single underscore: internal functions are mx__.
# tools/, bench/, tests/ and fuzz/ build programs, not the library, and are not checked.
#   -DLIBRARY=<libmixrt.so> -DNM=<nm> -DSOURCE_DIR=<checkout> -DGENERATED_INCLUDE=<build>/include
#   -DMODULES=<list of module folders>
execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
  OUTPUT_VARIABLE nm_out RESULT_VARIABLE nm_rc ERROR_VARIABLE nm_err)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIBRARY} failed: ${nm_err}")
endif()

file(GLOB headers "${SOURCE_DIR}/include/mixrt/*.h")
list(APPEND headers "${GENERATED_INCLUDE}/mixrt/version.h")
set(public "")
foreach(h ${headers})
  file(READ "${h}" text)
  string(APPEND public "${text}\n")
endforeach()

# Every MX_API function name in the public headers (a declaration may span lines).
set(declared "")
string(REGEX MATCHALL "MX_API[^;{}()]*[^A-Za-z0-9_]mx_[A-Za-z0-9_]+[ \t\r\n]*\\(" decls "${public}")
foreach(d ${decls})
  string(REGEX MATCH "mx_[A-Za-z0-9_]+[ \t\r\n]*\\($" name "${d}")
  string(REGEX REPLACE "[ \t\r\n]*\\($" "" name "${name}")
  list(APPEND declared "${name}")
endforeach()
list(REMOVE_DUPLICATES declared)
list(LENGTH declared n_declared)
if(n_declared LESS 10)
  message(FATAL_ERROR "found only ${n_declared} MX_API declarations in ${SOURCE_DIR}/include/mixrt: is the pattern stale?")
endif()

set(failures "")
set(exported "")
string(REPLACE "\n" ";" nm_lines "${nm_out}")
foreach(line ${nm_lines})
  # "<address> <type> <name>[@<version>]"; absolute symbols (A) are the version script's nodes.
  if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ @]+)")
    continue()
  endif()
  set(type "${CMAKE_MATCH_1}")
  set(name "${CMAKE_MATCH_2}")
  if(type STREQUAL "A")
    continue()
  endif()
  list(APPEND exported "${name}")
  list(FIND declared "${name}" at)
  if(at LESS 0)
    list(APPEND failures "exported but not declared MX_API in include/mixrt/: ${name} (${type})")
  endif()
endforeach()
foreach(name ${declared})
  list(FIND exported "${name}" at)
  if(at LESS 0)
    list(APPEND failures "declared MX_API but not exported by libmixrt.so (no definition?): ${name}")
  endif()
endforeach()

# Headers of the library's modules: no top-level declaration of an mx_[^_] function. A declaration
# is a line starting (no indent) with its type and the name followed by "(", not a typedef nor a
# preprocessor line; calls inside bodies are indented.
foreach(dir ${MODULES})
  file(GLOB_RECURSE module_headers "${SOURCE_DIR}/${dir}/*.h")
  foreach(h ${module_headers})
    file(STRINGS "${h}" lines REGEX "^[A-Za-z_][A-Za-z0-9_ \t*]*[ \t*]mx_[A-Za-z0-9][A-Za-z0-9_]*[ \t]*\\(")
    foreach(l ${lines})
      if(l MATCHES "^(typedef|#|return)")
        continue()
      endif()
      string(REGEX MATCH "mx_[A-Za-z0-9][A-Za-z0-9_]*[ \t]*\\(" name "${l}")
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${h}")
      list(APPEND failures "${rel} declares ${name}...): internal functions are mx__, only include/mixrt/ declares mx_ names")
    endforeach()
  endforeach()
endforeach()

list(LENGTH exported n_exported)
if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "public API fence of ${LIBRARY}:\n  ${text}")
endif()
message(STATUS "${LIBRARY}: ${n_exported} exported symbols, all declared MX_API in include/mixrt/; ${n_declared} declarations, all exported; no mx_ function declared outside include/mixrt/")
