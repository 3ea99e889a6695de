# CUDA Toolkit, NCCL, cuDNN and cuBLAS detection. NCCL and cuDNN ship no CMake config, so
# they are found by path and wrapped in imported targets. Where they are looked for, in
# order: NCCL_HOME / CUDNN_HOME, the CUDA Toolkit's folders, the system's, and last the
# Python wheels nvidia-nccl-cu13 / nvidia-cudnn-cu13 (site-packages/nvidia/{nccl,cudnn}/
# {include,lib}), as the Python that MIRRORED_PYTHON names (default: python3 on PATH, a
# virtual environment's when one is active) reports them. cuBLAS is the toolkit's
# (CUDA::cublas) when it has one; a toolkit without it (an image that keeps its CUDA
# libraries in PyTorch's wheels) takes it from the wheel nvidia-cublas (CUDA 13's layout
# site-packages/nvidia/cu13/{include,lib}, shared by the CUDA 13 wheels; CUDA 12's
# nvidia/cublas/{include,lib}). mirrored::cublas is the target either way. The wheels ship
# only versioned libraries (libnccl.so.2, libcudnn.so.9, libcublas.so.13), so those names
# are searched too; the build links them by full path, CMake records their folder as the
# build tree's RPATH, and libcudnn.so.9 finds the engine libraries it loads beside itself
# ($ORIGIN), as libcublas.so.13 finds libcublasLt.so.13.
set(MIRRORED_WITH_CUDA OFF)

# mirrored_python_wheel_dirs(OUT): the folders of the nvidia.nccl, nvidia.cudnn, nvidia.cu13
# and nvidia.cublas packages the configured Python can import (empty when there is no Python
# or no such wheel).
function(mirrored_python_wheel_dirs out)
  if(NOT MIRRORED_PYTHON)
    find_program(MIRRORED_PYTHON NAMES python3 python DOC "Python whose nvidia-* wheels may hold NCCL and cuDNN")
  endif()
  set(dirs)
  if(MIRRORED_PYTHON)
    execute_process(
      COMMAND "${MIRRORED_PYTHON}" -c
        "import importlib.util as u\nfor name in ('nvidia.nccl', 'nvidia.cudnn', 'nvidia.cu13', 'nvidia.cublas'):\n  try: spec = u.find_spec(name)\n  except Exception: spec = None\n  for d in (spec.submodule_search_locations or []) if spec else []: print(d)"
      OUTPUT_VARIABLE found ERROR_QUIET RESULT_VARIABLE rc TIMEOUT 30)
    if(rc EQUAL 0 AND found)
      string(REPLACE "\n" ";" dirs "${found}")
      list(FILTER dirs EXCLUDE REGEX "^$")
      list(REMOVE_DUPLICATES dirs)
    endif()
  endif()
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()

if(NOT MIRRORED_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    mirrored_python_wheel_dirs(MIRRORED_CUDA_WHEEL_DIRS)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include
              PATHS ${MIRRORED_CUDA_WHEEL_DIRS})
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64 PATHS ${MIRRORED_CUDA_WHEEL_DIRS})
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ENV CUDNN_HOME ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include
              PATHS ${MIRRORED_CUDA_WHEEL_DIRS})
    find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ENV CUDNN_HOME ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64 PATHS ${MIRRORED_CUDA_WHEEL_DIRS})
    if(NOT TARGET CUDA::cublas)
      # Only the wheels' folders: the toolkit was searched by FindCUDAToolkit already.
      find_library(CUBLAS_LIBRARY NAMES libcublas.so.13 libcublas.so.12 NO_DEFAULT_PATH
                   PATHS ${MIRRORED_CUDA_WHEEL_DIRS} PATH_SUFFIXES lib)
      find_library(CUBLASLT_LIBRARY NAMES libcublasLt.so.13 libcublasLt.so.12 NO_DEFAULT_PATH
                   PATHS ${MIRRORED_CUDA_WHEEL_DIRS} PATH_SUFFIXES lib)
      find_path(CUBLAS_INCLUDE_DIR cublas_v2.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include
                PATHS ${MIRRORED_CUDA_WHEEL_DIRS})
    endif()
  endif()
  set(MIRRORED_CUBLAS_FOUND OFF)
  if(TARGET CUDA::cublas OR (CUBLAS_LIBRARY AND CUBLASLT_LIBRARY AND CUBLAS_INCLUDE_DIR))
    set(MIRRORED_CUBLAS_FOUND ON)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY
     AND MIRRORED_CUBLAS_FOUND)
    set(MIRRORED_WITH_CUDA ON)
    if(TARGET CUDA::cublas)
      add_library(mirrored::cublas INTERFACE IMPORTED)
      set_target_properties(mirrored::cublas PROPERTIES INTERFACE_LINK_LIBRARIES CUDA::cublas)
      set(MIRRORED_CUBLAS_TEXT "the toolkit's")
    else()
      add_library(mirrored::cublas UNKNOWN IMPORTED)
      set_target_properties(mirrored::cublas PROPERTIES IMPORTED_LOCATION ${CUBLAS_LIBRARY}
                            INTERFACE_INCLUDE_DIRECTORIES ${CUBLAS_INCLUDE_DIR}
                            INTERFACE_LINK_LIBRARIES ${CUBLASLT_LIBRARY})
      set(MIRRORED_CUBLAS_TEXT "${CUBLAS_LIBRARY}")
    endif()
    add_library(mirrored::nccl UNKNOWN IMPORTED)
    set_target_properties(mirrored::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    add_library(mirrored::cudnn UNKNOWN IMPORTED)
    set_target_properties(mirrored::cudnn PROPERTIES IMPORTED_LOCATION ${CUDNN_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
    message(STATUS "mirrored: CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_LIBRARY}, cuDNN ${CUDNN_LIBRARY}, "
                   "cuBLAS ${MIRRORED_CUBLAS_TEXT}")
  elseif(MIRRORED_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MIRRORED_CUDA=ON but the CUDA Toolkit, NCCL, cuDNN or cuBLAS was not found "
                        "(toolkit: ${CUDAToolkit_FOUND}, nccl: ${NCCL_LIBRARY} with nccl.h in ${NCCL_INCLUDE_DIR}, "
                        "cudnn: ${CUDNN_LIBRARY} with cudnn.h in ${CUDNN_INCLUDE_DIR}, cublas: the toolkit's "
                        "${CUDA_cublas_LIBRARY} or the wheel's ${CUBLAS_LIBRARY} with cublas_v2.h in "
                        "${CUBLAS_INCLUDE_DIR}; Python wheels seen by ${MIRRORED_PYTHON}: ${MIRRORED_CUDA_WHEEL_DIRS}); "
                        "set CUDAToolkit_ROOT, NCCL_HOME, CUDNN_HOME, MIRRORED_PYTHON (a Python with nvidia-nccl-cu13, "
                        "nvidia-cudnn-cu13 and nvidia-cublas) or MIRRORED_CUDA=OFF")
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
    if(NOT MIRRORED_CUBLAS_FOUND)
      list(APPEND missing "cuBLAS (neither the toolkit's nor the wheel nvidia-cublas: set MIRRORED_PYTHON)")
    endif()
    string(REPLACE ";" " and " missing "${missing}")
    set(MIRRORED_CUDA_NOT_BUILT_REASON "CUDA ${CUDAToolkit_VERSION} found, but ${missing} not found")
    message(WARNING "\n*** mirrored: CPU-ONLY BUILD. ${MIRRORED_CUDA_NOT_BUILT_REASON}.\n"
                    "*** This binary cannot use GPUs (device = auto will compute on the CPU). Reconfigure with "
                    "the paths above (or -DMIRRORED_PYTHON=a Python with the nvidia-nccl-cu13 and "
                    "nvidia-cudnn-cu13 wheels), or -DMIRRORED_CUDA=ON to make this an error, or -DMIRRORED_CUDA=OFF to "
                    "silence it.\n")
  else()
    set(MIRRORED_CUDA_NOT_BUILT_REASON "no CUDA Toolkit found (set CUDAToolkit_ROOT, or put nvcc on PATH)")
    message(STATUS "mirrored: CUDA path not built: ${MIRRORED_CUDA_NOT_BUILT_REASON}")
  endif()
endif()
