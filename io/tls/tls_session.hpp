// tls_session — a client's resumable TLS session (OpenSSL's SSL_SESSION),
// taken from one tls_stream after its handshake and offered by the next
// one to the same server, which then skips the certificate and the full
// key exchange. The public contract is in <canopy/io/tls.hpp>.
#pragma once

namespace canopy::io {

// A value (copies share one SSL_SESSION; any thread may copy, keep and
// destroy one). Empty (valid() false): nothing to resume; offering an
// empty session offers none.
class tls_session {
 public:
  tls_session() noexcept = default;
  tls_session(const tls_session& other) noexcept;
  tls_session& operator=(const tls_session& other) noexcept;
  tls_session(tls_session&& other) noexcept;
  tls_session& operator=(tls_session&& other) noexcept;
  ~tls_session();

  // Whether this holds a session a server may resume.
  [[nodiscard]] bool valid() const noexcept { return native_ != nullptr; }
  // The SSL_SESSION* (nullptr when empty), owned by this value.
  [[nodiscard]] void* native_handle() const noexcept { return native_; }
  // Takes one reference to `native` (an SSL_SESSION*; nullptr: empty).
  static tls_session adopt(void* native) noexcept;

 private:
  void* native_ = nullptr;
};

}  // namespace canopy::io
