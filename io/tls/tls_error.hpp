// tls_error — the error category of canopy::io's TLS streams
// (canopy::io::tls_category()). Internal header; the contract is in
// <canopy/io/tls.hpp>.
//
// Values: the named tls_errc below; a certificate verification failure is
// verify_base + OpenSSL's X509_V_ERR_* code (message: "certificate verify
// failed: " and OpenSSL's text for it, "certificate has expired",
// "hostname mismatch", "unable to get local issuer certificate", ...); any
// other OpenSSL failure is library_base + (library << 16 | reason)
// (message: OpenSSL's reason text, "wrong version number", "unsupported
// protocol", "tlsv1 alert protocol version", ...).
// is_certificate_error(code) tells the verify values apart.
#pragma once

#include <system_error>
#include <type_traits>

namespace canopy::io {

enum class tls_errc : int {
  truncated = 1,            // the peer closed the connection without close_notify
  unusable = 2,             // an earlier operation failed or was cancelled mid-record
  closed_in_handshake = 3,  // the peer closed the connection during the handshake
  handshake_failed = 4,     // an OpenSSL failure (see the value's own message)
  verify_failed = 5,        // the peer's certificate was refused
  not_handshaken = 6,       // read, write or shutdown before handshake() succeeded
  key_mismatch = 7,         // the private key does not match the certificate
  renegotiation = 8,        // the peer asked for a renegotiation (refused)
};

inline constexpr int tls_verify_base = 1000;
inline constexpr int tls_library_base = 0x1000000;

const std::error_category& tls_category() noexcept;

inline std::error_code make_error_code(tls_errc value) noexcept {
  return {static_cast<int>(value), tls_category()};
}
// Whether `code` is a refusal of the peer's certificate (its value is
// tls_verify_base + OpenSSL's X509_V_ERR_* code).
inline bool is_certificate_error(const std::error_code& code) noexcept {
  return code.category() == tls_category() &&
         (code.value() == static_cast<int>(tls_errc::verify_failed) ||
          (code.value() >= tls_verify_base && code.value() < tls_library_base));
}

}  // namespace canopy::io

template <>
struct std::is_error_code_enum<canopy::io::tls_errc> : std::true_type {};
