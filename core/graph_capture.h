// Whether a CUDA graph is being captured, for host code that must not bake a host value into
// the graph or wait for the device while one is (Note [CUDA graphs] in cuda/graph.cpp). The
// counts live here, below both ops/ and cuda/, so a Generator or an optimizer front end can ask
// without depending on the CUDA runtime; cuda/graph.cpp keeps them up to date.
#pragma once

#include <string>

namespace kiln {

// A capture is underway on `device` (any thread): a host-side value that the captured work
// reads (a Generator's counter, an optimizer's step count) would be frozen into the graph.
bool graph_capture_underway(int device);

// The calling thread may not make the host wait for the GPU: it is capturing, or another thread
// captures in "global" mode (cudaStreamCaptureModeGlobal forbids unsafe calls on every thread).
bool host_sync_forbidden_by_capture();

// Raises RuntimeError "[op] <what> is not allowed while capturing a CUDA graph ..." when
// host_sync_forbidden_by_capture(); does nothing otherwise.
void check_not_capturing(const char* op, const std::string& what);

// Bookkeeping for cuda/graph.cpp: a capture on `device` by the calling thread begins or ends;
// `global` when its mode is "global".
void note_capture_begin(int device, bool global);
void note_capture_end(int device, bool global);

}  // namespace kiln
