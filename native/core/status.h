// Status: the error type every native entry point returns. Native code never exits, aborts or
// lets a C++ exception escape; a failed check becomes a Status naming the op, and the binding
// turns it into a JS Error with a stable `code`.
#pragma once
#include <string>
#include <utility>

namespace nf {

struct Status {
  std::string op;       // the op that failed, e.g. "layernorm_forward"
  std::string message;  // empty when ok
  // The JS error code when it is not the binding's default (ERR_NF_KERNEL): an argument only the
  // kernel can check (a prepacked weight against the active ISA variant) is ERR_NF_INVALID_ARG.
  const char* code = nullptr;

  bool ok() const { return message.empty(); }
  static Status Ok() { return {}; }
  static Status Error(std::string op, std::string message) {
    return Status{std::move(op), std::move(message)};
  }
  static Status InvalidArg(std::string op, std::string message) {
    return Status{std::move(op), std::move(message), "ERR_NF_INVALID_ARG"};
  }
};

}  // namespace nf

// Returns an error Status from the enclosing function when `cond` is false.
#define NF_CHECK(cond, op, msg) \
  do {                          \
    if (!(cond)) return ::nf::Status::Error((op), (msg)); \
  } while (0)

// Propagates a non-ok Status from an expression.
#define NF_TRY(expr)                       \
  do {                                     \
    ::nf::Status nf_status_ = (expr);      \
    if (!nf_status_.ok()) return nf_status_; \
  } while (0)
