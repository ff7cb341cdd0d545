// tls_stream — TLS over a Canopy stream (tcp_stream, unix_stream), OpenSSL
// kept off the socket: the stream's own read_some/write_all move the
// encrypted bytes (io/tls/tls_engine.hpp holds the SSL and its memory
// BIOs). The public contract is in <canopy/io/tls.hpp>.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../../coroutine/task.hpp"
#include "../tcp.hpp"
#include "../unix.hpp"
#include "tls_context.hpp"
#include "tls_session.hpp"

namespace canopy::io {

namespace detail {
class tls_engine;
}

template <class Stream>
class tls_stream {
 public:
  using next_layer_type = Stream;

  // The server side of `next` (a server context).
  tls_stream(Stream next, const tls_context& context);
  // The client side (a client context). `host`: the name the client asks
  // for (SNI) and checks the server's certificate against, a DNS name or
  // an IP address literal (checked as an address, not sent as SNI); empty:
  // neither.
  tls_stream(Stream next, const tls_context& context, std::string_view host);
  // Moves only while no operation runs (the operations refer to it).
  tls_stream(tls_stream&& other) noexcept;
  tls_stream& operator=(tls_stream&& other) noexcept;
  tls_stream(const tls_stream&) = delete;
  tls_stream& operator=(const tls_stream&) = delete;
  ~tls_stream();

  task<void> handshake(std::error_code& error);
  task<void> handshake();
  // At least one byte, or 0 at the peer's close_notify (EOF). A peer that
  // closes the connection without it: tls_errc::truncated. An empty
  // buffer (as a tcp_stream's): 0 at once, taking nothing and not EOF
  // (std::errc::bad_file_descriptor where the next layer is closed); so 0
  // is EOF only for a non-empty buffer. read_some_until alike.
  task<std::size_t> read_some(std::span<std::byte> buffer, std::error_code& error);
  task<std::size_t> read_some(std::span<std::byte> buffer);
  task<void> write_all(std::span<const std::byte> data, std::error_code& error);
  task<void> write_all(std::span<const std::byte> data);
  // Bounded forms that need no child task (with_timeout over read_some or
  // write_all runs the operation as one): the wait on the socket itself is
  // raced against the time. read_some_until: as read_some, but at
  // `deadline` with nothing decrypted it returns 0 with
  // std::errc::timed_out, and the stream stays usable (the bytes that
  // arrive later are the next read's; those the socket holds at the
  // deadline are still read). write_all_within: as write_all, but
  // std::errc::timed_out once the socket took nothing for `stall_limit`
  // (every send that makes progress starts it again); the stream is then
  // unusable (a record may be cut). time_point::max() and
  // milliseconds::max(): no limit.
  task<std::size_t> read_some_until(std::span<std::byte> buffer,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::error_code& error);
  task<void> write_all_within(std::span<const std::byte> data,
                              std::chrono::milliseconds stall_limit, std::error_code& error);
  // Sends close_notify (does not wait for the peer's).
  task<void> shutdown(std::error_code& error);
  task<void> shutdown();

  Stream& next_layer() noexcept { return next_; }
  const Stream& next_layer() const noexcept { return next_; }
  // Closes the underlying stream (waiting operations end as its close says).
  void close() noexcept { next_.close(); }

  // After the handshake: the protocol ALPN chose (empty: none), the SNI
  // name (the one the client sent), the version ("TLSv1.3").
  [[nodiscard]] std::string_view alpn() const noexcept;
  [[nodiscard]] std::string_view server_name() const noexcept;
  [[nodiscard]] std::string_view version() const noexcept;
  // After the handshake: whether the peer sent a certificate that was
  // verified (a client's, on a server with verify_client; a server's, on
  // a client with verify_peer), and its subject ("CN=name,O=org", RFC
  // 2253; empty: no certificate). Before: false and empty.
  [[nodiscard]] bool peer_verified() const noexcept;
  [[nodiscard]] std::string peer_subject() const;
  // False once an operation failed or was cancelled mid-record.
  [[nodiscard]] bool usable() const noexcept;
  // The SSL*, for what this class does not offer.
  [[nodiscard]] void* native_handle() const noexcept;
  // The fiber forms' access (io/fiber/tls_fiber.hpp), and the HTTPS
  // server's (io/tls/https_serve.cpp: reopen_after_input_end, and the
  // client's first bytes, read before the handshake, fed to it); not for
  // other use.
  detail::tls_engine& engine_for_fiber_forms() noexcept { return *engine_; }

  // Resumption (a client's; the server side is tls_server_options::
  // session_resumption). session(): after the handshake, the session to
  // offer on a later connection to the same server, or an empty one when
  // there is none yet. On TLS 1.3 the server sends its ticket after the
  // handshake: the session exists only once a read_some has run past it
  // (the ticket arrives with or before the server's first bytes), so take
  // it after the first read. Safe alongside a running read or write.
  // Shut the stream down (shutdown()) before dropping it: OpenSSL makes
  // the session of a stream freed without sending close_notify
  // unresumable.
  [[nodiscard]] tls_session session() const noexcept;
  // A client stream, before handshake(): offers `session` (empty: none;
  // the latest call decides). A resumed handshake checks no certificate,
  // so a session is offered only on a stream made for the same host (the
  // exact string, a DNS name or an address) from the same client context
  // as the stream it came from; any other offers nothing, quietly. A
  // session adopted from elsewhere (tls_session::adopt) is checked only
  // against the host name OpenSSL recorded in it (when the server
  // acknowledged SNI). The server may decline an offer (an expired or
  // unknown session, another version). Either way the handshake is then
  // a full one (resumed() false). Throws std::logic_error on a server
  // stream or once handshake() has begun.
  void offer_session(const tls_session& session);
  // After the handshake: whether it resumed an offered session.
  [[nodiscard]] bool resumed() const noexcept;

 private:
  // Sends what the engine produced; the caller holds the output claim.
  task<void> flush(std::chrono::milliseconds stall_limit, std::error_code& error);

  Stream next_;
  std::unique_ptr<detail::tls_engine> engine_;
  // The encrypted bytes on their way out, kept between writes so that a
  // write does not allocate; only the output claim's holder touches it.
  std::vector<std::byte> sending_;
};

extern template class tls_stream<tcp_stream>;
extern template class tls_stream<unix_stream>;

}  // namespace canopy::io
