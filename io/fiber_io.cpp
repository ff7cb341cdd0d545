#include "fiber_io.hpp"

#include <unistd.h>

#include <cstdint>
#include <string>

#include "socket_ops.hpp"

namespace canopy::io {

namespace {

interest interest_of(direction which) noexcept {
  return which == direction::read ? interest::readable : interest::writable;
}

std::error_code fiber_wait_after_eagain(const registration& reg, direction which,
                                        std::uint64_t tick) {
  reg.clear_ready(which, tick);
  readiness_wait wait{reg, which};
  return canopy::this_fiber::wait_on(wait);
}

}  // namespace

using detail::open_socket;
using detail::set_no_delay_on;
using detail::start_connect;
using detail::throw_if;

namespace this_fiber {

namespace {
std::error_code one_shot(int fd, direction which) {
  std::error_code error;
  registration reg(reactor::current(), fd, interest_of(which), error, false);
  if (error) {
    return error;
  }
  readiness_wait wait{reg, which};
  return canopy::this_fiber::wait_on(wait);
}
}  // namespace
std::error_code readable(int fd) { return one_shot(fd, direction::read); }
std::error_code writable(int fd) { return one_shot(fd, direction::write); }
}  // namespace this_fiber

namespace this_fiber {

tcp_stream connect(reactor& owner, const endpoint& peer, std::error_code& error) {
  error.clear();
  const int fd = open_socket(peer.family(), error);
  if (fd < 0) {
    return {};
  }
  // connect(2) before the registration, as in the coroutine form.
  const bool finished = start_connect(fd, peer, error);
  if (error) {
    ::close(fd);
    return {};
  }
  std::error_code registered;
  tcp_stream stream(owner, fd, registered, finished);
  if (registered) {
    error = registered;
    return {};
  }
  if (!finished) {
    readiness_wait wait{stream.reg(), direction::write};
    error = canopy::this_fiber::wait_on(wait);
    if (!error) {
      error = socket_error(fd);
    }
  }
  if (error) {
    return {};
  }
  set_no_delay_on(fd);
  return stream;
}

tcp_stream accept(tcp_listener& listener, std::error_code& error) {
  for (;;) {
    const std::uint64_t tick = listener.reg().tick(direction::read);
    tcp_stream stream = listener.try_accept(error);
    if (error != std::errc::resource_unavailable_try_again) {
      return stream;
    }
    // try_accept cleared readiness against a tick of its own; waiting with
    // ours is equally safe (a later edge leaves the direction ready).
    if (std::error_code failed = fiber_wait_after_eagain(listener.reg(), direction::read, tick)) {
      error = failed;
      return {};
    }
  }
}

std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer, std::error_code& error) {
  for (;;) {
    std::uint64_t tick = 0;
    if (stream.is_open() && !stream.reg().ready(direction::read, tick)) {
      readiness_wait wait{stream.reg(), direction::read};
      if (std::error_code failed = canopy::this_fiber::wait_on(wait)) {
        error = failed;
        return 0;
      }
      continue;
    }
    const std::size_t got = stream.try_read_some(buffer, error);  // clears readiness on EAGAIN
    if (error != std::errc::resource_unavailable_try_again) {
      return got;
    }
  }
}

void write_all(tcp_stream& stream, std::span<const std::byte> data, std::error_code& error) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const std::uint64_t tick = stream.reg().tick(direction::write);
    sent += stream.try_write_some(data.subspan(sent), error);
    if (error == std::errc::resource_unavailable_try_again) {
      if (std::error_code failed = fiber_wait_after_eagain(stream.reg(), direction::write, tick)) {
        error = failed;
        return;
      }
      error.clear();
      continue;
    }
    if (error) {
      return;
    }
  }
}

tcp_stream connect(reactor& owner, const endpoint& peer) {
  std::error_code error;
  tcp_stream stream = connect(owner, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::this_fiber::connect to " + peer.to_string());
  }
  return stream;
}

tcp_stream accept(tcp_listener& listener) {
  std::error_code error;
  tcp_stream stream = accept(listener, error);
  throw_if(error, "canopy::io::this_fiber::accept");
  return stream;
}

std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = read_some(stream, buffer, error);
  throw_if(error, "canopy::io::this_fiber::read_some");
  return got;
}

void write_all(tcp_stream& stream, std::span<const std::byte> data) {
  std::error_code error;
  write_all(stream, data, error);
  throw_if(error, "canopy::io::this_fiber::write_all");
}

}  // namespace this_fiber

}  // namespace canopy::io
