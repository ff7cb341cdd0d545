#include "tls_ciphers.hpp"

#include <openssl/err.h>

#include <stdexcept>

namespace canopy::io::detail {

namespace {

void check(int result, const char* option, const std::string& value) {
  if (result != 1) {
    // OpenSSL's reason adds nothing the option and string do not say.
    ERR_clear_error();
    throw std::invalid_argument(std::string("canopy::io::tls_context: ") + option +
                                " rejected by OpenSSL: \"" + value + "\"");
  }
}

}  // namespace

void use_ciphers(SSL_CTX* context, const std::string& ciphersuites, const std::string& cipher_list,
                 const std::string& groups) {
  if (!ciphersuites.empty()) {
    check(SSL_CTX_set_ciphersuites(context, ciphersuites.c_str()), "ciphersuites", ciphersuites);
  }
  if (!cipher_list.empty()) {
    check(SSL_CTX_set_cipher_list(context, cipher_list.c_str()), "cipher_list", cipher_list);
  }
  if (!groups.empty()) {
    check(SSL_CTX_set1_groups_list(context, groups.c_str()), "groups", groups);
  }
}

}  // namespace canopy::io::detail
