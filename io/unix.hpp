// unix_listener, unix_stream — Unix-domain stream sockets on the reactor,
// with the operations of tcp_listener and tcp_stream.
//
//   auto where = canopy::io::unix_endpoint::path("/run/app.sock");   // or ::abstract("app")
//   auto listener = canopy::io::unix_listener::bind(reactor, where);
//   canopy::io::unix_stream peer = co_await listener.accept();
//   canopy::io::unix_stream client = co_await canopy::io::unix_stream::connect(where);
//   std::size_t got = co_await peer.read_some(buffer);   // 0: the peer closed
//
// Addresses. A path address is a file the bind creates; an abstract one
// (Linux) lives in a namespace of its own, has no file and vanishes with
// its last socket. Errors: an empty name (errc::invalid_argument); a path
// of 108 bytes or more, or an abstract name of 108 or more
// (errc::filename_too_long); a path with a NUL byte (errc::invalid_argument).
//
// The stale socket file rule. bind() on a path where a socket file exists:
// if nobody accepts on it (a connect is refused: the file a crashed server
// left), bind removes it and binds; if a server is live, or the path is
// not a socket, bind fails with errc::address_in_use and touches nothing.
// The listener removes its own file when it is closed or destroyed.
//
// Error convention and threads: TCP's (io/tcp.hpp, docs/io.md); EOF is a
// read of 0 bytes; SIGPIPE is never raised. As there, shutdown(SHUT_RD)
// from another task while a read waits makes that read return 0, close()
// makes it end with errc::operation_canceled. A connect to a listener whose
// backlog is full reports errc::resource_unavailable_try_again (the kernel
// gives no readiness edge to wait for). The fiber forms are in
// io/fiber_io.hpp.
#pragma once

#include <sys/un.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "../coroutine/task.hpp"
#include "owned_socket.hpp"
#include "reactor.hpp"
#include "registration.hpp"
#include "stream_receive.hpp"

namespace canopy::io {

class unix_endpoint {
 public:
  unix_endpoint() noexcept = default;
  static unix_endpoint path(std::string_view file, std::error_code& error) noexcept;
  static unix_endpoint path(std::string_view file);  // throws std::system_error
  static unix_endpoint abstract(std::string_view name, std::error_code& error) noexcept;
  static unix_endpoint abstract(std::string_view name);  // throws std::system_error

  [[nodiscard]] bool is_abstract() const noexcept {
    return length_ > offset && address_.sun_path[0] == '\0';
  }
  [[nodiscard]] bool empty() const noexcept { return length_ <= offset; }
  // The path, or "@name" for an abstract name.
  [[nodiscard]] std::string to_string() const;
  [[nodiscard]] const sockaddr* data() const noexcept {
    return reinterpret_cast<const sockaddr*>(&address_);
  }
  [[nodiscard]] socklen_t size() const noexcept { return length_; }

 private:
  static constexpr socklen_t offset = offsetof(sockaddr_un, sun_path);
  sockaddr_un address_{AF_UNIX, {}};
  socklen_t length_ = 0;
};

class unix_stream {
 public:
  unix_stream() noexcept = default;
  // Adopt a connected non-blocking AF_UNIX stream socket (closed if its
  // registration fails).
  unix_stream(reactor& owner, int fd, std::error_code& error) noexcept;
  unix_stream(unix_stream&&) noexcept = default;
  unix_stream& operator=(unix_stream&&) noexcept = default;
  unix_stream(const unix_stream&) = delete;
  unix_stream& operator=(const unix_stream&) = delete;
  ~unix_stream() = default;

  static task<unix_stream> connect(reactor& owner, unix_endpoint peer, std::error_code& error);
  static task<unix_stream> connect(reactor& owner, unix_endpoint peer);
  static task<unix_stream> connect(unix_endpoint peer, std::error_code& error);
  static task<unix_stream> connect(unix_endpoint peer);

  task<std::size_t> read_some(std::span<std::byte> buffer, std::error_code& error);
  task<std::size_t> read_some(std::span<std::byte> buffer);
  task<void> write_all(std::span<const std::byte> data, std::error_code& error);
  task<void> write_all(std::span<const std::byte> data);
  // Gathered (sendmsg, MSG_NOSIGNAL): every byte of every buffer, in order,
  // as tcp_stream's (io/tcp.hpp), on both backends.
  task<void> write_all(std::span<const std::span<const std::byte>> buffers, std::error_code& error);
  task<void> write_all(std::span<const std::span<const std::byte>> buffers);

  // Bounded forms without a child task, as tcp_stream's (io/tcp.hpp):
  // read_some_until returns 0 with std::errc::timed_out at `deadline`
  // having taken no byte (the stream stays usable; an awaitable to
  // co_await at once in the calling task, not a task); write_all_within
  // fails with std::errc::timed_out once the socket took nothing for
  // `stall_limit` (the stream is then unusable: close it).
  [[nodiscard]] detail::bounded_read read_some_until(std::span<std::byte> buffer,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     std::error_code& error);
  task<void> write_all_within(std::span<const std::byte> data,
                              std::chrono::milliseconds stall_limit, std::error_code& error);

  std::size_t try_read_some(std::span<std::byte> buffer, std::error_code& error) noexcept;
  std::size_t try_write_some(std::span<const std::byte> data, std::error_code& error) noexcept;
  std::error_code shutdown(int how) noexcept;

  void close() noexcept { socket_.close(); }
  [[nodiscard]] bool is_open() const noexcept { return socket_.is_open(); }
  [[nodiscard]] int native_handle() const noexcept { return socket_.fd(); }
  [[nodiscard]] const registration& reg() const noexcept { return socket_.reg(); }

 private:
  detail::owned_socket socket_;
};

class unix_listener {
 public:
  unix_listener() noexcept = default;
  unix_listener(unix_listener&& other) noexcept;
  unix_listener& operator=(unix_listener&& other) noexcept;
  unix_listener(const unix_listener&) = delete;
  unix_listener& operator=(const unix_listener&) = delete;
  ~unix_listener() { close(); }

  static unix_listener bind(reactor& owner, const unix_endpoint& local, std::error_code& error,
                            int backlog = 1024) noexcept;
  static unix_listener bind(reactor& owner, const unix_endpoint& local, int backlog = 1024);

  task<unix_stream> accept(std::error_code& error);
  task<unix_stream> accept();
  unix_stream try_accept(std::error_code& error) noexcept;

  // Close the socket and remove its file (a path address) (idempotent).
  void close() noexcept;
  [[nodiscard]] bool is_open() const noexcept { return socket_.is_open(); }
  [[nodiscard]] int native_handle() const noexcept { return socket_.fd(); }
  [[nodiscard]] const unix_endpoint& local_endpoint() const noexcept { return local_; }
  [[nodiscard]] const registration& reg() const noexcept { return socket_.reg(); }

 private:
  detail::owned_socket socket_;
  unix_endpoint local_;
};

namespace detail {
struct io_result;
// Shared by the task and fiber forms (io/unix.cpp): open and connect (a
// Unix-domain connect never waits), and adopt what an accept returned.
unix_stream unix_connect(reactor& owner, const unix_endpoint& peer,
                         std::error_code& error) noexcept;
unix_stream adopt_accepted_unix(const registration& listener, const io_result& accepted,
                                std::error_code& error) noexcept;
}  // namespace detail

}  // namespace canopy::io
