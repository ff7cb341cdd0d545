// <canopy/embed/asio.hpp> — Canopy inside a Boost.Asio program and the
// other way round: an Asio executor that runs handlers as Canopy tasks, and
// a Canopy executor driven from an io_context (docs/embedding.md). The
// contract is at the top of detail/embed/asio.hpp. Needs Boost.Asio's
// headers (libboost-dev); link canopy.
#pragma once

#include "../canopy.hpp"
#include "../detail/embed/asio.hpp"
