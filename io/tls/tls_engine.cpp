#include "tls_engine.hpp"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <stdexcept>

#include "tls_openssl.hpp"

namespace canopy::io::detail {

namespace {

SSL* ssl_of(void* ssl) noexcept { return static_cast<SSL*>(ssl); }
BIO* bio_of(void* bio) noexcept { return static_cast<BIO*>(bio); }

}  // namespace

tls_engine::tls_engine(const tls_context& context, bool client, std::string_view host)
    : input_(new std::byte[input_size]), client_(client) {
  if (!context.valid()) {
    throw std::invalid_argument("canopy::io::tls_stream: an empty tls_context");
  }
  if (context.is_server() == client) {
    throw std::invalid_argument(client ? "canopy::io::tls_stream: a client needs a client context"
                                       : "canopy::io::tls_stream: a server needs a server context");
  }
  ERR_clear_error();
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(context.native_handle()));
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (ssl == nullptr || in == nullptr || out == nullptr) {
    SSL_free(ssl);
    BIO_free(in);
    BIO_free(out);
    throw std::system_error(take_openssl_error(tls_errc::handshake_failed),
                            "canopy::io::tls_stream");
  }
  SSL_set_bio(ssl, in, out);  // the SSL owns both from here
  ssl_ = ssl;
  in_ = in;
  out_ = out;
  if (client) {
    try {
      const tls_context_state* state = state_of(static_cast<SSL_CTX*>(context.native_handle()));
      origin_ = std::make_shared<const tls_session_origin>(
          tls_session_origin{state != nullptr ? state->identity : 0, std::string(host)});
    } catch (...) {
      SSL_free(ssl);  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  if (client) {
    SSL_set_connect_state(ssl);
    if (!host.empty()) {
      const std::string name(host);
      // An IP address is checked as one and not sent as SNI (RFC 6066
      // allows host names only).
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
        ERR_clear_error();
        SSL_set_tlsext_host_name(ssl, name.c_str());
        SSL_set1_host(ssl, name.c_str());
      }
    }
  } else {
    SSL_set_accept_state(ssl);
  }
}

tls_engine::~tls_engine() { SSL_free(ssl_of(ssl_)); }

bool tls_engine::begin(tls_operation operation, std::error_code& error) noexcept {
  const std::lock_guard lock(mutex_);
  if (broken_) {
    error = make_error_code(tls_errc::unusable);
    return false;
  }
  if (operation != tls_operation::handshake && !handshaken_) {
    error = make_error_code(tls_errc::not_handshaken);
    return false;
  }
  const bool reads = operation == tls_operation::handshake || operation == tls_operation::read;
  const bool writes = operation != tls_operation::read;
  if ((reads && reading_) || (writes && writing_)) {
    error = std::make_error_code(std::errc::connection_already_in_progress);
    return false;
  }
  reading_ = reading_ || reads;
  writing_ = writing_ || writes;
  return true;
}

void tls_engine::end(tls_operation operation, bool broken) noexcept {
  const std::lock_guard lock(mutex_);
  if (operation == tls_operation::handshake || operation == tls_operation::read) {
    reading_ = false;
  }
  if (operation != tls_operation::read) {
    writing_ = false;
  }
  if (broken && operation != tls_operation::read) {
    broken_by_input_end_ = false;  // a write or handshake failed too: no reopening
  }
  broken_ = broken_ || broken;
}

void tls_engine::note_input_end() noexcept {
  const std::lock_guard lock(mutex_);
  broken_by_input_end_ = !broken_;
}

bool tls_engine::reopen_after_input_end() noexcept {
  const std::lock_guard lock(mutex_);
  if (!broken_ || !broken_by_input_end_ || reading_ || writing_) {
    return false;
  }
  broken_ = false;
  broken_by_input_end_ = false;
  return true;
}

std::error_code tls_engine::failure(int result, tls_errc fallback) noexcept {
  SSL* ssl = ssl_of(ssl_);
  const int kind = SSL_get_error(ssl, result);
  const long verified = SSL_get_verify_result(ssl);
  std::error_code error;
  if (kind == SSL_ERROR_SSL &&
      ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_CERTIFICATE_VERIFY_FAILED &&
      verified != X509_V_OK) {
    ERR_clear_error();
    error = {tls_verify_base + static_cast<int>(verified), tls_category()};
  } else {
    error = take_openssl_error(fallback);
  }
  broken_ = true;
  broken_by_input_end_ = false;
  return error;
}

tls_step tls_engine::handshake(std::error_code& error) noexcept {
  const std::lock_guard lock(mutex_);
  started_ = true;
  ERR_clear_error();
  const int result = SSL_do_handshake(ssl_of(ssl_));
  if (result == 1) {
    handshaken_ = true;
    return tls_step::done;
  }
  if (SSL_get_error(ssl_of(ssl_), result) == SSL_ERROR_WANT_READ) {
    return tls_step::want_read;
  }
  error = failure(result, tls_errc::handshake_failed);
  return tls_step::failed;
}

tls_step tls_engine::read(std::span<std::byte> into, std::size_t& got,
                          std::error_code& error) noexcept {
  const std::lock_guard lock(mutex_);
  ERR_clear_error();
  return after_read(SSL_read_ex(ssl_of(ssl_), into.data(), into.size(), &got), got, error);
}

// The caller holds mutex_.
tls_step tls_engine::after_read(int result, std::size_t& got, std::error_code& error) noexcept {
  if (result == 1) {
    return tls_step::done;
  }
  got = 0;
  switch (SSL_get_error(ssl_of(ssl_), result)) {
    case SSL_ERROR_WANT_READ:
      return tls_step::want_read;
    case SSL_ERROR_ZERO_RETURN:
      return tls_step::eof;  // close_notify
    case SSL_ERROR_WANT_WRITE:
      // The memory BIO never refuses a write; OpenSSL asks this only for a
      // renegotiation, which the context disables.
      error = make_error_code(tls_errc::renegotiation);
      broken_ = true;
      return tls_step::failed;
    default:
      error = failure(result, tls_errc::handshake_failed);
      return tls_step::failed;
  }
}

tls_step tls_engine::write(std::span<const std::byte> data, std::error_code& error) noexcept {
  const std::lock_guard lock(mutex_);
  ERR_clear_error();
  std::size_t written = 0;
  const int result = SSL_write_ex(ssl_of(ssl_), data.data(), data.size(), &written);
  if (result == 1 && written == data.size()) {
    return tls_step::done;
  }
  error = SSL_get_error(ssl_of(ssl_), result) == SSL_ERROR_WANT_READ
              ? make_error_code(tls_errc::renegotiation)
              : failure(result, tls_errc::handshake_failed);
  broken_ = true;
  return tls_step::failed;
}

tls_step tls_engine::shutdown(std::error_code& error) noexcept {
  const std::lock_guard lock(mutex_);
  ERR_clear_error();
  // 0: our close_notify is queued and the peer's has not come; that ends
  // the shutdown (the caller closes the socket next).
  const int result = SSL_shutdown(ssl_of(ssl_));
  if (result >= 0) {
    return tls_step::done;
  }
  error = failure(result, tls_errc::handshake_failed);
  return tls_step::failed;
}

void tls_engine::feed(std::span<const std::byte> bytes) noexcept {
  const std::lock_guard lock(mutex_);
  // A memory BIO takes every byte (it grows).
  BIO_write(bio_of(in_), bytes.data(), static_cast<int>(bytes.size()));
}

bool tls_engine::claim_output() noexcept {
  const std::lock_guard lock(mutex_);
  if (output_claimed_) {
    return false;
  }
  output_claimed_ = true;
  return true;
}

bool tls_engine::claim_output_if_pending() noexcept {
  const std::lock_guard lock(mutex_);
  if (output_claimed_ || BIO_ctrl_pending(bio_of(out_)) == 0) {
    return false;
  }
  output_claimed_ = true;
  return true;
}

bool tls_engine::take_output(std::vector<std::byte>& out) {
  const std::lock_guard lock(mutex_);
  const std::size_t pending = BIO_ctrl_pending(bio_of(out_));
  if (pending == 0) {
    output_claimed_ = false;
    return false;
  }
  out.resize(pending);
  const int moved = BIO_read(bio_of(out_), out.data(), static_cast<int>(pending));
  out.resize(moved > 0 ? static_cast<std::size_t>(moved) : 0);
  return true;
}

void tls_engine::release_output() noexcept {
  const std::lock_guard lock(mutex_);
  output_claimed_ = false;
}

std::string_view tls_engine::alpn() const noexcept {
  const std::lock_guard lock(mutex_);
  const unsigned char* name = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_of(ssl_), &name, &length);
  return name == nullptr ? std::string_view()
                         : std::string_view(reinterpret_cast<const char*>(name), length);
}

std::string_view tls_engine::server_name() const noexcept {
  const std::lock_guard lock(mutex_);
  const char* name = SSL_get_servername(ssl_of(ssl_), TLSEXT_NAMETYPE_host_name);
  return name == nullptr ? std::string_view() : std::string_view(name);
}

std::string_view tls_engine::version() const noexcept {
  const std::lock_guard lock(mutex_);
  return SSL_get_version(ssl_of(ssl_));
}

bool tls_engine::peer_verified() const noexcept {
  const std::lock_guard lock(mutex_);
  return handshaken_ && SSL_get0_peer_certificate(ssl_of(ssl_)) != nullptr &&
         SSL_get_verify_result(ssl_of(ssl_)) == X509_V_OK;
}

std::string tls_engine::peer_subject() const {
  const std::lock_guard lock(mutex_);
  const X509* peer = handshaken_ ? SSL_get0_peer_certificate(ssl_of(ssl_)) : nullptr;
  if (peer == nullptr) {
    return {};
  }
  BIO* text = BIO_new(BIO_s_mem());
  if (text == nullptr) {
    return {};
  }
  // RFC 2253 order and escaping ("CN=client,O=example").
  X509_NAME_print_ex(text, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long length = BIO_get_mem_data(text, &data);
  std::string subject(data != nullptr && length > 0 ? data : "",
                      length > 0 ? static_cast<std::size_t>(length) : 0);
  BIO_free(text);
  return subject;
}

bool tls_engine::usable() const noexcept {
  const std::lock_guard lock(mutex_);
  return !broken_;
}

tls_session tls_engine::session() const noexcept {
  const std::lock_guard lock(mutex_);
  if (!handshaken_) {
    return {};
  }
  // On TLS 1.3 the session made by the handshake has no ticket yet: the
  // server's NewSessionTicket arrives after it and SSL_read replaces the
  // session with one that holds it; until then nothing is resumable.
  SSL_SESSION* current = SSL_get1_session(ssl_of(ssl_));
  if (current != nullptr && SSL_SESSION_is_resumable(current) != 1) {
    SSL_SESSION_free(current);
    current = nullptr;
  }
  tls_session session = tls_session::adopt(current);
  if (current != nullptr) {
    session.origin_ = origin_;
  }
  return session;
}

// Whether `session` came from a stream of this client's context and host.
// One adopted from elsewhere (no origin) is held to the host name OpenSSL
// recorded in it, if any (it records the name when the server
// acknowledged SNI).
bool tls_engine::fits(const tls_session& session) const noexcept {
  if (const tls_session_origin* origin = session.origin()) {
    return origin->context == origin_->context && origin->host == origin_->host;
  }
  const char* recorded =
      SSL_SESSION_get0_hostname(static_cast<SSL_SESSION*>(session.native_handle()));
  return recorded == nullptr || origin_->host == recorded;
}

bool tls_engine::offer_session(const tls_session& session) noexcept {
  const std::lock_guard lock(mutex_);
  if (!client_ || started_) {
    return false;
  }
  // A session from another host or client context is not offered: a
  // resumed handshake checks no certificate. SSL_set_session takes its own
  // reference (nullptr clears an earlier offer); it fails only when out of
  // memory, and then the handshake is a full one.
  auto* offered = static_cast<SSL_SESSION*>(session.native_handle());
  if (offered != nullptr && !fits(session)) {
    offered = nullptr;
  }
  if (SSL_set_session(ssl_of(ssl_), offered) != 1) {
    ERR_clear_error();
  }
  return true;
}

bool tls_engine::resumed() const noexcept {
  const std::lock_guard lock(mutex_);
  return handshaken_ && SSL_session_reused(ssl_of(ssl_)) == 1;
}

}  // namespace canopy::io::detail
