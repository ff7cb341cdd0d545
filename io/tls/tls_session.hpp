// tls_session — a client's resumable TLS session (OpenSSL's SSL_SESSION),
// taken from one tls_stream after its handshake and offered by the next
// one to the same server, which then skips the certificate and the full
// key exchange. The public contract is in <canopy/io/tls.hpp>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace canopy::io {

namespace detail {
class tls_engine;

// Where a client stream's session was made: its context
// (tls_context_state::identity) and the host the stream was made for.
struct tls_session_origin {
  std::uint64_t context = 0;
  std::string host;
};
}  // namespace detail

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
  // Takes over one reference to `native` (an SSL_SESSION*; nullptr:
  // empty). Such a session has no origin().
  static tls_session adopt(void* native) noexcept;
  // The client context and host of the stream it was taken from (nullptr
  // for an adopted one): offer_session offers it only to the same.
  [[nodiscard]] const detail::tls_session_origin* origin() const noexcept { return origin_.get(); }

 private:
  friend class detail::tls_engine;
  void* native_ = nullptr;
  std::shared_ptr<const detail::tls_session_origin> origin_;
};

}  // namespace canopy::io
