// What the HTTP server sends for the answers a handler easily gets wrong,
// and the requests RFC 9112 says to refuse, over real sockets on 127.0.0.1
// on both I/O backends: 204 and 304 with no Content-Length and no body
// (complete, appended and streamed answers; HEAD keeps its Content-Length);
// a status outside 200-599 answered as 500; the registered reason phrases;
// a request with two Host fields or an invalid one refused with 400 (one
// without Host served, HTTP/1.1 too); a request line with a version of
// another major number (HTTP/2.0) refused with 505, a malformed version
// with 400; a max_headers over the parser's capacity refused when serving
// starts.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "tests/http_test_support.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

namespace http = io::http;
using namespace std::chrono_literals;

// The status in the target's query ("/status?204"), 0 if there is none.
int status_in(std::string_view target) {
  const std::size_t at = target.find('?');
  int status = 0;
  if (at != std::string_view::npos) {
    std::from_chars(target.data() + at + 1, target.data() + target.size(), status);
  }
  return status;
}

// `request` on a connection of its own; everything the server sent until
// it closed.
std::string exchange(std::uint16_t port, const std::string& request) {
  raw_client client(port);
  client.send(request);
  CHECK(client.read_to_eof());
  return client.received;
}

void append_no_content(const http::request&, std::string& out) {
  http::append_response(out, 204, "No Content", "", "a body for nobody", false);
}

std::atomic<int> refused_stream_writes{0};

http::router answers() {
  http::router routes;
  routes
      .add("DELETE", "/item",
           [](const http::request&) {
             http::response gone;
             gone.status = 204;
             gone.content_type = "";
             gone.body = "dropped";  // a 204 has no content: the body is dropped
             return gone;
           })
      .get("/cached",
           [](const http::request&) {
             http::response same;
             same.status = 304;
             same.content_type = "";
             same.headers = {{"ETag", "\"v1\""}, {"Content-Length", "7"}};
             same.body = "dropped";
             return same;
           })
      .get("/appended", &append_no_content)
      .get("/streamed",
           [](const http::request& req, http::response_writer& body) -> task<void> {
             body.head().status = status_in(req.target);
             body.head().content_type = "";
             if (!co_await body.write("dropped")) {
               refused_stream_writes.fetch_add(1);
             }
           })
      .get("/status",
           [](const http::request& req) {
             http::response answer;
             answer.status = status_in(req.target);
             answer.reason = "Handler's Own";
             answer.body = "b";
             return answer;
           })
      .get("/*", [](const http::request&) { return std::string("hi"); });
  return routes;
}

TEST_CASE("http answers: 204 and 304 carry no Content-Length and no body; HEAD keeps its own") {
  const watchdog guard("http answers: no content", 60 * timeout_scale());
  http_test_server server({}, answers());
  const int refused_before = refused_stream_writes.load();
  // Pipelined, so that a body wrongly sent would be read as the next
  // answer's start and the exact text below would not match.
  const std::string got = exchange(server.port(),
                                   "DELETE /item HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /cached HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /appended HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /streamed?204 HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /streamed?304 HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(got ==
        "HTTP/1.1 204 No Content\r\n\r\n"
        "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"
        "HTTP/1.1 204 No Content\r\n\r\n"
        "HTTP/1.1 204 No Content\r\n\r\n"  // streamed: no chunked framing either
        "HTTP/1.1 304 Not Modified\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n"
        "Connection: close\r\n\r\nhi");
  // The streamed ones' writes were refused, as for HEAD.
  CHECK(refused_stream_writes.load() == refused_before + 2);
}

TEST_CASE("http answers: a status outside 200-599 goes out as 500; known ones keep theirs") {
  const watchdog guard("http answers: status", 60 * timeout_scale());
  http_test_server server({}, answers());
  for (const char* status : {"99", "100", "101", "199", "600", "1000", "-5", "0"}) {
    CAPTURE(status);
    const std::string got =
        exchange(server.port(), std::string("GET /status?") + status +
                                    " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    // The standard reason, not the handler's (it named another status).
    CHECK(got.starts_with("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1\r\n"));
    const std::string streamed =
        exchange(server.port(), std::string("GET /streamed?") + status +
                                    " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    CHECK(streamed.starts_with("HTTP/1.1 500 Internal Server Error\r\n"));
  }
  // A status in range is sent as given, with the handler's reason.
  const std::string own =
      exchange(server.port(), "GET /status?299 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(own.starts_with("HTTP/1.1 299 Handler's Own\r\n"));
}

TEST_CASE("http answers: every status registered by RFC 9110 (and 6585, 7725) has its phrase") {
  const std::pair<int, std::string_view> registered[] = {
      {100, "Continue"},
      {101, "Switching Protocols"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {203, "Non-Authoritative Information"},
      {204, "No Content"},
      {205, "Reset Content"},
      {206, "Partial Content"},
      {300, "Multiple Choices"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {303, "See Other"},
      {304, "Not Modified"},
      {305, "Use Proxy"},
      {307, "Temporary Redirect"},
      {308, "Permanent Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {402, "Payment Required"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {406, "Not Acceptable"},
      {407, "Proxy Authentication Required"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {410, "Gone"},
      {411, "Length Required"},
      {412, "Precondition Failed"},
      {413, "Content Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {416, "Range Not Satisfiable"},
      {417, "Expectation Failed"},
      {421, "Misdirected Request"},
      {422, "Unprocessable Content"},
      {426, "Upgrade Required"},
      {428, "Precondition Required"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {451, "Unavailable For Legal Reasons"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
      {511, "Network Authentication Required"},
  };
  for (const auto& [status, phrase] : registered) {
    CAPTURE(status);
    CHECK(http::reason_of(status) == phrase);
  }
  CHECK(http::reason_of(299).empty());  // unregistered: an empty reason-phrase
  // On the wire, with an empty reason in the response.
  const watchdog guard("http answers: phrases", 60 * timeout_scale());
  http_test_server server({}, [](const http::request&) {
    http::response answer;
    answer.status = 451;
    return answer;
  });
  CHECK(exchange(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .starts_with("HTTP/1.1 451 Unavailable For Legal Reasons\r\n"));
}

TEST_CASE("http answers: the rest of the IANA registry has its phrase too") {
  // <canopy/io/http.hpp>: reason_of gives "those of the IANA registry";
  // these are registered by RFC 2518, 8297, 4918, 5842, 3229, 8470, 2295,
  // 2774 (510 is marked obsoleted there, still registered).
  const std::pair<int, std::string_view> registered[] = {
      {102, "Processing"},           {103, "Early Hints"},   {207, "Multi-Status"},
      {208, "Already Reported"},     {226, "IM Used"},       {423, "Locked"},
      {424, "Failed Dependency"},    {425, "Too Early"},     {506, "Variant Also Negotiates"},
      {507, "Insufficient Storage"}, {508, "Loop Detected"}, {510, "Not Extended"},
  };
  for (const auto& [status, phrase] : registered) {
    CAPTURE(status);
    CHECK(http::reason_of(status) == phrase);
  }
  CHECK(http::reason_of(306).empty());  // registered as unused
  CHECK(http::reason_of(418).empty());
  const watchdog guard("http answers: the registry's phrases", 60 * timeout_scale());
  http_test_server server({}, [](const http::request&) {
    http::response answer;
    answer.status = 207;
    return answer;
  });
  CHECK(exchange(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .starts_with("HTTP/1.1 207 Multi-Status\r\n"));
}

TEST_CASE("http answers: two Host fields or an invalid Host get 400; none is served") {
  const watchdog guard("http answers: Host", 60 * timeout_scale());
  http_test_server server({}, answers());
  for (const char* head : {
           "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n",
           "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n",
           "GET / HTTP/1.1\r\nHost: a b\r\n",
           "GET / HTTP/1.1\r\nHost: a/b\r\n",
           "GET / HTTP/1.1\r\nHost: user@a\r\n",
           "GET / HTTP/1.1\r\nHost: a:80x\r\n",
           "GET / HTTP/1.1\r\nHost: [::1\r\n",
           "GET / HTTP/1.0\r\nHost: a%2\r\n",
       }) {
    CAPTURE(head);
    const std::string got = exchange(server.port(), std::string(head) + "\r\n");
    CHECK(got.starts_with("HTTP/1.1 400 Bad Request\r\n"));
    CHECK(got.find("Connection: close\r\n") != std::string::npos);
  }
  for (const char* head : {
           "GET / HTTP/1.0\r\n", "GET / HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: example.com\r\n",
           "GET / HTTP/1.1\r\nhost: Example.COM:8080\r\n",
           "GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\n", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n",
           "GET / HTTP/1.1\r\nHost: a%20b\r\n",
           "GET / HTTP/1.1\r\nHost:\r\n",  // empty: a target without an authority
       }) {
    CAPTURE(head);
    const std::string got =
        exchange(server.port(), std::string(head) + "Connection: close\r\n\r\n");
    CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
  }
}

TEST_CASE("http answers: a version of another major number gets 505; a malformed one 400") {
  const watchdog guard("http answers: version", 60 * timeout_scale());
  http_test_server server({}, answers());
  for (const char* head : {
           "GET / HTTP/2.0\r\nHost: a\r\n\r\n", "GET / HTTP/3.0\r\nHost: a\r\n\r\n",
           "GET / HTTP/0.9\r\n\r\n", "GET / HTTP/2\r\nHost: a\r\n\r\n",
           "GET / HTTP/10.1\r\nHost: a\r\n\r\n",
           "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  // a client that assumes HTTP/2
       }) {
    CAPTURE(head);
    const std::string got = exchange(server.port(), head);
    CHECK(got.starts_with("HTTP/1.1 505 HTTP Version Not Supported\r\n"));
    CHECK(got.find("Connection: close\r\n") != std::string::npos);
  }
  for (const char* head : {
           "GET / HTTP/1.2\r\nHost: a\r\n\r\n",
           "GET / HTTP/1\r\nHost: a\r\n\r\n",
           "GET / HTTP/2.\r\nHost: a\r\n\r\n",
           "GET / HTTP/.1\r\nHost: a\r\n\r\n",
           "GET / HTTP/x.1\r\nHost: a\r\n\r\n",
           "GET / HTTP/2.0 \r\nHost: a\r\n\r\n",
           "GET / http/2.0\r\nHost: a\r\n\r\n",
           "GET / HTTPS/2.0\r\nHost: a\r\n\r\n",
       }) {
    CAPTURE(head);
    const std::string got = exchange(server.port(), head);
    CHECK(got.starts_with("HTTP/1.1 400 Bad Request\r\n"));
  }
  CHECK(exchange(server.port(), "GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200 OK\r\n"));
}

TEST_CASE("http answers: limits at SIZE_MAX (no limit) serve a body larger than the defaults") {
  // The connection's buffer holds the head and the body: its size is the
  // sum of the two limits, which must not wrap around to a few KiB (the
  // connection then closed without an answer once its buffer was full).
  const watchdog guard("http answers: limits at SIZE_MAX", 60 * timeout_scale());
  constexpr std::size_t no_limit = std::numeric_limits<std::size_t>::max();
  for (const bool head_too : {false, true}) {
    CAPTURE(head_too);
    http::server_options options = with_body_limit(no_limit);
    if (head_too) {
      options.limits.max_head_bytes = no_limit;
    }
    http_test_server server(
        options, [](const http::request& req) { return std::to_string(req.body.size()); });
    const std::string body(3 << 20, 'b');  // 3 MiB: over the default limit too
    for (const std::string& framing :
         {"Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
          "Transfer-Encoding: chunked\r\n\r\n300000\r\n" + body + "\r\n0\r\n\r\n"}) {
      const std::string got =
          exchange(server.port(), "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + framing);
      CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
      CHECK(got.ends_with("\r\n\r\n3145728"));
    }
  }
}

TEST_CASE("http answers: an empty line after a request is no request begun (idle: no 408)") {
  // RFC 9112 2.2: empty lines before a request line are ignored, and some
  // clients send a CRLF after a POST body. A connection holding only that
  // is idle: closed quietly at request_timeout, and at once by a drain.
  const watchdog guard("http answers: a CRLF after a request", 60 * timeout_scale());
  http::server_options options;
  options.request_timeout = 300ms;
  stoppable_server server(options,
                          [](const http::request& req) { return std::to_string(req.body.size()); });
  const http::server_counters before = http::counters();
  const std::string post = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  const std::string answer =
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Type: text/plain\r\n\r\n3";
  for (const std::string_view after : {"\r\n", "\r\n\r\n"}) {
    raw_client client(server.port());
    client.send(post + std::string(after));
    CHECK(client.read_to_eof());
    CHECK(client.received == answer);  // no 408 after it
  }
  CHECK(eventually([&] { return http::counters().idle_closes >= before.idle_closes + 2; }));
  CHECK(http::counters().timeouts == before.timeouts);
  // The empty line, then a request: served as usual.
  raw_client later(server.port());
  later.send(post + "\r\n");
  CHECK(later.read_until(answer));
  later.send(post);
  CHECK(later.read_until(answer + answer));
  // ... one asking Expect: 100-continue too (its head after the empty line).
  later.send("\r\nPOST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  CHECK(later.read_until(answer + answer + "HTTP/1.1 100 Continue\r\n\r\n"));
  later.send("abc");
  CHECK(later.read_until(answer + answer + "HTTP/1.1 100 Continue\r\n\r\n" + answer));
  // A drain closes such a connection at once, as an idle one.
  raw_client draining(server.port());
  draining.send(post + "\r\n");
  CHECK(draining.read_until(answer));
  server.stop();
  CHECK(server.returned_within(200ms));
  CHECK(draining.read_to_eof());
  CHECK(draining.received == answer);
}

TEST_CASE("http answers: counters() counts the requests of a connection still open") {
  // A stats page read over keep-alive (or while clients stay connected)
  // sees the requests answered so far, not only those of closed connections.
  const watchdog guard("http answers: counters while open", 60 * timeout_scale());
  http_test_server server({}, [](const http::request&) { return std::string("x"); });
  const http::server_counters before = http::counters();
  raw_client client(server.port());
  const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string answer =
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Type: text/plain\r\n\r\nx";
  client.send(get + get);
  CHECK(client.read_until(answer + answer));
  client.send(get);
  CHECK(client.read_until(answer + answer + answer));
  CHECK(eventually([&] { return http::counters().requests >= before.requests + 3; }, 2));
  CHECK(http::counters().connections == before.connections + 1);
}

TEST_CASE("http answers: max_headers over the parser's capacity is refused, not capped") {
  const watchdog guard("http answers: max_headers", 60 * timeout_scale());
  executor pool(io_config(1));
  io::reactor_timers timers(pool);
  auto listener = io::tcp_listener::bind(io::reactor::of(pool), io::endpoint::loopback_v4(0));
  http::server_options options;
  options.limits.max_headers = http::request::header_capacity + 1;
  auto serving =
      pool.spawn(http::serve(listener, options, [](const http::request&) { return "x"; }));
  // Refused at its first co_await, not served (with a limit quietly capped).
  const bool ended = serving.wait_for(10s);
  if (!ended) {
    serving.cancel();
  }
  REQUIRE(ended);
  CHECK_THROWS_WITH_AS(
      serving.get(),
      doctest::Contains("limits.max_headers must be at most 64 (request::header_capacity), got 65"),
      std::invalid_argument);
  pool.shutdown();
}

}  // namespace
}  // namespace canopy::testing
