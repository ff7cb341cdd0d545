// canopy_echo_server — the Canopy side of the echo benchmark: one coroutine
// task per connection that sends back what it reads.
//
//   canopy_echo_server PORT [--threads N]
//
// On epoll it reads with a non-blocking attempt when the registration says
// the socket may be readable, and waits for readability otherwise or after
// EAGAIN (no task frame per read); writes with an attempt first. On io_uring
// (CANOPY_IO_BACKEND=io_uring, or auto where the kernel allows it) it uses
// the plain read_some and write_all, which are completion requests there:
// the readiness attempts above would bypass the ring. Prints
// "listening on 127.0.0.1:PORT", serves until SIGINT/SIGTERM, then prints
// "io_backend epoll|io_uring".
#include <signal.h>

#include <array>
#include <canopy/io.hpp>
#include <canopy/task.hpp>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>

namespace {

using canopy::io::direction;

canopy::task<void> echo(canopy::io::tcp_stream stream) {
  std::array<std::byte, 4096> buffer;
  for (;;) {
    std::error_code error;
    std::uint64_t tick = 0;
    std::size_t got = 0;
    if (stream.reg().ready(direction::read, tick)) {
      got = stream.try_read_some(buffer, error);
    } else {
      // A short read cleared readiness: nothing has arrived since, so wait
      // for the edge rather than spend a recv on EAGAIN.
      error = std::make_error_code(std::errc::resource_unavailable_try_again);
    }
    if (error == std::errc::resource_unavailable_try_again) {
      if (co_await canopy::io::readable(stream.reg())) {
        co_return;
      }
      continue;
    }
    if (error || got == 0) {
      co_return;
    }
    const std::span<const std::byte> data(buffer.data(), got);
    const std::size_t sent = stream.try_write_some(data, error);
    if (error && error != std::errc::resource_unavailable_try_again) {
      co_return;
    }
    if (sent < got) {
      error.clear();
      co_await stream.write_all(data.subspan(sent), error);
      if (error) {
        co_return;
      }
    }
  }
}

// The io_uring form: one receive and one send request per message.
canopy::task<void> echo_completion(canopy::io::tcp_stream stream) {
  std::array<std::byte, 4096> buffer;
  for (;;) {
    std::error_code error;
    const std::size_t got = co_await stream.read_some(buffer, error);
    if (error || got == 0) {
      co_return;
    }
    co_await stream.write_all(std::span<const std::byte>(buffer.data(), got), error);
    if (error) {
      co_return;
    }
  }
}

canopy::task<void> accept_loop(canopy::io::tcp_listener& listener, bool completion) {
  for (;;) {
    std::error_code error;
    canopy::io::tcp_stream stream = co_await listener.accept(error);
    if (error) {
      if (error == std::errc::operation_canceled) {
        co_return;
      }
      continue;
    }
    if (completion) {
      canopy::spawn_detached(echo_completion(std::move(stream)));
    } else {
      canopy::spawn_detached(echo(std::move(stream)));
    }
  }
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr, "canopy_echo_server: %s\nusage: canopy_echo_server PORT [--threads N]\n",
               message);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage("the port is required");
  }
  unsigned port = 0;
  if (std::from_chars(argv[1], argv[1] + std::strlen(argv[1]), port).ec != std::errc() ||
      port > 65535) {
    usage("the port must be 0..65535");
  }
  canopy::executor_config config;
  if (argc == 4 && std::string_view(argv[2]) == "--threads") {
    unsigned threads = 0;
    if (std::from_chars(argv[3], argv[3] + std::strlen(argv[3]), threads).ec != std::errc() ||
        threads == 0) {
      usage("--threads takes a positive number");
    }
    config.worker_count = threads;
  } else if (argc != 2) {
    usage("bad arguments");
  }

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  canopy::executor pool(canopy::io::with_reactor(config));
  canopy::io::reactor& reactor = canopy::io::reactor::of(pool);
  canopy::io::tcp_listener listener = canopy::io::tcp_listener::bind(
      reactor, canopy::io::endpoint::loopback_v4(static_cast<std::uint16_t>(port)));
  auto server =
      pool.spawn(accept_loop(listener, reactor.backend() == canopy::io::io_backend::io_uring));
  std::printf("listening on 127.0.0.1:%u\n", listener.local_endpoint().port());
  std::fflush(stdout);
  int received = 0;
  sigwait(&stop_signals, &received);
  server.cancel();
  pool.shutdown();
  std::printf("io_backend %s\n", canopy::io::to_string(reactor.backend()));
  return 0;
}
