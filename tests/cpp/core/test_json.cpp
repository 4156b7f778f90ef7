// core/json.h: the strict JSON reader behind safetensors headers and exported programs (also
// fuzzed: tests/fuzz/fuzz_json.cpp).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/json.h"

namespace kiln {
namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_json(text, "[test] ", "text");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "parsed: " << text;
  return "";
}

TEST(Json, ReadsTheHeaderSubset) {
  Json v = parse_json(R"( {"a": [1, -2, 9223372036854775807], "b": "x\u00e9\n"} )", "", "text");
  ASSERT_EQ(v.kind, Json::Kind::Object);
  ASSERT_EQ(v.members.size(), 2u);
  EXPECT_EQ(v.members[0].second.items[2].num, INT64_MAX);
  EXPECT_EQ(v.members[1].second.str, "x\xc3\xa9\n");
}

TEST(Json, RefusesWhatAHeaderNeverHolds) {
  EXPECT_NE(parse_error("1.5").find("non-integer"), std::string::npos);
  EXPECT_NE(parse_error("true").find("unsupported value"), std::string::npos);
  EXPECT_NE(parse_error(R"({"a":1,"a":2})").find("duplicate key 'a'"), std::string::npos);
  EXPECT_NE(parse_error("9223372036854775808").find("int64 range"), std::string::npos);
  EXPECT_NE(parse_error(R"("\ud800")").find("unpaired surrogate"), std::string::npos);
  EXPECT_NE(parse_error("{} x").find("trailing"), std::string::npos);
  EXPECT_NE(parse_error("[1,").find("[test] "), std::string::npos);
}

TEST(Json, BoundsNestingInsteadOfRecursingWithoutEnd) {
  const int ok = 64;  // the reader's depth limit
  EXPECT_NO_THROW(parse_json(std::string(ok, '[') + std::string(ok, ']'), "", "text"));
  const int deep = 100000;  // would overflow the C stack if each level recursed unchecked
  EXPECT_NE(parse_error(std::string(deep, '[')).find("nested too deeply"), std::string::npos);
}

TEST(Json, WritesStringsItReadsBack) {
  std::string out;
  write_json_string(out, std::string("q\"b\\\x01\x1f", 6));
  EXPECT_EQ(out, R"("q\"b\\\u0001\u001f")");
  EXPECT_EQ(parse_json(out, "", "text").str, std::string("q\"b\\\x01\x1f", 6));
}

}  // namespace
}  // namespace kiln
