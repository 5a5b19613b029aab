/**
 * Flat arenas (llm.c's params_memory and grads_memory): the parameters an optimizer updates, their
 * gradients and each of its state buffers live in one contiguous CPU buffer apiece, every tensor a
 * view of its slice (64-byte aligned, zero padding between). A step is then one native op over the
 * whole arena (adamwStep, sgdStep) and zeroGrad one `zero` op, both on a worker thread under
 * trainStepAsync, instead of one call per parameter tensor and a JS fill on the main thread.
 * Parameters keep their identity and shapes (model.parameters(), stateDict() and safetensors see
 * no difference); a tensor moved out of its slice (Module.to('cuda'), a replaced gradient) breaks
 * the arena, and the optimizer rebuilds it (one copy) when its tensors are back on the CPU. An
 * arena's memory is freed when its last slice is disposed (model.dispose(), optimizer.dispose()).
 */
import type { Parameter } from '../core/module';
import { Tensor } from '../core/tensor';

/** Elements per alignment step: 16 float32 = 64 bytes, the alignment of every CPU tensor. */
const ALIGN = 16;

/** One flat buffer and the slice of it each of a list of tensors views. */
export class FlatBuffer {
  /** The arena: a CPU float32 tensor of `total` elements (padding included). */
  readonly arena: Tensor<'float32'>;

  private constructor(readonly offsets: readonly number[], total: number) {
    this.arena = Tensor.zeros([total], 'float32');
  }

  /** The offsets of tensors of `sizes` elements, each 64-byte aligned, and the arena's length. */
  static layout(sizes: readonly number[]): { offsets: number[]; total: number } {
    const offsets: number[] = [];
    let total = 0;
    for (const n of sizes) {
      offsets.push(total);
      total += Math.ceil(n / ALIGN) * ALIGN;
    }
    return { offsets, total };
  }

  /** A new arena holding `tensors` (CPU, float32), each moved into its slice with its values. */
  static adopt(tensors: readonly Tensor<'float32'>[]): FlatBuffer {
    const { offsets, total } = FlatBuffer.layout(tensors.map((t) => t.size));
    const flat = new FlatBuffer(offsets, total);
    tensors.forEach((t, i) => t.moveInto(flat.arena, offsets[i]));
    return flat;
  }

  /** The elements [from, to) of the arena that tensors first … last (indices) span, padding included. */
  range(first: number, last: number): [number, number] {
    return [this.offsets[first], last + 1 < this.offsets.length ? this.offsets[last + 1] : this.arena.size];
  }

  /** Whether every one of `tensors` is still the view of its slice. */
  holds(tensors: readonly (Tensor<'float32'> | null)[]): boolean {
    return tensors.length === this.offsets.length && tensors.every((t, i) => t !== null && t.isSliceOf(this.arena, this.offsets[i]));
  }
}

/**
 * The arenas of an optimizer's parameters, their gradients and its state buffers (`state[j][i]`:
 * buffer j of parameter i). Built only when every parameter is on the CPU; a parameter without a
 * gradient gets a zero one.
 */
export class OptimizerArenas {
  private constructor(
    readonly params: FlatBuffer,
    readonly grads: FlatBuffer,
    readonly state: FlatBuffer[],
  ) {}

  /** The elements of each arena (padding included). */
  get size(): number {
    return this.params.arena.size;
  }

  /** The elements [from, to) of each arena that parameters first … last (indices) span. */
  range(first: number, last: number): [number, number] {
    return this.params.range(first, last);
  }

  /** Arenas for `params` and `state` (per parameter, its buffers), or null when some parameter is not on the CPU. */
  static build(params: readonly Parameter[], state: readonly (readonly Tensor<'float32'>[])[]): OptimizerArenas | null {
    if (params.some((p) => p.device !== 'cpu' || p.disposed) || state.some((bs) => bs.some((b) => b.device !== 'cpu'))) return null;
    for (const p of params) p.gradData();
    const perBuffer = state.length === 0 ? [] : state[0].map((_, j) => state.map((bs) => bs[j]));
    return new OptimizerArenas(FlatBuffer.adopt(params), FlatBuffer.adopt(params.map((p) => p.grad!)), perBuffer.map((bs) => FlatBuffer.adopt(bs)));
  }

  /** Whether the parameters, their gradients and `state` are all still views of these arenas. */
  holds(params: readonly Parameter[], state: readonly (readonly Tensor<'float32'>[])[]): boolean {
    return this.params.holds(params) && this.grads.holds(params.map((p) => p.grad)) &&
      this.state.every((flat, j) => flat.holds(state.map((bs) => bs[j])));
  }
}
