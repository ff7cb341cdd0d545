// Chunked request bodies in the parser alone (io/http/http_parser.hpp's
// request_reader over io/http/chunked_decoder.hpp): decoding, input split
// at every byte, extensions and trailers, malformed sizes, the limits, the
// Transfer-Encoding rules (501, with Content-Length, HTTP/1.0), and
// pipelining after a chunked body.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/http/http_parser.hpp"

namespace http = canopy::io::http;
using http::detail::parse_error;
using http::detail::parse_status;

namespace {

// What a connection made of the bytes it got: each request answered (its
// target and body), and the error that ended it, if one did.
struct reading {
  std::vector<std::string> targets;
  std::vector<std::string> bodies;
  parse_error error = parse_error::none;
  bool invalid = false;
  std::size_t left = 0;  // bytes kept, waiting for more
};

// Feeds `input` to a request_reader in pieces of `piece` bytes (0: all at
// once), as the server does: answered requests are consumed, and after
// `incomplete` only the `keep` bytes stay before the next piece.
reading read_all(std::string_view input, std::size_t piece = 0,
                 const http::request_limits& limits = {}) {
  http::detail::request_reader reader(limits);
  http::request req;
  reading result;
  std::string pending;
  std::size_t fed = 0;
  const std::size_t step = piece == 0 ? input.size() : piece;
  while (fed < input.size() && !result.invalid) {
    const std::size_t take = std::min(step, input.size() - fed);
    pending.append(input.substr(fed, take));
    fed += take;
    for (;;) {
      const http::detail::parse_outcome outcome = reader.read(std::span<char>(pending), req);
      if (outcome.status == parse_status::incomplete) {
        REQUIRE(outcome.keep <= pending.size());
        pending.resize(outcome.keep);
        break;
      }
      if (outcome.status == parse_status::invalid) {
        result.invalid = true;
        result.error = outcome.error;
        break;
      }
      REQUIRE(outcome.status == parse_status::complete);
      REQUIRE(outcome.consumed <= pending.size());
      result.targets.emplace_back(req.target);
      result.bodies.emplace_back(req.body);
      pending.erase(0, outcome.consumed);
    }
  }
  result.left = pending.size();
  return result;
}

parse_error error_of(std::string_view input, const http::request_limits& limits = {}) {
  const reading result = read_all(input, 0, limits);
  REQUIRE(result.invalid);
  return result.error;
}

const std::string chunked_head =
    "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

}  // namespace

TEST_CASE("http chunked: a body in chunks is decoded into req.body, as a Content-Length one") {
  const std::string input = chunked_head + "5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n";
  std::string buffer = input;
  http::detail::request_reader reader;
  http::request req;
  const auto outcome = reader.read(std::span<char>(buffer), req);
  REQUIRE(outcome.status == parse_status::complete);
  CHECK(outcome.consumed == input.size());
  CHECK(req.body == "hello, world");
  CHECK(req.method == "POST");
  CHECK(req.target == "/up");
  CHECK(req.keep_alive);
  CHECK(req.find("transfer-encoding") == "chunked");

  // Hex sizes in either case, leading zeros, an empty body, CHUNKED in capitals.
  CHECK(read_all(chunked_head + "A\r\n0123456789\r\n0\r\n\r\n").bodies ==
        std::vector<std::string>{"0123456789"});
  CHECK(read_all(chunked_head + "000a\r\n0123456789\r\n1f\r\n" + std::string(31, 'x') +
                 "\r\n0\r\n\r\n")
            .bodies == std::vector<std::string>{"0123456789" + std::string(31, 'x')});
  CHECK(read_all(chunked_head + "0\r\n\r\n").bodies == std::vector<std::string>{""});
  CHECK(read_all(
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
            .bodies == std::vector<std::string>{"abc"});
  // An empty list element is allowed (RFC 9110 5.6.1).
  CHECK(read_all(
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked ,\r\n\r\n1\r\nz\r\n0\r\n\r\n")
            .bodies == std::vector<std::string>{"z"});
}

TEST_CASE("http chunked: parse_request alone stops after the head of a chunked request") {
  const std::string input = chunked_head + "3\r\nabc\r\n0\r\n\r\n";
  http::request req;
  const auto outcome = http::detail::parse_request(input, req);
  REQUIRE(outcome.status == parse_status::chunked_body);
  CHECK(outcome.consumed == chunked_head.size());
  CHECK(req.target == "/up");
  CHECK(req.body.empty());
}

TEST_CASE("http chunked: extensions are ignored, trailers read and discarded") {
  const std::string input = chunked_head +
                            "4;name=value;flag\r\nwiki\r\n5 ; q=\"a b\"\r\npedia\r\n"
                            "0;last\r\nExpires: never\r\nX-Sum:  abc \r\n\r\n";
  const reading result = read_all(input);
  REQUIRE_FALSE(result.invalid);
  CHECK(result.bodies == std::vector<std::string>{"wikipedia"});
  CHECK(result.left == 0);
}

TEST_CASE(
    "http chunked: input split at every byte decodes the same, and a pipelined request follows") {
  const std::string input = chunked_head +
                            "4;ext=1\r\nwiki\r\n5\r\npedia\r\nF\r\n in\r\n\r\n chunks.\r\n"
                            "0\r\nTrailer: t\r\n\r\n" +
                            "GET /next HTTP/1.1\r\nHost: x\r\n\r\n" + chunked_head +
                            "2\r\nok\r\n0\r\n\r\n";
  const std::vector<std::string> targets{"/up", "/next", "/up"};
  const std::vector<std::string> bodies{"wikipedia in\r\n\r\n chunks.", "", "ok"};
  for (std::size_t piece = 0; piece <= 7; ++piece) {
    CAPTURE(piece);
    const reading result = read_all(input, piece);
    CHECK_FALSE(result.invalid);
    CHECK(result.targets == targets);
    CHECK(result.bodies == bodies);
    CHECK(result.left == 0);
  }
  // Two pieces, cut at every byte.
  for (std::size_t cut = 1; cut < input.size(); ++cut) {
    CAPTURE(cut);
    http::detail::request_reader reader;
    http::request req;
    std::string pending(input.substr(0, cut));
    std::vector<std::string> got;
    bool second = false;
    for (;;) {
      const auto outcome = reader.read(std::span<char>(pending), req);
      REQUIRE(outcome.status != parse_status::invalid);
      if (outcome.status == parse_status::complete) {
        got.emplace_back(req.body);
        pending.erase(0, outcome.consumed);
        continue;
      }
      pending.resize(outcome.keep);
      if (second) {
        break;
      }
      pending += input.substr(cut);
      second = true;
    }
    CHECK(got == bodies);
    CHECK(pending.empty());
  }
}

TEST_CASE("http chunked: incomplete keeps the head and the body decoded so far") {
  std::string buffer = chunked_head + "3\r\nabc\r\n2\r\nd";
  http::detail::request_reader reader;
  http::request req;
  const auto outcome = reader.read(std::span<char>(buffer), req);
  REQUIRE(outcome.status == parse_status::incomplete);
  CHECK(outcome.keep == chunked_head.size() + 4);
  CHECK(buffer.substr(chunked_head.size(), 4) == "abcd");
}

TEST_CASE("http chunked: malformed chunk-size lines and chunk endings are invalid") {
  CHECK(error_of(chunked_head + "x\r\n") == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + "\r\n") == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + "-1\r\n") == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + "0x5\r\n") == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + "5 \r\nhello\r\n") == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + ";ext\r\n") == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + "5;a\x01\r\n") == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + "5\nhello\r\n") == parse_error::bad_line_ending);
  CHECK(error_of(chunked_head + "5\rhello\r\n") == parse_error::bad_line_ending);
  CHECK(error_of(chunked_head + "3\r\nabcX\r\n") == parse_error::bad_chunk_ending);
  CHECK(error_of(chunked_head + "3\r\nabc\rX") == parse_error::bad_chunk_ending);
  CHECK(error_of(chunked_head + "3\r\nabc\n0\r\n\r\n") == parse_error::bad_chunk_ending);
  // A size that does not fit in 64 bits, with no body limit to stop it first.
  http::request_limits unlimited;
  unlimited.max_body_bytes = SIZE_MAX;
  CHECK(error_of(chunked_head + "10000000000000000\r\n", unlimited) == parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + "FFFFFFFFFFFFFFFFF", unlimited) == parse_error::bad_chunk_size);
  // A chunk-size line longer than the head limit, extensions included.
  http::request_limits limits;
  limits.max_head_bytes = 128;
  CHECK(error_of(chunked_head + "5;" + std::string(200, 'e'), limits) ==
        parse_error::bad_chunk_size);
  CHECK(error_of(chunked_head + std::string(200, '0'), limits) == parse_error::bad_chunk_size);
  CHECK(http::detail::status_of(parse_error::bad_chunk_size) == 400);
  CHECK(http::detail::describe(parse_error::bad_chunk_size).find("hex") != std::string_view::npos);
  CHECK(http::detail::describe(parse_error::bad_chunk_ending).find("CRLF") !=
        std::string_view::npos);
}

TEST_CASE(
    "http chunked: the decoded body obeys max_body_bytes, refused as soon as a size says so") {
  http::request_limits limits;
  limits.max_body_bytes = 10;
  CHECK(read_all(chunked_head + "6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n", 0, limits).bodies ==
        std::vector<std::string>{"abcdefghij"});
  // Eleven bytes: refused at the size digit, before any data is sent.
  CHECK(error_of(chunked_head + "b", limits) == parse_error::body_too_large);
  CHECK(error_of(chunked_head + "6\r\nabcdef\r\n5", limits) == parse_error::body_too_large);
  // A huge size is refused at once as well, not buffered.
  CHECK(error_of(chunked_head + "fffffff", limits) == parse_error::body_too_large);
  CHECK(http::detail::status_of(parse_error::body_too_large) == 413);
}

TEST_CASE("http chunked: trailers are bounded by the head's limits and checked as fields") {
  http::request_limits limits;
  limits.max_headers = 2;
  limits.max_head_bytes = 100;
  CHECK(read_all(chunked_head + "0\r\nA: 1\r\nB: 2\r\n\r\n", 0, limits).bodies.size() == 1);
  // Trailer fields are header fields: over the head's limits, as the head is (431).
  CHECK(error_of(chunked_head + "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits) ==
        parse_error::head_too_large);
  CHECK(error_of(chunked_head + "0\r\nA: " + std::string(120, 'v'), limits) ==
        parse_error::head_too_large);
  CHECK(http::detail::status_of(parse_error::head_too_large) == 431);
  CHECK(error_of(chunked_head + "0\r\nNoColon\r\n\r\n") == parse_error::bad_header);
  CHECK(error_of(chunked_head + "0\r\nBad Name: x\r\n\r\n") == parse_error::bad_header);
  CHECK(error_of(chunked_head + "0\r\n folded: x\r\n\r\n") == parse_error::bad_header);
  CHECK(error_of(chunked_head + "0\r\nA: b\x01\r\n\r\n") == parse_error::bad_header);
  CHECK(error_of(chunked_head + "0\r\nA: b\n\r\n") == parse_error::bad_line_ending);
  CHECK(error_of(chunked_head + "0\r\n\n") == parse_error::bad_line_ending);
  CHECK(error_of(chunked_head + "0\r\n\rX") == parse_error::bad_line_ending);
}

TEST_CASE("http chunked: other transfer codings are 501; with Content-Length or HTTP/1.0, 400") {
  for (const std::string_view codings :
       {"gzip", "identity", "x-unknown", "gzip, chunked", "chunked, gzip", "chunked;q=1"}) {
    CAPTURE(codings);
    const std::string head =
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + std::string(codings) +
        "\r\n\r\n0\r\n\r\n";
    const parse_error error = error_of(head);
    CHECK(error == parse_error::unsupported_transfer_encoding);
    CHECK(http::detail::status_of(error) == 501);
  }
  // Split over two fields, the list is the same.
  CHECK(
      error_of(
          "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
          "\r\n") == parse_error::unsupported_transfer_encoding);
  for (const std::string_view head : {
           "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: gzip\r\n\r\n",
           "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \r\n\r\n",
           "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
           "chunked\r\n\r\n",
       }) {
    CAPTURE(head);
    const parse_error error = error_of(std::string(head) + "3\r\nabc\r\n0\r\n\r\n");
    CHECK(error == parse_error::bad_transfer_encoding);
    CHECK(http::detail::status_of(error) == 400);
  }
  CHECK(http::detail::describe(parse_error::bad_transfer_encoding).find("Content-Length") !=
        std::string_view::npos);
}
