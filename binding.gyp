# node-gyp build of the CPU addon for a clone (`npm run build:native`, scripts/ensure-built.js;
# installing the package never runs it: users get the platform package's binary, and the published
# package holds no binding.gyp). Sources come from native/sources.js, the list CMakeLists.txt and
# scripts/build_platforms.ts read too. On x64 the kernels are compiled three times, once per ISA
# variant (NF_ISA=0 scalar, 1 avx2, 2 avx512); the variant code selects its instruction set itself
# (native/cpu/isa.h), so every object uses the same baseline flags and runtime CPUID dispatch
# decides what runs. Elsewhere (arm64) only the scalar variant is built (native/sources.js isas).
{
  "target_defaults": {
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
    "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fno-math-errno"],
    "cflags!": ["-fno-exceptions"],
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
    "xcode_settings": {"GCC_ENABLE_CPP_EXCEPTIONS": "YES", "OTHER_CPLUSPLUSFLAGS": ["-std=c++17", "-O3"]},
    "msvs_settings": {"VCCLCompilerTool": {"ExceptionHandling": 1, "AdditionalOptions": ["/std:c++17"]}}
  },
  "targets": [
    {"target_name": "nf_kernels_scalar", "type": "static_library", "defines": ["NF_ISA=0"],
     "sources": ["<!@(node native/sources.js kernels)"]},
    {"target_name": "nf_kernels_avx2", "type": "static_library", "defines": ["NF_ISA=1"],
     "sources": ["<!@(node native/sources.js kernels)"]},
    {"target_name": "nf_kernels_avx512", "type": "static_library", "defines": ["NF_ISA=2"],
     "sources": ["<!@(node native/sources.js kernels)"]},
    {
      "target_name": "nodeformer",
      "dependencies": ["nf_kernels_scalar"],
      "conditions": [["target_arch=='x64'", {"dependencies": ["nf_kernels_avx2", "nf_kernels_avx512"]}]],
      "sources": ["<!@(node native/sources.js common)"],
      "ldflags": ["-pthread"],
      "cflags": ["-pthread"]
    }
  ]
}
