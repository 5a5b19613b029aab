/**
 * Child process of test/bf16_storage.test.ts (bundled, run with NF_AMX=0 and NF_ISA=avx512bf16): every
 * case of test/support/bf16_storage_cases.ts on the active variant, printed as JSON with the variant and
 * its bf16 kernels.
 */
import { native } from '../../lib/native/addon';
import { feedForwardCase, feedForwardCases, linearCase, linearCases } from './bf16_storage_cases';

const info = native.isaInfo();
console.log(JSON.stringify({ isa: info.active, kernels: info.bf16Kernels,
  feedForward: feedForwardCases.map(feedForwardCase), linear: linearCases.map(linearCase) }));
