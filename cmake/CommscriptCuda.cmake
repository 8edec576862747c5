# Looks for the CUDA toolkit and NCCL. COMMSCRIPT_WITH_CUDA=AUTO builds the CUDA/NCCL parts when
# both are found, ON makes their absence an error, OFF never looks. Result: COMMSCRIPT_HAVE_NCCL
# and, when true, the targets CUDA::cudart and commscript::nccl.
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
    find_library(NCCL_LIBRARY nccl HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(COMMSCRIPT_HAVE_NCCL ON)
    add_library(commscript::nccl UNKNOWN IMPORTED)
    set_target_properties(commscript::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    message(STATUS "commscript: CUDA ${CUDAToolkit_VERSION} and NCCL (${NCCL_LIBRARY}) found")
  elseif(_cs_cuda STREQUAL "ON")
    message(FATAL_ERROR "COMMSCRIPT_WITH_CUDA=ON but the CUDA toolkit or NCCL was not found "
                        "(CUDAToolkit_FOUND=${CUDAToolkit_FOUND}, NCCL_INCLUDE_DIR=${NCCL_INCLUDE_DIR}, "
                        "NCCL_LIBRARY=${NCCL_LIBRARY}); set NCCL_HOME or CUDAToolkit_ROOT")
  else()
    message(STATUS "commscript: CUDA/NCCL not found, building the CPU-only engine")
  endif()
endif()
