#include "core/determinism.h"

#include <atomic>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace kiln {

namespace {
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_warn_only{false};

void stderr_warning(const std::string& message) { std::cerr << "Warning: " << message << "\n"; }
std::atomic<WarningHandler> g_handler{&stderr_warning};
}  // namespace

bool deterministic_algorithms() { return g_enabled.load(std::memory_order_relaxed); }
bool deterministic_warn_only() { return g_warn_only.load(std::memory_order_relaxed); }

void set_deterministic_algorithms(bool enabled, bool warn_only) {
  g_enabled.store(enabled);
  g_warn_only.store(warn_only);
}

void set_warning_handler(WarningHandler handler) {
  g_handler.store(handler ? handler : &stderr_warning);
}

void emit_warning(const std::string& message) { g_handler.load()(message); }

void alert_not_deterministic(const char* op, Device device) {
  if (!deterministic_algorithms()) return;
  std::ostringstream msg;
  msg << "[" << op << "] does not have a deterministic implementation on " << device.str()
      << ", but you set "
         "'kiln.use_deterministic_algorithms(True)'. You can turn off determinism just for this "
         "operation, or use the 'warn_only=True' option if that is acceptable for your "
         "application.";
  if (deterministic_warn_only()) {
    emit_warning(msg.str());
    return;
  }
  fail(ErrorKind::Runtime, msg.str());
}

}  // namespace kiln
