// echo_server — a TCP echo server on Canopy's C++20 tasks.
//
//   echo_server [PORT] [--threads N]
//
// Listens on 127.0.0.1:PORT (0 or no PORT: a free port) and prints
// "listening on 127.0.0.1:PORT". Every connection is one task that reads
// what arrives and writes it back until the peer closes. Serves until
// SIGINT or SIGTERM, then prints the I/O backend it ran on ("io_backend
// NAME") and one line of statistics, and exits. One
// worker per hardware thread unless --threads says otherwise.
#include <array>
#include <atomic>
#include <canopy/canopy.hpp>
#include <canopy/io.hpp>
#include <charconv>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>

namespace {

std::atomic<unsigned long long> connections{0};

canopy::task<void> echo(canopy::io::tcp_stream peer) {
  std::array<std::byte, 16 * 1024> buffer{};
  for (;;) {
    std::error_code error;
    const std::size_t got = co_await peer.read_some(buffer, error);
    if (error || got == 0) {
      co_return;  // EOF, or the peer reset the connection
    }
    co_await peer.write_all(std::span(buffer).first(got), error);
    if (error) {
      co_return;
    }
  }
}

canopy::task<void> accept_loop(canopy::io::tcp_listener& listener) {
  for (;;) {
    std::error_code error;
    canopy::io::tcp_stream peer = co_await listener.accept(error);
    if (error == std::errc::operation_canceled || error == std::errc::bad_file_descriptor) {
      co_return;
    }
    if (error) {
      std::fprintf(stderr, "echo_server: accept: %s\n", error.message().c_str());
      continue;  // EMFILE and friends: keep serving the open connections
    }
    connections.fetch_add(1, std::memory_order_relaxed);
    canopy::spawn_detached(echo(std::move(peer)));
  }
}

bool parse_number(std::string_view text, unsigned long& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr, "echo_server: %s\nusage: echo_server [PORT] [--threads N]\n", message);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long port = 0;
  unsigned long threads = canopy::executor_config::default_worker_count();
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument == "--threads" && i + 1 < argc) {
      if (!parse_number(argv[++i], threads) || threads == 0 ||
          threads > canopy::executor_config::max_worker_count) {
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
    std::fprintf(stderr, "echo_server: cannot listen on 127.0.0.1:%lu: %s\n", port,
                 error.message().c_str());
    return 1;
  }
  pool.spawn_detached(accept_loop(listener));
  std::printf("listening on 127.0.0.1:%u\n", listener.local_endpoint().port());
  std::fflush(stdout);

  // Serve until SIGINT or SIGTERM, read through signalfd on the reactor.
  canopy::io::signal_set stop(reactor, {SIGINT, SIGTERM});
  (void)canopy::block_on(pool, stop.wait());

  const canopy::io::reactor_stats io = reactor.stats();
  pool.shutdown();  // destroys the accept loop and every open connection
  listener.close();
  std::printf("io_backend %s\n", canopy::io::to_string(reactor.backend()));
  std::printf(
      "stats connections=%llu reactor_blocking_waits=%llu reactor_polls=%llu "
      "reactor_events=%llu reactor_notifies=%llu\n",
      connections.load(), static_cast<unsigned long long>(io.blocking_waits),
      static_cast<unsigned long long>(io.polls), static_cast<unsigned long long>(io.events),
      static_cast<unsigned long long>(io.notifies));
  return 0;
}
