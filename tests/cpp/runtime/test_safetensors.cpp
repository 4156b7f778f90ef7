// runtime/safetensors.h: round trips of every dtype and layout, and the checks that refuse
// malformed files with the file and the tensor key in the message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"
#include "runtime/safetensors.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/view.h"

namespace kiln {
namespace {

std::string temp_path(const std::string& name) {
  return str_cat(::testing::TempDir(), "kiln_st_", ::getpid(), "_", name, ".safetensors");
}

// Distinct values, zeros included so BOOL gets both states.
Tensor values(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, DType::Float64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = double((i * 37) % 11) * 0.5;
  return to_dtype(t, dtype);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = contiguous(a), cb = contiguous(b);
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.itemsize()) == 0;
}

// A file with a hand-written header and `data_bytes` bytes of data.
std::string write_raw(const std::string& name, const std::string& header, size_t data_bytes) {
  std::string path = temp_path(name);
  std::ofstream f(path, std::ios::binary);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
  f << header << std::string(data_bytes, '\0');
  return path;
}

std::string load_error(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value) << e.what();
    return e.what();
  }
  return "<no error>";
}

TEST(Safetensors, RoundTripsEveryDType) {
  const DType dtypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16,
                          DType::Int64,   DType::Int32,   DType::Int16,   DType::Int8,
                          DType::UInt8,   DType::Bool};
  std::map<std::string, Tensor> tensors;
  for (DType d : dtypes) tensors[dtype_name(d)] = values({3, 5}, d);
  std::string path = temp_path("dtypes");
  save_safetensors(path, tensors, R"({"kiln.structure":"{\"a\": [1]}","note":"caf\u00e9"})");
  SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [key, t] : tensors) {
    ASSERT_TRUE(f.tensors.count(key)) << key;
    EXPECT_TRUE(same_bytes(f.tensors.at(key), t)) << key;
  }
  EXPECT_EQ(f.metadata_json, "{\"kiln.structure\":\"{\\\"a\\\": [1]}\",\"note\":\"caf\xc3\xa9\"}");
  std::remove(path.c_str());
}

TEST(Safetensors, SavesViewsContiguouslyAndKeepsEdgeShapes) {
  Tensor base = values({4, 6}, DType::Float32);
  Tensor view = slice(transpose(base, 0, 1), 1, 1, 4, 2);  // [6, 2], not contiguous
  ASSERT_FALSE(view.is_contiguous());
  std::map<std::string, Tensor> tensors{{"view", view},
                                        {"scalar", full({}, 2.5, DType::Float64)},
                                        {"empty", empty({0, 3}, DType::Int32)}};
  std::string path = temp_path("layouts");
  save_safetensors(path, tensors);
  SafetensorsFile f = load_safetensors(path);
  EXPECT_TRUE(f.metadata_json.empty());
  EXPECT_TRUE(f.tensors.at("view").is_contiguous());
  EXPECT_TRUE(same_bytes(f.tensors.at("view"), view));
  EXPECT_EQ(f.tensors.at("scalar").dim(), 0);
  EXPECT_EQ(f.tensors.at("scalar").data<double>()[0], 2.5);
  EXPECT_EQ(f.tensors.at("empty").sizes(), (Shape{0, 3}));
  EXPECT_EQ(f.tensors.at("empty").dtype(), DType::Int32);
  // The file is exactly the 8-byte length, an 8-aligned header and 12*4 + 8 bytes of data.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  int64_t size = in.tellg();
  EXPECT_EQ((size - 8 - 56) % 8, 0);
  std::remove(path.c_str());
}

TEST(Safetensors, RefusesMalformedHeaders) {
  struct Case {
    const char* name;
    std::string header;
    size_t data;
    const char* expect;  // a part of the message
  };
  const Case cases[] = {
      {"notjson", "{\"a\":", 0, "header is not valid JSON"},
      {"float", R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4,
       "non-integer number"},
      {"literal", R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"b":true})", 4,
       "unsupported value"},
      {"dupkey", R"({"a":{},"a":{}})", 0, "duplicate key 'a'"},
      {"array", "[]", 0, "header must be a JSON object"},
      {"utf8", "{\"a\xff\":{}}", 0, "header is not valid UTF-8 (at byte 3)"},
      {"overlong", "{\"\xc0\xaf\":{}}", 0, "header is not valid UTF-8 (at byte 2)"},
      {"dtype", R"({"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1,
       "tensor 'w': unknown or unsupported dtype 'F8'"},
      {"missing", R"({"w":{"dtype":"F32","shape":[1]}})", 4, "tensor 'w': entry lacks"},
      {"negshape", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
       "tensor 'w': shape must be a list of non-negative integers"},
      {"span", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24,
       "tensor 'w': data_offsets [0, 20] span 20 bytes but dtype F32 and shape [2, 3] need 24"},
      {"past", R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[8,24]}})", 16,
       "tensor 'w': data_offsets [8, 24] run past the data region of 16 bytes"},
      {"reversed", R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4,
       "tensor 'w': data_offsets must be [begin, end]"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "tensor 'b': data_offsets [4, 12] overlap those of tensor 'a' [0, 8]"},
      {"meta", R"({"__metadata__":{"k":1}})", 0, "__metadata__ value of 'k' must be a string"},
      {"bool", R"({"m":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", 0, "run past"},
      {"huge", R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
       "tensor 'w': shape [4294967296, 4294967296] of dtype F64 is too large: Storage size "
       "calculation overflowed"},
      {"bytes", R"({"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})", 8,
       "is too large"},
      // No elements, but strides that would not fit in int64.
      {"emptyhuge",
       R"({"w":{"dtype":"U8","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", 0,
       "is too large"},
  };
  for (const Case& c : cases) {
    std::string path = write_raw(c.name, c.header, c.data);
    std::string msg = load_error(path);
    EXPECT_NE(msg.find("[load_safetensors] " + path + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << ": " << msg;
    std::remove(path.c_str());
  }
}

TEST(Safetensors, RefusesBadLengthsAndBooleans) {
  std::string path = temp_path("short");
  { std::ofstream(path, std::ios::binary) << "abc"; }
  EXPECT_NE(load_error(path).find("too short for the 8-byte header length"), std::string::npos);
  {
    std::ofstream f(path, std::ios::binary);
    f.put(char(0xff));
    f << std::string(7, '\0') << "{}";
  }
  EXPECT_NE(load_error(path).find("header length 255 runs past the end of the file (2 bytes"),
            std::string::npos);
  {
    std::ofstream f(path, std::ios::binary);
    const uint64_t n = 100000001;  // one byte over the format's header limit
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
  }
  EXPECT_NE(load_error(path).find("header length 100000001 exceeds the safetensors limit"),
            std::string::npos);
  std::remove(path.c_str());

  try {
    load_safetensors(::testing::TempDir());
    ADD_FAILURE() << "loading a directory did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[load_safetensors] "), std::string::npos);
  }
  try {
    load_safetensors(temp_path("missing"));
    ADD_FAILURE() << "loading a missing file did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open the file"), std::string::npos);
  }

  path = write_raw("boolbyte", R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 0);
  { std::ofstream(path, std::ios::binary | std::ios::app) << "\x01\x02"; }
  EXPECT_NE(load_error(path).find("tensor 'm': BOOL byte 1 is 2"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Safetensors, SaveRefusesReservedKeysAndBadMetadata) {
  std::string path = temp_path("reserved");
  std::map<std::string, Tensor> reserved{{"__metadata__", values({1}, DType::Float32)}};
  EXPECT_THROW(save_safetensors(path, reserved), Error);
  EXPECT_THROW(save_safetensors(path, {}, "{\"k\":[1]}"), Error);
  EXPECT_THROW(save_safetensors(path, {}, "not json"), Error);
  EXPECT_THROW(save_safetensors(path, {}, "{\"k\":\"\xff\"}"), Error);
  std::map<std::string, Tensor> bad_key{{"w\xff", values({1}, DType::Float32)}};
  EXPECT_THROW(save_safetensors(path, bad_key), Error);
  std::ifstream in(path);
  EXPECT_FALSE(in.good());  // nothing was written
}

}  // namespace
}  // namespace kiln
