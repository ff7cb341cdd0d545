#include "workloads/registry.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include "workloads/catalog.hpp"

namespace canopy::bench {

namespace {

using implementation_key = std::pair<std::string, peer>;

// Function-local static: constructed on first use, so registrations from any
// translation unit may run in any order during static initialization.
std::map<implementation_key, instance_factory>& implementations() {
  static std::map<implementation_key, instance_factory> table;
  return table;
}

[[noreturn]] void reject_registration(std::string_view workload, peer executor,
                                      const char* reason) {
  std::fprintf(stderr, "canopy_bench: cannot register %.*s for peer %.*s: %s\n",
               static_cast<int>(workload.size()), workload.data(),
               static_cast<int>(peer_name(executor).size()), peer_name(executor).data(), reason);
  std::abort();
}

}  // namespace

implementation_registration::implementation_registration(std::string_view workload, peer executor,
                                                         instance_factory factory) {
  if (find_workload(workload) == nullptr) {
    reject_registration(workload, executor, "workload is not in workload_catalog");
  }
  if (factory == nullptr) {
    reject_registration(workload, executor, "factory is null");
  }
  const bool inserted =
      implementations().emplace(implementation_key{workload, executor}, factory).second;
  if (!inserted) {
    reject_registration(workload, executor, "registered twice");
  }
}

instance_factory find_implementation(std::string_view workload, peer executor) {
  const auto found = implementations().find(implementation_key{workload, executor});
  return found == implementations().end() ? nullptr : found->second;
}

}  // namespace canopy::bench
