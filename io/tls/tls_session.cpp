#include "tls_session.hpp"

#include <utility>

#include "tls_openssl.hpp"

namespace canopy::io {

tls_session tls_session::adopt(void* native) noexcept {
  tls_session session;
  session.native_ = native;
  return session;
}

tls_session::tls_session(const tls_session& other) noexcept
    : native_(other.native_), origin_(other.origin_) {
  if (native_ != nullptr) {
    SSL_SESSION_up_ref(static_cast<SSL_SESSION*>(native_));
  }
}

tls_session& tls_session::operator=(const tls_session& other) noexcept {
  if (this != &other) {
    tls_session copy(other);
    std::swap(native_, copy.native_);
    std::swap(origin_, copy.origin_);
  }
  return *this;
}

tls_session::tls_session(tls_session&& other) noexcept
    : native_(std::exchange(other.native_, nullptr)), origin_(std::move(other.origin_)) {}

tls_session& tls_session::operator=(tls_session&& other) noexcept {
  if (this != &other) {
    tls_session old(std::move(*this));
    native_ = std::exchange(other.native_, nullptr);
    origin_ = std::move(other.origin_);
  }
  return *this;
}

tls_session::~tls_session() { SSL_SESSION_free(static_cast<SSL_SESSION*>(native_)); }

}  // namespace canopy::io
