# node-gyp build of the CPU addon (what `npm install` runs when no prebuild matches).
# Sources come from native/sources.js, the list CMakeLists.txt reads too. Kernels are compiled
# four times, once per ISA variant (NF_ISA=0 scalar, 1 avx2, 2 avx512, 3 avx512bf16); the variant code selects
# its instruction set itself (native/cpu/isa.h), so every object uses the same baseline flags and
# runtime CPUID dispatch decides what runs.
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
    {"target_name": "nf_kernels_avx512bf16", "type": "static_library", "defines": ["NF_ISA=3"],
     "sources": ["<!@(node native/sources.js kernels)"]},
    {
      "target_name": "nodeformer",
      "dependencies": ["nf_kernels_scalar", "nf_kernels_avx2", "nf_kernels_avx512", "nf_kernels_avx512bf16"],
      "sources": ["<!@(node native/sources.js common)"],
      "ldflags": ["-pthread"],
      "cflags": ["-pthread"]
    }
  ]
}
