# node-gyp build of the CPU addon for a clone (`npm run build:native`, scripts/ensure-built.js;
# installing the package never runs it: users get the platform package's binary, and the published
# package holds no binding.gyp). Sources come from native/sources.js, the list CMakeLists.txt and
# scripts/build_platforms.ts read too. Kernels are compiled once per ISA variant of the target
# architecture (native/cpu/isa.h): on x64 NF_ISA=0 scalar, 1 avx2, 2 avx512, 4 avx512bf16; on arm64 NF_ISA=0
# scalar, 3 neon. The variant code selects its instruction set itself, so every object uses the same
# baseline flags and run-time dispatch decides what runs.
# On arm64, where FMA is baseline, -ffp-contract=off keeps GCC from fusing a multiply and an add of
# the vocabulary (simd.h) in one variant and not the other.
{
  "target_defaults": {
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
    "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fno-math-errno"],
    "cflags!": ["-fno-exceptions"],
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
    "xcode_settings": {"GCC_ENABLE_CPP_EXCEPTIONS": "YES", "OTHER_CPLUSPLUSFLAGS": ["-std=c++17", "-O3"]},
    "msvs_settings": {"VCCLCompilerTool": {"ExceptionHandling": 1, "AdditionalOptions": ["/std:c++17"]}},
    "conditions": [
      ["target_arch=='arm64'", {
        "cflags_cc": ["-ffp-contract=off"],
        "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-ffp-contract=off"]}
      }]
    ]
  },
  "targets": [
    {"target_name": "nf_kernels_scalar", "type": "static_library", "defines": ["NF_ISA=0"],
     "sources": ["<!@(node native/sources.js kernels)"]},
    {
      "target_name": "nodeformer",
      "dependencies": ["nf_kernels_scalar"],
      "conditions": [
        ["target_arch=='x64'", {"dependencies": ["nf_kernels_avx2", "nf_kernels_avx512", "nf_kernels_avx512bf16"]}],
        ["target_arch=='arm64'", {"dependencies": ["nf_kernels_neon"]}]
      ],
      "sources": ["<!@(node native/sources.js common)"],
      "ldflags": ["-pthread"],
      "cflags": ["-pthread"]
    }
  ],
  "conditions": [
    ["target_arch=='x64'", {"targets": [
      {"target_name": "nf_kernels_avx2", "type": "static_library", "defines": ["NF_ISA=1"],
       "sources": ["<!@(node native/sources.js kernels)"]},
      {"target_name": "nf_kernels_avx512", "type": "static_library", "defines": ["NF_ISA=2"],
       "sources": ["<!@(node native/sources.js kernels)"]},
      {"target_name": "nf_kernels_avx512bf16", "type": "static_library", "defines": ["NF_ISA=4"],
       "sources": ["<!@(node native/sources.js kernels)"]}
    ]}],
    ["target_arch=='arm64'", {"targets": [
      {"target_name": "nf_kernels_neon", "type": "static_library", "defines": ["NF_ISA=3"],
       "sources": ["<!@(node native/sources.js kernels)"]}
    ]}]
  ]
}
