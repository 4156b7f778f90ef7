// libFuzzer target: the safetensors header's JSON reader (core/json.h). Any input either
// parses or raises kiln::Error; a parsed document is written back and must read the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/json.h"

namespace {

void write(std::string& out, const kiln::Json& v) {
  switch (v.kind) {
    case kiln::Json::Kind::Object:
      out += '{';
      for (size_t i = 0; i < v.members.size(); ++i) {
        if (i) out += ',';
        kiln::write_json_string(out, v.members[i].first);
        out += ':';
        write(out, v.members[i].second);
      }
      out += '}';
      break;
    case kiln::Json::Kind::Array:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        write(out, v.items[i]);
      }
      out += ']';
      break;
    case kiln::Json::Kind::String:
      kiln::write_json_string(out, v.str);
      break;
    case kiln::Json::Kind::Int:
      out += std::to_string(v.num);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kiln::Json doc;
  try {
    doc = kiln::parse_json(text, "[fuzz] ", "input");
  } catch (const kiln::Error&) {
    return 0;
  }
  std::string again;
  write(again, doc);
  std::string twice;
  write(twice, kiln::parse_json(again, "[fuzz round trip] ", "input"));
  if (again != twice) __builtin_trap();
  return 0;
}
