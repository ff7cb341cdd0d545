#include "harness/json_line.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace canopy::bench {

namespace {

// Names and units are fixed identifiers without quotes or backslashes, so
// they need no escaping; the check keeps it that way.
std::string json_string(const std::string& text) {
  if (text.find_first_of("\"\\") != std::string::npos) {
    throw std::invalid_argument("string needs JSON escaping: " + text);
  }
  return '"' + text + '"';
}

std::string json_number(double number) {
  if (!std::isfinite(number)) {
    return "null";
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", number);
  return buffer;
}

}  // namespace

std::string to_json_line(const result_record& record) {
  std::string line =
      "{\"peer\":" + json_string(record.peer) + ",\"workload\":" + json_string(record.workload) +
      ",\"value\":" + json_number(record.value) + ",\"unit\":" + json_string(record.unit) +
      ",\"threads\":" + std::to_string(record.threads) +
      ",\"reps\":" + std::to_string(record.reps) + ",\"min\":" + json_number(record.min) +
      ",\"max\":" + json_number(record.max);
  if (record.p99) {
    line += ",\"p99\":" + json_number(*record.p99);
  }
  if (record.other_threads) {
    line += ",\"other_threads\":" + json_number(*record.other_threads);
  }
  return line + "}";
}

}  // namespace canopy::bench
