// <canopy/io/fiber.hpp> — the I/O and timer calls of <canopy/io.hpp> for
// fibers, in the one namespace of a fiber's calls (beside yield, await and
// the rest of <canopy/fiber.hpp>): canopy::this_fiber::{readable, writable,
// connect, accept, read_some, write_all, resolve, ...} and
// canopy::this_fiber::{sleep_for, sleep_until}, and the buffered reads and text/frame writes of
// <canopy/io/buffered.hpp> (this_fiber::read_line(reader, max), read_until,
// read_exact, read_some, skip_until, read_frame, write_all(stream, text),
// write_frame).
// Each blocks only the calling fiber; outside a fiber they throw
// std::logic_error. Same error convention as the task forms. Link
// canopy-fiber. canopy::io::this_fiber, these calls' earlier name, is an
// alias of canopy::this_fiber, kept so that code written against it still
// compiles.
#pragma once

#include "../detail/io/fiber/buffered_fiber.hpp"
#include "../detail/io/fiber/fiber_io.hpp"
#include "../detail/io/fiber/resolve_fiber.hpp"
#include "../fiber.hpp"
#include "../io.hpp"
