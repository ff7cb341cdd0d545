#include "workloads/fib/asio.hpp"

#include "workloads/registry.hpp"

// fib_join is fib written with a join of two callables. Boost.Asio has no
// join (a handler must not wait for another), so this peer runs the same
// continuation-passing implementation as its fib.
namespace canopy::bench {
namespace {

const implementation_registration registered{"fib_join", peer::asio, &make_fib_on_asio};

}  // namespace
}  // namespace canopy::bench
