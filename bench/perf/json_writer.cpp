// Streaming JSON writer. See json_writer.hpp.
#include "bench/perf/json_writer.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ferry::perf {
namespace {

[[noreturn]] void misuse(const char* what) {
  std::fprintf(stderr, "ferry-perf: internal error: JSON writer misuse: %s\n", what);
  std::abort();
}

}  // namespace

std::string JsonWriter::quote(std::string_view s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': q += "\\\""; break;
      case '\\': q += "\\\\"; break;
      case '\n': q += "\\n"; break;
      case '\r': q += "\\r"; break;
      case '\t': q += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          q += buf;
        } else {
          q += static_cast<char>(c);  // UTF-8 passes through unchanged
        }
    }
  }
  return q + "\"";
}

void JsonWriter::newline() {
  out_ += '\n';
  out_.append(stack_.size() * 2, ' ');
}

// Commas and indentation before a value; checks that a key came first inside objects.
void JsonWriter::beforeValue() {
  if (stack_.empty()) {
    if (!out_.empty()) misuse("a second top-level value");
    return;
  }
  if (stack_.back() == Frame::kObject) {
    if (!keyPending_) misuse("a value without a key inside an object");
    keyPending_ = false;
    return;
  }
  if (hasItems_.back()) out_ += ',';
  hasItems_.back() = true;
  newline();
}

JsonWriter& JsonWriter::key(std::string_view name) {
  if (stack_.empty() || stack_.back() != Frame::kObject || keyPending_) misuse("a key outside an object");
  if (hasItems_.back()) out_ += ',';
  hasItems_.back() = true;
  newline();
  out_ += quote(name);
  out_ += ": ";
  keyPending_ = true;
  return *this;
}

JsonWriter& JsonWriter::beginObject() {
  beforeValue();
  out_ += '{';
  stack_.push_back(Frame::kObject);
  hasItems_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  beforeValue();
  out_ += '[';
  stack_.push_back(Frame::kArray);
  hasItems_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  if (stack_.empty() || stack_.back() != Frame::kObject || keyPending_) misuse("endObject without an open object");
  const bool items = hasItems_.back();
  stack_.pop_back();
  hasItems_.pop_back();
  if (items) newline();
  out_ += '}';
  if (stack_.empty()) out_ += '\n';
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  if (stack_.empty() || stack_.back() != Frame::kArray) misuse("endArray without an open array");
  const bool items = hasItems_.back();
  stack_.pop_back();
  hasItems_.pop_back();
  if (items) newline();
  out_ += ']';
  if (stack_.empty()) out_ += '\n';
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  beforeValue();
  out_ += quote(s);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  if (!std::isfinite(v)) return null();
  beforeValue();
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);  // enough digits for any measurement; always valid JSON
  out_ += buf;
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  beforeValue();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
  beforeValue();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  beforeValue();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  beforeValue();
  out_ += "null";
  return *this;
}

}  // namespace ferry::perf
