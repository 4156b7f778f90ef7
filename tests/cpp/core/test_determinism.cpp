// core/determinism.h: the alert raises, warns or stays quiet as the switch says.
// The device is only named, so a CUDA device needs no GPU here.
#include <gtest/gtest.h>

#include <string>

#include "core/determinism.h"
#include "core/error.h"

namespace kiln {
namespace {

std::string g_last_warning;
void record_warning(const std::string& message) { g_last_warning = message; }

// Turns the switch off and restores stderr warnings even when an expectation fails.
struct DeterminismGuard {
  ~DeterminismGuard() {
    set_deterministic_algorithms(false);
    set_warning_handler(nullptr);
  }
};

const Device kCuda(DeviceType::CUDA, 0);

TEST(Determinism, OffByDefaultAndQuiet) {
  EXPECT_FALSE(deterministic_algorithms());
  EXPECT_NO_THROW(alert_not_deterministic("index_add_", kCuda));
}

TEST(Determinism, RaisesARuntimeErrorNamingTheOp) {
  DeterminismGuard guard;
  set_deterministic_algorithms(true);
  try {
    alert_not_deterministic("index_add_", kCuda);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[index_add_] does not have a deterministic implementation on cuda", 0), 0u)
        << msg;
    EXPECT_NE(msg.find("kiln.use_deterministic_algorithms(True)"), std::string::npos);
  }
}

TEST(Determinism, WarnOnlyCallsTheHandler) {
  DeterminismGuard guard;
  set_warning_handler(&record_warning);
  set_deterministic_algorithms(true, true);
  EXPECT_TRUE(deterministic_warn_only());
  g_last_warning.clear();
  EXPECT_NO_THROW(alert_not_deterministic("bincount", kCuda));
  EXPECT_EQ(g_last_warning.rfind("[bincount] does not have", 0), 0u) << g_last_warning;
}

}  // namespace
}  // namespace kiln
