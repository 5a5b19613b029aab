// The CUDA addon's graph functions (device.h, CUDA graphs): begin and end a capture of the backend
// stream, launch the captured graph (synchronously queued, or as a Promise settled when the stream
// has run it), and free it. A graph is an opaque handle; the garbage collector frees one that was
// never freed (graphFree makes that a no-op). lib/training/graph.ts is the only caller.
#include <string>

#include "../device.h"
#include "../../napi/registry.h"
#include "device_args.h"

namespace nf::napi {
namespace {

struct GraphHandle {
  cuda::Graph* graph = nullptr;  // null once freed
};

constexpr napi_type_tag kGraphTag = {0x6e66637564616772ull, 0x6170686832303236ull};

GraphHandle* graph_arg(const Napi::CallbackInfo& info, const char* fn) {
  bool tagged = false;
  if (info.Length() < 1 || !info[0].IsExternal() ||
      napi_check_object_type_tag(info.Env(), info[0], &kGraphTag, &tagged) != napi_ok || !tagged)
    throw_error(info.Env(), "ERR_NF_INVALID_ARG", std::string(fn) + ": expected a CUDA graph handle");
  GraphHandle* h = info[0].As<Napi::External<GraphHandle>>().Data();
  if (!h->graph) throw_error(info.Env(), "ERR_NF_INVALID_ARG", std::string(fn) + ": the CUDA graph was freed");
  return h;
}

}  // namespace

NF_REGISTER_OPS(cuda_graph) {
  auto fn = [&](const char* name, Napi::Value (*f)(const Napi::CallbackInfo&)) {
    exports.Set(name, Napi::Function::New(env, f, name));
  };
  // graphBegin(): the backend stream starts capturing; allocations come from a private pool.
  fn("graphBegin", [](const Napi::CallbackInfo& info) -> Napi::Value {
    check_device(info.Env(), cuda::graph_begin());
    return info.Env().Undefined();
  });
  // graphEnd(): ends the capture and returns the instantiated graph (throws what made it fail).
  fn("graphEnd", [](const Napi::CallbackInfo& info) -> Napi::Value {
    cuda::Graph* g = nullptr;
    check_device(info.Env(), cuda::graph_end(&g));
    auto* h = new GraphHandle{g};
    Napi::External<GraphHandle> ext = Napi::External<GraphHandle>::New(info.Env(), h, [](Napi::Env, GraphHandle* d) {
      (void)cuda::graph_destroy(d->graph);
      delete d;
    });
    if (napi_type_tag_object(info.Env(), ext, &kGraphTag) != napi_ok)
      throw_error(info.Env(), "ERR_NF_CUDA", "cannot tag a CUDA graph handle");
    return ext;
  });
  // graphLaunch(graph): queues the graph on the backend stream (ERR_NF_GRAPH_STALE: capture again).
  fn("graphLaunch", [](const Napi::CallbackInfo& info) -> Napi::Value {
    check_device(info.Env(), cuda::graph_launch(graph_arg(info, "graphLaunch")->graph));
    return info.Env().Undefined();
  });
  // graphFresh(graph): whether no scratch buffer the graph uses has moved since its capture.
  fn("graphFresh", [](const Napi::CallbackInfo& info) -> Napi::Value {
    return Napi::Boolean::New(info.Env(), cuda::graph_fresh(graph_arg(info, "graphFresh")->graph));
  });
  // graphLaunchAsync(graph): a Promise settled once the stream has run the graph.
  fn("graphLaunchAsync", [](const Napi::CallbackInfo& info) -> Napi::Value {
    cuda::Graph* g = graph_arg(info, "graphLaunchAsync")->graph;
    return settle_when_done(info.Env(), [g] { return cuda::graph_launch(g); }, {info[0]});
  });
  // graphFree(graph): frees the graph and hands its memory pool back to the cache (later calls: no-ops).
  fn("graphFree", [](const Napi::CallbackInfo& info) -> Napi::Value {
    bool tagged = false;
    if (info.Length() < 1 || !info[0].IsExternal() ||
        napi_check_object_type_tag(info.Env(), info[0], &kGraphTag, &tagged) != napi_ok || !tagged)
      throw_error(info.Env(), "ERR_NF_INVALID_ARG", "graphFree: expected a CUDA graph handle");
    GraphHandle* h = info[0].As<Napi::External<GraphHandle>>().Data();
    cuda::Graph* g = h->graph;
    h->graph = nullptr;
    check_device(info.Env(), cuda::graph_destroy(g));
    return info.Env().Undefined();
  });
  // graphStats(): {captures, failed, launches, live} since the process started.
  fn("graphStats", [](const Napi::CallbackInfo& info) -> Napi::Value {
    const cuda::GraphStats s = cuda::graph_stats();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("captures", double(s.captures));
    o.Set("failed", double(s.failed));
    o.Set("launches", double(s.launches));
    o.Set("live", double(s.live));
    return o;
  });
}

}  // namespace nf::napi
