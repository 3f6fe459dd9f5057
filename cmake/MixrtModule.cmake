# Module targets of libmixrt.
#
# mixrt_module(NAME LINK deps... [PRIVATE deps...]) makes the object library mixrt_NAME from every
# .c file below NAME/. Sources include headers by their path from the project root
# ("graph/ir.h"), so every module gets an include root of its own, <build>/layers/NAME/, that
# holds one link, NAME -> <source>/NAME. A module sees its own folder, the public headers
# (include/), and the include roots of the modules it links (LINK is PUBLIC: a module's headers
# may name its dependencies' types); an #include of any other module's header fails to compile.
#
# mixrt_generated_module(NAME SOURCES files... ROOT dir LINK deps...) does the same for generated
# code whose headers live below ROOT.

set(MIXRT_MODULE_TARGETS "" CACHE INTERNAL "object libraries that make up libmixrt")

# The public version header is configured into the build tree's include root, which every module
# (and every user of the library) sees next to include/. Before 1.0 every minor release may break
# the ABI, so the SONAME carries major.minor; from 1.0 on only the major (docs/abi.md).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(MIXRT_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
else()
  set(MIXRT_SOVERSION "${PROJECT_VERSION_MAJOR}")
endif()
set(MIXRT_GENERATED_INCLUDE "${PROJECT_BINARY_DIR}/include")
configure_file("${CMAKE_CURRENT_LIST_DIR}/version.h.in" "${MIXRT_GENERATED_INCLUDE}/mixrt/version.h" @ONLY)

function(mixrt_module_defaults target)
  target_link_libraries(${target} PRIVATE mixrt_build_options)
  # Only the MX_API declarations have default visibility: calls between the library's own
  # functions bind inside libmixrt.so (no PLT hop, no interposition), and the version script
  # (cmake/ExportMap.cmake) lists the same set.
  set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET hidden)
  target_include_directories(${target} PUBLIC "${PROJECT_SOURCE_DIR}/include" "${MIXRT_GENERATED_INCLUDE}")
  target_compile_definitions(${target} PRIVATE
    MIXRT_VERSION_STRING="${PROJECT_VERSION}"
    MIXRT_BUILD_TYPE="${CMAKE_BUILD_TYPE}"
    MIXRT_SANITIZER="${MIXRT_SANITIZE}"
    MIXRT_COMPILER="${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}")
  set(MIXRT_MODULE_TARGETS ${MIXRT_MODULE_TARGETS} ${target} CACHE INTERNAL "")
endfunction()

function(mixrt_module name)
  cmake_parse_arguments(ARG "" "" "LINK;PRIVATE" ${ARGN})
  set(target mixrt_${name})
  file(GLOB_RECURSE src CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${name}/*.c")
  add_library(${target} OBJECT ${src})
  set(root "${PROJECT_BINARY_DIR}/layers/${name}")
  file(MAKE_DIRECTORY "${root}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${name}" "${root}/${name}" SYMBOLIC)
  target_include_directories(${target} PUBLIC "${root}")
  target_link_libraries(${target} PUBLIC ${ARG_LINK} PRIVATE ${ARG_PRIVATE})
  mixrt_module_defaults(${target})
endfunction()

function(mixrt_generated_module name)
  cmake_parse_arguments(ARG "" "ROOT" "SOURCES;LINK" ${ARGN})
  set(target mixrt_${name})
  add_library(${target} OBJECT ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC "${ARG_ROOT}")
  target_link_libraries(${target} PUBLIC ${ARG_LINK})
  mixrt_module_defaults(${target})
endfunction()
