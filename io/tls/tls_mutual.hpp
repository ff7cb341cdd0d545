// tls_mutual — mutual TLS's context settings: a server that requires and
// verifies client certificates, a client that presents its own chain and
// key (tls_server_options::verify_client, tls_client_options's
// certificate_chain_* and private_key_*). Internal; only the .cpp files
// of io/tls include it.
#pragma once

#include <openssl/ssl.h>

#include "tls_context.hpp"

namespace canopy::io::detail {

// Throw as tls_context::server and client do (std::invalid_argument for
// options that do not fit together, std::system_error for a file or PEM
// that cannot be used, tls_errc::key_mismatch for a key that does not
// match its certificate).
void require_client_certificates(SSL_CTX* context, const tls_server_options& options);
void use_client_identity(SSL_CTX* context, const tls_client_options& options);

}  // namespace canopy::io::detail
