// kiln.use_deterministic_algorithms: a process-wide switch that makes ops
// without a deterministic implementation on a device raise (or warn), and
// restricts cuDNN to deterministic algorithms (as backends.cudnn.deterministic).
#pragma once

#include <string>

#include "core/device.h"

namespace kiln {

bool deterministic_algorithms();
bool deterministic_warn_only();
void set_deterministic_algorithms(bool enabled, bool warn_only = false);

// Called by an op that is about to run a nondeterministic kernel (float
// atomics whose summation order varies run to run) on `device`: raises a
// Runtime error when deterministic algorithms are on, or warns through the
// warning handler with warn_only. Does nothing when the switch is off.
void alert_not_deterministic(const char* op, Device device);

// Where warnings raised by C++ go; the Python module routes them to
// warnings.warn (UserWarning). The default writes to stderr.
using WarningHandler = void (*)(const std::string& message);
void set_warning_handler(WarningHandler handler);
// Sends `message` to the warning handler (a Python UserWarning once kiln._C is loaded).
void emit_warning(const std::string& message);

}  // namespace kiln
