// Streamed answers (a handler writing its body through a response_writer,
// sent with Transfer-Encoding: chunked) and the drain of a connection with
// pipelined requests, over real sockets on 127.0.0.1 (a raw client and
// curl); on both I/O backends (run.sh's http_server pattern). curl is
// installed by ./run.sh; a missing curl fails the test.
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <atomic>
#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "tests/child_process.hpp"
#include "tests/http_test_support.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

namespace http = io::http;
using namespace std::chrono_literals;

std::string get(std::string_view target, std::string_view version = "1.1") {
  return "GET " + std::string(target) + " HTTP/" + std::string(version) + "\r\nHost: x\r\n\r\n";
}

// Piece i of the streamed body: its number and a run of letters, of sizes
// from 1 byte to a few KiB, so that chunk sizes take 1 to 4 hex digits.
std::string piece(int i) {
  return std::to_string(i) + ":" +
         std::string(static_cast<std::size_t>(i * 37 % 5000), static_cast<char>('a' + i % 26)) +
         "\n";
}
constexpr int piece_count = 300;
std::string whole_body() {
  std::string body;
  for (int i = 0; i < piece_count; ++i) {
    body += piece(i);
  }
  return body;
}

// Decodes the chunked body starting at `at` of `text`: the data, and the
// offset after the terminating chunk (npos if it has not arrived).
struct decoded {
  std::string data;
  std::size_t end = std::string::npos;
  int chunks = 0;
};
decoded decode_chunked(const std::string& text, std::size_t at) {
  decoded out;
  for (;;) {
    const std::size_t line_end = text.find("\r\n", at);
    if (line_end == std::string::npos) {
      return out;
    }
    const std::size_t size = std::stoul(text.substr(at, line_end - at), nullptr, 16);
    if (size == 0) {
      if (text.compare(line_end, 4, "\r\n\r\n") == 0) {
        out.end = line_end + 4;
      }
      return out;
    }
    if (text.size() < line_end + 2 + size + 2) {
      return out;
    }
    REQUIRE(text.compare(line_end + 2 + size, 2, "\r\n") == 0);
    out.data.append(text, line_end + 2, size);
    ++out.chunks;
    at = line_end + 2 + size + 2;
  }
}

// Reads until the chunked answer at the start of what arrives is complete
// (the bodies here hold no CR, so the first "\r\n0\r\n\r\n" after the
// head ends it), and decodes it.
decoded read_chunked_answer(raw_client& client) {
  constexpr std::string_view last_chunk = "\r\n0\r\n\r\n";
  std::size_t searched = 0;
  for (;;) {
    const std::size_t head_end = client.received.find("\r\n\r\n");
    if (head_end != std::string::npos &&
        client.received.find(last_chunk, std::max(searched, head_end + 2)) != std::string::npos) {
      return decode_chunked(client.received, head_end + 4);
    }
    searched =
        client.received.size() < last_chunk.size() ? 0 : client.received.size() - last_chunk.size();
    if (!client.read_some()) {
      return {};
    }
  }
}

std::atomic<int> head_writes_refused{0};

// GET /stream: piece_count pieces, each written after a yield, some after a
// sleep; /plain: a complete answer; /throw: one piece, then an exception.
http::router streaming_routes() {
  http::router routes;
  routes
      .get("/stream",
           [](const http::request& req, http::response_writer& body) -> task<void> {
             body.head().content_type = "text/csv";
             body.head().headers.emplace_back("X-Streamed", "yes");
             for (int i = 0; i < piece_count; ++i) {
               if (i % 50 == 0) {
                 co_await canopy::sleep_for(1ms);
               }
               if (!co_await body.write(piece(i))) {
                 if (req.method == "HEAD") {
                   head_writes_refused.fetch_add(1);
                 }
                 co_return;
               }
             }
           })
      .get("/framed",
           [](const http::request&, http::response_writer& body) -> task<void> {
             // Framing fields of the handler's own: the server's replace them.
             body.head().headers.emplace_back("Content-Length", "5");
             body.head().headers.emplace_back("transfer-encoding", "identity");
             body.head().headers.emplace_back("X-Kept", "yes");
             if (co_await body.write("abc")) {
               co_await body.write("de");
             }
           })
      .get("/closing",
           [](const http::request&, http::response_writer& body) -> task<void> {
             body.head().headers.emplace_back("Connection", "close");
             co_await body.write("last");
           })
      .get("/plain", [](const http::request&) { return "plain"; })
      .get("/throw", [](const http::request&, http::response_writer& body) -> task<void> {
        CHECK(co_await body.write("first piece"));
        co_await canopy::sleep_for(5ms);
        throw std::runtime_error("mid-stream");
      });
  return routes;
}

std::atomic<int> reported_failures{0};

executor_config counting_failures() {
  executor_config config = io_config(2);
  config.on_detached_exception = [](std::exception_ptr) { reported_failures.fetch_add(1); };
  return config;
}

TEST_CASE("http stream: many pieces arrive chunked and intact, the pipelined request after") {
  const watchdog guard("http stream: chunked", 60 * timeout_scale());
  stoppable_server server({}, streaming_routes());
  raw_client client(server.port());
  client.send(get("/stream") + get("/plain"));  // pipelined behind the stream
  const decoded got = read_chunked_answer(client);
  CHECK(client.received.starts_with("HTTP/1.1 200 OK\r\n"));
  const std::string head = client.received.substr(0, client.received.find("\r\n\r\n") + 4);
  CHECK(head.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(head.find("Content-Type: text/csv\r\n") != std::string::npos);
  CHECK(head.find("X-Streamed: yes\r\n") != std::string::npos);
  CHECK(head.find("Content-Length") == std::string::npos);
  CHECK(head.find("Connection") == std::string::npos);
  REQUIRE(got.end != std::string::npos);
  CHECK(got.data == whole_body());
  CHECK(got.chunks == piece_count);  // one chunk a write
  // The request pipelined behind it is answered after it, on the same connection.
  CHECK(client.read_until("\r\n\r\nplain"));
  CHECK(client.received.find("HTTP/1.1 200 OK", got.end) == got.end);

  // curl decodes it (and reuses the connection for a second URL).
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  child_process curl({"curl", "-sS", "--max-time", "30", url + "/stream", url + "/plain"});
  CHECK(curl.wait(60) == 0);
  CHECK(curl.output() == whole_body() + "plain");
}

TEST_CASE("http stream: HTTP/1.0 gets the body delimited by the close, not chunked") {
  const watchdog guard("http stream: 1.0", 60 * timeout_scale());
  stoppable_server server({}, streaming_routes());
  for (const std::string_view connection : {"", "Connection: keep-alive\r\n"}) {
    CAPTURE(connection);
    raw_client client(server.port());
    client.send("GET /stream HTTP/1.0\r\n" + std::string(connection) + "\r\n");
    CHECK(client.read_to_eof());
    const std::size_t head_end = client.received.find("\r\n\r\n");
    REQUIRE(head_end != std::string::npos);
    const std::string head = client.received.substr(0, head_end + 4);
    CHECK(head.find("Transfer-Encoding") == std::string::npos);
    CHECK(head.find("Content-Length") == std::string::npos);
    CHECK(head.find("Connection: close\r\n") != std::string::npos);
    CHECK(client.received.substr(head_end + 4) == whole_body());
  }
  // curl -0 (HTTP/1.0) reads it to the close.
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/stream";
  child_process curl({"curl", "-sS", "-0", "--max-time", "30", url});
  CHECK(curl.wait(60) == 0);
  CHECK(curl.output() == whole_body());
}

TEST_CASE("http stream: the handler's own Content-Length and Transfer-Encoding are left out") {
  const watchdog guard("http stream: framing fields", 60 * timeout_scale());
  stoppable_server server({}, streaming_routes());
  raw_client client(server.port());
  client.send(get("/framed") + get("/plain"));
  const decoded got = read_chunked_answer(client);
  REQUIRE(got.end != std::string::npos);
  CHECK(got.data == "abcde");
  const std::string head = client.received.substr(0, client.received.find("\r\n\r\n") + 4);
  CHECK(head.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(head.find("Content-Length") == std::string::npos);
  CHECK(head.find("transfer-encoding") == std::string::npos);
  CHECK(head.find("X-Kept: yes\r\n") != std::string::npos);
  CHECK(client.read_until("\r\n\r\nplain"));
  // HTTP/1.0: the body ends at the close, with no Content-Length either.
  raw_client old(server.port());
  old.send(get("/framed", "1.0"));
  CHECK(old.read_to_eof());
  CHECK(old.received.find("Content-Length") == std::string::npos);
  CHECK(old.received.find("transfer-encoding") == std::string::npos);
  CHECK(old.received.ends_with("\r\n\r\nabcde"));
}

TEST_CASE("http stream: the handler's own Connection: close ends the connection") {
  const watchdog guard("http stream: Connection field", 60 * timeout_scale());
  http::server_options options;
  options.request_timeout = 60s;  // an EOF within the client's wait is the answer's
  stoppable_server server(options, streaming_routes());
  raw_client client(server.port());
  client.receive_timeout(std::chrono::milliseconds(static_cast<long>(5000 * timeout_scale())));
  client.send(get("/closing") + get("/plain"));
  CHECK(client.read_to_eof());
  const std::string head = client.received.substr(0, client.received.find("\r\n\r\n") + 4);
  CHECK(head.find("Connection: close\r\n") != std::string::npos);
  CHECK(head.find("Connection", head.find("Connection") + 1) == std::string::npos);  // once
  CHECK(client.received.ends_with("\r\n\r\n4\r\nlast\r\n0\r\n\r\n"));                // not /plain's
}

TEST_CASE("http stream: HEAD gets the head only, the writes are refused, the connection stays") {
  const watchdog guard("http stream: HEAD", 60 * timeout_scale());
  head_writes_refused.store(0);
  stoppable_server server({}, streaming_routes());
  raw_client client(server.port());
  client.send("HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n" + get("/plain"));
  CHECK(client.read_until("\r\n\r\nplain"));
  const std::size_t head_end = client.received.find("\r\n\r\n");
  const std::string head = client.received.substr(0, head_end + 4);
  CHECK(head.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(head.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  // Nothing of the body: the next answer follows the head at once.
  CHECK(client.received.compare(head_end + 4, 15, "HTTP/1.1 200 OK") == 0);
  CHECK(head_writes_refused.load() == 1);
  // curl -I: the head, and curl does not wait for a body.
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/stream";
  child_process curl({"curl", "-sS", "-I", "--max-time", "30", url});
  CHECK(curl.wait(60) == 0);
  CHECK(curl.output().find("Transfer-Encoding: chunked") != std::string::npos);
  CHECK(curl.output().find("0:") == std::string::npos);
  CHECK(head_writes_refused.load() == 2);
}

TEST_CASE("http stream: a handler throwing after a piece closes without the last chunk") {
  const watchdog guard("http stream: throw", 60 * timeout_scale());
  reported_failures.store(0);
  stoppable_server server({}, streaming_routes(), counting_failures());
  raw_client client(server.port());
  client.send(get("/throw") + get("/plain"));
  CHECK(client.read_to_eof());
  CHECK(client.received.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(client.received.ends_with("b\r\nfirst piece\r\n"));  // no 0-chunk, no next answer
  CHECK(eventually([] { return reported_failures.load() == 1; }));

  // HTTP/1.0 (close-delimited): the cut is a reset, not a close that would
  // read as the end of a complete body.
  raw_client old(server.port());
  old.send("GET /throw HTTP/1.0\r\n\r\n");
  CHECK(old.read_until("first piece"));
  char byte = 0;
  CHECK(::recv(old.fd(), &byte, 1, 0) < 0);
  CHECK(errno == ECONNRESET);
  CHECK(eventually([] { return reported_failures.load() == 2; }));
}

TEST_CASE("http stream: a throw whose head never went out still lets the answers before go") {
  // HEAD (and a 204 head) refuses the writes, so the head waits in the
  // output with the answers pipelined before it; a throw then drops the
  // head only, as for any handler (<canopy/io/http.hpp>).
  const watchdog guard("http stream: throw before the head went out", 60 * timeout_scale());
  reported_failures.store(0);
  http::router routes = streaming_routes();
  const auto refused_then_throw = [](const http::request&,
                                     http::response_writer& body) -> task<void> {
    CHECK_FALSE(co_await body.write("dropped"));
    throw std::runtime_error("after a refused write");
  };
  routes.get("/refused", refused_then_throw)
      .get("/no-content",
           [refused_then_throw](const http::request& req,
                                http::response_writer& body) -> task<void> {
             body.head().status = 204;
             return refused_then_throw(req, body);
           });
  stoppable_server server({}, std::move(routes), counting_failures());
  const std::string plain =
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nplain";
  int reported = 0;
  for (const std::string& thrower :
       {std::string("HEAD /refused HTTP/1.1\r\nHost: x\r\n\r\n"), get("/no-content")}) {
    CAPTURE(thrower);
    raw_client client(server.port());
    client.send(get("/plain") + thrower + get("/plain"));
    CHECK(client.read_to_eof());
    CHECK(client.received == plain);  // the answer before it; nothing of its head, nothing after
    ++reported;
    CHECK(eventually([reported] { return reported_failures.load() == reported; }));
  }
}

TEST_CASE("http stream: writes wait for a slow client instead of buffering the body") {
  const watchdog guard("http stream: back-pressure", 120 * timeout_scale());
  constexpr std::size_t piece_bytes = 64 * 1024;
  constexpr std::size_t total = 32 * 1024 * 1024;
  std::atomic<std::size_t> written{0};
  stoppable_server server(
      {}, [&written](const http::request&, http::response_writer& body) -> task<void> {
        const std::string block(piece_bytes, 'x');
        while (written.load() < total) {
          if (!co_await body.write(block)) {
            co_return;
          }
          written.fetch_add(piece_bytes);
        }
      });
  raw_client client(server.port());
  client.send(get("/big"));
  REQUIRE(client.read_until("\r\n\r\n"));
  // The client reads nothing more: the writes stop once the socket buffers
  // are full (a few MiB on loopback), far short of the body.
  std::size_t before = 0;
  CHECK(eventually([&] {
    before = written.load();
    std::this_thread::sleep_for(100ms);
    return before > 0 && written.load() == before;
  }));
  CHECK(before < total / 2);
  // Reading on, the whole body arrives.
  client.receive_timeout(std::chrono::milliseconds(static_cast<int>(10'000 * timeout_scale())));
  while (!client.received.ends_with("\r\n0\r\n\r\n")) {
    REQUIRE(client.read_some());
  }
  const decoded got = decode_chunked(client.received, client.received.find("\r\n\r\n") + 4);
  CHECK(got.end == client.received.size());
  CHECK(got.data.size() == total);
  CHECK(got.data.find_first_not_of('x') == std::string::npos);
}

TEST_CASE("http stream: an endless stream to a fast reader yields its worker and drains") {
  const watchdog guard("http stream: fairness", 60 * timeout_scale());
  http::router routes;
  routes
      .get("/endless",
           [](const http::request&, http::response_writer& body) -> task<void> {
             // Pieces made without waiting: only the writes may suspend.
             for (int i = 0;; ++i) {
               if (!co_await body.write(std::to_string(i) + "\n")) {
                 co_return;
               }
             }
           })
      .get("/plain", [](const http::request&) { return "plain"; });
  http::server_options options;
  options.drain_timeout = 200ms;
  // One worker: a stream that never gave it back would leave nothing else run.
  stoppable_server server(options, std::move(routes), io_config(1));
  std::atomic<bool> ended{false};
  std::thread reader([&ended, port = server.port()] {
    raw_client fast(port);
    fast.send(get("/endless"));
    // Reads as fast as it can, until the server closes (or, failing, for
    // a bounded time, after which the close ends the stream).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    char buffer[1 << 16];
    while (std::chrono::steady_clock::now() < until) {
      if (::recv(fast.fd(), buffer, sizeof buffer, 0) <= 0) {
        ended.store(true);
        break;
      }
    }
  });
  std::this_thread::sleep_for(200ms);  // the stream is under way
  {
    raw_client other(server.port());
    other.receive_timeout(std::chrono::milliseconds(static_cast<long>(3000 * timeout_scale())));
    other.send(get("/plain"));
    CHECK(other.read_until("\r\n\r\nplain"));
  }
  // The drain: the stream's head went out, so it runs on until
  // drain_timeout, then is cancelled (closed without its last chunk).
  server.stop();
  CHECK(
      server.returned_within(std::chrono::milliseconds(static_cast<long>(5000 * timeout_scale()))));
  reader.join();
  CHECK(ended.load());
}

TEST_CASE("http stream: without a streaming connection the body is collected and sent whole") {
  // What a connection passes no body_sink for (as the HTTPS one does now).
  http::handler respond = [](const http::request&, http::response_writer& body) -> task<void> {
    body.head().status = 201;
    body.head().body = "ab";
    CHECK(co_await body.write("cd"));
    CHECK(co_await body.write("ef"));
  };
  executor pool(io_config(1));
  http::request req;
  req.method = "GET";
  req.target = "/";
  std::string out;
  const http::response answer =
      block_on(pool, [&]() -> task<http::response> { co_return co_await respond(req, out); }());
  CHECK(answer.status == 201);
  CHECK(answer.body == "abcdef");
  CHECK(out.empty());
  pool.shutdown();
}

TEST_CASE("http drain: the request under way is answered, those pipelined behind it are not") {
  const watchdog guard("http drain: pipelined", 60 * timeout_scale());
  std::atomic<int> started{0};
  std::atomic<int> fast_answered{0};
  http::server_options options;
  options.drain_timeout = std::chrono::milliseconds(static_cast<int>(3000 * timeout_scale()));
  http::router routes;
  routes
      .get("/slow",
           [&](const http::request&) -> task<http::response> {
             started.fetch_add(1);
             co_await canopy::sleep_for(300ms);
             http::response answer;
             answer.body = "slow done";
             co_return answer;
           })
      .get("/fast",
           [&](const http::request&) {
             fast_answered.fetch_add(1);
             return "fast";
           })
      // A streamed answer whose head went out before the stop: it ends with
      // its last chunk, then the close.
      .get("/stream-early",
           [&](const http::request&, http::response_writer& body) -> task<void> {
             CHECK(co_await body.write("a"));
             started.fetch_add(1);
             co_await canopy::sleep_for(300ms);
             CHECK(co_await body.write("b"));
           })
      // One whose head goes out after the stop: it says Connection: close.
      .get("/stream-late", [&](const http::request&, http::response_writer& body) -> task<void> {
        started.fetch_add(1);
        co_await canopy::sleep_for(300ms);
        CHECK(co_await body.write("late"));
      });
  stoppable_server server(options, std::move(routes));
  const std::string behind = get("/fast") + get("/fast");
  raw_client plain(server.port());
  plain.send(get("/slow") + behind);
  raw_client early(server.port());
  early.send(get("/stream-early") + behind);
  raw_client late(server.port());
  late.send(get("/stream-late") + behind);
  CHECK(eventually([&] { return started.load() == 3; }));
  server.stop();

  CHECK(plain.read_to_eof());
  CHECK(plain.received.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(plain.received.ends_with("Connection: close\r\n\r\nslow done"));
  CHECK(plain.received.find("HTTP/1.1", 1) == std::string::npos);

  CHECK(early.read_to_eof());
  const decoded early_body = decode_chunked(early.received, early.received.find("\r\n\r\n") + 4);
  CHECK(early_body.data == "ab");
  CHECK(early_body.end == early.received.size());  // nothing after its last chunk
  CHECK(early.received.find("Connection") == std::string::npos);

  CHECK(late.read_to_eof());
  CHECK(late.received.find("Connection: close\r\n") != std::string::npos);
  const decoded late_body = decode_chunked(late.received, late.received.find("\r\n\r\n") + 4);
  CHECK(late_body.data == "late");
  CHECK(late_body.end == late.received.size());

  CHECK(fast_answered.load() == 0);
  CHECK(server.returned_within(options.drain_timeout));
}

}  // namespace
}  // namespace canopy::testing
