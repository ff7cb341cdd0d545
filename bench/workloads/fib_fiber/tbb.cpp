#include "workloads/fib/tbb.hpp"

#include "workloads/registry.hpp"

// fib_fiber is fib written with fibers. oneTBB has none, so this peer
// runs the same implementation as its fib.
namespace canopy::bench {
namespace {

const implementation_registration registered{"fib_fiber", peer::tbb, &make_fib_on_tbb};

}  // namespace
}  // namespace canopy::bench
