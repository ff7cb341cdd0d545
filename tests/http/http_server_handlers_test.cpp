// The HTTP server's handler forms (stateful callables, coroutine handlers,
// the response type), its router (404, 405 with Allow) and serve()'s drain on
// a stop token, over real sockets on 127.0.0.1; on both I/O backends; and
// examples/http_hello's drain on SIGTERM.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <atomic>
#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <canopy/sync.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <stop_token>
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

std::string get(std::string_view target, std::string_view method = "GET") {
  return std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n\r\n";
}

// Reads until `count` complete answers (a head, then the body of its
// Content-Length; a 204 has none) have arrived.
bool read_answers(raw_client& client, std::size_t count) {
  for (;;) {
    const std::string& got = client.received;
    std::size_t at = 0;
    std::size_t complete = 0;
    while (complete < count) {
      const std::size_t head_end = got.find("\r\n\r\n", at);
      const std::size_t length_at = got.find("Content-Length: ", at);
      const bool no_content = got.compare(at, 13, "HTTP/1.1 204 ") == 0;
      if (head_end == std::string::npos || (length_at > head_end && !no_content)) {
        break;
      }
      const std::size_t end =
          head_end + 4 + (no_content ? 0 : std::stoul(got.substr(length_at + 16)));
      if (got.size() < end) {
        break;
      }
      at = end;
      ++complete;
    }
    if (complete == count) {
      return true;
    }
    if (!client.read_some()) {
      return false;
    }
  }
}

TEST_CASE("http handlers: a lambda with state counts the requests it answers") {
  const watchdog guard("http handlers: stateful lambda", 60 * timeout_scale());
  std::atomic<int> served{0};
  stoppable_server server({}, [&served](const http::request& req) {
    http::response answer;
    answer.body = std::to_string(served.fetch_add(1, std::memory_order_relaxed) + 1);
    answer.headers.emplace_back("X-Target", std::string(req.target));
    return answer;
  });
  raw_client client(server.port());
  client.send(get("/a") + get("/b") + get("/c"));  // pipelined
  REQUIRE(client.read_until("X-Target: /c"));
  CHECK(served.load() == 3);
  CHECK(client.received.find("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Type: text/plain"
                             "\r\nX-Target: /a\r\n\r\n1") != std::string::npos);
  CHECK(client.received.ends_with("\r\n\r\n3"));
  // HEAD: the head only, the GET answer's Content-Length.
  client.received.clear();
  client.send(get("/d", "HEAD") + get("/e"));
  REQUIRE(client.read_until("X-Target: /e\r\n\r\n5"));
  CHECK(client.received.starts_with("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"));
  CHECK(client.received.find("X-Target: /d\r\n\r\nHTTP/1.1 200") != std::string::npos);
}

TEST_CASE("http handlers: a coroutine handler awaits a sleep and a canopy::mutex") {
  const watchdog guard("http handlers: coroutine", 60 * timeout_scale());
  canopy::mutex lock;
  int inside = 0;  // guarded by `lock`
  // Read by the test's thread, which the answers' bytes do not order after
  // the workers' writes as far as TSan knows: an atomic.
  std::atomic<int> most_inside{0};
  stoppable_server server({}, [&](const http::request&) -> task<http::response> {
    auto held = co_await lock.lock();
    ++inside;
    if (inside > most_inside.load(std::memory_order_relaxed)) {
      most_inside.store(inside, std::memory_order_relaxed);  // under `lock`: one writer
    }
    co_await canopy::sleep_for(5ms);
    const int now = inside--;
    http::response answer;
    answer.status = 201;
    answer.body = "inside=" + std::to_string(now);
    co_return answer;
  });
  constexpr int clients = 4;
  std::vector<std::thread> threads;
  std::atomic<int> answered{0};
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      raw_client client(server.port());
      client.send(get("/x") + get("/y"));
      if (read_answers(client, 2) && client.received.starts_with("HTTP/1.1 201 Created") &&
          client.received.ends_with("inside=1")) {
        answered.fetch_add(1);
      }
    });
  }
  for (std::thread& each : threads) {
    each.join();
  }
  CHECK(answered.load() == clients);
  CHECK(most_inside == 1);  // the mutex held across the sleep
}

TEST_CASE("http handlers: the router answers 404 and 405 with Allow itself") {
  const watchdog guard("http handlers: router", 60 * timeout_scale());
  http::router routes;
  routes.get("/hello", [](const http::request&) { return std::string("hi"); })
      .post("/hello", [](const http::request& req) { return std::string(req.body); })
      .add("DELETE", "/files/*", [](const http::request& req) {
        http::response gone;
        gone.status = 204;
        gone.content_type = "";
        gone.body = std::string(req.target.substr(7));
        return gone;
      });
  stoppable_server server({}, std::move(routes));
  raw_client client(server.port());
  client.send(get("/hello?x=1") + get("/nope") + get("/hello", "PUT") +
              "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody" +
              get("/files/a/b", "DELETE") + get("/files/a", "GET"));
  REQUIRE(read_answers(client, 6));
  const std::string& got = client.received;
  CHECK(got.find("200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nhi") !=
        std::string::npos);
  CHECK(got.find("404 Not Found\r\n") != std::string::npos);
  CHECK(got.find("405 Method Not Allowed\r\nContent-Length: 18\r\nContent-Type: text/plain\r\n"
                 "Allow: GET, HEAD, POST\r\n\r\nMethod Not Allowed") != std::string::npos);
  CHECK(got.find("200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\nbody") !=
        std::string::npos);
  // A 204 has no content: the handler's body is dropped, and no Content-Length
  // goes out (RFC 9110 8.6).
  CHECK(got.find("204 No Content\r\n\r\nHTTP/1.1 405") != std::string::npos);
  CHECK(got.ends_with("Allow: DELETE\r\n\r\nMethod Not Allowed"));
}

TEST_CASE("http handlers: an answer with Connection: close ends the connection") {
  const watchdog guard("http handlers: close", 60 * timeout_scale());
  http::router routes;
  routes
      .get("/bye",
           [](const http::request&) {
             http::response answer;
             answer.body = "bye";
             answer.close = true;
             return answer;
           })
      .get("/co-bye",
           [](const http::request&) -> task<http::response> {
             co_await canopy::sleep_for(1ms);
             http::response answer;
             answer.body = "bye";
             answer.close = true;
             co_return answer;
           })
      .get("/plain-bye", [](const http::request&, std::string& out) {
        http::append_response(out, 200, "OK", "text/plain", "bye", true);
      });
  // An idle connection would close quietly only after a minute: an EOF
  // within the client's few seconds is the answer's.
  http::server_options options;
  options.request_timeout = 60s;
  stoppable_server server(options, std::move(routes));
  for (const std::string_view target : {"/bye", "/co-bye", "/plain-bye"}) {
    CAPTURE(target);
    raw_client client(server.port());
    client.receive_timeout(std::chrono::milliseconds(static_cast<long>(5000 * timeout_scale())));
    // The request pipelined behind it is not answered (RFC 9112 9.6).
    client.send(get(target) + get(target));
    CHECK(client.read_to_eof());
    CHECK(client.received.find("Connection: close\r\n\r\nbye") != std::string::npos);
    CHECK(client.received.find("HTTP/1.1", 1) == std::string::npos);
    // HTTP/1.0 kept alive (ab -k): the same, and no `Connection: keep-alive`.
    raw_client old(server.port());
    old.receive_timeout(std::chrono::milliseconds(static_cast<long>(5000 * timeout_scale())));
    old.send("GET " + std::string(target) + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK(old.read_to_eof());
    CHECK(old.received.ends_with("Connection: close\r\n\r\nbye"));
  }
  raw_client kept(server.port());  // other answers keep the connection
  kept.send(get("/nope") + get("/nope"));
  CHECK(read_answers(kept, 2));
}

TEST_CASE("http handlers: curl through the router, one connection for three requests") {
  const watchdog guard("http handlers: curl", 120 * timeout_scale());
  std::atomic<int> hits{0};
  http::router routes;
  routes.get("/hits", [&hits](const http::request&) { return std::to_string(++hits); })
      .post("/echo", [](const http::request& req) -> task<http::response> {
        co_await canopy::sleep_for(1ms);
        http::response answer;
        answer.content_type = "application/octet-stream";
        answer.body = std::string(req.body);
        co_return answer;
      });
  stoppable_server server({}, std::move(routes));
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  child_process curl({"curl",
                      "--silent",
                      "--show-error",
                      "--max-time",
                      "20",
                      "--write-out",
                      " code=%{http_code} connects=%{num_connects}\n",
                      base + "/hits",
                      base + "/hits",
                      "--next",
                      "--silent",
                      "--data-binary",
                      "payload",
                      "--write-out",
                      " code=%{http_code}\n",
                      base + "/echo",
                      "--next",
                      "--silent",
                      "--write-out",
                      " code=%{http_code}\n",
                      "--request",
                      "DELETE",
                      base + "/hits"});
  CHECK(curl.wait(30) == 0);
  INFO("curl said:\n", curl.output());
  CHECK(curl.output() ==
        "1 code=200 connects=1\n2 code=200 connects=0\npayload code=200\n"
        "Method Not Allowed code=405\n");
}

TEST_CASE("http handlers: the router routes an absolute-form target by its path") {
  // RFC 9112 3.2.2: a server accepts the absolute-form (what a client
  // sends through a proxy); the target's path is what follows the authority.
  const watchdog guard("http handlers: absolute-form", 60 * timeout_scale());
  http::router routes;
  routes.get("/hits", [](const http::request& req) { return "hits " + std::string(req.target); })
      .get("/", [](const http::request&) { return std::string("root"); })
      .get("/files/*", [](const http::request&) { return std::string("file"); });
  stoppable_server server({}, std::move(routes));
  raw_client client(server.port());
  client.send(get("http://example.test/hits?x=1") + get("HTTP://example.test:8080/files/a") +
              get("http://example.test") + get("https://example.test?q") +
              get("http://example.test/hits", "POST") + get("http://example.test/nope"));
  REQUIRE(read_answers(client, 6));
  const std::string& got = client.received;
  CHECK(got.find("\r\n\r\nhits http://example.test/hits?x=1HTTP/1.1 200 OK\r\n") !=
        std::string::npos);  // the target as it came
  CHECK(got.find("\r\n\r\nfileHTTP/1.1 200 OK\r\n") != std::string::npos);
  CHECK(got.find("\r\n\r\nrootHTTP/1.1 200 OK\r\n") != std::string::npos);  // an empty path: "/"
  CHECK(got.find("\r\n\r\nrootHTTP/1.1 405 Method") != std::string::npos);  // "?q": "/" too
  CHECK(got.find("Allow: GET, HEAD\r\n\r\nMethod Not AllowedHTTP/1.1 404 Not Found") !=
        std::string::npos);
  // curl through a proxy (-x) sends the absolute-form.
  const std::string proxy = "http://127.0.0.1:" + std::to_string(server.port());
  child_process curl({"curl", "--silent", "--show-error", "--max-time", "20", "--proxy", proxy,
                      "--write-out", " code=%{http_code}\n", "http://example.test/hits"});
  CHECK(curl.wait(30) == 0);
  CHECK(curl.output() == "hits http://example.test/hits code=200\n");
}

std::atomic<int> reported_failures{0};

TEST_CASE("http handlers: a coroutine handler's exception ends its connection, reported") {
  const watchdog guard("http handlers: coroutine throws", 60 * timeout_scale());
  reported_failures.store(0);
  executor_config config = io_config(2);
  config.on_detached_exception = [](std::exception_ptr) { reported_failures.fetch_add(1); };
  stoppable_server server(
      {},
      [](const http::request& req) -> task<http::response> {
        co_await canopy::sleep_for(1ms);
        if (req.target == "/boom") {
          throw std::runtime_error("boom");
        }
        co_return http::response{};
      },
      std::move(config));
  raw_client boom(server.port());
  boom.send(get("/boom"));
  CHECK(boom.read_to_eof());
  CHECK(boom.received.empty());
  CHECK(eventually([] { return reported_failures.load() == 1; }));
  raw_client fine(server.port());
  fine.send(get("/"));
  CHECK(fine.read_until("200 OK"));
}

TEST_CASE("http handlers: a handler's exception still lets the answers pipelined before go") {
  const watchdog guard("http handlers: throw behind answers", 60 * timeout_scale());
  reported_failures.store(0);
  executor_config config = io_config(2);
  config.on_detached_exception = [](std::exception_ptr) { reported_failures.fetch_add(1); };
  http::router routes;
  routes.get("/ok", [](const http::request&) { return std::string("fine"); })
      .get("/throw",
           [](const http::request&) -> std::string { throw std::runtime_error("plain boom"); })
      .get("/co-throw", [](const http::request&) -> task<http::response> {
        co_await canopy::sleep_for(1ms);
        throw std::runtime_error("coroutine boom");
      });
  stoppable_server server({}, std::move(routes), std::move(config));
  int reported = 0;
  for (const std::string_view target : {"/throw", "/co-throw"}) {
    CAPTURE(target);
    raw_client client(server.port());
    client.send(get("/ok") + get("/ok") + get(target) + get("/ok"));
    CHECK(client.read_to_eof());
    // The two answers before it, complete; nothing for it or after it.
    const std::string one =
        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\nfine";
    CHECK(client.received == one + one);
    ++reported;
    CHECK(eventually([reported] { return reported_failures.load() == reported; }));
  }
}

TEST_CASE("http handlers: bad input is refused with std::invalid_argument") {
  http::router routes;
  CHECK_THROWS_AS(routes.add("GET", "", [](const http::request&) { return std::string(); }),
                  std::invalid_argument);
  CHECK_THROWS_AS(routes.add("GET", "x", [](const http::request&) { return std::string(); }),
                  std::invalid_argument);
  CHECK_THROWS_AS(routes.add("", "/x", [](const http::request&) { return std::string(); }),
                  std::invalid_argument);
  CHECK_THROWS_AS(routes.get("/x", std::function<std::string(const http::request&)>()),
                  std::invalid_argument);
  void (*null_handler)(const http::request&, std::string&) = nullptr;
  CHECK_THROWS_WITH_AS(routes.get("/x", null_handler),
                       "canopy::io::http::router::add: an empty handler for GET /x",
                       std::invalid_argument);
  // serve() refuses an empty handler and a drain_timeout of zero.
  executor pool(io_config(1));
  io::reactor_timers timers(pool);
  auto listener = io::tcp_listener::bind(io::reactor::of(pool), io::endpoint::loopback_v4(0));
  CHECK_THROWS_AS(pool.spawn(http::serve(listener, {}, http::handler())).get(),
                  std::invalid_argument);
  http::server_options no_drain;
  no_drain.drain_timeout = 0ms;
  CHECK_THROWS_WITH_AS(
      pool.spawn(http::serve(listener, no_drain, [](const http::request&) { return "x"; })).get(),
      doctest::Contains("drain_timeout must be positive"), std::invalid_argument);
  pool.shutdown();
}

TEST_CASE("http handlers: a stop drains: in-flight answered, idle closed, new refused") {
  const watchdog guard("http handlers: drain", 60 * timeout_scale());
  std::atomic<bool> slow_started{false};
  http::server_options options;
  options.drain_timeout = std::chrono::milliseconds(static_cast<int>(3000 * timeout_scale()));
  stoppable_server server(options, [&](const http::request& req) -> task<http::response> {
    http::response answer;
    if (req.target == "/slow") {
      slow_started.store(true);
      co_await canopy::sleep_for(300ms);
      answer.body = "slow done";
    } else {
      answer.body = "fast";
    }
    co_return answer;
  });
  raw_client idle(server.port());
  idle.send(get("/fast"));
  REQUIRE(idle.read_until("fast"));  // now idle, kept alive
  raw_client busy(server.port());
  busy.send(get("/slow"));
  while (!slow_started.load()) {
    std::this_thread::sleep_for(1ms);
  }
  const auto stopped_at = std::chrono::steady_clock::now();
  server.stop();
  // The idle connection is closed without an answer it did not ask for.
  idle.received.clear();
  CHECK(idle.read_to_eof());
  CHECK(idle.received.empty());
  // The request under way is answered, with Connection: close, then EOF.
  CHECK(busy.read_to_eof());
  CHECK(busy.received.find("Connection: close\r\n\r\nslow done") != std::string::npos);
  CHECK(server.returned_within(options.drain_timeout));
  CHECK(std::chrono::steady_clock::now() - stopped_at < options.drain_timeout);
  // No longer accepting: a new client is not answered (the listener is
  // still open, so the kernel completes its connect; nobody accepts it).
  raw_client late(server.port());
  late.receive_timeout(200ms);
  late.send(get("/fast"));
  CHECK_FALSE(late.read_some());
  CHECK(late.received.empty());
}

TEST_CASE("http handlers: past the drain deadline the rest are closed") {
  const watchdog guard("http handlers: drain deadline", 60 * timeout_scale());
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  http::server_options options;
  options.drain_timeout = 200ms;
  stoppable_server server(options, [&](const http::request&) -> task<http::response> {
    started.store(true);
    co_await canopy::sleep_for(60s);
    finished.store(true);
    co_return http::response{};
  });
  raw_client stuck(server.port());
  stuck.send(get("/forever"));
  while (!started.load()) {
    std::this_thread::sleep_for(1ms);
  }
  const auto stopped_at = std::chrono::steady_clock::now();
  server.stop();
  CHECK(server.returned_within(
      std::chrono::milliseconds(static_cast<int>(10'000 * timeout_scale()))));
  const auto took = std::chrono::steady_clock::now() - stopped_at;
  CHECK(took >= options.drain_timeout);
  CHECK(took < options.drain_timeout +
                   std::chrono::milliseconds(static_cast<int>(2000 * timeout_scale())));
  // Cancelled: its socket closed, no answer.
  CHECK(stuck.read_to_eof());
  CHECK(stuck.received.empty());
  CHECK_FALSE(finished.load());
}

// examples/http_hello drains on SIGTERM: a request half sent before the
// signal is still answered (with Connection: close), an idle keep-alive
// connection is closed, and the example exits 0 with its stats line.
TEST_CASE("http handlers: http_hello, the example, drains on SIGTERM") {
  const watchdog guard("http handlers: http_hello drain", 120 * timeout_scale());
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string program =
      (self.parent_path().parent_path() / "examples" / "http_hello").string();
  REQUIRE_MESSAGE(::access(program.c_str(), X_OK) == 0, "no ", program,
                  ": build examples/http_hello (meson builds it with the tests)");
  child_process server({program, "0", "--threads", "2"});
  REQUIRE(server.read_until("\n", 30));
  INFO("http_hello said:\n", server.output());
  const std::string_view prefix = "listening on 127.0.0.1:";
  REQUIRE(server.output().rfind(prefix, 0) == 0);
  const auto port = static_cast<std::uint16_t>(std::stoul(server.output().substr(prefix.size())));
  raw_client idle(port);
  idle.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(idle.read_until("Hello, World!"));
  raw_client half(port);
  half.send("GET / HTTP/1.1\r\nHost: x\r\n");
  std::this_thread::sleep_for(100ms);  // the head's first part is read before the stop
  server.signal(SIGTERM);
  idle.received.clear();
  CHECK(idle.read_to_eof());
  CHECK(idle.received.empty());
  std::this_thread::sleep_for(100ms);
  half.send("\r\n");
  CHECK(half.read_to_eof());
  CHECK(half.received.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(half.received.find("Connection: close\r\n") != std::string::npos);
  CHECK(half.received.find("Hello, World!") != std::string::npos);
  CHECK(server.wait(30) == 0);
  CHECK(server.output().find(" requests=2 ") != std::string::npos);
}

}  // namespace
}  // namespace canopy::testing
