// N-API binding of the collectives addon (nodeformer_mpi.node). Each call turns its typed arrays
// into plain pointers, keeps a reference to them (so the memory outlives the collective), queues
// a Job for the communication thread (comm.cpp) and returns {promise, ticket}. The job's
// completion is sent back to the main thread through one thread-safe function, which settles the
// Promise and drops the references: no JS runs off the main thread, and the libuv pool is unused.
// waitSync(ticket, ms) blocks the main thread on a job instead (synchronous training loops).
#include <napi.h>

#include <csignal>
#include <cstring>
#include <map>
#include <unistd.h>

#include "comm.h"

namespace {
using nf::dist::DType;
using nf::dist::Job;
using nf::dist::Kind;

struct Pending {
  std::shared_ptr<Job> job;
  Napi::Promise::Deferred deferred;
  std::vector<Napi::Reference<Napi::Value>> keep;
  Kind kind;
};

std::map<double, Pending>* pending = nullptr;  // main thread only
Napi::ThreadSafeFunction tsfn;
bool tsfn_made = false, tsfn_refd = false, abandoned = false;
double next_ticket = 1;

void settle(Napi::Env env, Napi::Function, double* ticket_ptr) {
  const double ticket = *ticket_ptr;
  delete ticket_ptr;
  auto it = pending->find(ticket);
  if (it == pending->end()) return;
  Pending& p = it->second;
  if (p.job->ok) {
    if (p.kind == Kind::Init) {
      Napi::Object r = Napi::Object::New(env);
      r.Set("rank", nf::dist::rank());
      r.Set("size", nf::dist::size());
      r.Set("threadLevel", nf::dist::thread_level_name());
      p.deferred.Resolve(r);
    } else {
      p.deferred.Resolve(Napi::Number::New(env, p.job->seconds));
    }
  } else {
    p.deferred.Reject(Napi::Error::New(env, p.job->error).Value());
  }
  pending->erase(it);
  if (pending->empty() && tsfn_refd) {
    tsfn.Unref(env);
    tsfn_refd = false;
  }
}

DType dtype_of(const Napi::TypedArray& a) {
  switch (a.TypedArrayType()) {
    case napi_float32_array: return DType::F32;
    case napi_float64_array: return DType::F64;
    case napi_int32_array: return DType::I32;
    case napi_uint8_array: return DType::U8;
    default: throw Napi::TypeError::New(a.Env(), "expected a Float32Array, Float64Array, Int32Array or Uint8Array");
  }
}

nf::dist::Region region_of(const Napi::Value& v) {
  if (!v.IsTypedArray()) throw Napi::TypeError::New(v.Env(), "expected a typed array");
  auto a = v.As<Napi::TypedArray>();
  auto buf = a.ArrayBuffer();
  return {static_cast<unsigned char*>(buf.Data()) + a.ByteOffset(), a.ElementLength()};
}

Napi::Value queue(Napi::Env env, std::shared_ptr<Job> job, std::vector<Napi::Value> keep) {
  if (abandoned) throw Napi::Error::New(env, "the communication thread was abandoned after a timeout");
  if (!tsfn_made) {
    tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "nf-dist", 0, 1);
    tsfn.Unref(env);
    tsfn_made = true;
    pending = new std::map<double, Pending>();
  }
  if (!tsfn_refd) {
    tsfn.Ref(env);
    tsfn_refd = true;
  }
  const double ticket = next_ticket++;
  Pending p{job, Napi::Promise::Deferred::New(env), {}, job->kind};
  for (auto& v : keep) p.keep.push_back(Napi::Persistent(v));
  Napi::Promise promise = p.deferred.Promise();
  pending->emplace(ticket, std::move(p));
  job->on_done = [ticket](Job*) { tsfn.BlockingCall(new double(ticket), settle); };
  nf::dist::submit(job);
  Napi::Object r = Napi::Object::New(env);
  r.Set("promise", promise);
  r.Set("ticket", ticket);
  return r;
}

Napi::Value Init(const Napi::CallbackInfo& info) {
  auto job = std::make_shared<Job>();
  job->kind = Kind::Init;
  return queue(info.Env(), job, {});
}

Napi::Value Finalize(const Napi::CallbackInfo& info) {
  auto job = std::make_shared<Job>();
  job->kind = Kind::Finalize;
  return queue(info.Env(), job, {});
}

Napi::Value Barrier(const Napi::CallbackInfo& info) {
  auto job = std::make_shared<Job>();
  job->kind = Kind::Barrier;
  return queue(info.Env(), job, {});
}

// allReduce(arrays: TypedArray[] (one dtype), op: 'sum' | 'mean' | 'max')
Napi::Value AllReduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArray() || !info[1].IsString()) throw Napi::TypeError::New(env, "allReduce(arrays, op)");
  auto arr = info[0].As<Napi::Array>();
  auto job = std::make_shared<Job>();
  job->kind = Kind::AllReduce;
  const std::string op = info[1].As<Napi::String>();
  job->op = op == "max" ? nf::dist::ReduceOp::Max : op == "mean" ? nf::dist::ReduceOp::Mean : nf::dist::ReduceOp::Sum;
  std::vector<Napi::Value> keep;
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value v = arr.Get(i);
    job->regions.push_back(region_of(v));
    const DType t = dtype_of(v.As<Napi::TypedArray>());
    if (i == 0) job->dtype = t;
    else if (t != job->dtype) throw Napi::TypeError::New(env, "allReduce: every array must have one dtype");
    keep.push_back(v);
  }
  return queue(env, job, keep);
}

// broadcast(array, root)
Napi::Value Broadcast(const Napi::CallbackInfo& info) {
  auto job = std::make_shared<Job>();
  job->kind = Kind::Broadcast;
  job->regions.push_back(region_of(info[0]));
  job->dtype = dtype_of(info[0].As<Napi::TypedArray>());
  job->root = info[1].As<Napi::Number>().Int32Value();
  return queue(info.Env(), job, {info[0]});
}

// allGather(array, out): out holds worldSize × array.length elements of the same dtype
Napi::Value AllGather(const Napi::CallbackInfo& info) {
  auto job = std::make_shared<Job>();
  job->kind = Kind::AllGather;
  job->regions.push_back(region_of(info[0]));
  job->dtype = dtype_of(info[0].As<Napi::TypedArray>());
  job->out = region_of(info[1]).data;
  return queue(info.Env(), job, {info[0], info[1]});
}

// While the main thread blocks in waitSync, JS signal handlers cannot run: a SIGTERM from the
// launcher (mpirun aborting the job after another rank failed) is then answered here, with the
// message the façade passed and exit status 1 (write and _exit are async-signal-safe).
char abort_message[512];
size_t abort_length = 0;
void on_term(int) {
  if (write(2, abort_message, abort_length) < 0) {}
  _exit(1);
}

// waitSync(ticket, timeoutMs[, abortMessage]) → true when done (throws its error if it failed), false on timeout
Napi::Value WaitSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double ticket = info[0].As<Napi::Number>().DoubleValue();
  const double ms = info[1].As<Napi::Number>().DoubleValue();
  if (!pending) return Napi::Boolean::New(env, true);
  auto it = pending->find(ticket);
  if (it == pending->end()) return Napi::Boolean::New(env, true);  // already settled
  std::shared_ptr<Job> job = it->second.job;
  struct sigaction old {};
  const bool guard = info.Length() > 2 && info[2].IsString();
  if (guard) {
    const std::string msg = info[2].As<Napi::String>();
    abort_length = std::min(msg.size(), sizeof(abort_message));
    std::memcpy(abort_message, msg.data(), abort_length);
    struct sigaction sa {};
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old);
  }
  const bool done = nf::dist::wait(job, ms);
  if (guard) sigaction(SIGTERM, &old, nullptr);
  if (!done) return Napi::Boolean::New(env, false);
  if (!job->ok) throw Napi::Error::New(env, job->error);
  return Napi::Boolean::New(env, true);
}

// abandon(): after a timeout, lets the process exit although a collective never returned.
Napi::Value Abandon(const Napi::CallbackInfo& info) {
  abandoned = true;
  if (tsfn_made && tsfn_refd) {
    tsfn.Unref(info.Env());
    tsfn_refd = false;
  }
  return info.Env().Undefined();
}

Napi::Value Rank(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), nf::dist::rank()); }
Napi::Value Size(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), nf::dist::size()); }
Napi::Value BusySeconds(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), nf::dist::busy_seconds()); }

Napi::Object Setup(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New(env, Init));
  exports.Set("finalize", Napi::Function::New(env, Finalize));
  exports.Set("barrier", Napi::Function::New(env, Barrier));
  exports.Set("allReduce", Napi::Function::New(env, AllReduce));
  exports.Set("broadcast", Napi::Function::New(env, Broadcast));
  exports.Set("allGather", Napi::Function::New(env, AllGather));
  exports.Set("waitSync", Napi::Function::New(env, WaitSync));
  exports.Set("abandon", Napi::Function::New(env, Abandon));
  exports.Set("rank", Napi::Function::New(env, Rank));
  exports.Set("size", Napi::Function::New(env, Size));
  exports.Set("busySeconds", Napi::Function::New(env, BusySeconds));
  return exports;
}
}  // namespace

NODE_API_MODULE(nodeformer_mpi, Setup)
