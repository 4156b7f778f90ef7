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
    b.arg_reduce = arg_reduce_kernel;
    b.scan = scan_kernel;
    return b;
  }();
  return table;
}

}  // namespace kiln::cpu
