import { AdamW, Tensor, ViTClassifier, crossEntropy, type NodeformerError } from 'nodeformer';
const model = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3 });
const logits: Tensor<'float32'> = model.forward(Tensor.zeros([2, 1, 8, 8]));
const { loss, grad } = crossEntropy(logits, Tensor.from(Int32Array.of(0, 2), [2]));
const n: number = loss;
model.backward(grad);
new AdamW(model.parameters(), { lr: 1e-3 }).step();
const code: NodeformerError['code'] = 'ERR_NF_FORMAT';
// @ts-expect-error: imgSize is a number
new ViTClassifier({ imgSize: '8' });
export { n, code };
