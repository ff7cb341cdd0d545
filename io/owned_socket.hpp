// owned_socket — a socket descriptor an object owns, together with its
// registration with a reactor: what every socket type (and signal_set)
// shares. Internal (canopy::io::detail).
//
// Closing removes the registration first (waiters wake with
// errc::operation_canceled and no event is delivered after), then closes
// the descriptor. Move-only; used by one thread at a time, like its owners.
#pragma once

#include <system_error>

#include "endpoint.hpp"
#include "reactor.hpp"
#include "registration.hpp"

namespace canopy::io::detail {

class owned_socket {
 public:
  owned_socket() noexcept = default;
  // Adopt `fd` and register it with `owner`. On failure `fd` is closed,
  // *this stays empty and `error` says why. `assume_ready`: see reactor::add.
  owned_socket(reactor& owner, int fd, interest what, std::error_code& error,
               bool assume_ready = true, bool deferred = false) noexcept;
  owned_socket(owned_socket&& other) noexcept;
  owned_socket& operator=(owned_socket&& other) noexcept;
  owned_socket(const owned_socket&) = delete;
  owned_socket& operator=(const owned_socket&) = delete;
  ~owned_socket() { close(); }

  // Remove the registration, then close the descriptor (idempotent).
  void close() noexcept;

  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] const registration& reg() const noexcept { return reg_; }
  // getsockname / getpeername; an empty endpoint when closed or on error.
  [[nodiscard]] endpoint local_endpoint() const noexcept;
  [[nodiscard]] endpoint remote_endpoint() const noexcept;

 private:
  int fd_ = -1;
  registration reg_;
};

}  // namespace canopy::io::detail
