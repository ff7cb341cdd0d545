#include "tls_context.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tls_ciphers.hpp"
#include "tls_identity.hpp"
#include "tls_mutual.hpp"
#include "tls_openssl.hpp"

namespace canopy::io {

namespace {

class tls_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "canopy.tls"; }
  std::string message(int value) const override {
    switch (static_cast<tls_errc>(value)) {
      case tls_errc::truncated:
        return "TLS: the peer closed the connection without close_notify (truncated)";
      case tls_errc::unusable:
        return "TLS: the stream is unusable (an earlier operation failed or was cancelled "
               "mid-handshake or mid-record)";
      case tls_errc::closed_in_handshake:
        return "TLS: the peer closed the connection during the handshake";
      case tls_errc::handshake_failed:
        return "TLS: handshake failure";
      case tls_errc::verify_failed:
        return "TLS: certificate verify failed";
      case tls_errc::not_handshaken:
        return "TLS: the handshake has not completed";
      case tls_errc::key_mismatch:
        return "TLS: the private key does not match the certificate";
      case tls_errc::renegotiation:
        return "TLS: the peer asked for a renegotiation (refused)";
    }
    if (value >= tls_verify_base && value < tls_library_base) {
      return std::string("TLS: certificate verify failed: ") +
             X509_verify_cert_error_string(value - tls_verify_base);
    }
    if (value >= tls_library_base) {
      const int packed = value - tls_library_base;
      const char* reason = ERR_reason_error_string(ERR_PACK(packed >> 16, 0, packed & 0xffff));
      return std::string("TLS: ") +
             (reason != nullptr ? reason : "OpenSSL error " + std::to_string(packed));
    }
    return "TLS: unknown error " + std::to_string(value);
  }
};

int state_index() noexcept {
  static const int index = SSL_CTX_get_ex_new_index(
      0, nullptr, nullptr, nullptr, [](void*, void* state, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<detail::tls_context_state*>(state);
      });
  return index;
}

// A failed context step (detail::fail_context_step, tls_identity.hpp).
[[noreturn]] void fail(tls_errc fallback, const std::string& what) {
  detail::fail_context_step(fallback, what);
}

int protocol_of(tls_version version) noexcept {
  return version == tls_version::v1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

void check_pair(const std::string& file, const std::string& pem, const char* what) {
  if (file.empty() == pem.empty()) {
    throw std::invalid_argument(std::string("canopy::io::tls_context: give exactly one of ") +
                                what + "_file and " + what + "_pem");
  }
}

std::string alpn_wire(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const std::string& name : protocols) {
    if (name.empty() || name.size() > 255) {
      throw std::invalid_argument("canopy::io::tls_context: an ALPN name must have 1 to 255 bytes");
    }
    wire.push_back(static_cast<char>(name.size()));
    wire.append(name);
  }
  return wire;
}

SSL_CTX* make_context(bool server, tls_version min, tls_version max) {
  if (min > max) {
    throw std::invalid_argument("canopy::io::tls_context: min_version above max_version");
  }
  ERR_clear_error();
  SSL_CTX* context = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (context == nullptr) {
    fail(tls_errc::handshake_failed, "SSL_CTX_new");
  }
  // Relaxed: the counter only hands out distinct numbers; the state is
  // published to other threads with the context itself.
  static std::atomic<std::uint64_t> contexts{0};
  auto* state = new detail::tls_context_state;
  state->server = server;
  state->identity = contexts.fetch_add(1, std::memory_order_relaxed) + 1;
  SSL_CTX_set_ex_data(context, state_index(), state);
  SSL_CTX_set_min_proto_version(context, protocol_of(min));
  SSL_CTX_set_max_proto_version(context, protocol_of(max));
  // Renegotiation (TLS 1.2) would make a read write and a write read;
  // refused. Partial writes: a write hands whole buffers to the memory BIO.
  SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode(context, SSL_MODE_RELEASE_BUFFERS);
  return context;
}

struct context_owner {
  SSL_CTX* context;
  ~context_owner() { SSL_CTX_free(context); }
  SSL_CTX* release() noexcept { return std::exchange(context, nullptr); }
};

// The server's ALPN choice: its own preference order (RFC 7301 leaves the
// order to the server).
int select_alpn(SSL* ssl, const unsigned char** out, unsigned char* out_length,
                const unsigned char* offered, unsigned int offered_length, void*) {
  const detail::tls_context_state* state = detail::state_of(SSL_get_SSL_CTX(ssl));
  if (state == nullptr || state->alpn_wire.empty()) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  const auto* ours = reinterpret_cast<const unsigned char*>(state->alpn_wire.data());
  for (std::size_t at = 0; at < state->alpn_wire.size(); at += 1 + ours[at]) {
    for (unsigned int theirs = 0; theirs < offered_length; theirs += 1 + offered[theirs]) {
      if (ours[at] == offered[theirs] &&
          std::equal(ours + at + 1, ours + at + 1 + ours[at], offered + theirs + 1)) {
        *out = ours + at + 1;
        *out_length = ours[at];
        return SSL_TLSEXT_ERR_OK;
      }
    }
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
}

// SSL_set_SSL_CTX swaps the certificate, the session id context and the
// context the verification's store comes from, but the SSL keeps the verify
// mode, callback and depth, and any client CA list, it copied from the
// listener's context when it was made: a context chosen by SNI brings its
// own, as nginx's servername callback does. OpenSSL 3 already verifies
// with the current context's store; it is set as well so that the chosen
// context's client CAs verify without relying on that.
void adopt_client_verification(SSL* ssl, SSL_CTX* context) {
  SSL_set_verify(ssl, SSL_CTX_get_verify_mode(context), SSL_CTX_get_verify_callback(context));
  SSL_set_verify_depth(ssl, SSL_CTX_get_verify_depth(context));
  STACK_OF(X509_NAME)* names = SSL_CTX_get_client_CA_list(context);
  // A copy the SSL owns (nullptr: none, the certificate request names no CA).
  SSL_set_client_CA_list(ssl, names != nullptr ? SSL_dup_CA_list(names) : nullptr);
  (void)SSL_set1_verify_cert_store(ssl, SSL_CTX_get_cert_store(context));
}

// A resumed handshake asks for no client certificate, and OpenSSL looks
// the session up (with the listener's context: one session id context for
// all) before this callback switches contexts; so a session made on one
// context could let a client into a context chosen by SNI that verifies
// clients. Each new session records the context that served it (in its
// ticket's application data, which the cache keeps too), and resuming on
// a verifying context a session made on another is refused. Written only
// on a new session, which no other connection holds yet.
int check_resumption(SSL* ssl, int* alert) {
  const detail::tls_context_state* serving = detail::state_of(SSL_get_SSL_CTX(ssl));
  SSL_SESSION* session = SSL_get_session(ssl);
  if (serving == nullptr || session == nullptr) {
    return SSL_TLSEXT_ERR_OK;
  }
  std::uint64_t made_on = serving->identity;
  if (SSL_session_reused(ssl) != 1) {
    (void)SSL_SESSION_set1_ticket_appdata(session, &made_on, sizeof made_on);
    return SSL_TLSEXT_ERR_OK;
  }
  if ((SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) == 0) {
    return SSL_TLSEXT_ERR_OK;
  }
  void* data = nullptr;
  std::size_t length = 0;
  made_on = 0;
  if (SSL_SESSION_get0_ticket_appdata(session, &data, &length) == 1 && length == sizeof made_on) {
    std::memcpy(&made_on, data, sizeof made_on);
  }
  if (made_on == serving->identity) {
    return SSL_TLSEXT_ERR_OK;
  }
  *alert = SSL_AD_HANDSHAKE_FAILURE;
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

int select_by_name(SSL* ssl, int* alert, void*) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  const detail::tls_context_state* state = detail::state_of(SSL_get_SSL_CTX(ssl));
  if (name == nullptr || state == nullptr) {
    return check_resumption(ssl, alert);
  }
  const tls_context* chosen = nullptr;
  if (state->select) {
    chosen = state->select(name);
  }
  if (chosen == nullptr) {
    const auto found = state->by_name.find(std::string_view(name));
    if (found != state->by_name.end()) {
      chosen = &found->second;
    }
  }
  if (chosen != nullptr && chosen->valid() && chosen->is_server()) {
    SSL_CTX* context = static_cast<SSL_CTX*>(chosen->native_handle());
    SSL_set_SSL_CTX(ssl, context);
    adopt_client_verification(ssl, context);
  }
  return check_resumption(ssl, alert);
}

// Made explicit rather than left to OpenSSL's defaults, which are the
// "on" below (tickets, a server cache of SSL_SESSION_CACHE_MAX_SIZE_DEFAULT
// sessions, 7200 s).
void configure_resumption(SSL_CTX* context, bool on) {
  if (!on) {
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(context, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(context, 0);  // TLS 1.3 would send stateful tickets without it
    return;
  }
  SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(context, SSL_SESSION_CACHE_MAX_SIZE_DEFAULT);
  SSL_CTX_clear_options(context, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(context, 2);
  SSL_CTX_set_timeout(context, 7200);
  // OpenSSL refuses to resume a session without a session id context
  // once the server verifies its peers (client certificates); the SNI
  // switch copies it, so every Canopy context uses the same one.
  static constexpr unsigned char id[] = "canopy";
  (void)SSL_CTX_set_session_id_context(context, id, sizeof id - 1);
}

}  // namespace

const std::error_category& tls_category() noexcept {
  static const tls_category_impl category;
  return category;
}

namespace detail {

std::error_code take_openssl_error(tls_errc fallback) noexcept {
  const unsigned long packed = ERR_peek_last_error();
  ERR_clear_error();
  return openssl_error_code(packed, fallback);
}

std::error_code openssl_error_code(unsigned long packed, tls_errc fallback) noexcept {
  if (packed == 0 || ERR_SYSTEM_ERROR(packed)) {
    return make_error_code(fallback);
  }
  const int library = ERR_GET_LIB(packed);
  const int reason = ERR_GET_REASON(packed);
  if (library > 0xff || reason > 0xffff) {
    return make_error_code(fallback);
  }
  return {tls_library_base + (library << 16 | reason), tls_category()};
}

tls_context_state* state_of(SSL_CTX* context) noexcept {
  return context == nullptr
             ? nullptr
             : static_cast<tls_context_state*>(SSL_CTX_get_ex_data(context, state_index()));
}

}  // namespace detail

tls_context tls_context::server(const tls_server_options& options) {
  check_pair(options.certificate_chain_file, options.certificate_chain_pem, "certificate_chain");
  check_pair(options.private_key_file, options.private_key_pem, "private_key");
  context_owner owner{make_context(true, options.min_version, options.max_version)};
  SSL_CTX* context = owner.context;
  detail::use_identity(context,
                       {options.certificate_chain_file, options.certificate_chain_pem,
                        options.private_key_file, options.private_key_pem},
                       "");
  detail::state_of(context)->alpn_wire = alpn_wire(options.alpn);
  SSL_CTX_set_alpn_select_cb(context, select_alpn, nullptr);
  SSL_CTX_set_tlsext_servername_callback(context, select_by_name);
  detail::require_client_certificates(context, options);
  detail::use_ciphers(context, options.ciphersuites, options.cipher_list, options.groups);
  configure_resumption(context, options.session_resumption);
  return tls_context(owner.release());
}

tls_context tls_context::client(const tls_client_options& options) {
  if (!options.ca_file.empty() && !options.ca_pem.empty()) {
    throw std::invalid_argument("canopy::io::tls_context: give at most one of ca_file and ca_pem");
  }
  context_owner owner{make_context(false, options.min_version, options.max_version)};
  SSL_CTX* context = owner.context;
  if (!options.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(context, options.ca_file.c_str(), nullptr) != 1) {
      fail(tls_errc::handshake_failed, "CA file " + options.ca_file);
    }
  } else if (!options.ca_pem.empty()) {
    BIO* text = BIO_new_mem_buf(options.ca_pem.data(), static_cast<int>(options.ca_pem.size()));
    X509_STORE* store = SSL_CTX_get_cert_store(context);
    int added = 0;
    while (X509* ca = PEM_read_bio_X509(text, nullptr, nullptr, nullptr)) {
      added += X509_STORE_add_cert(store, ca) == 1 ? 1 : 0;
      X509_free(ca);
    }
    ERR_clear_error();
    BIO_free(text);
    if (added == 0) {
      throw std::invalid_argument("canopy::io::tls_context: ca_pem holds no certificate");
    }
  } else if (SSL_CTX_set_default_verify_paths(context) != 1) {
    fail(tls_errc::handshake_failed, "the system's CA store");
  }
  SSL_CTX_set_verify(context, options.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  const std::string wire = alpn_wire(options.alpn);
  if (!wire.empty() &&
      SSL_CTX_set_alpn_protos(context, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned int>(wire.size())) != 0) {
    fail(tls_errc::handshake_failed, "ALPN");
  }
  detail::use_client_identity(context, options);
  detail::use_ciphers(context, options.ciphersuites, options.cipher_list, options.groups);
  return tls_context(owner.release());
}

void tls_context::select_by_server_name(sni_selector select) {
  detail::state_of(static_cast<SSL_CTX*>(native_))->select = std::move(select);
}

void tls_context::add_server_name(std::string server_name, tls_context context) {
  detail::state_of(static_cast<SSL_CTX*>(native_))
      ->by_name.insert_or_assign(std::move(server_name), std::move(context));
}

tls_context::tls_context(const tls_context& other) noexcept : native_(other.native_) {
  if (native_ != nullptr) {
    SSL_CTX_up_ref(static_cast<SSL_CTX*>(native_));
  }
}

tls_context& tls_context::operator=(const tls_context& other) noexcept {
  if (this != &other) {
    tls_context copy(other);
    std::swap(native_, copy.native_);
  }
  return *this;
}

tls_context::tls_context(tls_context&& other) noexcept
    : native_(std::exchange(other.native_, nullptr)) {}

tls_context& tls_context::operator=(tls_context&& other) noexcept {
  if (this != &other) {
    tls_context old(std::move(*this));
    native_ = std::exchange(other.native_, nullptr);
  }
  return *this;
}

tls_context::~tls_context() { SSL_CTX_free(static_cast<SSL_CTX*>(native_)); }

bool tls_context::is_server() const noexcept {
  const detail::tls_context_state* state = detail::state_of(static_cast<SSL_CTX*>(native_));
  return state != nullptr && state->server;
}

}  // namespace canopy::io

namespace canopy::io::detail {

// The code is the root cause (the earliest error queued: errno for a file
// that cannot be opened, else OpenSSL's reason), and what() lists every
// error OpenSSL queued.
[[noreturn]] void fail_context_step(tls_errc fallback, const std::string& what) {
  std::vector<unsigned long> queued;
  while (const unsigned long error = ERR_get_error()) {
    queued.push_back(error);
  }
  std::error_code code = make_error_code(fallback);
  std::string details;
  for (const unsigned long error : queued) {
    char text[256];
    ERR_error_string_n(error, text, sizeof text);
    details += std::string(" [") + text + "]";
  }
  if (!queued.empty() && ERR_SYSTEM_ERROR(queued.front())) {
    code = {static_cast<int>(ERR_GET_REASON(queued.front())), std::system_category()};
  } else if (!queued.empty()) {
    code = openssl_error_code(queued.back(), fallback);
  }
  throw std::system_error(code, "canopy::io::tls_context: " + what + details);
}

}  // namespace canopy::io::detail
