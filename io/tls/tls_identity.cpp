#include "tls_identity.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <system_error>

#include "tls_openssl.hpp"

namespace canopy::io::detail {

namespace {

[[noreturn]] void key_mismatch(std::string_view who, const std::string& what) {
  ERR_clear_error();
  throw std::system_error(make_error_code(tls_errc::key_mismatch),
                          "canopy::io::tls_context: " + std::string(who) + what);
}

void use_chain_pem(SSL_CTX* context, const std::string& pem, std::string_view who) {
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
    fail_context_step(tls_errc::handshake_failed, std::string(who) + "certificate chain PEM");
  }
}

void use_key_pem(SSL_CTX* context, const std::string& pem, std::string_view who) {
  BIO* text = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(text, nullptr, nullptr, nullptr);
  BIO_free(text);
  if (key == nullptr) {
    fail_context_step(tls_errc::handshake_failed, std::string(who) + "private key PEM");
  }
  const int used = SSL_CTX_use_PrivateKey(context, key);
  EVP_PKEY_free(key);
  if (used != 1) {
    key_mismatch(who, "private key PEM");
  }
}

}  // namespace

void use_identity(SSL_CTX* context, const identity_sources& from, std::string_view who) {
  const std::string prefix(who);
  if (!from.chain_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context, from.chain_file.c_str()) != 1) {
      fail_context_step(tls_errc::handshake_failed,
                        prefix + "certificate chain " + from.chain_file);
    }
  } else {
    use_chain_pem(context, from.chain_pem, who);
  }
  if (!from.key_file.empty()) {
    if (SSL_CTX_use_PrivateKey_file(context, from.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
        key_mismatch(who, from.key_file);
      }
      fail_context_step(tls_errc::handshake_failed, prefix + "private key " + from.key_file);
    }
  } else {
    use_key_pem(context, from.key_pem, who);
  }
  if (SSL_CTX_check_private_key(context) != 1) {
    key_mismatch(who, "private key");
  }
}

}  // namespace canopy::io::detail
