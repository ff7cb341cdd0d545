// tls_ciphers — the context's cipher and key-exchange choices: TLS 1.3
// cipher suites, TLS 1.2 cipher list, supported groups (the ciphersuites,
// cipher_list and groups fields of tls_server_options and
// tls_client_options). Internal; only the .cpp files of io/tls include it.
#pragma once

#include <openssl/ssl.h>

#include <string>

namespace canopy::io::detail {

// Applies each non-empty string to `context` (empty: OpenSSL's default);
// throws std::invalid_argument, naming the option and the string, for one
// OpenSSL rejects.
void use_ciphers(SSL_CTX* context, const std::string& ciphersuites, const std::string& cipher_list,
                 const std::string& groups);

}  // namespace canopy::io::detail
