// Binding for the FMA peak measurement: fmaPeak({ minSeconds, out }) writes into the Float64Array
// `out` [flops, seconds, threads] of the fastest timed run on the active ISA, seconds in the threads'
// CPU time (see native/cpu/peak.h).
#include "../cpu/peak.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

Job parse_fma_peak(Args& a) {
  double min_seconds = a.number("minSeconds", 0.2, 1e-3, 10.0);
  double* out = a.floats<double>("out", 3);
  return [=]() -> Status {
    cpu::FmaPeakResult r;
    NF_TRY(cpu::fma_peak(min_seconds, &r));
    out[0] = r.flops;
    out[1] = r.seconds;
    out[2] = r.threads;
    return Status::Ok();
  };
}

}  // namespace

NF_REGISTER_OPS(peak) { register_op(env, exports, "fmaPeak", parse_fma_peak); }

}  // namespace nf::napi
