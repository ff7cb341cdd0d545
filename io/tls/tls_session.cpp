#include "tls_session.hpp"

#include <cstdint>
#include <new>
#include <string>
#include <utility>

#include "tls_openssl.hpp"

namespace canopy::io::detail {

namespace {

// Where a client's session was made.
struct session_origin {
  std::uint64_t context = 0;  // tls_context_state::identity
  std::string host;
};

// A client SSL's host, as its stream was given it: OpenSSL keeps no single
// place for it (SNI for a DNS name, the verify parameters for an address,
// and SSL_get_servername may answer with an offered session's name).
int host_index() noexcept {
  static const int index = SSL_get_ex_new_index(
      0, nullptr, nullptr, nullptr, [](void*, void* host, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<std::string*>(host);
      });
  return index;
}

// OpenSSL copies a client's session when a ticket arrives after a
// resumption (TLS 1.3, and a renewed TLS 1.2 ticket): the copy keeps the
// origin (or, out of memory, has none).
int session_index() noexcept {
  static const int index = SSL_SESSION_get_ex_new_index(
      0, nullptr, nullptr,
      [](CRYPTO_EX_DATA*, const CRYPTO_EX_DATA*, void** origin, int, long, void*) {
        if (*origin != nullptr) {
          try {
            *origin = new session_origin(*static_cast<const session_origin*>(*origin));
          } catch (const std::bad_alloc&) {
            *origin = nullptr;
          }
        }
        return 1;
      },
      [](void*, void* origin, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<session_origin*>(origin);
      });
  return index;
}

std::string host_of(SSL* ssl) {
  const auto* host = static_cast<const std::string*>(SSL_get_ex_data(ssl, host_index()));
  return host != nullptr ? *host : std::string();
}

// OpenSSL's new-session callback (a client "cache" that stores nothing):
// it runs in the handshake or the read that made `session`, under the
// stream's lock, before any other stream can hold the session, so the
// origin is written before anyone reads it.
int note_origin(SSL* ssl, SSL_SESSION* session) {
  const tls_context_state* state = state_of(SSL_get_SSL_CTX(ssl));
  try {
    auto* origin = new session_origin{state != nullptr ? state->identity : 0, host_of(ssl)};
    auto* old = static_cast<session_origin*>(SSL_SESSION_get_ex_data(session, session_index()));
    if (SSL_SESSION_set_ex_data(session, session_index(), origin) == 1) {
      delete old;
    } else {
      delete origin;
    }
  } catch (const std::bad_alloc&) {
    // Unmarked: may_offer then checks the host name OpenSSL recorded.
  }
  return 0;  // OpenSSL keeps its reference; this callback took none
}

}  // namespace

void remember_host(SSL* ssl, std::string_view host) {
  auto* copy = new std::string(host);
  if (SSL_set_ex_data(ssl, host_index(), copy) != 1) {
    delete copy;
    throw std::bad_alloc();
  }
}

void record_session_origin(SSL_CTX* context) noexcept {
  SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(context, note_origin);
}

bool may_offer(SSL* ssl, SSL_SESSION* session) {
  const std::string host = host_of(ssl);
  const auto* origin =
      static_cast<const session_origin*>(SSL_SESSION_get_ex_data(session, session_index()));
  if (origin != nullptr) {
    const tls_context_state* state = state_of(SSL_get_SSL_CTX(ssl));
    return state != nullptr && origin->context == state->identity && origin->host == host;
  }
  // Not made by a Canopy client stream (adopted from elsewhere): the host
  // name OpenSSL recorded, when the server acknowledged SNI.
  const char* recorded = SSL_SESSION_get0_hostname(session);
  return recorded == nullptr || host == recorded;
}

}  // namespace canopy::io::detail

namespace canopy::io {

tls_session tls_session::adopt(void* native) noexcept {
  tls_session session;
  session.native_ = native;
  return session;
}

tls_session::tls_session(const tls_session& other) noexcept : native_(other.native_) {
  if (native_ != nullptr) {
    SSL_SESSION_up_ref(static_cast<SSL_SESSION*>(native_));
  }
}

tls_session& tls_session::operator=(const tls_session& other) noexcept {
  if (this != &other) {
    tls_session copy(other);
    std::swap(native_, copy.native_);
  }
  return *this;
}

tls_session::tls_session(tls_session&& other) noexcept
    : native_(std::exchange(other.native_, nullptr)) {}

tls_session& tls_session::operator=(tls_session&& other) noexcept {
  if (this != &other) {
    tls_session old(std::move(*this));
    native_ = std::exchange(other.native_, nullptr);
  }
  return *this;
}

tls_session::~tls_session() { SSL_SESSION_free(static_cast<SSL_SESSION*>(native_)); }

}  // namespace canopy::io
