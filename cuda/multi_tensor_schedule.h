// Note [Multi-tensor chunk schedule]
// The host side of kiln's multi-tensor kernels (optimizer steps, GradScaler's
// unscale): tensors are cut into chunks of `chunk` elements, one block per
// chunk, and the blocks are grouped into launches of at most `max_blocks`
// blocks over at most `max_tensors` tensor slots, so a kernel's argument
// struct (pointers per slot, a block -> (slot, chunk) map) stays under CUDA's
// 4 KB parameter limit. A tensor whose chunks straddle two launches continues
// in slot 0 of the next one; chunk indices stay absolute. Plain C++, so the
// schedule is tested without a GPU (tests/cpp/cuda/test_multi_tensor_schedule.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::cuda {

// For each launch: set_slot(slot, i) binds tensor i (an index into numels) to a
// slot, set_block(block, slot, chunk_index) fills the block map, and
// launch(blocks) runs it. Empty tensors get no slot.
template <typename SetSlot, typename SetBlock, typename Launch>
void schedule_chunks(const std::vector<int64_t>& numels, int max_tensors, int max_blocks,
                     int64_t chunk, SetSlot set_slot, SetBlock set_block, Launch launch) {
  int slot = 0, blocks = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t n = numels[i];
    if (n == 0) continue;
    set_slot(slot, i);
    const int64_t chunks = (n + chunk - 1) / chunk;
    for (int64_t c = 0; c < chunks; ++c) {
      set_block(blocks, slot, c);
      ++blocks;
      const bool last = c == chunks - 1;
      if (blocks == max_blocks || (last && slot + 1 == max_tensors)) {
        launch(blocks);
        blocks = 0;
        if (last) {
          slot = -1;
        } else {
          set_slot(0, i);
          slot = 0;
        }
      }
    }
    ++slot;
  }
  if (blocks > 0) launch(blocks);
}

}  // namespace kiln::cuda
