// Note [C++ safetensors]
// The same file format and the same checks as python/kiln/serialization.py, for programs that
// embed kiln without Python. The header is parsed by a small strict JSON reader: a safetensors
// header only holds objects, arrays, strings and integers, so anything else (floats, true,
// null, duplicate keys, trailing garbage other than the spaces that pad the header) is refused
// rather than guessed at. Tensor bytes are little-endian (kiln runs on little-endian hosts)
// and are copied straight into new CPU tensors.
#include "runtime/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace kiln {
namespace {

constexpr const char* kMetadataKey = "__metadata__";
// The safetensors format's own cap on the JSON header (the reference reader's), so a hostile
// length cannot make the loader read and parse gigabytes; serialization.py has the same.
constexpr uint64_t kMaxHeaderBytes = 100000000;

// The __metadata__ object as compact JSON, after checking it maps strings to strings.
std::string metadata_to_json(const Json& meta, const std::string& where) {
  KILN_CHECK(meta.kind == Json::Kind::Object, Value, where,
             "__metadata__ must be a JSON object of strings to strings; got ",
             json_kind_name(meta.kind));
  std::string out = "{";
  for (const auto& [key, value] : meta.members) {
    KILN_CHECK(value.kind == Json::Kind::String, Value, where, "__metadata__ value of '", key,
               "' must be a string; got ", json_kind_name(value.kind));
    if (out.size() > 1) out += ',';
    write_json_string(out, key);
    out += ':';
    write_json_string(out, value.str);
  }
  return out + "}";
}

struct DTypeCode {
  const char* code;
  DType dtype;
};
constexpr DTypeCode kCodes[] = {{"F64", DType::Float64}, {"F32", DType::Float32},
                                {"F16", DType::Float16}, {"BF16", DType::BFloat16},
                                {"I64", DType::Int64},   {"I32", DType::Int32},
                                {"I16", DType::Int16},   {"I8", DType::Int8},
                                {"U8", DType::UInt8},    {"BOOL", DType::Bool}};

const char* code_of(DType d) {
  for (const auto& c : kCodes)
    if (c.dtype == d) return c.code;
  fail(ErrorKind::Type, "[save_safetensors] dtype ", d, " has no safetensors code");
}

struct Entry {
  std::string key;
  DType dtype;
  Shape shape;
  int64_t begin, end;
};

Entry check_entry(const std::string& key, const Json& e, uint64_t data_size,
                  const std::string& where) {
  const std::string at = str_cat(where, "tensor '", key, "': ");
  KILN_CHECK(e.kind == Json::Kind::Object, Value, at, "entry must be a JSON object; got ",
             json_kind_name(e.kind));
  const Json* fields[3] = {nullptr, nullptr, nullptr};
  const char* names[3] = {"dtype", "shape", "data_offsets"};
  for (const auto& [name, value] : e.members) {
    for (int i = 0; i < 3; ++i)
      if (name == names[i]) fields[i] = &value;
  }
  for (int i = 0; i < 3; ++i)
    KILN_CHECK(fields[i] != nullptr, Value, at, "entry lacks '", names[i], "'");
  const Json& code = *fields[0];
  const DTypeCode* found = nullptr;
  if (code.kind == Json::Kind::String)
    for (const auto& c : kCodes)
      if (code.str == c.code) found = &c;
  KILN_CHECK(found != nullptr, Value, at, "unknown or unsupported dtype ",
             code.kind == Json::Kind::String ? "'" + code.str.substr(0, 40) + "'"
                                             : std::string("(") + json_kind_name(code.kind) + ")",
             "; kiln reads BF16, BOOL, F16, F32, F64, I16, I32, I64, I8, U8");
  Entry out{key, found->dtype, {}, 0, 0};

  const Json& shape = *fields[1];
  KILN_CHECK(shape.kind == Json::Kind::Array, Value, at,
             "shape must be a list of non-negative integers; got ", json_kind_name(shape.kind));
  for (const Json& d : shape.items) {
    KILN_CHECK(d.kind == Json::Kind::Int && d.num >= 0, Value, at,
               "shape must be a list of non-negative integers; got an element that is ",
               d.kind == Json::Kind::Int ? str_cat(d.num) : json_kind_name(d.kind));
    out.shape.push_back(d.num);
  }
  // The sizes a tensor may have (Note [Checked shape arithmetic] in core/shape.h).
  int64_t numel = 0, nbytes = 0;
  const bool overflow = !numel_fits(out.shape, &numel) ||
                        mul_overflows(numel, static_cast<int64_t>(itemsize(out.dtype)), &nbytes);

  const Json& offs = *fields[2];
  KILN_CHECK(offs.kind == Json::Kind::Array && offs.items.size() == 2 &&
                 offs.items[0].kind == Json::Kind::Int && offs.items[1].kind == Json::Kind::Int &&
                 offs.items[0].num >= 0 && offs.items[0].num <= offs.items[1].num,
             Value, at, "data_offsets must be [begin, end] integers with 0 <= begin <= end");
  out.begin = offs.items[0].num;
  out.end = offs.items[1].num;
  const int64_t span = out.end - out.begin;
  KILN_CHECK(!overflow, Value, at, "shape ", out.shape, " of dtype ", found->code,
             " is too large: Storage size calculation overflowed");
  KILN_CHECK(nbytes == span, Value, at, "data_offsets [", out.begin, ", ", out.end, "] span ", span,
             " bytes but dtype ", found->code, " and shape ", out.shape, " need ", nbytes);
  KILN_CHECK(static_cast<uint64_t>(out.end) <= data_size, Value, at, "data_offsets [", out.begin,
             ", ", out.end, "] run past the data region of ", data_size, " bytes");
  return out;
}

// The byte offset of the first byte that breaks UTF-8 (overlong forms and surrogates
// included), or -1. Python's loader decodes the header as UTF-8, so keys agree in both.
int64_t invalid_utf8_at(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : 9;
    if (n == 9 || i + n >= s.size()) return static_cast<int64_t>(i);
    uint32_t cp = n == 0 ? c : c & (0x3F >> n);
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return static_cast<int64_t>(i);
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
      return static_cast<int64_t>(i);
    i += n + 1;
  }
  return -1;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string where = str_cat("[load_safetensors] ", path, ": ");
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f.is_open(), Runtime, where, "cannot open the file: ", std::strerror(errno));
  // A directory opens as a stream on Linux and seeks to a meaningless end on some filesystems.
  std::error_code ec;
  KILN_CHECK(std::filesystem::is_regular_file(path, ec), Runtime, where,
             "cannot read the file (not a regular file: is it a directory?)");
  f.seekg(0, std::ios::end);
  const std::streamoff end = f.tellg();
  KILN_CHECK(f.good() && end >= 0, Runtime, where, "cannot read the file (is it a directory?)");
  const uint64_t file_size = static_cast<uint64_t>(end);
  f.seekg(0);
  KILN_CHECK(file_size >= 8, Value, where, "file is ", file_size,
             " bytes, too short for the 8-byte header length");
  unsigned char len_bytes[8];
  f.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  KILN_CHECK(n <= kMaxHeaderBytes, Value, where, "header length ", n,
             " exceeds the safetensors limit of ", kMaxHeaderBytes, " bytes");
  KILN_CHECK(n <= file_size - 8, Value, where, "header length ", n,
             " runs past the end of the file (", file_size - 8, " bytes follow the length)");
  std::string text(n, '\0');
  f.read(text.data(), static_cast<std::streamsize>(n));
  KILN_CHECK(f.good(), Runtime, where, "reading the header failed");
  const int64_t bad = invalid_utf8_at(text);
  KILN_CHECK(bad < 0, Value, where, "header is not valid UTF-8 (at byte ", bad, ")");
  Json header = parse_json(text, where, "header");
  KILN_CHECK(header.kind == Json::Kind::Object, Value, where, "header must be a JSON object; got ",
             json_kind_name(header.kind));

  const uint64_t data_start = 8 + n, data_size = file_size - data_start;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.members) {
    if (key == kMetadataKey) {
      out.metadata_json = metadata_to_json(value, where);
      continue;
    }
    entries.push_back(check_entry(key, value, data_size, where));
  }
  // Overlapping ranges would alias two tensors' bytes: a malformed or crafted file.
  std::vector<const Entry*> by_begin;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i) {
    const Entry& a = *by_begin[i - 1];
    const Entry& b = *by_begin[i];
    KILN_CHECK(b.begin >= a.end, Value, where, "tensor '", b.key, "': data_offsets [", b.begin,
               ", ", b.end, "] overlap those of tensor '", a.key, "' [", a.begin, ", ", a.end, "]");
  }

  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    const int64_t nbytes = e.end - e.begin;
    if (nbytes > 0) {
      f.seekg(static_cast<std::streamoff>(data_start + e.begin));
      f.read(static_cast<char*>(t.data_ptr()), nbytes);
      KILN_CHECK(f.good(), Runtime, where, "tensor '", e.key, "': reading ", nbytes,
                 " bytes failed; the file changed while loading");
    }
    if (e.dtype == DType::Bool) {
      const auto* p = static_cast<const unsigned char*>(t.data_ptr());
      for (int64_t i = 0; i < nbytes; ++i)
        KILN_CHECK(p[i] <= 1, Value, where, "tensor '", e.key, "': BOOL byte ", i, " is ",
                   int(p[i]), "; only 0 and 1 are booleans");
    }
    out.tensors.emplace(e.key, std::move(t));
  }
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::string& metadata_json) {
  const std::string where = str_cat("[save_safetensors] ", path, ": ");
  std::string header = "{";
  std::vector<Tensor> data;
  int64_t offset = 0;
  for (const auto& [key, t] : tensors) {
    KILN_CHECK(key != kMetadataKey, Value, where, "'", kMetadataKey,
               "' is reserved for the metadata and cannot name a tensor");
    KILN_CHECK(t.defined(), Value, where, "tensor '", key, "' is undefined");
    KILN_CHECK(invalid_utf8_at(key) < 0, Value, where, "tensor key '", key, "' is not valid UTF-8");
    Tensor c = contiguous(to_device(t, Device(DeviceType::CPU)));
    const int64_t nbytes = c.numel() * static_cast<int64_t>(c.itemsize());
    if (header.size() > 1) header += ',';
    write_json_string(header, key);
    header += str_cat(":{\"dtype\":\"", code_of(c.dtype()), "\",\"shape\":[");
    for (int64_t d = 0; d < c.dim(); ++d) header += str_cat(d ? "," : "", c.size(d));
    header += str_cat("],\"data_offsets\":[", offset, ",", offset + nbytes, "]}");
    offset += nbytes;
    data.push_back(std::move(c));
  }
  if (!metadata_json.empty()) {
    KILN_CHECK(invalid_utf8_at(metadata_json) < 0, Value, where,
               "metadata_json is not valid UTF-8");
    Json meta = parse_json(metadata_json, where + "metadata_json: ", "metadata_json");
    if (header.size() > 1) header += ',';
    write_json_string(header, kMetadataKey);
    header += ':' + metadata_to_json(meta, where);
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');  // padding that aligns the data section

  // Written next to the target and renamed over it, so a crash never leaves half a file.
  std::random_device rd;
  const std::string tmp = str_cat(path, ".", std::hex, rd(), rd(), ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    KILN_CHECK(f.is_open(), Runtime, where, "cannot create ", tmp, ": ", std::strerror(errno));
    unsigned char len_bytes[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(n >> (8 * i));
    f.write(reinterpret_cast<const char*>(len_bytes), 8);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const Tensor& c : data)
      f.write(static_cast<const char*>(c.data_ptr()),
              static_cast<std::streamsize>(c.numel() * c.itemsize()));
    f.flush();
    if (!f.good()) {
      std::remove(tmp.c_str());
      fail(ErrorKind::Runtime, where, "writing ", tmp, " failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    fail(ErrorKind::Runtime, where, "cannot rename ", tmp, " to the target: ", reason);
  }
}

}  // namespace kiln
