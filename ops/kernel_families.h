// Every kernel family of struct Backend (ops/backend.h), by field name: those every device has,
// those only GPUs have, those only the CPU has. The CPU table (ops/cpu/backend_cpu.cpp) and
// missing_kernel_families (ops/backend.cpp, what a GPU backend lacks) expand from these lists,
// and the static_assert below checks that they name every field, so a new family is its field in
// struct Backend, its name here, and its kernels.
#pragma once

#include "ops/backend.h"

#define KILN_KERNEL_FAMILIES(_) \
  _(unary)                      \
  _(binary)                     \
  _(copy)                       \
  _(fill)                       \
  _(where)                      \
  _(reduce)                     \
  _(bmm)                        \
  _(index_take)                 \
  _(index_put)                  \
  _(nonzero)                    \
  _(triangle)                   \
  _(sort)                       \
  _(gather_rows)                \
  _(unique_sorted)              \
  _(random)                     \
  _(bernoulli)                  \
  _(dropout)                    \
  _(dropout_backward)           \
  _(arg_reduce)                 \
  _(scan)                       \
  _(row_gather)                 \
  _(row_scatter_add)            \
  _(optimizer_step)             \
  _(softmax_lastdim)            \
  _(softmax_backward_lastdim)   \
  _(layer_norm_forward)         \
  _(layer_norm_backward)        \
  _(cross_entropy_forward)      \
  _(cross_entropy_backward)     \
  _(amp_unscale)                \
  _(batch_norm_forward)         \
  _(batch_norm_backward)        \
  _(max_pool2d_forward)         \
  _(max_pool2d_backward)        \
  _(avg_pool2d_forward)         \
  _(avg_pool2d_backward)        \
  _(attention_forward)          \
  _(attention_backward)

// Families only GPU backends have: the CPU's front ends check indices eagerly, a GPU checks them
// on the device (Note [Deferred index errors], ops/index.cpp).
#define KILN_GPU_ONLY_KERNEL_FAMILIES(_) _(index_check)

// Families only the CPU has, on purpose: CUDA inputs run them through the CPU (Note [CUDA linear
// algebra through the CPU], ops/linalg_decomp.cpp), so a device is complete without them.
#define KILN_CPU_ONLY_KERNEL_FAMILIES(_) \
  _(linalg_lu)                           \
  _(linalg_solve)                        \
  _(linalg_cholesky)                     \
  _(linalg_qr)                           \
  _(linalg_svd)                          \
  _(linalg_eigh)                         \
  _(linalg_solve_triangular)             \
  _(linalg_lstsq)

namespace kiln {

// Every family is one function pointer, so counting the lists checks that they name every field.
#define KILN_COUNT_FAMILY(family) +1
static_assert(sizeof(Backend) == (0 KILN_KERNEL_FAMILIES(KILN_COUNT_FAMILY)
                                      KILN_GPU_ONLY_KERNEL_FAMILIES(KILN_COUNT_FAMILY)
                                          KILN_CPU_ONLY_KERNEL_FAMILIES(KILN_COUNT_FAMILY)) *
                                     sizeof(void (*)()),
              "the KILN_*KERNEL_FAMILIES lists must name every field of struct Backend once");
#undef KILN_COUNT_FAMILY

}  // namespace kiln
