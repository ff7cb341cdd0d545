#include "resolve.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "../blocking/run_blocking.hpp"

namespace canopy::io {

namespace {

class category final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "canopy.resolve"; }
  [[nodiscard]] std::string message(int code) const override {
    // gai_strerror returns a static string (glibc: a translated constant).
    return ::gai_strerror(code);
  }
};

bool same_address(const endpoint& left, const endpoint& right) noexcept {
  return left.size() == right.size() && std::memcmp(left.data(), right.data(), left.size()) == 0;
}

// The lookup the task form hands to run_blocking: its outcome as a value,
// so that the error_code form never depends on an exception crossing the pool.
struct lookup_outcome {
  std::vector<endpoint> found;
  std::error_code error;
};

}  // namespace

const std::error_category& resolve_category() noexcept {
  static const category instance;
  return instance;
}

namespace detail {

std::vector<endpoint> resolve_now(std::string_view host, std::string_view service,
                                  std::error_code& error) {
  error.clear();
  if (host.empty() || host.find('\0') != std::string_view::npos ||
      service.find('\0') != std::string_view::npos) {
    error = std::make_error_code(std::errc::invalid_argument);
    return {};
  }
  // A numeric service over 65535: glibc's getaddrinfo takes it modulo
  // 65536 ("99999" became port 34463), so it is refused here, as an
  // unknown service, before a wrong port is handed back.
  if (!service.empty() &&
      std::all_of(service.begin(), service.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    unsigned long number = 0;
    const auto [end, parse_error] =
        std::from_chars(service.data(), service.data() + service.size(), number);
    if (parse_error != std::errc() || end != service.data() + service.size() || number > 65535) {
      error = make_error_code(resolve_errc::service_not_found);
      return {};
    }
  }
  const std::string node(host);
  const std::string port(service);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address, not one per socket type
  addrinfo* list = nullptr;
  const int status =
      ::getaddrinfo(node.c_str(), port.empty() ? nullptr : port.c_str(), &hints, &list);
  if (status != 0) {
    error = status == EAI_SYSTEM ? std::error_code(errno, std::system_category())
                                 : std::error_code(status, resolve_category());
    return {};
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(list, &::freeaddrinfo);
  std::vector<endpoint> found;
  for (const addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family != AF_INET && entry->ai_family != AF_INET6) {
      continue;
    }
    const endpoint address = endpoint::from(entry->ai_addr, entry->ai_addrlen);
    const bool seen = std::any_of(found.begin(), found.end(), [&](const endpoint& other) {
      return same_address(other, address);
    });
    if (!seen) {
      found.push_back(address);
    }
  }
  if (found.empty()) {  // only families an endpoint cannot hold
    error = make_error_code(resolve_errc::family_not_supported);
  }
  return found;
}

void throw_resolve_error(std::error_code error, std::string_view host, std::string_view service) {
  throw std::system_error(error, "canopy::io::resolve(\"" + std::string(host) + "\", \"" +
                                     std::string(service) + "\")");
}

}  // namespace detail

task<std::vector<endpoint>> resolve(std::string host, std::string service, std::error_code& error) {
  error.clear();
  // Named, then moved in: GCC 12 destroys twice the captures of a lambda
  // temporary written inside a co_await expression.
  auto lookup = [host = std::move(host), service = std::move(service)] {
    lookup_outcome outcome;
    outcome.found = detail::resolve_now(host, service, outcome.error);
    return outcome;
  };
  lookup_outcome outcome;
  try {
    outcome = co_await canopy::run_blocking(std::move(lookup));
  } catch (const std::system_error& refused) {  // the pool's at_capacity / shut_down
    error = refused.code();
    co_return std::vector<endpoint>{};
  }
  error = outcome.error;
  co_return std::move(outcome.found);
}

task<std::vector<endpoint>> resolve(std::string host, std::string service) {
  std::error_code error;
  std::vector<endpoint> found = co_await resolve(host, service, error);
  if (error) {
    detail::throw_resolve_error(error, host, service);
  }
  co_return found;
}

}  // namespace canopy::io
