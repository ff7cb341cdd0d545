// deadline_reads: reads raced against short deadlines, on the reactor's
// backend (CANOPY_IO_BACKEND picks it). `connections` TCP connections on
// loopback; on each a writer task sends `messages` 64-byte messages of a
// counting byte pattern, pausing 50 us every 8, and a reader task loops on
// one bounded read (`--form until`: read_some_until, the default;
// `--form with_timeout`: with_timeout over a task that awaits read_some)
// with a deadline of `--deadline-us`, checking every byte. Prints the wall
// time, how many reads timed out and how many bytes were out of order (0,
// or the run is wrong).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include <canopy/canopy.hpp>
#include <canopy/io.hpp>

namespace {

namespace io = canopy::io;
using namespace std::chrono_literals;

struct settings {
  int connections = 48;
  int messages = 2000;
  long deadline_us = 20;
  bool until = true;
};

constexpr std::size_t message_size = 64;

std::atomic<long> timeouts{0};
std::atomic<long> misordered{0};
std::atomic<long> received{0};

canopy::task<std::size_t> read_once(io::tcp_stream& stream, std::span<std::byte> buffer) {
  co_return co_await stream.read_some(buffer);
}

canopy::task<void> reader(io::tcp_stream stream, settings set) {
  std::vector<std::byte> buffer(4096);
  const long wanted = static_cast<long>(set.messages) * static_cast<long>(message_size);
  const auto deadline = std::chrono::microseconds(set.deadline_us);
  long offset = 0;
  while (offset < wanted) {
    std::size_t got = 0;
    if (set.until) {
      std::error_code error;
      got = co_await stream.read_some_until(buffer, std::chrono::steady_clock::now() + deadline,
                                            error);
      if (error == std::errc::timed_out) {
        timeouts.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (error) {
        break;
      }
    } else {
      auto read = co_await canopy::with_timeout(deadline, read_once(stream, buffer));
      if (!read) {
        timeouts.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      got = *read;
    }
    if (got == 0) {
      break;
    }
    for (std::size_t i = 0; i < got; ++i) {
      if (buffer[i] != static_cast<std::byte>((offset + static_cast<long>(i)) & 0xff)) {
        misordered.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    offset += static_cast<long>(got);
  }
  received.fetch_add(offset, std::memory_order_relaxed);
}

canopy::task<void> writer(io::tcp_stream stream, settings set) {
  std::vector<std::byte> message(message_size);
  long offset = 0;
  for (int i = 0; i < set.messages; ++i) {
    for (std::size_t j = 0; j < message_size; ++j) {
      message[j] = static_cast<std::byte>((offset + static_cast<long>(j)) & 0xff);
    }
    offset += static_cast<long>(message_size);
    co_await stream.write_all(message);
    if (i % 8 == 0) {
      co_await canopy::sleep_for(50us);
    }
  }
}

canopy::task<void> run(io::reactor& owner, settings set) {
  auto listener = io::tcp_listener::bind(owner, io::endpoint::loopback_v4(0));
  std::vector<canopy::join_handle<void>> handles;
  for (int i = 0; i < set.connections; ++i) {
    auto client = co_await io::tcp_stream::connect(listener.local_endpoint());
    auto server = co_await listener.accept();
    handles.push_back(canopy::spawn(reader(std::move(server), set)));
    handles.push_back(canopy::spawn(writer(std::move(client), set)));
  }
  co_await canopy::await_all(handles);
}

}  // namespace

int main(int argc, char** argv) {
  settings set;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view name = argv[i];
    const char* value = argv[i + 1];
    if (name == "--connections") {
      set.connections = std::atoi(value);
    } else if (name == "--messages") {
      set.messages = std::atoi(value);
    } else if (name == "--deadline-us") {
      set.deadline_us = std::atol(value);
    } else if (name == "--form") {
      set.until = std::strcmp(value, "with_timeout") != 0;
    } else {
      std::fprintf(stderr,
                   "usage: deadline_reads [--connections N] [--messages N] [--deadline-us N] "
                   "[--form until|with_timeout]\n");
      return 2;
    }
  }
  if (set.connections <= 0 || set.messages <= 0 || set.deadline_us <= 0) {
    std::fprintf(stderr, "deadline_reads: counts and the deadline must be positive\n");
    return 2;
  }
  canopy::executor pool(io::with_reactor({}));
  io::reactor& owner = io::reactor::of(pool);
  const auto start = std::chrono::steady_clock::now();
  canopy::block_on(pool, run(owner, set));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool uring = owner.backend() == io::io_backend::io_uring;
  std::printf("backend %s form %s connections %d deadline_us %ld: %.3f s, %ld timeouts, "
              "%ld bytes, %ld misordered\n",
              uring ? "io_uring" : "epoll", set.until ? "until" : "with_timeout", set.connections,
              set.deadline_us, seconds, timeouts.load(), received.load(), misordered.load());
  return misordered.load() == 0 ? 0 : 1;
}
