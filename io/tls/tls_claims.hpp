// tls_claims — how a TLS operation holds its direction(s) of a stream and
// the socket's write direction, for the task forms (tls_stream.cpp) and
// the fiber forms (io/fiber/tls_fiber.cpp) alike. Internal (canopy::io::detail).
#pragma once

#include <cstddef>

#include "tls_engine.hpp"

namespace canopy::io::detail {

// Holds an operation's claim on its direction(s) and releases it however
// the operation ends. `risky` while a record (or the handshake) is half
// sent or half made: an end then, by an error, by the task's
// cancellation (its frame destroyed at a suspension) or by the fiber's
// unwinding, leaves the stream unusable.
class operation_claim {
 public:
  operation_claim(tls_engine& engine, tls_operation operation) noexcept
      : engine_(engine), operation_(operation) {}
  operation_claim(const operation_claim&) = delete;
  operation_claim& operator=(const operation_claim&) = delete;
  ~operation_claim() { engine_.end(operation_, risky); }
  bool risky = false;

 private:
  tls_engine& engine_;
  tls_operation operation_;
};

// Releases the socket's write direction if the flush holding it ends
// early (an error, a cancellation).
class output_claim {
 public:
  explicit output_claim(tls_engine& engine) noexcept : engine_(engine) {}
  output_claim(const output_claim&) = delete;
  output_claim& operator=(const output_claim&) = delete;
  ~output_claim() {
    if (held) {
      engine_.release_output();
    }
  }
  bool held = true;

 private:
  tls_engine& engine_;
};

// The most plaintext one write_all step encrypts before sending it.
inline constexpr std::size_t tls_write_chunk = 64 * 1024;

}  // namespace canopy::io::detail
