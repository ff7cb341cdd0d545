// io_callbacks — I/O readiness callbacks without coroutines.
//
//   io_callbacks
//
// A pipe is watched with a canopy::io::callback_registration: each time it
// becomes readable, the callback runs as a task on the executor and drains
// it (edge-triggered: read until EAGAIN). A plain thread writes ten
// messages; the callback counts them; then the registration is closed,
// after which the callback never runs again. Prints what it received.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <canopy/io.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

int main() {
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    std::perror("io_callbacks: pipe2");
    return 1;
  }
  const int read_end = fds[0];
  const int write_end = fds[1];

  canopy::executor pool(canopy::io::with_reactor());
  std::mutex lock;
  std::string received;
  std::atomic<int> runs{0};

  canopy::io::callback_registration watch(
      pool, read_end, canopy::io::interest::readable, [&](std::uint32_t /*events*/) {
        runs.fetch_add(1, std::memory_order_relaxed);
        char buffer[256];
        for (;;) {
          const ssize_t got = ::read(read_end, buffer, sizeof buffer);
          if (got <= 0) {
            break;  // EAGAIN: wait for the next edge (or EOF)
          }
          const std::lock_guard guard(lock);
          received.append(buffer, static_cast<std::size_t>(got));
        }
      });

  std::thread writer([write_end] {
    for (int index = 0; index < 10; ++index) {
      const std::string message = "message " + std::to_string(index) + "\n";
      [[maybe_unused]] const ssize_t put = ::write(write_end, message.data(), message.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  writer.join();

  // Wait (bounded) until every byte arrived.
  const std::size_t expected = 10 * std::strlen("message 0\n");
  for (int attempt = 0; attempt < 2000; ++attempt) {
    {
      const std::lock_guard guard(lock);
      if (received.size() >= expected) {
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  watch.close();  // from here on the callback never runs
  ::close(write_end);
  ::close(read_end);

  const std::lock_guard guard(lock);
  std::printf("%s", received.c_str());
  std::printf("received %zu bytes in %d callback runs\n", received.size(), runs.load());
  return received.size() == expected ? 0 : 1;
}
