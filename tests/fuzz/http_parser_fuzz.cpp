// http_parser_fuzz — arbitrary bytes and limits into io/http_parser's
// parse_request, checking what its header promises:
//   * it never crashes, reads out of bounds or overflows (ASan, UBSan);
//   * `complete` has no error, consumed <= the input, every view (method,
//     target, header names and values, body) lies inside the consumed
//     bytes, header_count is within both capacities, the body has the
//     Content-Length, and the version is HTTP/1.0 or 1.1;
//   * `invalid` names an error (413 only for body_too_large, decided once
//     the head is complete; 431 only for head_too_large); `incomplete`
//     names none;
//   * it is incremental: every proper prefix of a complete request is
//     `incomplete` (never invalid or complete), and the request alone (with
//     the bytes after it cut off) parses the same;
//   * `chunked_body` stops after a head that names Transfer-Encoding;
//   * request_reader (chunked bodies, decoded in place) reads the same
//     requests, bodies and outcome from the input given at once and given
//     in pieces (a byte at a time for short inputs, else pieces of 1 to 64
//     bytes), as the server feeds it; a chunked body it decodes is what a
//     plain reference decoder makes of the same bytes, and no body is over
//     max_body_bytes.
// Any violation aborts with a message (libFuzzer reports it as a crash).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// The chunked body at the start of `bytes`, decoded the plain way (the
// whole body at hand, no state): its data and the bytes it took, or false
// where it is not a whole, well-formed body. Checks only what request_reader
// must agree with on a body it accepted.
bool reference_decode(std::string_view bytes, std::string& body, std::size_t& taken) {
  std::size_t at = 0;
  body.clear();
  for (;;) {
    std::uint64_t size = 0;
    std::size_t digits = 0;
    std::size_t significant = 0;  // leading zeros do not count towards overflow
    while (at < bytes.size() && std::isxdigit(static_cast<unsigned char>(bytes[at])) != 0) {
      const char c = bytes[at++];
      size = size * 16 + static_cast<std::uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      ++digits;
      significant += size != 0 ? 1 : 0;
    }
    const std::size_t line_end = bytes.find("\r\n", at);
    if (digits == 0 || significant > 16 || line_end == std::string_view::npos) {
      return false;
    }
    at = line_end + 2;
    if (size == 0) {
      // Trailer lines up to the empty line.
      const std::size_t end = bytes.find("\r\n\r\n", at - 2);
      if (end == std::string_view::npos) {
        return false;
      }
      taken = end + 4;
      return true;
    }
    if (bytes.size() - at < size + 2 || bytes.substr(at + size, 2) != "\r\n") {
      return false;
    }
    body.append(bytes.substr(at, size));
    at += size + 2;
  }
}

// What a connection made of the input: the requests read (target, body),
// and how it ended.
struct reading {
  std::vector<std::string> targets;
  std::vector<std::string> bodies;
  http::detail::parse_status last = http::detail::parse_status::incomplete;
};

// Feeds `bytes` to a request_reader in pieces as the server does (`pieces`:
// the size of each; empty: all at once), consuming each complete request
// and keeping `keep` bytes after `incomplete`. At once, every chunked body
// is checked against reference_decode.
reading read_all(std::string_view bytes, const std::vector<std::size_t>& pieces,
                 const http::request_limits& limits) {
  http::detail::request_reader reader(limits);
  http::request request;
  reading result;
  std::string pending;
  std::size_t fed = 0;
  std::size_t next_piece = 0;
  while (fed < bytes.size()) {
    const std::size_t take =
        pieces.empty() ? bytes.size()
                       : std::min(pieces[next_piece++ % pieces.size()], bytes.size() - fed);
    pending.append(bytes.substr(fed, take));
    fed += take;
    for (;;) {
      const std::string before = pieces.empty() ? pending : std::string();
      const http::detail::parse_outcome outcome = reader.read(std::span<char>(pending), request);
      result.last = outcome.status;
      if (outcome.status == http::detail::parse_status::incomplete) {
        if (outcome.error != http::detail::parse_error::none || outcome.keep > pending.size()) {
          fail("reader: incomplete with an error, or keep past the input",
               static_cast<long>(outcome.keep));
        }
        pending.resize(outcome.keep);
        break;
      }
      if (outcome.status == http::detail::parse_status::invalid) {
        if (outcome.error == http::detail::parse_error::none) {
          fail("reader: invalid without an error", 0);
        }
        return result;
      }
      if (outcome.status != http::detail::parse_status::complete || outcome.consumed == 0 ||
          outcome.consumed > pending.size()) {
        fail("reader: not complete, or consumed outside the input",
             static_cast<long>(outcome.status));
      }
      if (request.body.size() > limits.max_body_bytes ||
          !inside(request.body, std::string_view(pending).substr(0, outcome.consumed))) {
        fail("reader: a body over the limit or outside the request",
             static_cast<long>(request.body.size()));
      }
      if (pieces.empty()) {
        http::request head;
        const http::detail::parse_outcome plain = http::detail::parse_request(before, head, limits);
        if (plain.status == http::detail::parse_status::chunked_body) {
          std::string body;
          std::size_t taken = 0;
          if (!reference_decode(std::string_view(before).substr(plain.consumed), body, taken) ||
              body != request.body || plain.consumed + taken != outcome.consumed) {
            fail("reader: a chunked body differs from the reference decoding",
                 static_cast<long>(request.body.size()));
          }
        }
      }
      result.targets.emplace_back(request.target);
      result.bodies.emplace_back(request.body);
      pending.erase(0, outcome.consumed);
      if (!request.keep_alive) {
        return result;  // the server reads no further
      }
    }
  }
  return result;
}

void check_reader(std::string_view bytes, const http::request_limits& limits) {
  const reading whole = read_all(bytes, {}, limits);
  std::vector<std::size_t> pieces;
  if (bytes.size() <= 512) {
    pieces.push_back(1);
  } else {
    std::uint32_t state = static_cast<std::uint32_t>(bytes.size()) * 2654435761U;
    for (int i = 0; i < 61; ++i) {
      state = state * 1664525U + 1013904223U;
      pieces.push_back(1 + (state >> 26));  // 1 to 64
    }
  }
  const reading split = read_all(bytes, pieces, limits);
  if (split.targets != whole.targets || split.bodies != whole.bodies) {
    fail("reader: the input in pieces reads other requests than at once",
         static_cast<long>(split.targets.size()));
  }
  // Under a head limit of 0 or 1 byte, a lone CR before a request is too
  // large before its LF arrives and makes it an empty line to skip: an edge
  // of parse_request's limits, not of reading in pieces.
  if (limits.max_head_bytes >= 2 && (split.last == http::detail::parse_status::invalid) !=
                                        (whole.last == http::detail::parse_status::invalid)) {
    fail("reader: the input in pieces ends otherwise than at once", static_cast<long>(split.last));
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
  check_reader(whole, limits);
  const http::detail::parse_outcome outcome = http::detail::parse_request(whole, request, limits);
  switch (outcome.status) {
    case http::detail::parse_status::invalid:
      if (outcome.error == http::detail::parse_error::none) {
        fail("invalid without an error", 0);
      }
      if (http::detail::describe(outcome.error).empty()) {
        fail("an error without a description", static_cast<long>(outcome.error));
      }
      // Each limit has its own answer, and nothing else gets it.
      if ((http::detail::status_of(outcome.error) == 413) !=
              (outcome.error == http::detail::parse_error::body_too_large) ||
          (http::detail::status_of(outcome.error) == 431) !=
              (outcome.error == http::detail::parse_error::head_too_large)) {
        fail("a limit answered with the wrong status", static_cast<long>(outcome.error));
      }
      // Without a chunked body the body limit is decided from the
      // Content-Length field, so only once the whole head has arrived.
      if (outcome.error == http::detail::parse_error::body_too_large &&
          whole.find("\r\n\r\n") == std::string_view::npos) {
        fail("body_too_large before the head ended", 0);
      }
      return 0;
    case http::detail::parse_status::incomplete:
      if (outcome.error != http::detail::parse_error::none) {
        fail("incomplete with an error", static_cast<long>(outcome.error));
      }
      return 0;
    case http::detail::parse_status::chunked_body: {
      // A field may be empty ("Transfer-Encoding:" then one that says chunked).
      bool named = false;
      for (std::size_t index = 0; index < request.header_count; ++index) {
        named =
            named || http::equals_ignoring_case(request.headers[index].name, "transfer-encoding");
      }
      if (outcome.error != http::detail::parse_error::none || outcome.consumed > whole.size() ||
          !named || !request.body.empty()) {
        fail("chunked_body without its head, its Transfer-Encoding, or with a body",
             static_cast<long>(outcome.consumed));
      }
      return 0;
    }
    case http::detail::parse_status::complete:
      break;
  }
  if (outcome.error != http::detail::parse_error::none || outcome.consumed == 0 ||
      outcome.consumed > whole.size()) {
    fail("complete with an error, or consumed outside the input",
         static_cast<long>(outcome.consumed));
  }
  const std::string_view consumed = whole.substr(0, outcome.consumed);
  check_complete(request, consumed, limits);

  // The request alone parses the same (copied, so views must move with it).
  const std::string alone(consumed);
  http::request again;
  const http::detail::parse_outcome same = http::detail::parse_request(alone, again, limits);
  if (same.status != http::detail::parse_status::complete || same.consumed != outcome.consumed ||
      again.header_count != request.header_count || again.body != request.body ||
      again.method != request.method || again.target != request.target) {
    fail("the request without the bytes after it parses differently",
         static_cast<long>(same.status));
  }
  // Every proper prefix is incomplete: a reader that calls again with more
  // bytes must never be told "invalid" or "complete" early.
  for (std::size_t cut = 0; cut < alone.size(); ++cut) {
    http::request partial;
    const http::detail::parse_outcome early =
        http::detail::parse_request(std::string_view(alone).substr(0, cut), partial, limits);
    if (early.status != http::detail::parse_status::incomplete) {
      fail("a proper prefix of a complete request was not incomplete", static_cast<long>(cut));
    }
  }
  return 0;
}
