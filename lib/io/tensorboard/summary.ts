/**
 * The protocol buffers of TensorBoard event files (tensorboard/compat/proto: event.proto,
 * summary.proto, tensor.proto), only the fields written here: an Event holds a wall time, a step
 * and either the file version or a Summary of tagged values.
 */
import type { Histogram } from './histogram';
import type { PngInfo } from './png';
import { ProtoWriter } from './protobuf';

/** TensorFlow's DT_STRING (types.proto). */
const DT_STRING = 7;

/** The first event of every file. */
export function fileVersionEvent(wallTime: number): Uint8Array {
  return new ProtoWriter().double(1, wallTime).string(3, 'brain.Event:2').finish();
}

/** An Event carrying one Summary (given as its bytes). */
export function summaryEvent(wallTime: number, step: number, summary: Uint8Array): Uint8Array {
  const w = new ProtoWriter().double(1, wallTime);
  if (step !== 0) w.int(2, step);
  return w.bytes(5, summary).finish();
}

/** A Summary of one value: `tag` and the fields `build` writes (Summary.Value), in field-number order as protobuf serializers write them. */
function summary(tag: string, build: (value: ProtoWriter) => void): Uint8Array {
  return new ProtoWriter().message(1, (v) => {
    v.string(1, tag);
    build(v);
  }).finish();
}

/** SummaryMetadata naming the plugin that reads a value, with its content bytes. */
export function pluginMetadata(value: ProtoWriter, pluginName: string, content: Uint8Array): void {
  value.message(9, (m) => m.message(1, (p) => {
    p.string(1, pluginName);
    if (content.length) p.bytes(2, content);
  }));
}

/** A Summary holding a scalar (simple_value, as add_scalar writes it). */
export function scalarSummary(tag: string, value: number): Uint8Array {
  return summary(tag, (v) => v.float(2, value));
}

/** A Summary holding an encoded image (Summary.Image). */
export function imageSummary(tag: string, info: PngInfo, png: Uint8Array): Uint8Array {
  return summary(tag, (v) => v.message(4, (img) => {
    img.int(1, info.height).int(2, info.width).int(3, info.colorspace).bytes(4, png);
  }));
}

/** A Summary holding a HistogramProto. */
export function histogramSummary(tag: string, h: Histogram): Uint8Array {
  return summary(tag, (v) => v.message(5, (p) => {
    p.double(1, h.min).double(2, h.max).double(3, h.num).double(4, h.sum).double(5, h.sumSquares)
      .packedDoubles(6, h.bucketLimit).packedDoubles(7, h.bucket);
  }));
}

/** A Summary of the text plugin: a string tensor of shape [1] under `<tag>/text_summary`, as add_text writes it. */
export function textSummary(tag: string, text: string): Uint8Array {
  return summary(`${tag}/text_summary`, (v) => {
    v.message(8, (t) => {
      t.int(1, DT_STRING).message(2, (shape) => shape.message(2, (dim) => dim.int(1, 1)));
      t.string(8, text);
    });
    pluginMetadata(v, 'text', new Uint8Array(0)); // TextPluginData{version: 0} is empty
  });
}

/** A Summary of one tag with plugin metadata and no value (the hparams plugin's records). */
export function metadataSummary(tag: string, pluginName: string, content: Uint8Array): Uint8Array {
  return summary(tag, (v) => pluginMetadata(v, pluginName, content));
}
