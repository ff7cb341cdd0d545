#include "workloads/fib/asio.hpp"

#include "workloads/registry.hpp"

// fib_fiber is fib written with fibers. Boost.Asio has none, so this peer
// runs the same implementation as its fib.
namespace canopy::bench {
namespace {

const implementation_registration registered{"fib_fiber", peer::asio, &make_fib_on_asio};

}  // namespace
}  // namespace canopy::bench
