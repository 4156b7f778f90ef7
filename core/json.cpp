#include "core/json.h"

#include <cstdio>
#include <utility>

#include "core/error.h"

namespace kiln {
namespace {

constexpr int kMaxJsonDepth = 64;

class JsonParser {
 public:
  // `where` prefixes every error ("[load_safetensors] <path>: ").
  JsonParser(const std::string& text, std::string where, const char* what)
      : s_(text), where_(std::move(where)), what_(what) {}

  Json parse_document() {
    Json v = value(0);
    skip_space();
    if (pos_ != s_.size()) error("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(ErrorKind::Value, where_, what_, " is not valid JSON (", what, " at byte ", pos_, ")");
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c)) error(str_cat("expected '", c, "'"));
  }

  Json value(int depth) {
    if (depth > kMaxJsonDepth) error("nested too deeply");
    skip_space();
    if (pos_ >= s_.size()) error("unexpected end");
    char c = s_[pos_];
    Json v;
    if (c == '{') {
      ++pos_;
      v.kind = Json::Kind::Object;
      if (consume('}')) return v;
      do {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a string key");
        std::string key = string();
        for (const auto& m : v.members)
          if (m.first == key) error(str_cat("duplicate key '", key, "'"));
        expect(':');
        v.members.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.kind = Json::Kind::Array;
      if (consume(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::String;
      v.str = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::Kind::Int;
      v.num = integer();
    } else {
      error(str_cat("unsupported value starting with '", c,
                    "' (kiln's JSON holds only "
                    "objects, arrays, strings and integers)"));
    }
    return v;
  }

  int64_t integer() {
    bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    size_t start = pos_;
    uint64_t mag = 0;
    const uint64_t limit = negative ? uint64_t(1) << 63 : uint64_t(INT64_MAX);
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      uint64_t d = static_cast<uint64_t>(s_[pos_] - '0');
      if (mag > (limit - d) / 10) error("integer out of the int64 range");
      mag = mag * 10 + d;
      ++pos_;
    }
    if (pos_ == start) error("expected digits");
    if (s_[start] == '0' && pos_ - start > 1) error("leading zero");
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      error("unsupported non-integer number");
    return negative ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
  }

  unsigned hex4() {
    if (s_.size() - pos_ < 4) error("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= unsigned(c - 'A' + 10);
      else
        error("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) error("unescaped control character in a string");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (pos_ >= s_.size()) error("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (s_.compare(pos_, 2, "\\u") != 0) error("unpaired surrogate in \\u escape");
            pos_ += 2;
            uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) error("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            error("unpaired surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          error(str_cat("bad escape '\\", e, "'"));
      }
    }
  }

  const std::string& s_;
  std::string where_;
  const char* what_;
  size_t pos_ = 0;
};

}  // namespace

const char* json_kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::Object:
      return "an object";
    case Json::Kind::Array:
      return "an array";
    case Json::Kind::String:
      return "a string";
    case Json::Kind::Int:
      return "an integer";
  }
  return "?";
}

Json parse_json(const std::string& text, const std::string& where, const char* what) {
  return JsonParser(text, where, what).parse_document();
}

void write_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

}  // namespace kiln
