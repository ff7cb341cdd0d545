// The buffered reader and the writes beside it (io/buffered_reader.hpp,
// io/stream_writes.hpp): lines that arrive a byte at a time, CRLF, a line
// past its maximum (a clear error, and the reader goes on), EOF inside a
// line, exact reads across the buffer's end, frames, and reads raced
// against with_timeout that must lose no bytes. Each case runs on both
// backends, or on the one CANOPY_IO_BACKEND names (run.sh runs this binary
// once per backend); descriptors are counted before and after.
#include "io/buffered_reader.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/fiber/buffered_fiber.hpp"
#include "io/io.hpp"
#include "io/stream_writes.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/test_support.hpp"
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
using namespace std::chrono_literals;

namespace {

// Blocking send of all of `text` on `fd`, in pieces of `piece` bytes.
void send_text(int fd, std::string_view text, std::size_t piece = 0) {
  piece = piece == 0 ? text.size() : piece;
  for (std::size_t done = 0; done < text.size();) {
    const std::size_t size = std::min(piece, text.size() - done);
    const ssize_t sent = ::send(fd, text.data() + done, size, MSG_NOSIGNAL);
    REQUIRE(sent > 0);
    done += static_cast<std::size_t>(sent);
  }
}

using body = std::function<void(executor&, tcp_stream&, int peer)>;

// Runs `test` on every backend under test with an accepted stream and the
// blocking peer socket (the test thread's); checks no descriptor is left.
void on_each_backend(const body& test, std::size_t workers = 2) {
  for (const io_backend backend : backends_under_test()) {
    INFO("backend " << std::string(to_string(backend)));
    const std::size_t fds_before = open_fd_count();
    {
      auto config = config_for(backend, workers);
      if (!config) {
        continue;
      }
      executor pool(std::move(*config));
      canopy::io::reactor_timers timers(pool);
      tcp_listener listener = tcp_listener::bind(reactor::of(pool), endpoint::loopback_v4(0));
      const int peer = connect_raw(listener.local_endpoint());
      tcp_stream stream = canopy::block_on(pool, listener.accept());
      test(pool, stream, peer);
      ::close(peer);
    }
    CHECK(open_fd_count() == fds_before);
  }
}

// Every line until EOF.
task<std::vector<std::string>> all_lines(buffered_reader<tcp_stream&>& reader, std::size_t max) {
  std::vector<std::string> lines;
  while (std::optional<std::string> line = co_await reader.read_line(max)) {
    lines.push_back(std::move(*line));
  }
  co_return lines;
}

}  // namespace

TEST_CASE("read_line: lines sent a byte at a time, LF and CRLF, a bare CR kept, EOF") {
  const canopy::testing::watchdog guard("byte-sized lines", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    std::string sent;
    std::vector<std::string> expected;
    for (int index = 0; index < 200; ++index) {
      std::string line = "line " + std::to_string(index) + (index % 7 == 0 ? "\ra" : "");
      expected.push_back(line);
      sent += line + (index % 2 == 0 ? "\r\n" : "\n");
    }
    expected.emplace_back();  // an empty line
    sent += "\n";
    std::thread writer([&] {
      send_text(peer, sent, 1);
      ::shutdown(peer, SHUT_WR);
    });
    // A small buffer, so that lines also straddle its end.
    buffered_reader<tcp_stream&> reader(stream, 16);
    const std::vector<std::string> got = canopy::block_on(pool, all_lines(reader, 64));
    writer.join();
    CHECK(got == expected);
  });
}

TEST_CASE("read_line: a line past its maximum is errc::message_size; skip_until goes on") {
  const canopy::testing::watchdog guard("long lines", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    send_text(peer, "short\n" + std::string(100, 'x') + "\nabcdefghij\r\nabcdefghijk\nafter");
    ::shutdown(peer, SHUT_WR);
    buffered_reader<tcp_stream&> reader(stream, 32);
    canopy::block_on(pool, [](buffered_reader<tcp_stream&>& reader) -> task<void> {
      CHECK(co_await reader.read_line(10) == "short");
      std::error_code error;
      CHECK_FALSE(co_await reader.read_line(10, error));
      CHECK(error == std::errc::message_size);
      CHECK(reader.buffered().size() >= 12);  // nothing consumed
      CHECK(reader.buffered()[0] == std::byte{'x'});
      bool threw = false;
      try {
        (void)co_await reader.read_line(10);
      } catch (const std::system_error& failure) {
        threw = failure.code() == std::errc::message_size;
      }
      CHECK(threw);
      CHECK(co_await reader.skip_until('\n'));
      CHECK(co_await reader.read_line(10) == "abcdefghij");  // 10 bytes and CRLF fit
      CHECK_FALSE(co_await reader.read_line(10, error));
      CHECK(error == std::errc::message_size);
      CHECK(co_await reader.read_until('\n', 12) == "abcdefghijk\n");
      CHECK(co_await reader.read_line(10) == "after");  // the last line, no '\n'
      CHECK_FALSE(co_await reader.read_line(10, error));
      CHECK_FALSE(error);
      CHECK_FALSE(co_await reader.skip_until('\n'));  // EOF
    }(reader));
  });
}

TEST_CASE("read_until: the delimiter included, a last record without it, then nullopt") {
  const canopy::testing::watchdog guard("records", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    send_text(peer, "a;bb;;ccc");
    ::shutdown(peer, SHUT_WR);
    buffered_reader<tcp_stream&> reader(stream);
    canopy::block_on(pool, [](buffered_reader<tcp_stream&>& reader) -> task<void> {
      CHECK(co_await reader.read_until(';', 10) == "a;");
      CHECK(co_await reader.read_until(';', 10) == "bb;");
      CHECK(co_await reader.read_until(';', 10) == ";");
      std::error_code error;
      CHECK_FALSE(co_await reader.read_until(';', 2, error));  // "ccc" is longer than 2
      CHECK(error == std::errc::message_size);
      CHECK(co_await reader.read_until(';', 10) == "ccc");
      CHECK_FALSE(co_await reader.read_until(';', 10));
    }(reader));
  });
}

TEST_CASE("read_exact across the buffer's end, read_some after it, EOF inside an exact read") {
  const canopy::testing::watchdog guard("exact reads", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    std::string sent;
    for (int index = 0; index < 300; ++index) {
      sent += static_cast<char>('a' + index % 26);
    }
    std::thread writer([&] {
      send_text(peer, sent, 7);
      ::shutdown(peer, SHUT_WR);
    });
    buffered_reader<tcp_stream&> reader(stream, 16);
    const std::string got =
        canopy::block_on(pool, [](buffered_reader<tcp_stream&>& reader) -> task<std::string> {
          std::string all = co_await reader.read_exact(std::size_t{10});
          std::vector<std::byte> bytes(50);  // more than the buffer holds
          co_await reader.read_exact(bytes);
          all.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          std::string text(40, '\0');
          co_await reader.read_exact(std::span<char>(text));
          all += text;
          std::array<char, 3> small{};
          const std::size_t some = co_await reader.read_some(std::span<char>(small));
          CHECK(some >= 1);
          all.append(small.data(), some);
          std::string rest(300 - all.size() + 5, '\0');  // 5 more than the stream has
          std::error_code error;
          co_await reader.read_exact(std::span<char>(rest), error);
          CHECK(error == canopy::io::errc::unexpected_eof);
          CHECK(reader.buffered().size() == rest.size() - 5);  // kept
          all.append(reinterpret_cast<const char*>(reader.buffered().data()),
                     reader.buffered().size());
          reader.consume(reader.buffered().size());
          CHECK(co_await reader.read_some(std::span<char>(small)) == 0);
          co_return all;
        }(reader));
    writer.join();
    CHECK(got == sent);
  });
}

TEST_CASE("frames: write_frame and read_frame, a length past max_size, EOF inside a frame") {
  const canopy::testing::watchdog guard("frames", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    // The writer is a Canopy stream too: the peer's descriptor adopted.
    std::error_code adopted;
    const int writer_fd = ::dup(peer);
    REQUIRE(::fcntl(writer_fd, F_SETFL, ::fcntl(writer_fd, F_GETFL) | O_NONBLOCK) == 0);
    tcp_stream writer(reactor::of(pool), writer_fd, adopted);
    REQUIRE_FALSE(adopted);
    const std::string big(70000, 'z');
    canopy::block_on(pool, [](tcp_stream& out, const std::string& big) -> task<void> {
      co_await canopy::io::write_frame(out, "");
      co_await canopy::io::write_frame(out, "hello");
      co_await canopy::io::write_frame(out, big);
      std::error_code error;
      co_await canopy::io::write_frame(out, "too big", error, 3);
      CHECK(error == std::errc::message_size);  // and nothing was written
      co_await canopy::io::write_all(out, std::string_view("\x00\x00\x08\x00", 4));  // 2048
      co_await canopy::io::write_all(out, std::string(2048, 'q'));
      co_await canopy::io::write_frame(out, std::string(5000, 'w'));  // past max_size below
    }(writer, big));
    writer.close();
    send_text(peer, std::string_view("\x00\x00\x00\x09"
                                     "abc",
                                     7));  // 3 of 9 bytes
    ::shutdown(peer, SHUT_WR);
    buffered_reader<tcp_stream&> reader(stream, 64);
    canopy::block_on(
        pool, [](buffered_reader<tcp_stream&>& reader, const std::string& big) -> task<void> {
          const auto text = [](const std::optional<std::vector<std::byte>>& frame) {
            REQUIRE(frame);
            return std::string(reinterpret_cast<const char*>(frame->data()), frame->size());
          };
          CHECK(text(co_await reader.read_frame(100000)).empty());
          CHECK(text(co_await reader.read_frame(100000)) == "hello");
          CHECK(text(co_await reader.read_frame(100000)) == big);
          CHECK(text(co_await reader.read_frame(100000)) == std::string(2048, 'q'));
          std::error_code error;
          CHECK_FALSE(co_await reader.read_frame(4096, error));
          CHECK(error == std::errc::message_size);
          CHECK(reader.buffered().size() >= 4);  // the header is still there
          CHECK(text(co_await reader.read_frame(8192)) == std::string(5000, 'w'));
          CHECK_FALSE(co_await reader.read_frame(100, error));
          CHECK(error == canopy::io::errc::unexpected_eof);
          CHECK(reader.buffered().size() == 7);
        }(reader, big));
  });
}

TEST_CASE("a read_line that times out loses no bytes: the next one returns the whole line") {
  const canopy::testing::watchdog guard("timed lines", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    buffered_reader<tcp_stream&> reader(stream);
    send_text(peer, "hel");
    const auto first = canopy::block_on(pool, canopy::with_timeout(30ms, reader.read_line(100)));
    REQUIRE_FALSE(first);
    CHECK(first.error() == canopy::io::errc::timed_out);
    CHECK(reader.buffered().size() == 3);  // the part that came is kept
    send_text(peer, "lo\r\n");
    CHECK(canopy::block_on(pool, reader.read_line(100)) == "hello");
  });
}

TEST_CASE("read_line raced against short timeouts loses and repeats nothing") {
  const canopy::testing::watchdog guard("raced lines", 120);
  const long count = std::max(500L, 4000L / canopy::testing::stress_divisor());
  on_each_backend(
      [count](executor& pool, tcp_stream& stream, int peer) {
        std::string sent;
        for (long index = 0; index < count; ++index) {
          sent += "message " + std::to_string(index) + std::string(index % 97, '.') + "\n";
        }
        // After every quarter of the text the writer also holds back until
        // the reader has lost a race, so that the races run however the two
        // are scheduled (a slow reader otherwise always finds a line waiting).
        std::atomic<long> lost_races{0};
        std::thread writer([&] {
          std::minstd_rand random(7);
          const std::size_t quarter = sent.size() / 4;
          for (std::size_t done = 0; done < sent.size();) {
            const std::size_t size = std::min<std::size_t>(1 + random() % 64, sent.size() - done);
            send_text(peer, std::string_view(sent).substr(done, size));
            if (done / quarter != (done + size) / quarter) {
              // relaxed: a count only; nothing is published through it.
              const long before = lost_races.load(std::memory_order_relaxed);
              const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
              while (lost_races.load(std::memory_order_relaxed) == before &&
                     std::chrono::steady_clock::now() < give_up) {
                std::this_thread::sleep_for(std::chrono::microseconds(200));
              }
            }
            done += size;
            std::this_thread::sleep_for(std::chrono::microseconds(random() % 20));
          }
          ::shutdown(peer, SHUT_WR);
        });
        buffered_reader<tcp_stream&> reader(stream, 32);
        const std::string got = canopy::block_on(
            pool,
            [](buffered_reader<tcp_stream&>& reader, std::atomic<long>& lost) -> task<std::string> {
              std::minstd_rand random(11);
              std::string all;
              for (;;) {
                const auto line = co_await canopy::with_timeout(
                    std::chrono::microseconds(random() % 41), reader.read_line(256));
                if (!line) {
                  lost.fetch_add(1, std::memory_order_relaxed);  // a count only
                  continue;
                }
                if (!*line) {
                  co_return all;
                }
                all += **line + "\n";
              }
            }(reader, lost_races));
        writer.join();
        MESSAGE(lost_races.load() << " reads lost their race");
        CHECK(lost_races.load() > 0);
        CHECK(got == sent);
      },
      2);
}

TEST_CASE("the reader owns a unix_stream; write_all takes text forms") {
  const canopy::testing::watchdog guard("unix", 60);
  for (const io_backend backend : backends_under_test()) {
    auto config = config_for(backend, 1);
    if (!config) {
      continue;
    }
    executor pool(std::move(*config));
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    std::error_code error;
    canopy::io::unix_stream left(reactor::of(pool), fds[0], error);
    REQUIRE_FALSE(error);
    canopy::io::unix_stream right(reactor::of(pool), fds[1], error);
    REQUIRE_FALSE(error);
    buffered_reader reader(std::move(right));
    canopy::block_on(pool,
                     [](canopy::io::unix_stream& out,
                        buffered_reader<canopy::io::unix_stream>& in) -> task<void> {
                       co_await canopy::io::write_all(out, "literal\n");
                       const std::string owned = "string\n";
                       co_await canopy::io::write_all(out, owned);
                       std::string spanned = "span\n";
                       co_await canopy::io::write_all(out, std::span<char>(spanned));
                       CHECK(co_await in.read_line(16) == "literal");
                       CHECK(co_await in.read_line(16) == "string");
                       CHECK(co_await in.read_line(16) == "span");
                       co_await canopy::io::write_all(in.stream(),
                                                      "back\n");  // the other direction
                       std::array<char, 5> echo{};
                       CHECK(co_await out.read_some(std::as_writable_bytes(std::span(echo))) >= 1);
                     }(left, reader));
  }
}

TEST_CASE("fiber forms: lines, a line past its maximum, exact reads, frames, text writes") {
  const canopy::testing::watchdog guard("fiber forms", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    const auto frame = [](std::string_view payload) {
      std::error_code error;
      const std::vector<std::byte> bytes = canopy::io::detail::make_frame(
          std::as_bytes(std::span(payload.data(), payload.size())), 1000, error);
      REQUIRE_FALSE(error);
      return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    };
    const std::string big(300, 'b');
    std::thread writer([&] {
      send_text(peer,
                "one\r\ntwo\n" + std::string(40, 'x') + "\nthree\nexactabc" + frame("payload") +
                    frame(big) + frame(big) + "tail",
                3);
      ::shutdown(peer, SHUT_WR);
    });
    buffered_reader<tcp_stream&> reader(stream, 16);
    auto done = pool.spawn(canopy::fiber([&reader, &stream, &big] {
      namespace fiber_io = canopy::this_fiber;
      CHECK(fiber_io::read_line(reader, 10) == "one");
      CHECK(fiber_io::read_until(reader, '\n', 10) == "two\n");
      std::error_code error;
      CHECK_FALSE(fiber_io::read_line(reader, 10, error));
      CHECK(error == std::errc::message_size);
      CHECK(fiber_io::skip_until(reader, '\n'));
      CHECK(fiber_io::read_line(reader, 10) == "three");
      std::string exact(5, '\0');
      fiber_io::read_exact(reader, std::span<char>(exact));
      CHECK(exact == "exact");
      CHECK(fiber_io::read_exact(reader, 3) == "abc");  // the string form
      const auto payload = fiber_io::read_frame(reader, 1000);
      REQUIRE(payload);
      CHECK(std::string(reinterpret_cast<const char*>(payload->data()), payload->size()) ==
            "payload");
      CHECK_FALSE(fiber_io::read_frame(reader, 100, error));
      CHECK(error == std::errc::message_size);
      CHECK(fiber_io::read_frame(reader, 1000)->size() == big.size());
      std::array<std::byte, 4> head{};
      fiber_io::read_exact(reader, head);  // the next frame's header, by hand
      std::array<std::byte, 300> body{};   // as large as the buffer's capacity: read straight
      std::size_t got = 0;
      while (got < body.size()) {
        got += fiber_io::read_some(reader, std::span(body).subspan(got));
      }
      CHECK(body[299] == std::byte{'b'});
      CHECK(fiber_io::read_until(reader, '\n', 10) == "tail");
      CHECK_FALSE(fiber_io::read_line(reader, 10, error));
      CHECK_FALSE(error);
      std::array<std::byte, 1> more{};
      fiber_io::read_exact(reader, more, error);
      CHECK(error == canopy::io::errc::unexpected_eof);
      fiber_io::write_all(stream, "bye\n");
      fiber_io::write_frame(stream, "f");
    }));
    done.get();
    writer.join();
    std::array<char, 9> back{};
    std::size_t got = 0;
    while (got < back.size()) {
      const ssize_t count = ::recv(peer, back.data() + got, back.size() - got, 0);
      REQUIRE(count > 0);
      got += static_cast<std::size_t>(count);
    }
    CHECK(std::string_view(back.data(), back.size()) == std::string_view("bye\n\0\0\0\1f", 9));
  });
}

TEST_CASE("a fiber cancelled inside read_line loses no bytes: the next read returns the line") {
  const canopy::testing::watchdog guard("cancelled fiber", 60);
  on_each_backend([](executor& pool, tcp_stream& stream, int peer) {
    buffered_reader<tcp_stream&> reader(stream, 16);
    send_text(peer, "a line longer than the buffer, in two");
    std::atomic<bool> started{false};
    auto fiber = pool.spawn(canopy::fiber([&reader, &started] {
      // release: pairs with the acquire load below.
      started.store(true, std::memory_order_release);
      (void)canopy::this_fiber::read_line(reader, 100);
    }));
    // acquire: pairs with the release store in the fiber.
    REQUIRE(canopy::testing::eventually([&] { return started.load(std::memory_order_acquire); }));
    // The fiber took what came from the socket (its receive queue is
    // empty), buffered it, and waits for the rest of the line.
    const int fd = stream.native_handle();
    REQUIRE(canopy::testing::eventually([fd] {
      int queued = -1;
      return ::ioctl(fd, FIONREAD, &queued) == 0 && queued == 0;
    }));
    std::this_thread::sleep_for(20ms);
    fiber.cancel();
    CHECK_THROWS_AS(fiber.get(), canopy::task_cancelled);
    MESSAGE(reader.buffered().size() << " bytes buffered when the fiber was cancelled");
    send_text(peer, " parts\n");
    CHECK(canopy::block_on(pool, reader.read_line(100)) ==
          "a line longer than the buffer, in two parts");
  });
}
