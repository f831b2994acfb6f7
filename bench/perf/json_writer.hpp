// A small streaming JSON writer: objects, arrays, strings, numbers, booleans and null, indented
// two spaces per level so results files read well in a diff. It keeps a stack of open
// containers and inserts commas itself; a key is required inside objects and rejected elsewhere
// (misuse is a programming error and stops the program, never silently bad JSON).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::perf {

class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  /// The key of the next value; only inside an object.
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  /// Non-finite numbers are written as null (JSON has no NaN or infinity).
  JsonWriter& value(double v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(bool v);
  JsonWriter& null();

  /// key(name).value(v) in one call.
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  /// The document so far; complete once every container is closed.
  const std::string& str() const { return out_; }
  bool complete() const { return stack_.empty() && !out_.empty(); }

  /// `s` as a quoted JSON string (escapes quotes, backslashes and control characters).
  static std::string quote(std::string_view s);

 private:
  enum class Frame { kObject, kArray };
  void beforeValue();
  void newline();

  std::string out_;
  std::vector<Frame> stack_;
  std::vector<bool> hasItems_;
  bool keyPending_ = false;
};

}  // namespace ferry::perf
