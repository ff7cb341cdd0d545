// http_hello — an HTTP/1.1 server on Canopy: `GET /` answers "Hello, World!"
// (the path decides: `GET /?name=x` too; any other path gets 404).
//
//   http_hello [PORT] [--threads N] [--request-timeout MS] [--write-timeout MS]
//              [--coroutine]
//
// Listens on 127.0.0.1:PORT (0 or no PORT: a free port). Prints
// "listening on 127.0.0.1:PORT" once it accepts connections, serves until
// SIGINT or SIGTERM, then drains (serve()'s stop token: no new
// connections, a request under way is answered with Connection: close,
// idle keep-alive connections close at once, the rest are cut after 5 s),
// prints one line of statistics ("stats key=value ...": the executor's and
// the reactor's counters, requests served) and exits. One worker per
// hardware thread unless --threads says otherwise. Keep-alive (HTTP/1.0
// too: confirmed with Connection: keep-alive), pipelining, Connection:
// close, HEAD (the GET answer's head, no body), 400 on malformed or
// oversized requests, 408 for a request that starts but does not arrive
// within the request timeout, a quiet close of a connection idle that
// long, and a reset of one whose client reads nothing for the write
// timeout (io/http/http_server.hpp). --coroutine answers the same bytes
// from a stateful coroutine handler (a lambda counting its answers,
// returning canopy::task<response>) instead of the function pointer, to
// compare the two forms' cost.
#include <atomic>
#include <canopy/canopy.hpp>
#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

namespace {

namespace http = canopy::io::http;

// HEAD is answered as GET: the server sends the head only. The server also
// adds Connection: keep-alive for an HTTP/1.0 request kept alive.
void hello(const http::request& req, std::string& out) {
  const bool close = !req.keep_alive;
  // The raw target first: the common "/" costs no parse of the target.
  if (req.target != "/" && req.path() != "/") {
    http::append_response(out, 404, "Not Found", "text/plain", "Not Found", close);
  } else if (req.method != "GET" && req.method != "HEAD") {
    http::append_response(out, 405, "Method Not Allowed", "text/plain", "Method Not Allowed",
                          close);
  } else {
    http::append_response(out, 200, "OK", "text/plain", "Hello, World!", close);
  }
}

// The same answers as hello, from a coroutine handler with state.
http::handler counting_coroutine(std::atomic<unsigned long>& answered) {
  return [&answered](const http::request& req) -> canopy::task<http::response> {
    answered.fetch_add(1, std::memory_order_relaxed);
    http::response answer;
    if (req.target != "/" && req.path() != "/") {
      answer.status = 404;
      answer.body = "Not Found";
    } else if (req.method != "GET" && req.method != "HEAD") {
      answer.status = 405;
      answer.body = "Method Not Allowed";
    } else {
      answer.body = "Hello, World!";
    }
    co_return answer;
  };
}

bool parse_number(std::string_view text, unsigned long& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "http_hello: %s\nusage: http_hello [PORT] [--threads N] [--request-timeout MS] "
               "[--write-timeout MS] [--coroutine]\n",
               message);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long port = 0;
  unsigned long threads = canopy::executor_config::default_worker_count();
  unsigned long timeout_ms = 10'000;
  unsigned long write_timeout_ms = 30'000;
  bool coroutine = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument == "--coroutine") {
      coroutine = true;
    } else if ((argument == "--threads" || argument == "--request-timeout" ||
                argument == "--write-timeout") &&
               i + 1 < argc) {
      unsigned long& target = argument == "--threads"           ? threads
                              : argument == "--request-timeout" ? timeout_ms
                                                                : write_timeout_ms;
      if (!parse_number(argv[++i], target) || target == 0) {
        usage("--threads, --request-timeout and --write-timeout take a positive number");
      }
      if (threads > canopy::executor_config::max_worker_count) {
        usage("--threads takes 1..1024");
      }
    } else if (i == 1 && parse_number(argument, port)) {
      if (port > 65535) {
        usage("the port must be 0..65535");
      }
    } else {
      usage("unknown argument");
    }
  }

  // SIGINT/SIGTERM reach the signal_set below only if blocked in every
  // thread: block them here, before the executor starts its workers.
  canopy::io::block_signals({SIGINT, SIGTERM});

  canopy::executor_config config;
  config.worker_count = threads;
  canopy::executor pool(canopy::io::with_reactor(config));
  canopy::io::reactor& reactor = canopy::io::reactor::of(pool);

  std::error_code error;
  canopy::io::tcp_listener listener = canopy::io::tcp_listener::bind(
      reactor, canopy::io::endpoint::loopback_v4(static_cast<std::uint16_t>(port)), error);
  if (error) {
    std::fprintf(stderr, "http_hello: cannot listen on 127.0.0.1:%lu: %s\n", port,
                 error.message().c_str());
    return 1;
  }
  http::server_options options;
  options.request_timeout = std::chrono::milliseconds(timeout_ms);
  options.write_timeout = std::chrono::milliseconds(write_timeout_ms);
  std::atomic<unsigned long> answered{0};
  http::handler respond = &hello;
  if (coroutine) {
    respond = counting_coroutine(answered);
  }
  std::stop_source stop;
  auto server = pool.spawn(http::serve(listener, options, std::move(respond), stop.get_token()));
  std::printf("listening on 127.0.0.1:%u\n", listener.local_endpoint().port());
  std::fflush(stdout);

  // Serve until SIGINT or SIGTERM, read through signalfd on the reactor;
  // then the drain, and serve() returns once every connection ended.
  canopy::io::signal_set signals(reactor, {SIGINT, SIGTERM});
  (void)canopy::block_on(pool, signals.wait());
  stop.request_stop();
  const std::error_code failed = server.get();
  if (failed) {
    std::fprintf(stderr, "http_hello: accept failed: %s\n", failed.message().c_str());
  }

  const canopy::worker_stats work = pool.stats().total();
  const canopy::io::reactor_stats io = reactor.stats();
  pool.shutdown();
  listener.close();
  const http::server_counters served = http::counters();
  std::printf("io_backend %s\n", canopy::io::to_string(reactor.backend()));
  std::printf(
      "stats tasks_run=%llu steals=%llu parks=%llu wakes_by_permit=%llu wakes_by_jec=%llu "
      "reactor_blocking_waits=%llu reactor_polls=%llu reactor_events=%llu reactor_notifies=%llu "
      "ring_enters=%llu ring_completions=%llu connections=%llu requests=%llu bad_requests=%llu "
      "timeouts=%llu idle_closes=%llu "
      "write_timeouts=%llu\n",
      static_cast<unsigned long long>(work.tasks_run), static_cast<unsigned long long>(work.steals),
      static_cast<unsigned long long>(work.parks),
      static_cast<unsigned long long>(work.wakes_by_permit),
      static_cast<unsigned long long>(work.wakes_by_jec),
      static_cast<unsigned long long>(io.blocking_waits), static_cast<unsigned long long>(io.polls),
      static_cast<unsigned long long>(io.events), static_cast<unsigned long long>(io.notifies),
      static_cast<unsigned long long>(io.ring_enters),
      static_cast<unsigned long long>(io.completions),
      static_cast<unsigned long long>(served.connections),
      static_cast<unsigned long long>(served.requests),
      static_cast<unsigned long long>(served.bad_requests),
      static_cast<unsigned long long>(served.timeouts),
      static_cast<unsigned long long>(served.idle_closes),
      static_cast<unsigned long long>(served.write_timeouts));
  return 0;
}
