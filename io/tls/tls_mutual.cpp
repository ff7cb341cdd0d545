#include "tls_mutual.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <stdexcept>
#include <string>
#include <system_error>

#include "tls_identity.hpp"
#include "tls_openssl.hpp"

namespace canopy::io::detail {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(take_openssl_error(tls_errc::handshake_failed),
                          "canopy::io::tls_context: " + what);
}

// Trusts every certificate of `pem` for client certificates and names it
// in the certificate request, as a client_ca_file's are: how many.
int add_certificates(SSL_CTX* context, const std::string& pem) {
  BIO* text = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509_STORE* store = SSL_CTX_get_cert_store(context);
  int added = 0;
  while (X509* ca = PEM_read_bio_X509(text, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, ca) == 1) {
      ++added;
      SSL_CTX_add_client_CA(context, ca);
    }
    X509_free(ca);
  }
  ERR_clear_error();  // the end of the text
  BIO_free(text);
  return added;
}

}  // namespace

void require_client_certificates(SSL_CTX* context, const tls_server_options& options) {
  const bool file = !options.client_ca_file.empty();
  const bool pem = !options.client_ca_pem.empty();
  if (!options.verify_client) {
    if (file || pem) {
      throw std::invalid_argument(
          "canopy::io::tls_context: client_ca_file or client_ca_pem without verify_client");
    }
    return;
  }
  if (file == pem) {
    throw std::invalid_argument(
        "canopy::io::tls_context: verify_client needs exactly one of client_ca_file and "
        "client_ca_pem");
  }
  if (file) {
    if (SSL_CTX_load_verify_locations(context, options.client_ca_file.c_str(), nullptr) != 1) {
      fail("client CA file " + options.client_ca_file);
    }
    // The CAs' names go to the client in the certificate request.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(context, names);
    }
    ERR_clear_error();
  } else if (add_certificates(context, options.client_ca_pem) == 0) {
    throw std::invalid_argument("canopy::io::tls_context: client_ca_pem holds no certificate");
  }
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
}

void use_client_identity(SSL_CTX* context, const tls_client_options& options) {
  const bool chain =
      !options.certificate_chain_file.empty() || !options.certificate_chain_pem.empty();
  const bool key = !options.private_key_file.empty() || !options.private_key_pem.empty();
  if (!chain && !key) {
    return;
  }
  if (options.certificate_chain_file.empty() == options.certificate_chain_pem.empty() ||
      options.private_key_file.empty() == options.private_key_pem.empty()) {
    throw std::invalid_argument(
        "canopy::io::tls_context: a client certificate needs exactly one of "
        "certificate_chain_file and certificate_chain_pem and one of private_key_file and "
        "private_key_pem");
  }
  ERR_clear_error();
  use_identity(context,
               {options.certificate_chain_file, options.certificate_chain_pem,
                options.private_key_file, options.private_key_pem},
               "client ");
}

}  // namespace canopy::io::detail
