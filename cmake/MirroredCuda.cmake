# CUDA Toolkit, NCCL and cuDNN detection. NCCL and cuDNN ship no CMake config, so they
# are found by path and wrapped in imported targets.
set(MIRRORED_WITH_CUDA OFF)
if(NOT MIRRORED_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_HOME PATH_SUFFIXES include)
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_HOME PATH_SUFFIXES lib lib64)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    set(MIRRORED_WITH_CUDA ON)
    add_library(mirrored::nccl UNKNOWN IMPORTED)
    set_target_properties(mirrored::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    add_library(mirrored::cudnn UNKNOWN IMPORTED)
    set_target_properties(mirrored::cudnn PROPERTIES IMPORTED_LOCATION ${CUDNN_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
    message(STATUS "mirrored: CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_LIBRARY}, cuDNN ${CUDNN_LIBRARY}")
  elseif(MIRRORED_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MIRRORED_CUDA=ON but the CUDA Toolkit, NCCL or cuDNN was not found "
                        "(toolkit: ${CUDAToolkit_FOUND}, nccl: ${NCCL_LIBRARY}, cudnn: ${CUDNN_LIBRARY}); "
                        "set CUDAToolkit_ROOT, NCCL_HOME, CUDNN_HOME or MIRRORED_CUDA=OFF")
  elseif(CUDAToolkit_FOUND)
    # The toolkit is here, so a GPU build was most likely wanted: say loudly what is missing
    # (and `mirrored info` repeats it), rather than leave a CPU-only binary to be found out on
    # the cluster.
    set(missing)
    if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
      list(APPEND missing "NCCL (nccl.h, libnccl: export NCCL_HOME, or set -DNCCL_INCLUDE_DIR and -DNCCL_LIBRARY)")
    endif()
    if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
      list(APPEND missing "cuDNN (cudnn.h, libcudnn: export CUDNN_HOME, or set -DCUDNN_INCLUDE_DIR and -DCUDNN_LIBRARY)")
    endif()
    string(REPLACE ";" " and " missing "${missing}")
    set(MIRRORED_CUDA_NOT_BUILT_REASON "CUDA ${CUDAToolkit_VERSION} found, but ${missing} not found")
    message(WARNING "\n*** mirrored: CPU-ONLY BUILD. ${MIRRORED_CUDA_NOT_BUILT_REASON}.\n"
                    "*** This binary cannot use GPUs (device = auto will compute on the CPU). Reconfigure with "
                    "the paths above, or -DMIRRORED_CUDA=ON to make this an error, or -DMIRRORED_CUDA=OFF to "
                    "silence it.\n")
  else()
    set(MIRRORED_CUDA_NOT_BUILT_REASON "no CUDA Toolkit found (set CUDAToolkit_ROOT, or put nvcc on PATH)")
    message(STATUS "mirrored: CUDA path not built: ${MIRRORED_CUDA_NOT_BUILT_REASON}")
  endif()
endif()
