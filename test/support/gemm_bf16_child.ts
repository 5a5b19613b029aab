/**
 * Child process of test/gemm.test.ts (bundled, run with NF_AMX=0 and NF_ISA=avx512bf16): every gemm
 * case at 'bf16' on the active variant, printed as JSON with the variant and its bf16 kernels, each
 * case's relative error against the float64 product of the bf16-rounded inputs.
 */
import { native } from '../../lib/native/addon';
import { bf16Case, cases } from './gemm_cases';

const info = native.isaInfo();
console.log(JSON.stringify({ isa: info.active, kernels: info.bf16Kernels, errors: cases.map((c) => bf16Case(c)()) }));
