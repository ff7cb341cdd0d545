// tls_engine — one TLS connection's OpenSSL state (SSL with two memory
// BIOs), without I/O: tls_stream feeds it the bytes its socket read and
// sends the bytes it produced. Every call locks the engine's mutex (the
// reader and the writer of a stream may run on two workers at once; the
// SSL is not thread-safe), and none waits. Internal (canopy::io::detail).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tls_context.hpp"
#include "tls_session.hpp"

namespace canopy::io::detail {

enum class tls_step : std::uint8_t { done, want_read, eof, failed };
enum class tls_operation : std::uint8_t { handshake, read, write, shutdown };

class tls_engine {
 public:
  // Throws std::invalid_argument for an empty context, std::system_error
  // when OpenSSL cannot make the connection's state (out of memory).
  tls_engine(const tls_context& context, bool client, std::string_view host);
  ~tls_engine();
  tls_engine(const tls_engine&) = delete;
  tls_engine& operator=(const tls_engine&) = delete;

  // Claims the operation's direction(s): false with `error` set when the
  // stream is unusable, not handshaken, or another task's operation holds
  // the direction (errc::connection_already_in_progress).
  bool begin(tls_operation operation, std::error_code& error) noexcept;
  // Releases it; `broken` marks the stream unusable (an operation that
  // failed, or was cancelled while a record or handshake was half done).
  void end(tls_operation operation, bool broken) noexcept;
  // A read met the end of the socket's input (tls_errc::truncated): the
  // stream becomes unusable as after any failure (end() marks it), but the
  // TLS state is whole: the end came between records the engine asked for.
  void note_input_end() noexcept;
  // After note_input_end(), with no operation running and nothing failed
  // since: the stream is usable again (true), so that close_notify can go
  // out. For the HTTPS server only, whose drain shut a waiting connection's
  // reading side itself (io/tls/https_serve.cpp): that end is no
  // truncation by the peer. Otherwise false, nothing changed.
  bool reopen_after_input_end() noexcept;

  tls_step handshake(std::error_code& error) noexcept;
  tls_step read(std::span<std::byte> into, std::size_t& got, std::error_code& error) noexcept;
  tls_step write(std::span<const std::byte> data, std::error_code& error) noexcept;
  tls_step shutdown(std::error_code& error) noexcept;
  // Bytes that arrived from the socket (after a want_read).
  void feed(std::span<const std::byte> bytes) noexcept;
  // The reader's socket buffer.
  std::span<std::byte> input_room() noexcept { return {input_.get(), input_size}; }

  // The socket's write direction, shared by the writer and (for the rare
  // records a read produces: a TLS 1.3 KeyUpdate answer) the reader:
  // claim_output() takes it when it is free; claim_output_if_pending()
  // only when output waits too. take_output() moves the waiting output to
  // `out`; with none it releases the claim and returns false, so output a
  // reader leaves while a writer holds the claim goes out with the
  // writer's.
  bool claim_output() noexcept;
  bool claim_output_if_pending() noexcept;
  bool take_output(std::vector<std::byte>& out);
  void release_output() noexcept;

  [[nodiscard]] std::string_view alpn() const noexcept;
  [[nodiscard]] std::string_view server_name() const noexcept;
  [[nodiscard]] std::string_view version() const noexcept;
  [[nodiscard]] bool usable() const noexcept;
  [[nodiscard]] bool peer_verified() const noexcept;
  [[nodiscard]] std::string peer_subject() const;
  [[nodiscard]] void* native_handle() const noexcept { return ssl_; }

  // Resumption: the current session when a server could resume it (else
  // empty); offering one before the handshake (false: not a client, or
  // the handshake began); whether the handshake resumed one.
  [[nodiscard]] tls_session session() const noexcept;
  bool offer_session(const tls_session& session) noexcept;
  [[nodiscard]] bool resumed() const noexcept;

 private:
  static constexpr std::size_t input_size = 17 * 1024;  // one whole record and its header
  std::error_code failure(int result, tls_errc fallback) noexcept;
  tls_step after_read(int result, std::size_t& got, std::error_code& error) noexcept;
  [[nodiscard]] bool fits(const tls_session& session) const noexcept;

  mutable std::mutex mutex_;
  void* ssl_ = nullptr;  // SSL*
  void* in_ = nullptr;   // BIO*: the socket's bytes, to OpenSSL
  void* out_ = nullptr;  // BIO*: OpenSSL's bytes, to the socket
  std::unique_ptr<std::byte[]> input_;
  bool handshaken_ = false;
  bool broken_ = false;
  // broken_ came only from a read's note_input_end() (reopen_after_input_end).
  bool broken_by_input_end_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool output_claimed_ = false;
  bool client_ = false;
  bool started_ = false;  // handshake() ran once: too late to offer a session
  // A client's context and host, given to its sessions (shared, so that
  // copying a session cannot throw).
  std::shared_ptr<const tls_session_origin> origin_;
};

}  // namespace canopy::io::detail
