// The CPU kernels' thread pool (OpenMP). Worker processes forked from a
// process that already ran parallel kernels must call set_num_threads(1)
// first: GNU OpenMP's pool does not survive fork().
#pragma once

namespace kiln {

void set_num_threads(int n);
int get_num_threads();

}  // namespace kiln
