// completion_request — what an io_uring completion request asks of the
// kernel: the operation, the descriptor, the caller's memory. Made by
// completion_op (completion_op.hpp), queued by the io_uring backend
// (uring_backend.hpp). Internal (canopy::io::detail).
#pragma once

#include <cstddef>
#include <cstdint>

namespace canopy::io::detail {

enum class completion_kind : std::uint8_t {
  receive,        // recv: at least one byte, 0 at EOF
  send_some,      // send: what the socket takes, at least one byte
  send_all,       // send until every byte went
  accept,         // accept4(SOCK_NONBLOCK | SOCK_CLOEXEC): the new descriptor
  connect,        // connect(2) to `address`
  send_gathered,  // sendmsg until every byte of a gather_cursor (`data`) went
};

struct completion_request {
  completion_kind kind = completion_kind::receive;
  int fd = -1;
  // The buffer; the sockaddr for connect; for send_gathered, the
  // gather_cursor (completion_op) or the msghdr it built (the submitted
  // request, whose size is then unused).
  void* data = nullptr;
  std::size_t size = 0;  // its length
};

}  // namespace canopy::io::detail
