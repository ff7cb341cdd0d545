// endpoint — an IPv4 or IPv6 address and port (a sockaddr_in / sockaddr_in6).
//
//   auto local = canopy::io::endpoint::loopback_v4(0);        // 127.0.0.1:0
//   auto every = canopy::io::endpoint::any_v4(8080);          // 0.0.0.0:8080
//   auto six = canopy::io::endpoint::parse("::1", 8080);      // throws on bad text
//   std::string text = local.to_string();                     // "127.0.0.1:0"
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace canopy::io {

class endpoint {
 public:
  endpoint() noexcept = default;
  static endpoint loopback_v4(std::uint16_t port) noexcept;
  static endpoint loopback_v6(std::uint16_t port) noexcept;
  // Every local address (0.0.0.0, ::), for a listener reachable from other
  // hosts. A v6 listener on :: also takes IPv4 unless the system's
  // net.ipv6.bindv6only says otherwise.
  static endpoint any_v4(std::uint16_t port) noexcept;
  static endpoint any_v6(std::uint16_t port) noexcept;
  // A numeric address ("127.0.0.1", "::1"); errc::invalid_argument otherwise.
  static endpoint parse(std::string_view address, std::uint16_t port, std::error_code& error);
  static endpoint parse(std::string_view address, std::uint16_t port);  // throws std::system_error
  static endpoint from(const sockaddr* address, socklen_t length) noexcept;

  [[nodiscard]] int family() const noexcept { return storage_.ss_family; }
  [[nodiscard]] std::uint16_t port() const noexcept;
  [[nodiscard]] std::string to_string() const;
  [[nodiscard]] const sockaddr* data() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage_);
  }
  [[nodiscard]] socklen_t size() const noexcept { return length_; }

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

}  // namespace canopy::io
