# The CPU math libraries kiln uses where they are installed (Note [CPU math libraries] in
# ops/cpu/cpu_libraries.h): OpenBLAS (Debian's libopenblas-openmp-dev) for GEMM and oneDNN
# (libdnnl-dev) for convolution and pooling. Both are optional: without them the CPU kernels
# fall back to Eigen and kiln's own loops, and kiln.__config__.show() says which is in use.
#
# OpenBLAS must be the OpenMP build, so that its threads are kiln's OpenMP threads and
# kiln.set_num_threads governs both; the pthread build would run a second pool beside OpenMP's.
# Debian installs it beside the pthread build under openblas-openmp/. A copy under
# third_party/openblas (include/ and lib/, git-ignored) is found first: that is how the offline
# GPU machine, which has neither library, gets one carried with the working tree.
#
# Sets KILN_WITH_OPENBLAS / KILN_WITH_DNNL, KILN_CPU_LIBRARIES (to link) and
# KILN_CPU_LIBRARY_INCLUDE_DIRS, and drops ops/cpu/*_openblas.cpp and ops/cpu/*_dnnl.cpp from
# KILN_SOURCES when their library is absent.

option(KILN_OPENBLAS "Use OpenBLAS (OpenMP build) for CPU GEMMs when it is found" ON)
option(KILN_DNNL "Use oneDNN for CPU convolution and pooling when it is found" ON)

set(KILN_WITH_OPENBLAS OFF)
set(KILN_WITH_DNNL OFF)
set(KILN_CPU_LIBRARIES "")
set(KILN_CPU_LIBRARY_INCLUDE_DIRS "")

if(KILN_OPENBLAS)
  find_path(KILN_OPENBLAS_INCLUDE_DIR cblas.h NO_DEFAULT_PATH
    PATHS ${PROJECT_SOURCE_DIR}/third_party/openblas/include
      /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/openblas-openmp)
  find_library(KILN_OPENBLAS_LIBRARY NAMES openblas NO_DEFAULT_PATH
    PATHS ${PROJECT_SOURCE_DIR}/third_party/openblas/lib
      /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/openblas-openmp)
  if(KILN_OPENBLAS_INCLUDE_DIR AND KILN_OPENBLAS_LIBRARY)
    set(KILN_WITH_OPENBLAS ON)
    list(APPEND KILN_CPU_LIBRARIES ${KILN_OPENBLAS_LIBRARY})
    list(APPEND KILN_CPU_LIBRARY_INCLUDE_DIRS ${KILN_OPENBLAS_INCLUDE_DIR})
  endif()
endif()
if(KILN_WITH_OPENBLAS)
  message(STATUS "kiln: OpenBLAS ON (${KILN_OPENBLAS_LIBRARY})")
else()
  message(STATUS "kiln: OpenBLAS OFF (float64 CPU GEMMs on Eigen; install libopenblas-openmp-dev)")
  list(FILTER KILN_SOURCES EXCLUDE REGEX ".*/ops/cpu/[^/]*_openblas\\.cpp$")
endif()

if(KILN_DNNL)
  find_path(KILN_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp
    PATHS ${PROJECT_SOURCE_DIR}/third_party/dnnl/include NO_CMAKE_SYSTEM_PATH)
  find_path(KILN_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  # scripts/stage_cpu_libs.sh copies the library under its SONAME, with no libdnnl.so link.
  find_library(KILN_DNNL_LIBRARY NAMES dnnl libdnnl.so.2
    PATHS ${PROJECT_SOURCE_DIR}/third_party/dnnl/lib NO_CMAKE_SYSTEM_PATH)
  find_library(KILN_DNNL_LIBRARY NAMES dnnl)
  if(KILN_DNNL_INCLUDE_DIR AND KILN_DNNL_LIBRARY)
    set(KILN_WITH_DNNL ON)
    list(APPEND KILN_CPU_LIBRARIES ${KILN_DNNL_LIBRARY})
    # Debian's libdnnl.so.2 needs the OpenCL loader, which a staged copy brings beside it. The
    # copy has no RUNPATH of its own, so libkiln links the loader too (kept by --no-as-needed,
    # though libkiln calls nothing in it): loaded through libkiln's RPATH, it is there when
    # libdnnl.so.2 asks for it.
    get_filename_component(_kiln_dnnl_dir ${KILN_DNNL_LIBRARY} DIRECTORY)
    if(_kiln_dnnl_dir STREQUAL "${PROJECT_SOURCE_DIR}/third_party/dnnl/lib" AND
       EXISTS ${_kiln_dnnl_dir}/libOpenCL.so.1)
      list(APPEND KILN_CPU_LIBRARIES "-Wl,--push-state,--no-as-needed"
        ${_kiln_dnnl_dir}/libOpenCL.so.1 "-Wl,--pop-state")
    endif()
    list(APPEND KILN_CPU_LIBRARY_INCLUDE_DIRS ${KILN_DNNL_INCLUDE_DIR})
  endif()
endif()
if(KILN_WITH_DNNL)
  message(STATUS "kiln: oneDNN ON (${KILN_DNNL_LIBRARY})")
else()
  message(STATUS "kiln: oneDNN OFF (CPU convolution on im2col + GEMM; install libdnnl-dev)")
  list(FILTER KILN_SOURCES EXCLUDE REGEX ".*/ops/cpu/[^/]*_dnnl\\.cpp$")
endif()
