// tls_context — the configuration a TLS stream is made from (OpenSSL's
// SSL_CTX): a server's certificate chain and key, a client's trusted CAs,
// ALPN, versions, SNI. The public contract is in <canopy/io/tls.hpp>.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tls_error.hpp"

namespace canopy::io {

enum class tls_version : int { v1_2, v1_3 };

// A server's context. PEM, each from a file or from memory (the text
// itself): set one of each pair; the chain is the certificate followed by
// its intermediates.
struct tls_server_options {
  std::string certificate_chain_file;
  std::string certificate_chain_pem;
  std::string private_key_file;
  std::string private_key_pem;
  // The protocols this server speaks (ALPN), most preferred first: the
  // first of them the client also offers is chosen; a client offering
  // none of them is refused (no_application_protocol alert). Empty: ALPN
  // is ignored.
  std::vector<std::string> alpn;
  tls_version min_version = tls_version::v1_2;
  tls_version max_version = tls_version::v1_3;
  // Mutual TLS: true asks every client for a certificate and refuses one
  // that sends none or one that does not lead to a CA of client_ca_file or
  // client_ca_pem (exactly one of them, PEM); tls_stream::peer_verified()
  // and peer_subject() tell whom after the handshake. False: no client
  // certificate is asked for (the two CA fields must be empty). A context
  // chosen by SNI (add_server_name, select_by_server_name) applies its own
  // verify_client and client CA, not the listener context's; with
  // verify_client it resumes only sessions it made itself (a TLS 1.3
  // client offering one made on another context is refused).
  bool verify_client = false;
  std::string client_ca_file;
  std::string client_ca_pem;
  // Session resumption: a client offering a session from an earlier
  // connection (tls_stream::offer_session) skips the certificate and its
  // signature. True (the default): session tickets on TLS 1.3 and 1.2 (two
  // sent after each TLS 1.3 handshake), sealed with keys this context
  // draws at random when it is made (a new context, a restarted process,
  // cannot open older tickets), and this context's cache (at most 20,480
  // sessions) for a TLS 1.2 client without tickets; a session lives 2
  // hours. With SNI, the context the listener serves with decides. False:
  // no tickets, no cache, every handshake is a full one.
  bool session_resumption = true;
  // Cipher and key-exchange choices, each in OpenSSL's syntax; empty:
  // OpenSSL's defaults. ciphersuites: TLS 1.3's suites, colon-separated
  // (SSL_CTX_set_ciphersuites, e.g. "TLS_AES_128_GCM_SHA256"); cipher_list:
  // TLS 1.2's ciphers (SSL_CTX_set_cipher_list, e.g. "ECDHE+AESGCM");
  // groups: the key-exchange groups, most preferred first
  // (SSL_CTX_set1_groups_list, e.g. "X25519:P-256"). A peer that shares
  // none fails the handshake.
  std::string ciphersuites;
  std::string cipher_list;
  std::string groups;
};

// A client's context. Verification is on unless verify_peer is false: the
// server's chain must lead to a trusted CA (ca_file or ca_pem, else the
// system's default store) and, for a stream made with a host name, the
// certificate must name that host (or IP address).
struct tls_client_options {
  std::string ca_file;
  std::string ca_pem;
  bool verify_peer = true;
  // The protocols offered (ALPN), most preferred first; empty: none.
  std::vector<std::string> alpn;
  tls_version min_version = tls_version::v1_2;
  tls_version max_version = tls_version::v1_3;
  // The client's own certificate chain and key, sent to a server that asks
  // for one (mutual TLS): PEM, each from a file or from memory, as a
  // server's; none at all, or one of each pair.
  std::string certificate_chain_file;
  std::string certificate_chain_pem;
  std::string private_key_file;
  std::string private_key_pem;
  // Cipher and key-exchange choices, each in OpenSSL's syntax; empty:
  // OpenSSL's defaults. ciphersuites: TLS 1.3's suites, colon-separated
  // (SSL_CTX_set_ciphersuites, e.g. "TLS_AES_128_GCM_SHA256"); cipher_list:
  // TLS 1.2's ciphers (SSL_CTX_set_cipher_list, e.g. "ECDHE+AESGCM");
  // groups: the key-exchange groups, most preferred first
  // (SSL_CTX_set1_groups_list, e.g. "X25519:P-256"). A peer that shares
  // none fails the handshake.
  std::string ciphersuites;
  std::string cipher_list;
  std::string groups;
};

class tls_context {
 public:
  // Throw std::system_error (tls_category(): tls_errc::key_mismatch for a
  // key that does not match the certificate; an OpenSSL reason for a file
  // that cannot be read or parsed, with the file named in what()) or
  // std::invalid_argument (a missing certificate or key, both or neither
  // of a file/PEM pair, min_version above max_version; verify_client
  // without exactly one client CA, or a client CA without it; half a
  // client's own certificate and key). A client's key that does not match
  // its certificate: tls_errc::key_mismatch too. A ciphersuites,
  // cipher_list or groups string OpenSSL rejects: std::invalid_argument
  // naming the option and the string.
  static tls_context server(const tls_server_options& options);
  static tls_context client(const tls_client_options& options = {});

  // A server's SNI: which context serves a connection whose client asked
  // for `server_name` (nullptr or no match: this one). The selector runs
  // during handshakes, on whichever worker runs them, possibly several at
  // once; it is consulted before the map. Set both before the context
  // serves (not thread-safe against handshakes). A context must not name
  // itself (that would keep it alive forever).
  using sni_selector = std::function<const tls_context*(std::string_view server_name)>;
  void select_by_server_name(sni_selector select);
  void add_server_name(std::string server_name, tls_context context);

  tls_context() noexcept = default;                // empty: no stream can be made from it
  tls_context(const tls_context& other) noexcept;  // shares the same SSL_CTX
  tls_context& operator=(const tls_context& other) noexcept;
  tls_context(tls_context&& other) noexcept;
  tls_context& operator=(tls_context&& other) noexcept;
  ~tls_context();

  [[nodiscard]] bool valid() const noexcept { return native_ != nullptr; }
  [[nodiscard]] bool is_server() const noexcept;
  // The SSL_CTX*, for settings this class does not offer (before use).
  [[nodiscard]] void* native_handle() const noexcept { return native_; }

 private:
  explicit tls_context(void* native) noexcept : native_(native) {}
  void* native_ = nullptr;
};

}  // namespace canopy::io
