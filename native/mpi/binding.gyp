# The optional collectives addon (nodeformer_mpi.node): Open MPI behind one communication thread.
# Built by `npm run build:mpi` (native/mpi/build.js), and by scripts/ensure-built.js (npm test, npm
# run demo) when mpicxx is on the PATH; compile and link flags come from `mpicxx --showme:compile` / `--showme:link`.
{
  "targets": [
    {
      "target_name": "nodeformer_mpi",
      "sources": ["comm.cpp", "binding.cpp"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED", "OMPI_SKIP_MPICXX"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
      "cflags_cc": ["-std=c++17", "-O2", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter", "<!@(mpicxx --showme:compile)"],
      "cflags": ["-pthread"],
      "ldflags": ["-pthread"],
      "libraries": ["<!@(mpicxx --showme:link)"]
    }
  ]
}
