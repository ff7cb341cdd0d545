// canopy::io::resolve: "localhost" and numeric hosts (IPv4, IPv6) in the
// task and fiber forms, and its errors: a name that does not exist (a
// reserved .invalid name, RFC 2606, so no network is needed), an unknown
// service name, an empty host or a NUL byte, the fiber form outside a
// fiber. Only names /etc/hosts resolves are expected to succeed (the test
// machine has no network). Public headers only; no descriptor leaks.
#include <arpa/inet.h>
#include <dirent.h>
#include <doctest/doctest.h>
#include <netdb.h>
#include <netinet/in.h>

#include <canopy/io.hpp>
#include <canopy/io/fiber.hpp>
#include <canopy/io/resolve.hpp>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "tests/watchdog.hpp"

using canopy::task;
using canopy::io::endpoint;
using canopy::io::resolve_errc;

namespace {

// Open descriptors of this process (entries of /proc/self/fd, minus the one
// opendir itself holds).
std::size_t open_fd_count() {
  DIR* directory = opendir("/proc/self/fd");
  REQUIRE(directory != nullptr);
  std::size_t count = 0;
  while (const dirent* entry = readdir(directory)) {
    if (entry->d_name[0] != '.') {
      ++count;
    }
  }
  closedir(directory);
  return count - 1;
}

bool is_loopback(const endpoint& address) {
  if (address.family() == AF_INET) {
    const auto* four = reinterpret_cast<const sockaddr_in*>(address.data());
    return (ntohl(four->sin_addr.s_addr) >> 24) == 127;
  }
  if (address.family() == AF_INET6) {
    const auto* six = reinterpret_cast<const sockaddr_in6*>(address.data());
    return IN6_IS_ADDR_LOOPBACK(&six->sin6_addr) != 0;
  }
  return false;
}

struct lookup {
  std::vector<endpoint> found;
  std::error_code error;
};

task<lookup> resolve_quietly(std::string host, std::string service) {
  lookup result;
  result.found = co_await canopy::io::resolve(std::move(host), std::move(service), result.error);
  co_return result;
}

canopy::executor_config small_pool() {
  canopy::executor_config config = canopy::io::with_reactor();
  config.worker_count = 2;
  return config;
}

}  // namespace

TEST_CASE("resolve: localhost and numeric hosts, task and fiber forms") {
  const canopy::testing::watchdog guard("resolve ok", 60);
  const std::size_t fds_before = open_fd_count();
  {
    canopy::executor pool(small_pool());

    const std::vector<endpoint> local =
        canopy::block_on(pool, canopy::io::resolve("localhost", "8080"));
    REQUIRE_FALSE(local.empty());
    for (const endpoint& address : local) {
      CHECK(is_loopback(address));
      CHECK(address.port() == 8080);
    }

    const std::vector<endpoint> four =
        canopy::block_on(pool, canopy::io::resolve("127.0.0.1", "80"));
    REQUIRE(four.size() == 1);
    CHECK(four.front().family() == AF_INET);
    CHECK(four.front().to_string() == "127.0.0.1:80");

    const std::vector<endpoint> six = canopy::block_on(pool, canopy::io::resolve("::1", "443"));
    REQUIRE(six.size() == 1);
    CHECK(six.front().family() == AF_INET6);
    CHECK(six.front().port() == 443);
    CHECK(is_loopback(six.front()));

    // An empty service is port 0; the error_code form clears the code.
    const lookup no_port = canopy::block_on(pool, resolve_quietly("127.0.0.1", ""));
    CHECK_FALSE(no_port.error);
    REQUIRE(no_port.found.size() == 1);
    CHECK(no_port.found.front().port() == 0);

    // The fiber form, on the same pool.
    auto fibered = pool.spawn(canopy::fiber([] {
      const std::vector<endpoint> found = canopy::this_fiber::resolve("localhost", "9");
      return found.size() >= 1 && is_loopback(found.front()) && found.front().port() == 9;
    }));
    CHECK(fibered.get());
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("resolve: a name that does not exist and an unknown service are clear errors") {
  const canopy::testing::watchdog guard("resolve errors", 60);
  const std::size_t fds_before = open_fd_count();
  {
    canopy::executor pool(small_pool());

    // ".invalid" never exists (RFC 2606). Without a reachable name server
    // getaddrinfo may only say it could not ask: try_again.
    const lookup missing = canopy::block_on(pool, resolve_quietly("no-such-host.invalid", "80"));
    CHECK(missing.found.empty());
    CHECK(&missing.error.category() == &canopy::io::resolve_category());
    CHECK(std::string(missing.error.category().name()) == "canopy.resolve");
    CHECK((missing.error == resolve_errc::host_not_found ||
           missing.error == resolve_errc::try_again));
    CHECK(missing.error.message() == ::gai_strerror(missing.error.value()));

    // The throwing form names what was looked up.
    std::string what;
    std::error_code thrown;
    try {
      (void)canopy::block_on(pool, canopy::io::resolve("no-such-host.invalid", "80"));
    } catch (const std::system_error& failure) {
      what = failure.what();
      thrown = failure.code();
    }
    CHECK(thrown == missing.error);
    CHECK(what.find("no-such-host.invalid") != std::string::npos);

    // An unknown service name on a host that resolves.
    const lookup no_service =
        canopy::block_on(pool, resolve_quietly("localhost", "no-such-service-name"));
    CHECK(no_service.found.empty());
    CHECK(no_service.error == resolve_errc::service_not_found);
    CHECK_FALSE(no_service.error.message().empty());

    // Bad input: an empty host, a NUL byte inside the host or the service.
    CHECK(canopy::block_on(pool, resolve_quietly("", "80")).error == std::errc::invalid_argument);
    CHECK(canopy::block_on(pool, resolve_quietly(std::string("local\0host", 10), "80")).error ==
          std::errc::invalid_argument);
    CHECK(canopy::block_on(pool, resolve_quietly("localhost", std::string("8\0", 2))).error ==
          std::errc::invalid_argument);

    // The fiber form reports the same errors, and throws outside a fiber.
    auto fibered = pool.spawn(canopy::fiber([] {
      std::error_code error;
      (void)canopy::this_fiber::resolve("localhost", "no-such-service-name", error);
      return error;
    }));
    CHECK(fibered.get() == resolve_errc::service_not_found);
  }
  CHECK_THROWS_AS((void)canopy::this_fiber::resolve("localhost", "80"), std::logic_error);
  CHECK(open_fd_count() == fds_before);
}
