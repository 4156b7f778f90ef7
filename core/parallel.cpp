#include "core/parallel.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"

namespace kiln {

void set_num_threads(int n) {
  KILN_CHECK(n > 0, Runtime, "[set_num_threads] Number of threads must be positive, got ", n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

int get_num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace kiln
