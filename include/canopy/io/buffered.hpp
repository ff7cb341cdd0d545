// <canopy/io/buffered.hpp> — buffered reading and framing over a Canopy
// stream: canopy::io::buffered_reader (lines, delimited records, exact
// counts, length-prefixed frames) and the writes that go with it
// (canopy::io::write_all for text, canopy::io::write_frame).
//
//   canopy::io::buffered_reader reader(std::move(stream));   // a tcp_stream, unix_stream, ...
//   while (std::optional<std::string> line = co_await reader.read_line(4096)) {
//     co_await canopy::io::write_all(reader.stream(), *line + "\n");
//   }
//
// Streams: any type with task<std::size_t> read_some(std::span<std::byte>,
// std::error_code&) (the concept canopy::io::readable_stream), held by
// value (the reader owns it) or by reference (buffered_reader<tcp_stream&>);
// the writes take any type with write_all(std::span<const std::byte>) in
// both error forms. Text is std::string_view, std::string or
// std::span<char> as well as std::span<std::byte>.
//
// Who may call, threads: one read at a time on a reader, awaited inside a
// canopy::task (any worker; the reader is not thread-safe, and must not
// move while a read runs). Writes go to stream() and may run in another
// task meanwhile, as the stream allows one operation per direction.
//
// Errors: each read has a std::error_code& form, which never throws for
// I/O errors, and a throwing form (std::system_error with the same code),
// as the stream's. A read that fails consumes nothing, so the reader stays
// usable:
//   * std::errc::message_size — a line or record longer than its maximum
//     (read_line, read_until), or a frame whose length header exceeds
//     max_size (read_frame; the stream is then out of step: close it).
//     skip_until('\n') drops an over-long line and reading goes on;
//   * canopy::io::errc::unexpected_eof — the stream ended inside an exact
//     read (read_exact) or a frame; the bytes that came stay buffered();
//   * the stream's own errors (ECONNRESET, operation_canceled, ...).
// EOF is not an error: read_line and read_until return a last record that
// has no delimiter as it is (read_until's then lacks the delimiter), then
// std::nullopt; read_frame returns std::nullopt at EOF between frames;
// read_some returns 0.
//
// Cancel-safety: the buffer lives in the reader, so a read that loses a
// race (with_timeout(d, reader.read_line(n)), a cancel through its task's
// handle while it waits) loses no bytes: the next read starts where it
// would have. A read that completed before a cancel landed consumed its
// record: what the task then returns its handle discards (join_handle's
// contract), so race the read instead to keep it. Only
// skip_until, which discards as it goes, may have dropped a prefix.
// read_exact(n) and read_frame keep the whole record in the buffer until it
// is complete (the buffer grows to it, and shrinks back once it is empty).
//
// Writes do not copy the text: it must outlive the co_await (as a span's
// bytes must). write_frame sends the length header and the payload as one
// gathered write (sendmsg) on a stream that has one (tcp_stream,
// unix_stream: write_all(std::span<const std::span<const std::byte>>,
// std::error_code&)); on another stream it copies them into one buffer.
//
// Reference (namespace canopy::io; every read has a [, error] form as above):
//   buffered_reader<Stream>(stream, capacity = 4096): Stream a
//     readable_stream, by value (moved in) or a reference type; the buffer
//     starts at capacity (0 counts as 1) and grows for a long record.
//     Movable between reads: a moved-from reader holds no bytes (one that
//     owned its stream has a moved-from stream: bad_file_descriptor).
//   stream() -> the stream (writes, shutdown, close; reading it directly
//     skips what is buffered). buffered() -> the bytes read and not yet
//     returned; consume(count) drops count of them (count <= their size).
//   co_await read_some(span of bytes or chars) -> std::size_t: buffered
//     bytes first, else one read of the stream; 0: EOF.
//   co_await read_exact(span) -> void, read_exact(count) -> std::string:
//     exactly that many bytes, or errc::unexpected_eof.
//   co_await read_until(delimiter, max) -> std::optional<std::string>: the
//     bytes through the delimiter (included) if it comes within max bytes,
//     else std::errc::message_size.
//   co_await read_line(max_length) -> std::optional<std::string>: the next
//     line without its "\n" (and a "\r" before it), at most max_length
//     bytes, else std::errc::message_size.
//   co_await skip_until(delimiter) -> bool: drops bytes through the next
//     delimiter without buffering them all; false at EOF.
//   co_await read_frame(max_size) -> std::optional<std::vector<std::byte>>:
//     a 4-byte big-endian length, then that payload.
//   co_await write_all(stream, text[, error]): text a std::string_view (a
//     std::string, a literal) or a std::span<char> / std::span<const char>.
//   co_await write_frame(stream, payload[, error], max_size = 2^32 - 1):
//     payload bytes or a std::string_view; over max_size:
//     std::errc::message_size and nothing is written.
//   readable_stream, writable_stream: the concepts above.
// The fibers' forms, with the same results and errors, are in
// <canopy/io/fiber.hpp>: canopy::this_fiber::read_line(reader, max) and
// the rest (link canopy-fiber).
// Link canopy.
#pragma once

#include "../detail/io/buffered_reader.hpp"
#include "../detail/io/stream_writes.hpp"
#include "../io.hpp"
