// http_parser_fuzz — arbitrary bytes and limits into io/http_parser's
// parse_request, checking what its header promises:
//   * it never crashes, reads out of bounds or overflows (ASan, UBSan);
//   * `complete` has no error, consumed <= the input, every view (method,
//     target, header names and values, body) lies inside the consumed
//     bytes, header_count is within both capacities, the body has the
//     Content-Length, and the version is HTTP/1.0 or 1.1;
//   * `invalid` names an error; `incomplete` names none;
//   * it is incremental: every proper prefix of a complete request is
//     `incomplete` (never invalid or complete), and the request alone (with
//     the bytes after it cut off) parses the same.
// Any violation aborts with a message (libFuzzer reports it as a crash).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "io/http/http_parser.hpp"

namespace {

namespace http = canopy::io::http;

[[noreturn]] void fail(const char* what, long detail) {
  std::fprintf(stderr, "http_parser_fuzz: %s (detail %ld)\n", what, detail);
  std::abort();
}

bool inside(std::string_view part, std::string_view whole) {
  if (part.empty()) {
    return true;
  }
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

void check_complete(const http::request& request, std::string_view consumed,
                    const http::request_limits& limits) {
  if (request.method.empty() || !inside(request.method, consumed)) {
    fail("complete: method empty or outside the request", 0);
  }
  if (request.target.empty() || !inside(request.target, consumed)) {
    fail("complete: target empty or outside the request", 0);
  }
  if (request.version_minor != 0 && request.version_minor != 1) {
    fail("complete: version neither 1.0 nor 1.1", request.version_minor);
  }
  if (request.header_count > http::request::header_capacity ||
      request.header_count > limits.max_headers) {
    fail("complete: more headers than allowed", static_cast<long>(request.header_count));
  }
  for (std::size_t index = 0; index < request.header_count; ++index) {
    const http::header& field = request.headers[index];
    if (field.name.empty() || !inside(field.name, consumed) || !inside(field.value, consumed)) {
      fail("complete: a header outside the request", static_cast<long>(index));
    }
  }
  if (!inside(request.body, consumed) || request.body.size() > limits.max_body_bytes) {
    fail("complete: body outside the request or over the limit",
         static_cast<long>(request.body.size()));
  }
  const std::string_view length = request.find("Content-Length");
  if (!length.empty() && std::to_string(request.body.size()) != length &&
      std::stoull(std::string(length)) != request.body.size()) {
    fail("complete: body size differs from Content-Length", static_cast<long>(request.body.size()));
  }
  if (length.empty() && !request.body.empty()) {
    fail("complete: a body without Content-Length", static_cast<long>(request.body.size()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  http::request_limits limits;
  if (input.ConsumeBool()) {
    limits.max_head_bytes = input.ConsumeIntegralInRange<std::size_t>(0, 512);
    limits.max_headers = input.ConsumeIntegralInRange<std::size_t>(0, 80);
    limits.max_body_bytes = input.ConsumeIntegralInRange<std::size_t>(0, 256);
  }
  const std::string bytes = input.ConsumeRemainingBytesAsString();
  const std::string_view whole(bytes);
  http::request request;
  const http::parse_outcome outcome = http::parse_request(whole, request, limits);
  switch (outcome.status) {
    case http::parse_status::invalid:
      if (outcome.error == http::parse_error::none) {
        fail("invalid without an error", 0);
      }
      if (http::describe(outcome.error).empty()) {
        fail("an error without a description", static_cast<long>(outcome.error));
      }
      return 0;
    case http::parse_status::incomplete:
      if (outcome.error != http::parse_error::none) {
        fail("incomplete with an error", static_cast<long>(outcome.error));
      }
      return 0;
    case http::parse_status::complete:
      break;
  }
  if (outcome.error != http::parse_error::none || outcome.consumed == 0 ||
      outcome.consumed > whole.size()) {
    fail("complete with an error, or consumed outside the input",
         static_cast<long>(outcome.consumed));
  }
  const std::string_view consumed = whole.substr(0, outcome.consumed);
  check_complete(request, consumed, limits);

  // The request alone parses the same (copied, so views must move with it).
  const std::string alone(consumed);
  http::request again;
  const http::parse_outcome same = http::parse_request(alone, again, limits);
  if (same.status != http::parse_status::complete || same.consumed != outcome.consumed ||
      again.header_count != request.header_count || again.body != request.body ||
      again.method != request.method || again.target != request.target) {
    fail("the request without the bytes after it parses differently",
         static_cast<long>(same.status));
  }
  // Every proper prefix is incomplete: a reader that calls again with more
  // bytes must never be told "invalid" or "complete" early.
  for (std::size_t cut = 0; cut < alone.size(); ++cut) {
    http::request partial;
    const http::parse_outcome early =
        http::parse_request(std::string_view(alone).substr(0, cut), partial, limits);
    if (early.status != http::parse_status::incomplete) {
      fail("a proper prefix of a complete request was not incomplete", static_cast<long>(cut));
    }
  }
  return 0;
}
