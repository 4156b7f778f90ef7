// kiln's error type. Each kind maps to one Python exception; messages start
// with the op in brackets and name the offending shapes, dtypes or devices.
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

enum class ErrorKind { Runtime, Value, Type, Index, NotImplemented, OutOfMemory };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Shapes print as [2, 3] in messages.
std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& v);

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream ss;
  (ss << ... << args);
  return ss.str();
}

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, const Args&... args) {
  throw Error(kind, str_cat(args...));
}

}  // namespace kiln

// KILN_CHECK(cond, Kind, message parts...): throws kiln::Error of ErrorKind::Kind.
#define KILN_CHECK(cond, kind, ...) \
  do {                              \
    if (!(cond)) ::kiln::fail(::kiln::ErrorKind::kind, __VA_ARGS__); \
  } while (0)
