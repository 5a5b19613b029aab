/**
 * Child process of test/int8.test.ts (bundled, run with NF_ADDON_PATH and NF_AMX=0): the int8 linear
 * products of INT8_KERNEL_CASES on the active variant, printed as JSON with the kernels that ran them,
 * so the test can hold the VNNI kernels' outputs to the AMX ones' of its own process, bit for bit.
 */
import { native } from '../../lib/native/addon';
import { int8KernelCases, runInt8KernelCase } from './int8_cases';

const ys = int8KernelCases.map((c) => Buffer.from(runInt8KernelCase(c).buffer).toString('base64'));
console.log(JSON.stringify({ kernels: native.isaInfo().int8Kernels, ys }));
