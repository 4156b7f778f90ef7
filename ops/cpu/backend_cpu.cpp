#include "ops/cpu/kernels.h"

namespace kiln::cpu {

const Backend& backend() {
  static const Backend table = [] {
    Backend b;
    b.unary = unary_kernel;
    b.binary = binary_kernel;
    b.copy = copy_kernel;
    b.fill = fill_kernel;
    b.where = where_kernel;
    b.reduce = reduce_kernel;
    b.bmm = bmm_kernel;
    b.row_gather = row_gather_kernel;
    b.row_scatter_add = row_scatter_add_kernel;
    return b;
  }();
  return table;
}

}  // namespace kiln::cpu
