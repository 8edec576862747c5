# Looks for the CUDA toolkit and NCCL. COMMSCRIPT_WITH_CUDA=AUTO builds the CUDA/NCCL parts when
# both are found, ON makes their absence an error, OFF never looks. Only the headers are needed:
# libcudart and libnccl are opened at run time (engine/core/gpu_libs.cpp), never linked. Result:
# COMMSCRIPT_HAVE_NCCL and, when true, the header-only target commscript::cuda_headers.
set(COMMSCRIPT_HAVE_NCCL OFF)
string(TOUPPER "${COMMSCRIPT_WITH_CUDA}" _cs_cuda)
if(NOT _cs_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "COMMSCRIPT_WITH_CUDA must be AUTO, ON or OFF (got '${COMMSCRIPT_WITH_CUDA}')")
endif()

if(NOT _cs_cuda STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(_nccl_hints $ENV{NCCL_HOME} ${NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
              PATH_SUFFIXES include)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR)
    set(COMMSCRIPT_HAVE_NCCL ON)
    add_library(commscript::cuda_headers INTERFACE IMPORTED)
    set_target_properties(commscript::cuda_headers PROPERTIES
                          INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS};${NCCL_INCLUDE_DIR}")
    message(STATUS "commscript: CUDA ${CUDAToolkit_VERSION} and NCCL headers found (libraries opened at run time)")
  elseif(_cs_cuda STREQUAL "ON")
    message(FATAL_ERROR "COMMSCRIPT_WITH_CUDA=ON but the CUDA toolkit or NCCL was not found "
                        "(CUDAToolkit_FOUND=${CUDAToolkit_FOUND}, NCCL_INCLUDE_DIR=${NCCL_INCLUDE_DIR}); "
                        "set NCCL_HOME or CUDAToolkit_ROOT")
  else()
    message(STATUS "commscript: CUDA/NCCL not found, building the CPU-only engine")
  endif()
endif()
