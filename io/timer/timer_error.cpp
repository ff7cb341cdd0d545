#include "timer_error.hpp"

#include <string>

namespace canopy::io {

namespace {

class category final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "canopy.io"; }
  [[nodiscard]] std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::timed_out:
        return "the deadline passed before the operation completed";
      case errc::unexpected_eof:
        return "the stream ended before the bytes the read needs";
    }
    return "unknown canopy.io error " + std::to_string(code);
  }
};

}  // namespace

const std::error_category& io_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace canopy::io
