# `cmake --install`: the headers, libmirrored, the mirrored program and a CMake package, so
# that another project can write find_package(mirrored) and link mirrored::mirrored.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MIRRORED_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mirrored)
install(TARGETS mirrored_lib EXPORT mirroredTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET mirrored)
  install(TARGETS mirrored RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mirrored DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mirroredTargets NAMESPACE mirrored:: DESTINATION ${MIRRORED_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mirroredConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mirroredConfig.cmake INSTALL_DESTINATION ${MIRRORED_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mirroredConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mirroredConfig.cmake ${PROJECT_BINARY_DIR}/mirroredConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/MirroredCuda.cmake
        DESTINATION ${MIRRORED_CMAKE_DIR})

# A sanitized libmirrored needs the sanitizer runtime in whatever links it.
if(MIRRORED_SANITIZE)
  target_link_options(mirrored_lib INTERFACE $<INSTALL_INTERFACE:-fsanitize=${MIRRORED_SANITIZE}>)
endif()
