#!/usr/bin/env node
// The one list of native sources, read by both binding.gyp (node-gyp, what `npm install` runs)
// and CMakeLists.txt (cmake-js), so the two builds never drift apart.
//   node native/sources.js kernels  -> native/cpu/*.cpp  (compiled once per ISA variant, see isas;
//                                      not native/cpu/napi, the CPU addon's binding)
//   node native/sources.js common   -> native/core/*.cpp native/napi/*.cpp native/cpu/napi/*.cpp (compiled once)
//   node native/sources.js isas ARCH -> the NF_ISA values the kernels are compiled for on ARCH (Node's
//                                      process.arch names; native/cpu/isa.h): x64 0 1 2 4 (scalar, avx2,
//                                      avx512, avx512bf16), arm64 0 3 (scalar, neon), any other architecture 0 alone
// Paths are relative to the repository root, separated by spaces (gyp's <!@ and CMake's
// separate_arguments both split on them; no source path contains a space).
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const cppIn = (dir) =>
  fs.readdirSync(path.join(root, dir))
    .filter((f) => f.endsWith('.cpp'))
    .sort()
    .map((f) => `${dir}/${f}`);

const lists = {
  kernels: () => cppIn('native/cpu'),
  isas: (arch) => ({ x64: ['0', '1', '2', '4'], arm64: ['0', '3'] })[arch] ?? ['0'],
  common: () => [...cppIn('native/core'), ...cppIn('native/napi'), ...cppIn('native/cpu/napi')],
};

const which = process.argv[2];
if (!lists[which]) {
  console.error(`usage: node native/sources.js ${Object.keys(lists).join('|')} [ARCH, for isas]`);
  process.exit(2);
}
process.stdout.write(lists[which](process.argv[3]).join(' '));
