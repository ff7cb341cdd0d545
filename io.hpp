// <canopy/io.hpp> — readiness I/O on a Canopy executor: the epoll reactor,
// waits for tasks, fibers and callbacks, TCP (io/io.hpp; docs/io.md).
// Installed as <includedir>/canopy/io.hpp; in the source tree through the
// include/canopy link, as canopy.hpp. Link every Canopy library.
#pragma once

#include "canopy.hpp"
#include "io/io.hpp"
