// The io_uring backend (issue 29): which backend a reactor picks, the forced
// fallback to epoll when io_uring_setup is refused, and the probe run.sh
// reads. The buffer-ownership cases are in io_uring_ownership_test.cpp.
//
// Where io_uring cannot run, the cases that need it fail, unless
// CANOPY_IO_URING_UNAVAILABLE_OK=1 (set by run.sh only when its probe, the
// first case here, found io_uring unusable); they then say so and pass.
#include <doctest/doctest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::endpoint;
using canopy::io::io_backend;
using canopy::io::reactor;
using canopy::io::reactor_options;
using canopy::io::tcp_listener;
using canopy::io::tcp_stream;
using canopy::testing::ask;
using canopy::testing::report_unavailable;
using canopy::testing::scoped_env;

TEST_CASE("probe: whether io_uring runs here, and why; automatic takes epoll") {
  const scoped_env plain("CANOPY_IO_BACKEND", nullptr);
  const reactor automatic;
  std::string why = "io_uring_setup works and the kernel has what the backend needs";
  bool uring_runs = true;
  try {
    const reactor forced(reactor_options{io_backend::io_uring});
    CHECK(forced.backend() == io_backend::io_uring);
  } catch (const std::system_error& failure) {
    uring_runs = false;
    why = failure.what();
  }
  // run.sh reads this line.
  std::printf("canopy-io-probe: io_uring=%s (%s); automatic=%s\n",
              uring_runs ? "runs" : "unavailable", why.c_str(), to_string(automatic.backend()));
  std::fflush(stdout);
  // automatic takes epoll wherever io_uring runs or not (docs/io.md, "Which is faster").
  CHECK(automatic.backend() == io_backend::epoll);
}

TEST_CASE("backend selection: explicit, automatic, CANOPY_IO_BACKEND, to_string") {
  const canopy::testing::watchdog guard("backend selection", 60);
  const scoped_env plain("CANOPY_IO_BACKEND", nullptr);
  CHECK(std::string(to_string(io_backend::automatic)) == "auto");
  CHECK(std::string(to_string(io_backend::epoll)) == "epoll");
  CHECK(std::string(to_string(io_backend::io_uring)) == "io_uring");

  const reactor epoll_reactor(reactor_options{io_backend::epoll});
  CHECK(epoll_reactor.backend() == io_backend::epoll);
  CHECK(epoll_reactor.stats().backend == io_backend::epoll);
  bool uring_runs = false;
  try {
    const reactor uring_reactor(reactor_options{io_backend::io_uring});
    CHECK(uring_reactor.backend() == io_backend::io_uring);
    CHECK(uring_reactor.stats().backend == io_backend::io_uring);
    uring_runs = true;
  } catch (const std::system_error& failure) {
    report_unavailable(failure);
  }
  const io_backend picked = io_backend::epoll;  // automatic's choice
  CHECK(reactor().backend() == picked);
  {
    // with_reactor passes the options to the executor's reactor.
    executor pool(canopy::io::with_reactor(canopy::testing::config_with(1),
                                           reactor_options{io_backend::epoll}));
    CHECK(reactor::of(pool).backend() == io_backend::epoll);
  }

  SUBCASE("CANOPY_IO_BACKEND=epoll overrides an explicit io_uring") {
    const scoped_env forced("CANOPY_IO_BACKEND", "epoll");
    CHECK(reactor(reactor_options{io_backend::io_uring}).backend() == io_backend::epoll);
    CHECK(reactor().backend() == io_backend::epoll);
  }
  SUBCASE("CANOPY_IO_BACKEND=io_uring overrides an explicit epoll") {
    const scoped_env forced("CANOPY_IO_BACKEND", "io_uring");
    try {
      CHECK(reactor(reactor_options{io_backend::epoll}).backend() == io_backend::io_uring);
      CHECK(uring_runs);
    } catch (const std::system_error& failure) {
      CHECK_FALSE(uring_runs);  // an explicit io_uring that cannot run is an error
      report_unavailable(failure);
    }
  }
  SUBCASE("CANOPY_IO_BACKEND=auto picks as automatic does") {
    const scoped_env forced("CANOPY_IO_BACKEND", "auto");
    CHECK(reactor(reactor_options{io_backend::epoll}).backend() == picked);
  }
  SUBCASE("an invalid CANOPY_IO_BACKEND throws invalid_argument naming the value") {
    const scoped_env forced("CANOPY_IO_BACKEND", "kqueue-ish");
    try {
      const reactor refused;
      FAIL("CANOPY_IO_BACKEND=kqueue-ish was accepted");
    } catch (const std::invalid_argument& failure) {
      CHECK(std::string(failure.what()).find("kqueue-ish") != std::string::npos);
    }
  }
}

namespace {

// A seccomp filter that fails io_uring_setup with EPERM (as many container
// profiles do) and allows every other call of this architecture; calls of
// another ABI (i386 via int 0x80, x32) are refused outright.
bool refuse_io_uring_setup() {
#if defined(__x86_64__)
  constexpr std::uint32_t arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t arch = AUDIT_ARCH_AARCH64;
#else
#error "refuse_io_uring_setup: name this architecture's AUDIT_ARCH"
#endif
  constexpr std::uint32_t refuse = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  std::array<sock_filter, 8> program{{
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, refuse),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 2, 0),  // x32's bit
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, refuse),
  }};
  const sock_fprog filter{static_cast<unsigned short>(program.size()), program.data()};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) == 0;
}

// What the child found, as its exit status.
enum fallback_outcome : int {
  fallback_ok = 0,
  no_filter = 20,
  filter_ineffective,
  explicit_ran,
  explicit_error_unnamed,
  explicit_wrong_exception,
  automatic_not_epoll,
  echo_wrong,
  echo_threw,
  env_ran,
};

const char* describe(int status) {
  switch (status) {
    case no_filter:
      return "the seccomp filter could not be installed";
    case filter_ineffective:
      return "io_uring_setup still worked under the filter";
    case explicit_ran:
      return "an explicit io_uring reactor started under the filter";
    case explicit_error_unnamed:
      return "the system_error's what() does not name io_uring";
    case explicit_wrong_exception:
      return "an explicit io_uring threw something else";
    case automatic_not_epoll:
      return "automatic did not fall back to epoll";
    case echo_wrong:
      return "the echo round trip on the fallback came back wrong";
    case echo_threw:
      return "the echo round trip on the fallback threw";
    case env_ran:
      return "CANOPY_IO_BACKEND=io_uring started under the filter";
    default:
      return "unexpected status";
  }
}

task<void> echo_once(tcp_listener* listener) {
  tcp_stream peer = co_await listener->accept();
  std::array<std::byte, 256> buffer{};
  const std::size_t got = co_await peer.read_some(buffer);
  co_await peer.write_all(std::span(buffer).first(got));
}

// The child's whole run (no doctest here: the parent asserts on the status).
int fallback_child() {
  ::unsetenv("CANOPY_IO_BACKEND");
  if (!refuse_io_uring_setup()) {
    return no_filter;
  }
  std::array<std::byte, 120> params{};  // struct io_uring_params
  errno = 0;
  if (::syscall(__NR_io_uring_setup, 4, params.data()) >= 0 || errno != EPERM) {
    return filter_ineffective;
  }
  try {
    const reactor forced(reactor_options{io_backend::io_uring});
    return explicit_ran;
  } catch (const std::system_error& failure) {
    if (std::strstr(failure.what(), "io_uring") == nullptr) {
      return explicit_error_unnamed;
    }
  } catch (...) {
    return explicit_wrong_exception;
  }
  try {
    executor pool(canopy::io::with_reactor(canopy::testing::config_with(2)));
    reactor& owner = reactor::of(pool);
    if (owner.backend() != io_backend::epoll || owner.stats().backend != io_backend::epoll) {
      return automatic_not_epoll;
    }
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    auto server = pool.spawn(echo_once(&listener));
    const std::string answer =
        canopy::block_on(pool, ask(&owner, listener.local_endpoint(), "served on epoll"));
    server.get();
    if (answer != "served on epoll") {
      return echo_wrong;
    }
  } catch (...) {
    return echo_threw;
  }
  ::setenv("CANOPY_IO_BACKEND", "io_uring", 1);
  try {
    const reactor forced;
    return env_ran;
  } catch (const std::system_error& failure) {
    if (std::strstr(failure.what(), "io_uring") == nullptr) {
      return explicit_error_unnamed;
    }
  } catch (...) {
    return explicit_wrong_exception;
  }
  return fallback_ok;
}

}  // namespace

TEST_CASE("forced fallback: io_uring_setup refused by seccomp, automatic serves on epoll") {
  // Forked before this case starts any thread (TSan refuses threads in the
  // child of a multi-threaded fork); the watchdog starts after the fork.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(static_cast<unsigned>(60 * canopy::testing::timeout_scale()));
    ::_exit(fallback_child());  // _exit: no doctest or sanitizer teardown here
  }
  const canopy::testing::watchdog guard("forced fallback", 90);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE_MESSAGE(WIFEXITED(status), "the child died of signal " << WTERMSIG(status));
  const int code = WEXITSTATUS(status);
  CHECK_MESSAGE(code == fallback_ok, "child status " << code << ": " << describe(code));
}

// The kernel completes io_uring work through task work on the thread that
// submitted it, and signals the thread that created a ring when the ring
// goes (TWA_SIGNAL): a program thread so signalled sees its next blocking
// call with a timeout fail with EINTR. The backend creates its ring on a
// thread of its own and submits only from workers, so the thread that
// builds, uses and destroys a pool is never interrupted.
TEST_CASE("the program's thread is never interrupted by the ring it used") {
  const canopy::testing::watchdog guard("no EINTR after the ring", 120);
  const scoped_env explicit_backend("CANOPY_IO_BACKEND", nullptr);  // run.sh's pass would override
  const std::size_t fds_before = canopy::testing::open_fd_count();
  std::optional<canopy::executor_config> config = canopy::testing::config_for(io_backend::io_uring);
  if (!config) {
    return;  // reported by config_for
  }
  for (int round = 0; round < 3; ++round) {
    {
      executor pool(*config);
      reactor& owner = reactor::of(pool);
      REQUIRE(owner.backend() == io_backend::io_uring);
      tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
      auto server = pool.spawn(echo_once(&listener));
      CHECK(canopy::block_on(pool, ask(&owner, listener.local_endpoint(), "round trip")) ==
            "round trip");
      server.get();
      pool.shutdown();
      config = canopy::testing::config_for(io_backend::io_uring);
      REQUIRE(config);
    }
    int pair[2] = {-1, -1};
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
    const timeval timeout{0, 100000};
    REQUIRE(::setsockopt(pair[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) == 0);
    char byte = 0;
    errno = 0;
    const ssize_t got = ::recv(pair[0], &byte, 1, 0);
    const int failure = errno;
    ::close(pair[0]);
    ::close(pair[1]);
    INFO("round " << round << ": recv returned " << got << ", errno " << failure);
    CHECK(got == -1);
    CHECK((failure == EAGAIN || failure == EWOULDBLOCK));  // the timeout, not EINTR
  }
  config.reset();
  CHECK(canopy::testing::open_fd_count() == fds_before);  // every pool's ring, epoll, eventfd
}

// Which backend ran is in the trace (otherData.io_backend), as in stats().
TEST_CASE("the trace names the I/O backend") {
  const canopy::testing::watchdog guard("trace names the backend", 60);
  const scoped_env explicit_backend("CANOPY_IO_BACKEND", nullptr);
  for (const io_backend backend : {io_backend::epoll, io_backend::io_uring}) {
    std::optional<canopy::executor_config> config = canopy::testing::config_for(backend);
    if (!config) {
      continue;  // io_uring unavailable: reported by config_for
    }
    const std::string path = "/tmp/canopy_io_trace_" + std::to_string(::getpid()) + "_" +
                             canopy::io::to_string(backend) + ".json";
    config->trace_path = path;
    {
      executor pool(*config);
      pool.shutdown();
    }
    std::string text;
    if (std::FILE* file = std::fopen(path.c_str(), "r")) {
      char chunk[512];
      const std::size_t got = std::fread(chunk, 1, sizeof chunk, file);
      text.assign(chunk, got);
      std::fclose(file);
    }
    std::remove(path.c_str());
    std::remove((path.substr(0, path.size() - 5) + ".svg").c_str());
    INFO("trace head: " << text);
    CHECK(text.find(std::string("\"io_backend\":\"") + canopy::io::to_string(backend) + "\"") !=
          std::string::npos);
  }
}

// A completion is delivered to a worker that never runs out of work long
// before its driver-poll interval: the worker looks at the completion queue
// after each task (ext::idle_driver::completions_may_be_waiting).
TEST_CASE("a completion reaches a busy worker long before driver_poll_interval tasks") {
  const canopy::testing::watchdog guard("busy completions", 120);
  const scoped_env explicit_backend("CANOPY_IO_BACKEND", nullptr);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  std::optional<canopy::executor_config> config =
      canopy::testing::config_for(io_backend::io_uring, 1);
  if (!config) {
    return;  // reported by config_for
  }
  config->driver_poll_interval = 1000000;  // the task-count poll alone would need 10^6 tasks
  {
    executor pool(*config);
    reactor& owner = reactor::of(pool);
    REQUIRE(owner.backend() == io_backend::io_uring);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    // The poller's waits counted just before the read starts (the worker is
    // running, so none is in progress); none yet: the reader has not got there.
    std::atomic<std::uint64_t> waits_at_read{0};
    std::atomic<bool> reading{false};
    std::atomic<bool> delivered{false};
    auto reader =
        pool.spawn([](tcp_listener* from, reactor* on, std::atomic<std::uint64_t>& waits,
                      std::atomic<bool>& started, std::atomic<bool>& done) -> task<std::size_t> {
          tcp_stream peer = co_await from->accept();
          std::array<std::byte, 16> buffer{};
          waits.store(on->stats().blocking_waits);
          started.store(true);
          const std::size_t got = co_await peer.read_some(buffer);
          done.store(true);
          co_return got;
        }(&listener, &owner, waits_at_read, reading, delivered));
    const int client = canopy::testing::connect_raw(listener.local_endpoint());
    REQUIRE(canopy::testing::eventually([&] { return reading.load(); }));
    // The receive goes to the kernel when the worker runs out of work (its
    // wait as the poller submits it): only then does the spinner start.
    REQUIRE(canopy::testing::eventually(
        [&] { return owner.stats().blocking_waits > waits_at_read.load(); }));
    // From here the only worker never runs out of work until the read ends,
    // so it never waits on the ring: only its looks between tasks can reap.
    std::atomic<long> spun{0};
    auto spinner = pool.spawn([](std::atomic<bool>& stop, std::atomic<long>& rounds) -> task<void> {
      while (!stop.load()) {
        co_await canopy::yield_now();
        rounds.fetch_add(1);
      }
    }(delivered, spun));
    REQUIRE(canopy::testing::eventually([&] { return spun.load() >= 1000; }));
    const long rounds_at_send = spun.load();
    const char byte = 'x';
    REQUIRE(::send(client, &byte, 1, MSG_NOSIGNAL) == 1);
    CHECK(reader.get() == 1);
    spinner.get();
    const long rounds = spun.load() - rounds_at_send;
    MESSAGE("spinner rounds from the send until the read completed: " << rounds);
    CHECK(rounds < static_cast<long>(config->driver_poll_interval) / 2);
    ::close(client);
  }
  config.reset();
  CHECK(canopy::testing::open_fd_count() == fds_before);  // the ring, epoll, eventfd, sockets
}
