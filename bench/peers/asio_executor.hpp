#pragma once

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <utility>

namespace canopy::bench {

// The Boost.Asio peer: a thread_pool with `worker_count` threads.
//
// boost::asio::post pushes onto the back of the pool's one mutex-protected
// FIFO queue, from outside the pool and from inside a handler alike (with a
// single thread, a post from a handler goes to a thread-private queue that is
// spliced onto the back of the shared one when the handler returns). So a
// handler that re-posts itself runs after the handlers already queued: that
// is what "yield" means for Asio.
// A handler must not block waiting for another handler (a pool thread that
// waits is a thread lost, and all of them waiting is a deadlock), so
// fork/join workloads use continuation passing.
class asio_executor {
 public:
  explicit asio_executor(unsigned worker_count) : pool_(worker_count) {}

  template <typename Task>
  void submit(Task&& task) {
    boost::asio::post(pool_, std::forward<Task>(task));
  }

 private:
  boost::asio::thread_pool pool_;
};

}  // namespace canopy::bench
