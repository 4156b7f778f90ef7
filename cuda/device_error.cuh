// Recording a bad index or an integer division by zero from a kernel into the device's error
// record (cuda/internal.h, Note [Deferred index errors] in ops/index.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/internal.h"
#include "ops/backend.h"

namespace kiln::cuda {

// The first caller since the record was last cleared fills it in; later ones return at once.
// Only this device writes its record, so a device-scope compare-and-swap picks the writer:
// atomics on mapped host memory are atomic among one GPU's threads, not with the host. The
// plain read before it keeps the swap off a record the host may be clearing (state 2). The
// fields are written, then fenced, before the record is published (state 2), so a host that
// sees it published reads them whole.
__device__ inline void record_device_error(DeviceErrorRecord* rec, DeviceErrorKind kind,
                                           IndexErrorStyle style, uint64_t op, int64_t index,
                                           int64_t size, int64_t dim) {
  volatile DeviceErrorRecord* r = rec;
  if (r->state != 0u || atomicCAS(&rec->state, 0u, 1u) != 0u) return;
  r->kind = static_cast<int32_t>(kind);
  r->style = static_cast<int32_t>(style);
  r->op = op;
  r->index = index;
  r->size = size;
  r->dim = dim;
  __threadfence_system();
  r->state = 2u;
}

__device__ inline void record_index_error(DeviceErrorRecord* rec, IndexErrorStyle style,
                                          uint64_t op, int64_t index, int64_t size, int64_t dim) {
  record_device_error(rec, DeviceErrorKind::Index, style, op, index, size, dim);
}

// An op's name as the record carries it (see IndexCheck::op in ops/backend.h).
inline uint64_t op_address(const char* op) { return reinterpret_cast<uint64_t>(op); }

// The CUDA sink of the shared functors (Note [Shared elementwise functors] in
// ops/math/functors.h): an integer division by zero is recorded, not raised, and the element
// gets 0. Host/device so the visitors' host instantiations compile; it only runs on the device.
struct RecordZeroDivision {
  DeviceErrorRecord* rec;
  uint64_t op;
  __host__ __device__ void zero_division() const {
#if defined(__CUDA_ARCH__)
    record_device_error(rec, DeviceErrorKind::ZeroDivision, IndexErrorStyle::Dim, op, 0, 0, 0);
#endif
  }
};

}  // namespace kiln::cuda
