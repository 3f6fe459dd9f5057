# libmixrt.so, installation and the packages other builds find mixrt by.
#
# libmixrt.so is made of the same module objects as libmixrt.a (they are position independent).
# Its SONAME is libmixrt.so.<MIXRT_SOVERSION> (docs/abi.md) and it exports only the public API:
# the functions declared MX_API (include/mixrt/api.h), through a version script generated from
# the public headers (cmake/ExportMap.cmake). Programs that use internals (tools/, tests/,
# bench/) keep linking libmixrt.a.
#
# Installed: both libraries, include/mixrt/*.h with the configured version.h, the `mixrt` program,
# docs/, lib/pkgconfig/mixrt.pc and lib/cmake/mixrt/ (find_package(mixrt) -> mixrt::mixrt, the
# shared library, and mixrt::mixrt_static).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The fuzz build's objects carry libFuzzer instrumentation that only a fuzz program can link.
if(MIXRT_FUZZ)
  set(shared_default OFF)
else()
  set(shared_default ON)
endif()
option(MIXRT_BUILD_SHARED "Build libmixrt.so beside libmixrt.a" ${shared_default})
set(MIXRT_PACKAGE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/mixrt")

# The static library's interface for builds that install it: headers from the install prefix.
target_include_directories(mixrt INTERFACE
  "$<BUILD_INTERFACE:${MIXRT_GENERATED_INCLUDE}>" "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
set_target_properties(mixrt PROPERTIES EXPORT_NAME mixrt_static)
add_library(mixrt::mixrt_static ALIAS mixrt)

if(MIXRT_BUILD_SHARED)
  add_library(mixrt_shared SHARED)
  foreach(m ${MIXRT_MODULE_TARGETS})
    target_sources(mixrt_shared PRIVATE $<TARGET_OBJECTS:${m}>)
  endforeach()
  target_include_directories(mixrt_shared PUBLIC
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>" "$<BUILD_INTERFACE:${MIXRT_GENERATED_INCLUDE}>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  target_link_libraries(mixrt_shared PRIVATE
    PkgConfig::UV PkgConfig::CK PkgConfig::PROTOBUFC PkgConfig::HWLOC PkgConfig::OPENBLAS PkgConfig::IMAGE
    Threads::Threads m mixrt_build_options)
  # The exported symbols: the MX_API declarations, listed by cmake/ExportMap.cmake.
  file(GLOB public_headers CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/include/mixrt/*.h")
  list(APPEND public_headers "${MIXRT_GENERATED_INCLUDE}/mixrt/version.h")
  set(map "${PROJECT_BINARY_DIR}/package/mixrt.map")
  add_custom_command(OUTPUT "${map}"
    COMMAND "${CMAKE_COMMAND}" "-DHEADERS=${public_headers}" "-DOUTPUT=${map}"
            -P "${CMAKE_CURRENT_LIST_DIR}/ExportMap.cmake"
    DEPENDS ${public_headers} "${CMAKE_CURRENT_LIST_DIR}/ExportMap.cmake"
    COMMENT "libmixrt.so exports: the MX_API declarations" VERBATIM)
  add_custom_target(mixrt_export_map DEPENDS "${map}")
  add_dependencies(mixrt_shared mixrt_export_map)
  target_link_options(mixrt_shared PRIVATE "LINKER:--version-script=${map}")
  # A symbol no library provides is a link error here, not at the user's dlopen. Sanitizer
  # runtimes are resolved by the final program, so those builds leave the check off.
  if(MIXRT_SANITIZE STREQUAL "" AND NOT MIXRT_FUZZ)
    target_link_options(mixrt_shared PRIVATE "LINKER:--no-undefined")
  endif()
  set_target_properties(mixrt_shared PROPERTIES
    OUTPUT_NAME mixrt EXPORT_NAME mixrt
    VERSION "${PROJECT_VERSION}" SOVERSION "${MIXRT_SOVERSION}"
    LINK_DEPENDS "${map}")
  add_library(mixrt::mixrt ALIAS mixrt_shared)
else()
  add_library(mixrt::mixrt ALIAS mixrt)
endif()

# --- install ------------------------------------------------------------------------------------
install(TARGETS mixrt EXPORT mixrtStaticTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT development)
install(EXPORT mixrtStaticTargets NAMESPACE mixrt:: DESTINATION "${MIXRT_PACKAGE_DIR}"
  COMPONENT development)
if(MIXRT_BUILD_SHARED)
  install(TARGETS mixrt_shared EXPORT mixrtTargets
    LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT runtime NAMELINK_COMPONENT development)
  install(EXPORT mixrtTargets NAMESPACE mixrt:: DESTINATION "${MIXRT_PACKAGE_DIR}"
    COMPONENT development)
endif()
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/mixrt" "${MIXRT_GENERATED_INCLUDE}/mixrt"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT development FILES_MATCHING PATTERN "*.h")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/" DESTINATION "${CMAKE_INSTALL_DOCDIR}"
  COMPONENT documentation)
install(FILES "${PROJECT_SOURCE_DIR}/README.md" DESTINATION "${CMAKE_INSTALL_DOCDIR}"
  COMPONENT documentation)

configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/mixrtConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/package/mixrtConfig.cmake" INSTALL_DESTINATION "${MIXRT_PACKAGE_DIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/package/mixrtConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
# pkg-config wants the prefix written in; `cmake --install --prefix P` may move it, so the file is
# configured at install time from the prefix actually used.
install(FILES "${PROJECT_BINARY_DIR}/package/mixrtConfig.cmake"
  "${PROJECT_BINARY_DIR}/package/mixrtConfigVersion.cmake"
  DESTINATION "${MIXRT_PACKAGE_DIR}" COMPONENT development)
install(CODE "
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  configure_file(\"${CMAKE_CURRENT_LIST_DIR}/mixrt.pc.in\"
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/mixrt.pc\" @ONLY)
  message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/mixrt.pc\")
  " COMPONENT development)

# The Python package (python/mixrt, ctypes over libmixrt.so) where Debian's python3 looks:
# <prefix>/lib/python3/dist-packages; it finds libmixrt.so in <prefix>/lib* (docs/python.md).
set(MIXRT_PYTHON_DIR "lib/python3/dist-packages" CACHE STRING "Install folder of the mixrt Python package, below the prefix")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/python/mixrt" DESTINATION "${MIXRT_PYTHON_DIR}" COMPONENT python
  PATTERN "__pycache__" EXCLUDE PATTERN "*.c" EXCLUDE)
# Its optional C extension (the per-step path of Session.run).
include("${CMAKE_CURRENT_LIST_DIR}/MixrtPython.cmake")
