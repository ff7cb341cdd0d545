// kv_server — a small Redis-like key-value server on Canopy, written
// against the public headers only. One concern per file: protocol.hpp (the
// lines), store.hpp (sharded map, expiry timers), log_writer.hpp (the
// append-only log), session.hpp (one connection), stats_page.hpp (the HTTP
// admin page); this file is the command line and the server's lifetime.
//
//   kv_server [--port P] [--http-port Q] [--log FILE] [--threads N]
//             [--fsync] [--drain-ms D]
//
// Listens on 127.0.0.1:P for the protocol and on 127.0.0.1:Q for HTTP (0,
// the default: a free port) and prints "listening on 127.0.0.1:P" and
// "http on 127.0.0.1:Q". GET /stats on Q answers JSON counters.
//
// The protocol. One request per line ("\n"; a "\r" before it is dropped),
// at most 4096 bytes; words are separated by spaces or tabs; command names
// are case-insensitive; a key is 1..256 bytes without spaces. One reply
// line per request:
//   GET key               "$value", or "(nil)" if there is no such key
//   SET key value         "+OK"; the value is the rest of the line after
//                         the key's one separator (spaces kept, may be
//                         empty); clears the key's expiry
//   DEL key               ":1" deleted, ":0" no such key
//   EXPIRE key seconds    ":1" the key now expires after 1..10^9 seconds,
//                         ":0" no such key
//   TTL key               ":N" seconds left, ":-1" no expiry, ":-2" no key
//   PING                  "+PONG"
//   QUIT                  "+BYE", then the server closes the connection
// Anything else gets "-ERR <why>" and the connection stays open; a line
// over 4096 bytes gets "-ERR line longer than 4096 bytes" and is closed.
//
// Durability. Every successful SET and DEL is appended to FILE (--log) as
// "SET key value" / "DEL key" before it is acknowledged: +OK (or :1) means
// the line was written to the file with write(2); with --fsync, also
// fdatasync'ed. Expiries are not logged.
//
// Shutdown. SIGINT or SIGTERM requests stop on a std::stop_source: the
// accept loop and every connection waiting for a request stop at once (a
// request already read is answered), the HTTP server drains, connections
// still busy after --drain-ms (default 2000) are cancelled (their
// unacknowledged writes may or may not be logged), the log writer appends
// what is queued, and the process prints one "stopped by ..." line (its
// counters, the I/O backend, and how long the shutdown took: drain_ms from
// the stop to the end, clients_ms of it until the last connection ended)
// and exits 0.
#include <canopy/canopy.hpp>
#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <canopy/io/signal.hpp>
#include <canopy/race.hpp>
#include <canopy/task_group.hpp>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "log_writer.hpp"
#include "session.hpp"
#include "stats_page.hpp"
#include "store.hpp"

namespace {

using namespace std::chrono_literals;

struct settings {
  unsigned long port = 0;
  unsigned long http_port = 0;
  std::string log_path;
  unsigned long threads = 2;
  bool fsync = false;
  unsigned long drain_ms = 2000;
};

struct summary {
  int signal = 0;
  bool forced = false;  // connections were cancelled at the drain deadline
  std::chrono::milliseconds drain_time{0};    // from the stop to the end of run()
  std::chrono::milliseconds clients_time{0};  // from the stop to the last connection's end
};

canopy::task<int> wait_for_signal(std::stop_source stop) {
  canopy::io::signal_set signals{SIGINT, SIGTERM};
  const int which = co_await signals.wait();
  stop.request_stop();
  co_return which;
}

struct drained {
  bool forced = false;
  std::chrono::steady_clock::time_point stopped_at;
  std::chrono::steady_clock::time_point ended_at;  // every connection ended
};

// Accepts until the stop, one detached child per connection; then drains
// them within the deadline and cancels the rest.
canopy::task<drained> accept_and_drain(canopy::io::tcp_listener& listener, kv::store& data,
                                       kv::counters& stats, std::stop_token stop,
                                       std::chrono::milliseconds deadline) {
  canopy::task_group<void> clients;
  for (;;) {
    std::error_code error;
    auto got = co_await canopy::race(listener.accept(error), canopy::stopped(stop));
    if (!got.has_value<0>()) {
      break;
    }
    if (error) {
      if (error == std::errc::operation_canceled || error == std::errc::bad_file_descriptor) {
        break;
      }
      co_await canopy::sleep_for(10ms);  // EMFILE and friends: serve the open ones meanwhile
      continue;
    }
    stats.accepted.fetch_add(1, std::memory_order_relaxed);
    clients.spawn_detached(kv::serve_client(std::move(got.get<0>()), data, stats, stop));
  }
  drained outcome;
  outcome.stopped_at = std::chrono::steady_clock::now();
  listener.close();
  auto ended = clients.all_ended();
  outcome.forced = !co_await canopy::with_timeout(deadline, ended);
  if (outcome.forced) {
    clients.cancel();
  }
  co_await clients.close();
  outcome.ended_at = std::chrono::steady_clock::now();
  co_return outcome;
}

canopy::task<summary> run(canopy::io::tcp_listener& kv_listener,
                          canopy::io::tcp_listener& http_listener, kv::store& data,
                          kv::log_writer& log, kv::counters& stats,
                          std::chrono::milliseconds deadline) {
  namespace http = canopy::io::http;
  std::stop_source stop;
  auto signalled = canopy::spawn(wait_for_signal(stop));
  auto writer = canopy::spawn(log.run());
  auto expiry = canopy::spawn(data.run_expiry());
  http::server_options options;
  options.drain_timeout = deadline;
  auto admin = canopy::spawn(
      http::serve(http_listener, options, kv::stats_routes(data, stats, log), stop.get_token()));

  const drained clients =
      co_await accept_and_drain(kv_listener, data, stats, stop.get_token(), deadline);
  const std::error_code http_error = co_await admin;
  if (http_error) {
    std::fprintf(stderr, "kv_server: http: %s\n", http_error.message().c_str());
  }
  data.close_expiry();
  co_await expiry;
  log.close();  // after every connection ended: nothing more is submitted
  co_await writer;
  summary done;
  done.signal = co_await signalled;
  done.forced = clients.forced;
  done.drain_time = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - clients.stopped_at);
  done.clients_time = std::chrono::duration_cast<std::chrono::milliseconds>(clients.ended_at -
                                                                            clients.stopped_at);
  co_return done;
}

bool parse_number(std::string_view text, unsigned long& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "kv_server: %s\nusage: kv_server [--port P] [--http-port Q] [--log FILE] "
               "[--threads N] [--fsync] [--drain-ms D]\n",
               message);
  std::exit(2);
}

settings parse_arguments(int argc, char** argv) {
  settings chosen;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument == "--fsync") {
      chosen.fsync = true;
      continue;
    }
    if (i + 1 >= argc) {
      usage("missing value or unknown option");
    }
    const std::string_view value = argv[++i];
    if (argument == "--log") {
      chosen.log_path = value;
    } else if (argument == "--port" || argument == "--http-port") {
      unsigned long& port = argument == "--port" ? chosen.port : chosen.http_port;
      if (!parse_number(value, port) || port > 65535) {
        usage("--port and --http-port take 0..65535");
      }
    } else if (argument == "--threads") {
      if (!parse_number(value, chosen.threads) || chosen.threads == 0 ||
          chosen.threads > canopy::executor_config::max_worker_count) {
        usage("--threads takes 1..1024");
      }
    } else if (argument == "--drain-ms") {
      if (!parse_number(value, chosen.drain_ms) || chosen.drain_ms == 0) {
        usage("--drain-ms takes a positive number");
      }
    } else {
      usage("unknown option");
    }
  }
  return chosen;
}

}  // namespace

int main(int argc, char** argv) {
  const settings chosen = parse_arguments(argc, argv);
  // Before the executor starts its workers: they inherit the mask, so the
  // signals reach only the signal_set (io/signal.hpp's rule).
  canopy::io::block_signals({SIGINT, SIGTERM});
  try {
    canopy::executor_config config;
    config.worker_count = chosen.threads;
    canopy::executor pool(canopy::io::with_reactor(config));
    canopy::io::reactor& reactor = canopy::io::reactor::of(pool);
    canopy::io::tcp_listener kv_listener = canopy::io::tcp_listener::bind(
        reactor, canopy::io::endpoint::loopback_v4(static_cast<std::uint16_t>(chosen.port)));
    canopy::io::tcp_listener http_listener = canopy::io::tcp_listener::bind(
        reactor, canopy::io::endpoint::loopback_v4(static_cast<std::uint16_t>(chosen.http_port)));
    kv::log_writer log(chosen.log_path, chosen.fsync);
    kv::store data(log);
    kv::counters stats;
    std::printf("listening on 127.0.0.1:%u\nhttp on 127.0.0.1:%u\n",
                kv_listener.local_endpoint().port(), http_listener.local_endpoint().port());
    std::fflush(stdout);
    const summary done = canopy::block_on(pool, run(kv_listener, http_listener, data, log, stats,
                                                    std::chrono::milliseconds(chosen.drain_ms)));
    std::printf(
        "stopped by %s: accepted=%zu commands=%zu errors=%zu logged=%zu forced=%d "
        "drain_ms=%lld clients_ms=%lld io_backend=%s\n",
        done.signal == SIGINT ? "SIGINT" : "SIGTERM",
        stats.accepted.load(std::memory_order_relaxed),
        stats.commands.load(std::memory_order_relaxed),
        stats.errors.load(std::memory_order_relaxed), log.written(), done.forced ? 1 : 0,
        static_cast<long long>(done.drain_time.count()),
        static_cast<long long>(done.clients_time.count()), canopy::io::to_string(reactor.backend()));
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "kv_server: %s\n", failure.what());
    return 1;
  }
  return 0;
}
