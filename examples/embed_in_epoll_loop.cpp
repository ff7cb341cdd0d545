// embed_in_epoll_loop — Canopy inside a server's own epoll loop.
//
//   embed_in_epoll_loop [requests]
//
// The main thread is a plain epoll loop (no Canopy I/O): it accepts TCP
// connections on 127.0.0.1, reads requests, and hands each one to Canopy's
// workers. The work runs there; the reply is written back on the loop thread,
// two ways:
//   * C++20: a canopy::task that co_awaits canopy::resume_on_host() before it
//     writes (even requests);
//   * callbacks: a callable that calls pool.post(write_reply) (odd requests).
// The loop sleeps in epoll_wait on its sockets and on pool.notify_fd(), and
// calls pool.run_until_idle() when that descriptor is readable. A client
// thread sends the requests one at a time and checks every reply; the
// program prints what it measured and exits 0 if every reply was right.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <canopy/canopy.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

bool send_all(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) {
      continue;
    }
    if (sent <= 0) {
      return false;
    }
    bytes += sent;
    size -= static_cast<std::size_t>(sent);
  }
  return true;
}

bool receive_all(int fd, void* data, std::size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::recv(fd, bytes, size, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return false;
    }
    bytes += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

// The "work": a few thousand multiply-adds, enough to be worth a worker.
std::uint64_t compute(std::uint64_t request) {
  std::uint64_t value = request;
  for (int round = 0; round < 2000; ++round) {
    value = value * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  return value;
}

// C++20 way: compute on a worker, continue on the loop thread, write there.
canopy::task<void> answer(int connection, std::uint64_t request) {
  const std::uint64_t reply = compute(request);
  co_await canopy::resume_on_host();
  send_all(connection, &reply, sizeof reply);
}

}  // namespace

int main(int argc, char** argv) {
  const long requests = argc > 1 ? std::atol(argv[1]) : 20000;
  canopy::executor_config config;
  config.worker_count = 2;
  canopy::executor pool(config);

  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1 only
  socklen_t length = sizeof address;
  if (listener < 0 ||
      ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      ::listen(listener, 4) != 0) {
    std::perror("embed_in_epoll_loop: listen on 127.0.0.1");
    return 1;
  }

  long wrong = 0;
  std::thread client([&] {
    const int connection = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(connection, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      wrong = requests;
      return;
    }
    const int on = 1;
    ::setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    for (std::uint64_t request = 0; request < static_cast<std::uint64_t>(requests); ++request) {
      std::uint64_t reply = 0;
      if (!send_all(connection, &request, sizeof request) ||
          !receive_all(connection, &reply, sizeof reply) || reply != compute(request)) {
        ++wrong;
      }
    }
    ::close(connection);
  });

  // The server's own loop.
  const int poller = ::epoll_create1(EPOLL_CLOEXEC);
  const auto watch = [poller](int fd) {
    epoll_event interest{};
    interest.events = EPOLLIN;
    interest.data.fd = fd;
    ::epoll_ctl(poller, EPOLL_CTL_ADD, fd, &interest);
  };
  watch(listener);
  watch(pool.notify_fd());
  int connection = -1;
  long handed_off = 0;
  long loop_wakeups = 0;
  const auto started = std::chrono::steady_clock::now();
  for (bool open = true; open;) {
    epoll_event events[8];
    const int ready = ::epoll_wait(poller, events, 8, 10000);
    if (ready <= 0) {
      std::fprintf(stderr, "embed_in_epoll_loop: nothing happened for 10 s\n");
      break;
    }
    ++loop_wakeups;
    for (int index = 0; index < ready; ++index) {
      const int fd = events[index].data.fd;
      if (fd == listener) {
        connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        const int on = 1;
        ::setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        watch(connection);
      } else if (fd == pool.notify_fd()) {
        pool.run_until_idle();  // replies written here, on the loop thread
      } else {
        std::uint64_t request = 0;
        if (!receive_all(connection, &request, sizeof request)) {
          open = false;  // the client is done
          continue;
        }
        ++handed_off;
        if (request % 2 == 0) {
          pool.spawn_detached(answer(connection, request));
        } else {
          pool.spawn_detached([&pool, connection, request] {
            const std::uint64_t reply = compute(request);
            pool.post([connection, reply] { send_all(connection, &reply, sizeof reply); });
          });
        }
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  client.join();
  ::close(connection);
  ::close(listener);
  ::close(poller);
  const canopy::executor_stats stats = pool.stats();
  std::printf(
      "embed_in_epoll_loop: %ld requests handed to %zu workers, %ld wrong replies, %.1f us per "
      "round trip, %ld loop wake-ups, %llu runs on the loop thread\n",
      handed_off, pool.worker_count(), wrong, seconds * 1e6 / static_cast<double>(requests),
      loop_wakeups, static_cast<unsigned long long>(stats.host.tasks_run));
  return wrong == 0 && handed_off == requests ? 0 : 1;
}
