// tls_identity — a context's own certificate chain and private key, for a
// server (tls_server_options) and for a client that presents one (mutual
// TLS, tls_client_options): one loader for both. Internal; only the .cpp
// files of io/tls include it.
#pragma once

#include <openssl/ssl.h>

#include <string>
#include <string_view>

#include "tls_context.hpp"

namespace canopy::io::detail {

// Where the chain and the key come from: a file or PEM text each (the
// caller has checked that exactly one of each pair is set).
struct identity_sources {
  const std::string& chain_file;
  const std::string& chain_pem;
  const std::string& key_file;
  const std::string& key_pem;
};

// Loads the chain and the key into `context` and checks that they belong
// together. `who` starts every message after "canopy::io::tls_context: "
// ("" for a server, "client " for a client). Throws std::system_error: the
// root cause (fail_context_step) for a file or PEM that cannot be used,
// tls_errc::key_mismatch for a key that is not the certificate's.
void use_identity(SSL_CTX* context, const identity_sources& from, std::string_view who);

// Throws std::system_error for a failed context step: the code is the
// root cause, what() "canopy::io::tls_context: " + what and every error
// OpenSSL queued.
[[noreturn]] void fail_context_step(tls_errc fallback, const std::string& what);

}  // namespace canopy::io::detail
