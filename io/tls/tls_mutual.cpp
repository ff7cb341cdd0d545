#include "tls_mutual.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <stdexcept>
#include <string>
#include <system_error>

#include "tls_openssl.hpp"

namespace canopy::io::detail {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(take_openssl_error(tls_errc::handshake_failed),
                          "canopy::io::tls_context: " + what);
}

// Adds every certificate of `pem` to `store`: how many.
int add_certificates(X509_STORE* store, const std::string& pem) {
  BIO* text = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int added = 0;
  while (X509* ca = PEM_read_bio_X509(text, nullptr, nullptr, nullptr)) {
    added += X509_STORE_add_cert(store, ca) == 1 ? 1 : 0;
    X509_free(ca);
  }
  ERR_clear_error();  // the end of the text
  BIO_free(text);
  return added;
}

void use_chain_pem(SSL_CTX* context, const std::string& pem) {
  BIO* text = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* leaf = PEM_read_bio_X509_AUX(text, nullptr, nullptr, nullptr);
  bool good = leaf != nullptr && SSL_CTX_use_certificate(context, leaf) == 1;
  X509_free(leaf);
  while (good) {
    X509* next = PEM_read_bio_X509(text, nullptr, nullptr, nullptr);
    if (next == nullptr) {
      ERR_clear_error();  // the end of the text
      break;
    }
    good = SSL_CTX_add0_chain_cert(context, next) == 1;
    if (!good) {
      X509_free(next);
    }
  }
  BIO_free(text);
  if (!good) {
    fail("client certificate chain PEM");
  }
}

[[noreturn]] void key_mismatch(const std::string& what) {
  ERR_clear_error();
  throw std::system_error(make_error_code(tls_errc::key_mismatch),
                          "canopy::io::tls_context: client " + what);
}

void use_key_pem(SSL_CTX* context, const std::string& pem) {
  BIO* text = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(text, nullptr, nullptr, nullptr);
  BIO_free(text);
  if (key == nullptr) {
    fail("client private key PEM");
  }
  const int used = SSL_CTX_use_PrivateKey(context, key);
  EVP_PKEY_free(key);
  if (used != 1) {
    key_mismatch("private key PEM");
  }
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
  } else if (add_certificates(SSL_CTX_get_cert_store(context), options.client_ca_pem) == 0) {
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
  if (!options.certificate_chain_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context, options.certificate_chain_file.c_str()) != 1) {
      fail("client certificate chain " + options.certificate_chain_file);
    }
  } else {
    use_chain_pem(context, options.certificate_chain_pem);
  }
  if (!options.private_key_file.empty()) {
    if (SSL_CTX_use_PrivateKey_file(context, options.private_key_file.c_str(), SSL_FILETYPE_PEM) !=
        1) {
      if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
        key_mismatch(options.private_key_file);
      }
      fail("client private key " + options.private_key_file);
    }
  } else {
    use_key_pem(context, options.private_key_pem);
  }
  if (SSL_CTX_check_private_key(context) != 1) {
    key_mismatch("private key");
  }
}

}  // namespace canopy::io::detail
