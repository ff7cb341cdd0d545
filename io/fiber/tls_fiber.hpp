// tls_fiber — the fiber forms of tls_stream's operations (io/tls/tls_stream.hpp):
// handshake, read_some, write_all and shutdown, blocking only the calling
// fiber (its worker runs other tasks meanwhile), for a tls_stream over a
// tcp_stream or a unix_stream. The same steps as the task forms, moving
// the encrypted bytes with the next layer's this_fiber::read_some and
// write_all (io/fiber/fiber_io.hpp), so they run on both reactor backends.
// (<canopy/io/tls_fiber.hpp> shows them in use.)
//
// Only inside a fiber (elsewhere std::logic_error, this_fiber's rule). The
// contract is the task forms' (<canopy/io/tls.hpp>): handshake first and
// alone; then one read and one write at once (a fiber and a task may share
// a stream, one per direction); the same errors, the std::error_code& and
// throwing forms. The cancel rule reads "a fiber cancelled or dropped"
// for "a task cancelled": one that unwinds from handshake, write_all or
// shutdown, or from a read's rare send, leaves the stream unusable; one
// that unwinds from a read's wait for the socket loses nothing. Built
// where both TLS and fibers are (canopy_tls_fiber).
#pragma once

#include <cstddef>
#include <span>
#include <system_error>

#include "../tcp.hpp"
#include "../tls/tls_stream.hpp"
#include "../unix.hpp"

namespace canopy::this_fiber {

void handshake(io::tls_stream<io::tcp_stream>& stream, std::error_code& error);
std::size_t read_some(io::tls_stream<io::tcp_stream>& stream, std::span<std::byte> buffer,
                      std::error_code& error);
void write_all(io::tls_stream<io::tcp_stream>& stream, std::span<const std::byte> data,
               std::error_code& error);
void shutdown(io::tls_stream<io::tcp_stream>& stream, std::error_code& error);
void handshake(io::tls_stream<io::tcp_stream>& stream);
std::size_t read_some(io::tls_stream<io::tcp_stream>& stream, std::span<std::byte> buffer);
void write_all(io::tls_stream<io::tcp_stream>& stream, std::span<const std::byte> data);
void shutdown(io::tls_stream<io::tcp_stream>& stream);

void handshake(io::tls_stream<io::unix_stream>& stream, std::error_code& error);
std::size_t read_some(io::tls_stream<io::unix_stream>& stream, std::span<std::byte> buffer,
                      std::error_code& error);
void write_all(io::tls_stream<io::unix_stream>& stream, std::span<const std::byte> data,
               std::error_code& error);
void shutdown(io::tls_stream<io::unix_stream>& stream, std::error_code& error);
void handshake(io::tls_stream<io::unix_stream>& stream);
std::size_t read_some(io::tls_stream<io::unix_stream>& stream, std::span<std::byte> buffer);
void write_all(io::tls_stream<io::unix_stream>& stream, std::span<const std::byte> data);
void shutdown(io::tls_stream<io::unix_stream>& stream);

}  // namespace canopy::this_fiber

namespace canopy::io {
// The name these forms had before they joined canopy::this_fiber
// (io/fiber/fiber_io.hpp).
namespace this_fiber = canopy::this_fiber;
}  // namespace canopy::io
