// A program for a Canopy built without io_uring (-Dio_uring=disabled):
// tests/consumer/run.sh builds it against that installed tree alone. A
// coroutine connects over TCP loopback on the epoll backend and gets its
// bytes echoed; asking for io_uring, by option or by CANOPY_IO_BACKEND,
// throws the error that says the library was built without it.
#include <canopy/canopy.hpp>
#include <canopy/io.hpp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

namespace {

// Whether constructing a reactor with `options` throws the "built without
// io_uring" error.
bool refuses_io_uring(canopy::io::reactor_options options) {
  try {
    canopy::io::reactor reactor(options);
  } catch (const std::system_error& failure) {
    return std::strstr(failure.what(), "built without the io_uring backend") != nullptr &&
           failure.code() == std::errc::function_not_supported;
  }
  return false;
}

canopy::task<void> echo_one(canopy::io::tcp_listener& listener) {
  canopy::io::tcp_stream peer = co_await listener.accept();
  std::byte buffer[16];
  const std::size_t count = co_await peer.read_some(buffer);
  co_await peer.write_all(std::span<const std::byte>(buffer, count));
}

canopy::task<std::string> ping(canopy::io::tcp_listener& listener) {
  auto server = canopy::spawn(echo_one(listener));
  canopy::io::tcp_stream stream = co_await canopy::io::tcp_stream::connect(
      canopy::io::endpoint::loopback_v4(listener.local_endpoint().port()));
  const char message[] = "ping";
  co_await stream.write_all(std::as_bytes(std::span(message, 4)));
  std::string answer;
  std::byte buffer[16];
  while (answer.size() < 4) {
    const std::size_t count = co_await stream.read_some(buffer);
    if (count == 0) {
      break;
    }
    answer.append(reinterpret_cast<const char*>(buffer), count);
  }
  co_await server;
  co_return answer;
}

}  // namespace

int main() {
  // Whatever the caller's environment says: the explicit requests below.
  ::unsetenv("CANOPY_IO_BACKEND");
  bool refused = refuses_io_uring({.backend = canopy::io::io_backend::io_uring});
  ::setenv("CANOPY_IO_BACKEND", "io_uring", 1);
  refused = refused && refuses_io_uring({});
  ::unsetenv("CANOPY_IO_BACKEND");

  canopy::executor_config config;
  config.worker_count = 2;
  canopy::executor pool(canopy::io::with_reactor(config));  // automatic
  canopy::io::reactor& reactor = canopy::io::reactor::of(pool);
  canopy::io::tcp_listener listener =
      canopy::io::tcp_listener::bind(reactor, canopy::io::endpoint::loopback_v4(0));
  const std::string answer = canopy::block_on(pool, ping(listener));
  const char* backend = canopy::io::to_string(reactor.backend());
  pool.shutdown();
  std::printf("canopy consumer without io_uring: automatic runs %s, echo ping = %s, io_uring %s\n",
              backend, answer.c_str(), refused ? "refused" : "NOT refused");
  return refused && answer == "ping" && std::string(backend) == "epoll" ? 0 : 1;
}
