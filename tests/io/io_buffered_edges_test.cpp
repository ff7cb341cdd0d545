// The buffered reader's edges (io/buffered_reader.hpp,
// io/fiber/buffered_fiber.hpp): the fibers' forms take the text types the
// task forms take, and a moved-from reader reads on as a new one would
// (its stream's error, no crash). Each case runs on both backends, or on
// the one CANOPY_IO_BACKEND names; descriptors are counted before and after.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "coroutine/coroutine.hpp"
#include "io/buffered_reader.hpp"
#include "io/fiber/buffered_fiber.hpp"
#include "io/io.hpp"
#include "io/stream_writes.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::buffered_reader;
using canopy::io::endpoint;
using canopy::io::io_backend;
using canopy::io::reactor;
using canopy::io::tcp_listener;
using canopy::io::tcp_stream;
using canopy::testing::backends_under_test;
using canopy::testing::config_for;
using canopy::testing::connect_raw;
using canopy::testing::open_fd_count;

namespace {

// Blocking send of all of `text` on `fd`.
void send_text(int fd, std::string_view text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t sent = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    REQUIRE(sent > 0);
    done += static_cast<std::size_t>(sent);
  }
}

using body = std::function<void(executor&, tcp_stream&, int peer)>;

// Runs `test` on every backend under test with an accepted stream and the
// blocking peer socket (the test thread's); checks no descriptor is left.
void on_each_backend(const body& test) {
  for (const io_backend backend : backends_under_test()) {
    INFO("backend " << std::string(to_string(backend)));
    const std::size_t fds_before = open_fd_count();
    {
      auto config = config_for(backend, 2);
      if (!config) {
        continue;
      }
      executor pool(std::move(*config));
      tcp_listener listener = tcp_listener::bind(reactor::of(pool), endpoint::loopback_v4(0));
      const int peer = connect_raw(listener.local_endpoint());
      tcp_stream stream = canopy::block_on(pool, listener.accept());
      test(pool, stream, peer);
      ::close(peer);
    }
    CHECK(open_fd_count() == fds_before);
  }
}

}  // namespace

TEST_CASE("fiber forms take chars as the task forms do: read_some and write_all of a span<char>") {
  const canopy::testing::watchdog guard("fiber chars", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    send_text(peer, "chars");
    buffered_reader<tcp_stream&> reader(stream, 16);
    auto done = pool.spawn(canopy::fiber([&reader, &stream] {
      std::array<char, 5> into{};
      std::size_t got = 0;
      while (got < into.size()) {
        got += canopy::this_fiber::read_some(reader, std::span<char>(into).subspan(got));
      }
      CHECK(std::string_view(into.data(), into.size()) == "chars");
      std::error_code error;
      CHECK(canopy::this_fiber::read_some(reader, std::span<char>(into), error) == 0);  // EOF
      CHECK_FALSE(error);
      std::string text = "span\n";
      canopy::this_fiber::write_all(stream, std::span<char>(text));
      const std::span<const char> constant(text.data(), 3);
      canopy::this_fiber::write_all(stream, constant, error);
      CHECK_FALSE(error);
    }));
    ::shutdown(peer, SHUT_WR);
    done.get();
    std::array<char, 8> back{};
    std::size_t got = 0;
    while (got < back.size()) {
      const ssize_t count = ::recv(peer, back.data() + got, back.size() - got, 0);
      REQUIRE(count > 0);
      got += static_cast<std::size_t>(count);
    }
    CHECK(std::string_view(back.data(), back.size()) == "span\nspa");
  });
}

TEST_CASE("a moved-from reader reads on as a new one would; the moved-to one keeps the bytes") {
  const canopy::testing::watchdog guard("moved reader", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    send_text(peer, "one\ntwo\n");
    // By value: the stream moves with the reader; the moved-from one has a
    // closed stream and no bytes (it used to keep positions into a buffer
    // it no longer had, and crashed in its next read).
    buffered_reader owner(std::move(stream), 8);
    CHECK(canopy::block_on(pool, owner.read_line(10)) == "one");
    buffered_reader moved(std::move(owner));
    std::error_code error;
    // NOLINTNEXTLINE(bugprone-use-after-move): the moved-from state is the subject
    CHECK_FALSE(canopy::block_on(pool, owner.read_line(10, error)));
    CHECK(error == std::errc::bad_file_descriptor);
    CHECK(owner.buffered().empty());
    CHECK(canopy::block_on(pool, moved.read_line(10)) == "two");

    // By reference: the moved-to reader has the bytes the other buffered,
    // the moved-from one is empty and reads on from the stream.
    send_text(peer, "three\n");
    buffered_reader<tcp_stream&> first(moved.stream(), 4);
    std::array<std::byte, 1> letter{};
    canopy::block_on(pool, first.read_exact(letter));  // 't'; "hre" stays buffered
    CHECK(letter[0] == std::byte{'t'});
    buffered_reader<tcp_stream&> second(std::move(first));
    CHECK(first.buffered().empty());  // NOLINT(bugprone-use-after-move)
    CHECK(canopy::block_on(pool, second.read_line(10)) == "hree");
    send_text(peer, "four\n");
    CHECK(canopy::block_on(pool, first.read_line(10)) == "four");
  });
}
