/**
 * The pictures of the demo and the examples, drawn with Vega-Lite (compiled to Vega, rendered to
 * SVG headless) and rasterised to PNG by resvg: training curves, digit grids with an attention
 * overlay, heatmaps, and original / masked / reconstructed digit rows.
 */
import * as fs from 'node:fs';

import { Resvg } from '@resvg/resvg-js';

import { DIGIT_SIZE } from './mnist';

/** A Vega-Lite specification (https://vega.github.io/vega-lite/docs/spec.html). */
export type TopLevelSpec = Record<string, unknown>;

/**
 * The part of Vega and Vega-Lite used here, typed locally: their own typings need the DOM
 * library, which a Node package does not compile against.
 */
interface VegaView {
  toSVG(scaleFactor?: number): Promise<string>;
  finalize(): void;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const vega = require('vega') as { parse(spec: object): object; View: new (runtime: object, options: { renderer: 'none' }) => VegaView };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { compile } = require('vega-lite') as { compile(spec: TopLevelSpec): { spec: object } };

const FONT = 'DejaVu Sans';
const CONFIG = { font: FONT, view: { stroke: null }, title: { fontSize: 15 }, axis: { labelFontSize: 11, titleFontSize: 12 } };

/** Renders a Vega-Lite spec to the bytes of a PNG image (white background, `scale`× for sharp text). */
export async function renderChart(spec: TopLevelSpec, scale = 2): Promise<Uint8Array> {
  const full = { ...spec, config: { ...CONFIG, ...(spec.config as object | undefined) } };
  const view = new vega.View(vega.parse(compile(full).spec), { renderer: 'none' });
  const svg = await view.toSVG(scale);
  view.finalize();
  return new Resvg(svg, { background: 'white', font: { loadSystemFonts: true, defaultFontFamily: FONT } }).render().asPng();
}

/** Renders a Vega-Lite spec to a PNG file (renderChart). */
export async function writeChart(path: string, spec: TopLevelSpec): Promise<void> {
  fs.writeFileSync(path, await renderChart(spec));
}

/** One epoch of training: mean loss and accuracy on the training batches and on the test set. */
export interface EpochRecord {
  epoch: number;
  trainLoss: number;
  trainAccuracy: number;
  testLoss: number;
  testAccuracy: number;
}

/** Loss and accuracy per epoch, train and test, side by side. */
export function trainingCurvesSpec(history: readonly EpochRecord[]): TopLevelSpec {
  const rows = history.flatMap((h) => [
    { epoch: h.epoch, split: 'train', loss: h.trainLoss, accuracy: 100 * h.trainAccuracy },
    { epoch: h.epoch, split: 'test', loss: h.testLoss, accuracy: 100 * h.testAccuracy },
  ]);
  const color = { field: 'split', type: 'nominal', title: null, scale: { domain: ['train', 'test'], range: ['#4c78a8', '#e45756'] },
    legend: { orient: 'top', labelFontSize: 13, symbolStrokeWidth: 3 } } as const;
  const x = { field: 'epoch', type: 'quantitative', title: 'epoch', axis: { tickMinStep: 1, format: 'd' } } as const;
  const panel = (field: 'loss' | 'accuracy', title: string, extra: object) => ({
    width: 360, height: 260, title,
    mark: { type: 'line', point: true, strokeWidth: 2 },
    encoding: { x, y: { field, type: 'quantitative', ...extra }, color },
  });
  return {
    data: { values: rows },
    title: { text: 'ViT on MNIST: training curves', anchor: 'middle', fontSize: 17 },
    hconcat: [
      panel('loss', 'cross-entropy loss', { title: 'loss', scale: { type: 'log' } }),
      panel('accuracy', 'accuracy', { title: 'accuracy (%)', scale: { zero: false } }),
    ],
  };
}

/** A digit with its true and predicted labels and an attention weight per patch (row-major grid). */
export interface AttentionSample {
  pixels: Float32Array;
  label: number;
  predicted: number;
  attention: Float32Array;
}

const unitScale = { domain: [0, DIGIT_SIZE], nice: false, zero: false };
/** Encodings of cells {x, y, x2, y2} in digit-pixel units on a square digit chart (row 0 on top). */
const cellEncoding = {
  x: { field: 'x', type: 'quantitative', scale: unitScale, axis: null },
  x2: { field: 'x2' },
  y: { field: 'y', type: 'quantitative', scale: { ...unitScale, reverse: true }, axis: null },
  y2: { field: 'y2' },
} as const;

function gray(v: number): string {
  const g = Math.round(255 * Math.min(1, Math.max(0, v)));
  return `rgb(${g},${g},${g})`;
}

/** The pixels of a digit as unit cells filled with their own colour (NaN → `hidden`). */
function pixelCells(pixels: Float32Array, hidden = '#3b6fb6') {
  return Array.from(pixels, (v, i) => {
    const x = i % DIGIT_SIZE, y = Math.floor(i / DIGIT_SIZE);
    return { x, y, x2: x + 1, y2: y + 1, fill: Number.isNaN(v) ? hidden : gray(v) };
  });
}

const pixelLayer = (pixels: Float32Array) => ({
  data: { values: pixelCells(pixels) },
  mark: { type: 'rect' },
  encoding: { ...cellEncoding, color: { field: 'fill', type: 'nominal', scale: null, legend: null } },
});

/**
 * A grid of digits (white on black) with the CLS token's attention over their patches overlaid
 * in colour (scaled to each digit's largest weight); titles give the prediction, red if wrong.
 */
export function attentionGridSpec(samples: readonly AttentionSample[], columns: number, title: string): TopLevelSpec {
  const side = DIGIT_SIZE * 4;
  const charts = samples.map((s) => {
    const grid = Math.round(Math.sqrt(s.attention.length)), patch = DIGIT_SIZE / grid;
    const max = Math.max(...s.attention);
    const patches = Array.from(s.attention, (a, i) => {
      const x = (i % grid) * patch, y = Math.floor(i / grid) * patch;
      return { x, y, x2: x + patch, y2: y + patch, a: a / max };
    });
    const right = s.predicted === s.label;
    return {
      width: side, height: side,
      title: { text: right ? `pred ${s.predicted}` : `pred ${s.predicted} (true ${s.label})`, color: right ? '#222' : '#d62728', fontSize: 13 },
      layer: [
        pixelLayer(s.pixels),
        {
          data: { values: patches },
          mark: { type: 'rect', color: '#ff5a1f' },
          encoding: { ...cellEncoding, opacity: { field: 'a', type: 'quantitative', title: ['attention', '(÷ max)'], scale: { domain: [0, 1], range: [0, 0.75] } } },
        },
      ],
    };
  });
  return {
    title: { text: title, anchor: 'middle', fontSize: 16, subtitle: 'orange: attention of the CLS token to each patch in the last layer (mean over heads)', subtitleFontSize: 12 },
    columns, concat: charts, spacing: { row: 30, column: 12 }, bounds: 'flush',
    resolve: { scale: { opacity: 'shared' }, legend: { opacity: 'shared' } },
  };
}

/** A heatmap of a [rows, cols] table, e.g. the sinusoidal positional encoding (position × dimension). */
export function heatmapSpec(values: Float32Array, rows: number, cols: number, labels: { title: string; subtitle?: string; x: string; y: string; value: string }): TopLevelSpec {
  const data = Array.from(values, (v, i) => {
    const r = Math.floor(i / cols), c = i % cols;
    return { r, c, r2: r + 1, c2: c + 1, v };
  });
  const cell = Math.max(4, Math.min(12, Math.floor(640 / Math.max(rows, cols))));
  return {
    title: { text: labels.title, subtitle: labels.subtitle ?? '', anchor: 'middle', fontSize: 16, subtitleFontSize: 12 },
    data: { values: data },
    width: cols * cell, height: rows * cell,
    mark: { type: 'rect' },
    encoding: {
      x: { field: 'c', type: 'quantitative', title: labels.x, scale: { domain: [0, cols], nice: false, zero: false } },
      x2: { field: 'c2' },
      y: { field: 'r', type: 'quantitative', title: labels.y, scale: { domain: [0, rows], nice: false, zero: false, reverse: true } },
      y2: { field: 'r2' },
      color: { field: 'v', type: 'quantitative', title: labels.value, scale: { scheme: 'redblue', domain: [-1, 1], reverse: true } },
    },
  };
}

/**
 * Rows of digit images side by side (pixels in [0, 1]; NaN marks a hidden patch, drawn blue):
 * one row per example, one column per version (e.g. original, masked, reconstructed), and the
 * rows split into `groups` blocks placed next to each other. A subtitle given as lines is drawn
 * one line under the other.
 */
export function digitRowsSpec(rows: readonly Float32Array[][], columnTitles: readonly string[], groups: number, title: string,
  subtitle: string | readonly string[]): TopLevelSpec {
  const side = DIGIT_SIZE * 3, perGroup = Math.ceil(rows.length / groups);
  const block = (part: readonly Float32Array[][]) => ({
    columns: columnTitles.length, spacing: 6, bounds: 'flush',
    concat: part.flatMap((images, r) => images.map((img, c) => ({
      width: side, height: side,
      ...(r === 0 ? { title: { text: columnTitles[c], fontSize: 13 } } : {}),
      ...pixelLayer(img),
    }))),
  });
  return {
    title: { text: title, subtitle, anchor: 'middle', fontSize: 16, subtitleFontSize: 12 },
    hconcat: Array.from({ length: groups }, (_, g) => block(rows.slice(g * perGroup, (g + 1) * perGroup))),
    spacing: 36,
  };
}
