// tls_openssl — what the TLS sources share about OpenSSL: the error
// mapping and the context's own state (kept in the SSL_CTX's ex_data, so
// it lives exactly as long as the SSL_CTX, which every SSL made from it
// holds a reference to). Internal; only the .cpp files of io/tls include
// it (the public headers do not expose OpenSSL).
#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <map>
#include <string>
#include <system_error>

#include "tls_context.hpp"

namespace canopy::io::detail {

// The error on top of this thread's OpenSSL error queue (then clears the
// queue); `fallback` when the queue is empty.
std::error_code take_openssl_error(tls_errc fallback) noexcept;
// The code of one packed OpenSSL error (`fallback` for 0 or a system error).
std::error_code openssl_error_code(unsigned long packed, tls_errc fallback) noexcept;

struct tls_context_state {
  bool server = false;
  // Tells the context that made a client's session apart from any other,
  // even one made later at the same address (never reused).
  std::uint64_t identity = 0;
  std::string alpn_wire;  // length-prefixed protocol names
  tls_context::sni_selector select;
  std::map<std::string, tls_context, std::less<>> by_name;
};

tls_context_state* state_of(SSL_CTX* context) noexcept;

}  // namespace canopy::io::detail
