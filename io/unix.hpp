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
// if nobody accepts on it (the file a crashed server left), bind removes it
// and binds; if a server is live, or the path is not a socket, bind fails
// with errc::address_in_use and touches nothing: a live server found in
// the kernel's table of listening sockets is not connected to, so its
// accept queue gets nothing (io/unix_probe.hpp says how it is asked).
// The listener removes its own file when it is closed or destroyed (not
// another server's, made at the path after its own was removed).
//
// Error convention and threads: TCP's (io/tcp.hpp, docs/io.md); EOF is a
// read of 0 bytes; SIGPIPE is never raised. As there, shutdown(SHUT_RD)
// from another task while a read waits makes that read return 0, close()
// makes it end with errc::operation_canceled. A connect to a listener whose
// backlog is full reports errc::resource_unavailable_try_again (the kernel
// gives no readiness edge to wait for). The fiber forms are in
// io/fiber/fiber_io.hpp.
#pragma once

#include <sys/types.h>
#include <sys/un.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "../coroutine/task.hpp"
#include "basic_stream.hpp"
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

class unix_stream;

namespace detail {
// Unix-domain streams for basic_stream (io/basic_stream.hpp): readiness
// waits on both backends, and a connect that never waits.
struct unix_protocol {
  using stream = unix_stream;
  using endpoint_type = unix_endpoint;
  static constexpr bool completion_requests = false;
  static constexpr stream_receive::kind receive_kind = stream_receive::kind::unix_domain;
  static constexpr const char* read_what = "canopy::io::unix_stream::read_some";
  static constexpr const char* write_what = "canopy::io::unix_stream::write_all";
  static constexpr const char* connect_what = "canopy::io::unix_stream::connect to ";
  static unix_stream open_connect(reactor& owner, const unix_endpoint& peer, bool& pending,
                                  std::error_code& error) noexcept;
  static void connected(int /*fd*/) noexcept {}
};
}  // namespace detail

// A connected Unix-domain stream: the members of detail::basic_stream
// (connect, read_some, write_all, the gathered write (sendmsg,
// MSG_NOSIGNAL, on both backends), the bounded forms (read_some_until
// returns 0 with std::errc::timed_out at `deadline` having taken no byte,
// the stream stays usable; write_all_within fails with
// std::errc::timed_out once the socket took nothing for `stall_limit`, the
// stream is then unusable), try_read_some, try_write_some, shutdown,
// close; io/basic_stream.hpp states their contract, as tcp_stream's).
class unix_stream : public detail::basic_stream<detail::unix_protocol> {
 public:
  unix_stream() noexcept = default;
  // Adopt a connected non-blocking AF_UNIX stream socket (closed if its
  // registration fails).
  unix_stream(reactor& owner, int fd, std::error_code& error) noexcept
      : basic_stream(owner, fd, error, true) {}
  unix_stream(unix_stream&&) noexcept = default;
  unix_stream& operator=(unix_stream&&) noexcept = default;
  unix_stream(const unix_stream&) = delete;
  unix_stream& operator=(const unix_stream&) = delete;
  ~unix_stream() = default;
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
  // The file bind() made (a path address): close() removes it only while
  // the path still names it.
  dev_t file_device_ = 0;
  ino_t file_inode_ = 0;
};

namespace detail {
struct io_result;
// Shared by the task and fiber forms (io/unix.cpp): adopt what an accept
// returned.
unix_stream adopt_accepted_unix(const registration& listener, const io_result& accepted,
                                std::error_code& error) noexcept;
}  // namespace detail

}  // namespace canopy::io
