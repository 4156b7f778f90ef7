// A small strict JSON reader shared by the safetensors loader and the exported-program loader
// (Note [C++ safetensors], Note [Export file format]). It holds only objects, arrays, strings
// and integers: anything else (floats, true, null, duplicate keys, trailing garbage) is
// refused rather than guessed at, so a file that parses means one thing.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct Json {
  enum class Kind { Object, Array, String, Int } kind = Kind::Int;
  std::string str;
  int64_t num = 0;
  std::vector<std::pair<std::string, Json>> members;  // in file order
  std::vector<Json> items;
};

// "an object", "an array", "a string", "an integer": for error messages.
const char* json_kind_name(Json::Kind k);

// Parses one JSON document. Errors are kiln::Error of kind Value: "<where><what> is not valid
// JSON (<reason> at byte N)".
Json parse_json(const std::string& text, const std::string& where, const char* what);

// Appends `s` as a quoted, escaped JSON string.
void write_json_string(std::string& out, const std::string& s);

}  // namespace kiln
