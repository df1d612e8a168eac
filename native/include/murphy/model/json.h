// A small JSON reader and writer for config.json, safetensors headers and shard indexes.
// Enough of RFC 8259 for those files: objects, arrays, strings (with \u escapes), numbers,
// true/false/null. Errors name the file and the byte offset.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "murphy/common.h"

namespace murphy {
namespace model {

struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object } type = Type::Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;  // in file order

  bool is_null() const { return type == Type::Null; }
  bool is_number() const { return type == Type::Number; }
  bool is_string() const { return type == Type::String; }
  bool is_object() const { return type == Type::Object; }
  bool is_array() const { return type == Type::Array; }
  // nullptr when absent (or when this is not an object)
  const Json* find(const std::string& key) const;
};

// Parses `text`; `where` names the source (a file path) in error messages.
Json json_parse(const std::string& text, const std::string& where);
// Writes a JSON string literal (with quotes and escapes).
std::string json_quote(const std::string& s);

}  // namespace model
}  // namespace murphy
