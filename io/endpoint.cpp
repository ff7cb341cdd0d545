#include "endpoint.hpp"

#include <arpa/inet.h>

#include <cstring>
#include <string>

namespace canopy::io {

endpoint endpoint::loopback_v4(std::uint16_t port) noexcept {
  endpoint result;
  auto* address = reinterpret_cast<sockaddr_in*>(&result.storage_);
  address->sin_family = AF_INET;
  address->sin_port = htons(port);
  address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  result.length_ = sizeof(sockaddr_in);
  return result;
}

endpoint endpoint::loopback_v6(std::uint16_t port) noexcept {
  endpoint result;
  auto* address = reinterpret_cast<sockaddr_in6*>(&result.storage_);
  address->sin6_family = AF_INET6;
  address->sin6_port = htons(port);
  address->sin6_addr = in6addr_loopback;
  result.length_ = sizeof(sockaddr_in6);
  return result;
}

endpoint endpoint::any_v4(std::uint16_t port) noexcept {
  endpoint result = loopback_v4(port);
  reinterpret_cast<sockaddr_in*>(&result.storage_)->sin_addr.s_addr = htonl(INADDR_ANY);
  return result;
}

endpoint endpoint::any_v6(std::uint16_t port) noexcept {
  endpoint result = loopback_v6(port);
  reinterpret_cast<sockaddr_in6*>(&result.storage_)->sin6_addr = in6addr_any;
  return result;
}

endpoint endpoint::parse(std::string_view address, std::uint16_t port, std::error_code& error) {
  error.clear();
  const std::string text(address);
  endpoint result;
  auto* four = reinterpret_cast<sockaddr_in*>(&result.storage_);
  if (inet_pton(AF_INET, text.c_str(), &four->sin_addr) == 1) {
    four->sin_family = AF_INET;
    four->sin_port = htons(port);
    result.length_ = sizeof(sockaddr_in);
    return result;
  }
  result = endpoint{};
  auto* six = reinterpret_cast<sockaddr_in6*>(&result.storage_);
  if (inet_pton(AF_INET6, text.c_str(), &six->sin6_addr) == 1) {
    six->sin6_family = AF_INET6;
    six->sin6_port = htons(port);
    result.length_ = sizeof(sockaddr_in6);
    return result;
  }
  error = std::make_error_code(std::errc::invalid_argument);
  return {};
}

endpoint endpoint::parse(std::string_view address, std::uint16_t port) {
  std::error_code error;
  endpoint result = parse(address, port, error);
  if (error) {
    throw std::system_error(error, "canopy::io::endpoint::parse: '" + std::string(address) +
                                       "' is not a numeric IPv4 or IPv6 address");
  }
  return result;
}

endpoint endpoint::from(const sockaddr* address, socklen_t length) noexcept {
  endpoint result;
  if (length > 0 && length <= sizeof(result.storage_)) {
    std::memcpy(&result.storage_, address, length);
    result.length_ = length;
  }
  return result;
}

std::uint16_t endpoint::port() const noexcept {
  if (storage_.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  }
  if (storage_.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

std::string endpoint::to_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (storage_.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, text,
              sizeof text);
    return std::string(text) + ":" + std::to_string(port());
  }
  if (storage_.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, text,
              sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(port());
  }
  return "(none)";
}

}  // namespace canopy::io
