#!/usr/bin/env node
/**
 * The `nodeformer` command: train (the demo), eval and predict with a checkpoint, bench.
 * Usage errors (unknown flags, bad values, missing files) print a message and exit with 2.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';

import { cuda, type Device, type Precision } from '../core/device';
import { Precisions } from '../native/ops.generated';
import { NodeformerError } from '../validation/errors';
import { ViTClassifier } from '../models/vit';
import { native, packageRoot } from '../native/addon';
import { readSafetensorsMetadata } from '../io/safetensors';
import { COMMANDS, PROGRAM_DESCRIPTION } from './commands';
import { checkDigitClassifier, evaluate, loadClassifier, predictImages } from './classify';
import { readFolderMetadata } from './data_source';
import { loadMnist } from './mnist';
import { TRAIN_DEFAULTS, trainDemo } from './train';
import { trainFolder } from './train_folder';
import { USAGE_EXIT, UsageError } from './usage';

const DEFAULT_MODEL = path.join(TRAIN_DEFAULTS.out, 'model.safetensors');

function integer(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`Expected an integer in [${min}, ${max}].`);
    return n;
  };
}

function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('Expected a positive number.');
  return n;
}

function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n >= 0 && n < 1)) throw new InvalidArgumentError('Expected a number in [0, 1).');
  return n;
}

/** Flags that every computing subcommand takes: threads and device. */
function withRuntime(cmd: Command): Command {
  return cmd
    .addOption(new Option('--threads <n>', 'kernel threads (0 = one per core)').argParser(integer(0, 256)).default(0))
    .addOption(new Option('--device <device>', 'where to run').choices(['cpu', 'cuda']).default('cpu'));
}

/** The --precision option of eval and predict (inference: every precision, 'int8' on the CPU only). */
function withPrecision(cmd: Command): Command {
  return cmd.addOption(new Option('--precision <precision>', "how the matrix products run ('int8': dynamic quantization, CPU only)")
    .choices([...Precisions]).default('fp32'));
}

/** Refuses --precision int8 with --device cuda (int8 is CPU inference). */
function checkPrecisionFlag(o: { device: Device; precision: Precision }): void {
  if (o.precision === 'int8' && o.device === 'cuda')
    throw new UsageError("--precision int8 runs on the CPU (dynamic quantization): use --device cpu, or --precision fp32, tf32 or bf16 on cuda.");
}

/** The options of `train` that only an image-folder run reads. */
const FOLDER_FLAGS = ['valSplit', 'imageSize', 'workers'];

/** The command line flag of an option of `cmd` ("--val-split" for valSplit). */
function flagOf(cmd: Command, key: string): string {
  return cmd.options.find((opt) => opt.attributeName() === key)?.long ?? key;
}

/** Applies --threads and --device. */
function setupRuntime(o: { threads: number; device: Device }): void {
  if (o.device === 'cuda') {
    try {
      cuda();
    } catch (e) {
      if (e instanceof NodeformerError) throw new UsageError(`--device cuda is not available: ${e.message}; use --device cpu.`);
      throw e;
    }
  }
  native.setNumThreads(o.threads);
}

/** The digit model in `file` for `eval`; a folder model (train --data) or any other classifier is a UsageError saying what to do. */
function loadDigitClassifier(file: string): ViTClassifier {
  const model = loadClassifier(file);
  const folder = readFolderMetadata(readSafetensorsMetadata(file), file);
  if (folder) {
    model.dispose();
    throw new UsageError(`${file} was trained on an image folder (classes ${folder.classes.join(', ')}); eval tests digit models on ` +
      `MNIST's test split. Classify pictures with it: nodeformer predict <image...> --model ${file}`);
  }
  checkDigitClassifier(model, file);
  return model;
}

/** Where a run's output goes (tests capture it) and the exit status an action sets. */
interface Io {
  out: (line: string) => void;
  status: number;
}

/** Builds the program. */
function program(io: Io): Command {
  const out = io.out;
  const prog = new Command('nodeformer')
    .description(PROGRAM_DESCRIPTION)
    .exitOverride()
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => process.stdout.write(s), writeErr: (s) => process.stderr.write(s) });

  withRuntime(prog.command('train')
    .description(COMMANDS.train)
    .addOption(new Option('--epochs <n>', 'training epochs').argParser(integer(1, 10000)).default(TRAIN_DEFAULTS.epochs))
    .addOption(new Option('--batch-size <n>', 'images per step').argParser(integer(1, 8000)).default(TRAIN_DEFAULTS.batchSize))
    .addOption(new Option('--lr <rate>', 'peak learning rate (cosine schedule with warmup)').argParser(positiveNumber).default(TRAIN_DEFAULTS.lr))
    .addOption(new Option('--seed <n>', 'seed of initialisation, data split, batch order and augmentation').argParser(integer(0)).default(TRAIN_DEFAULTS.seed))
    .addOption(new Option('--out <dir>', 'output folder').default(TRAIN_DEFAULTS.out))
    .addOption(new Option('--logdir <dir>', 'TensorBoard log folder: loss, accuracy, learning rate and throughput per epoch ' +
      '(and for MNIST the attention grid), then the hyperparameters'))
    // The MNIST demo's data.
    .addOption(new Option('--train-size <n>', 'MNIST: training digits').argParser(integer(1, 9999)).default(TRAIN_DEFAULTS.trainSize).conflicts('data'))
    .addOption(new Option('--test-size <n>', 'MNIST: test digits').argParser(integer(1, 9999)).default(TRAIN_DEFAULTS.testSize).conflicts('data'))
    .addOption(new Option('--distributed', 'MNIST: data-parallel over the ranks of `mpirun -np N` (each rank reads its share; ' +
      'global batch = batch size × N)').conflicts('data'))
    // An image folder instead (lib/cli/train_folder.ts, lib/cli/data_source.ts).
    .addOption(new Option('--data <folder>', 'train on an image folder (<folder>/<class>/<image>, any format sharp reads) instead of MNIST'))
    .addOption(new Option('--val-split <fraction>', 'with --data: fraction of the images kept for validation').argParser(fraction).default(0.1))
    .addOption(new Option('--image-size <n>', 'with --data: side of the (square) images the model sees, a multiple of 8').argParser(integer(8, 1024)).default(64))
    .addOption(new Option('--workers <n>', 'with --data: image decoding worker threads (default: the cores but one, at most 4)').argParser(integer(1, 64))))
    .action(async (o, cmd: Command) => {
      const progress = Boolean(process.stderr.isTTY);
      if (o.data === undefined) {
        const folderFlags = FOLDER_FLAGS.filter((k) => cmd.getOptionValueSource(k) === 'cli');
        if (folderFlags.length) {
          const [verb, pronoun] = folderFlags.length > 1 ? ['are', 'them'] : ['is', 'it'];
          throw new UsageError(`${folderFlags.map((k) => flagOf(cmd, k)).join(', ')} ${verb} for training on an image folder: ` +
            `add --data <folder>, or leave ${pronoun} out`);
        }
      }
      setupRuntime(o);
      if (o.data !== undefined) {
        await trainFolder({ ...o, progress, log: out });
        return;
      }
      if (o.trainSize + o.testSize > 10000)
        throw new UsageError(`Expected --train-size + --test-size of at most 10000 (the digits of the mnist package) but received ${o.trainSize + o.testSize}`);
      await trainDemo({ ...o, distributed: Boolean(o.distributed), progress, log: out });
    });

  withPrecision(withRuntime(prog.command('eval')
    .description(COMMANDS.eval)
    .addOption(new Option('--model <file>', 'checkpoint written by train').default(DEFAULT_MODEL))
    .addOption(new Option('--test-size <n>', 'test digits (the last ones of the fixed split)').argParser(integer(1, 9999)).default(TRAIN_DEFAULTS.testSize))
    .addOption(new Option('--batch-size <n>', 'images per forward').argParser(integer(1, 10000)).default(250))))
    .action((o) => {
      checkPrecisionFlag(o);
      setupRuntime(o);
      const model = loadDigitClassifier(o.model).to(o.device).setPrecision(o.precision);
      const { test } = loadMnist({ trainSize: 1, testSize: o.testSize });
      const t0 = performance.now();
      const r = evaluate(model, test, o.batchSize);
      const s = (performance.now() - t0) / 1000;
      out(`${o.model}: test accuracy ${(100 * r.accuracy).toFixed(2)}% (${Math.round(r.accuracy * test.count)}/${test.count}), ` +
        `loss ${r.loss.toFixed(4)}, ${s.toFixed(2)} s (${(test.count / s).toFixed(0)} images/s)`);
      model.dispose();
    });

  withPrecision(withRuntime(prog.command('predict')
    .description(COMMANDS.predict)
    .argument('<image...>', 'image files (PNG, JPEG, WebP, AVIF, GIF, TIFF)')
    .addOption(new Option('--model <file>', 'checkpoint written by train').default(DEFAULT_MODEL))))
    .action(async (files: string[], o) => {
      checkPrecisionFlag(o);
      setupRuntime(o);
      for (const line of await predictImages(o.model, files, o.device, o.precision)) out(line);
    });

  prog.command('bench')
    .description(COMMANDS.bench)
    .argument('[harness-options...]', 'options for the benchmark harness (bench -- --help lists them)')
    .action((harnessOptions: string[]) => {
      const root = packageRoot(__dirname);
      const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
      if (!pkg.scripts?.bench || !fs.existsSync(path.join(root, 'bench'))) {
        out('The benchmarks live in the repository: clone it and run `npm run bench`.');
        return;
      }
      io.status = spawnSync('npm', ['run', '--silent', 'bench', '--', ...harnessOptions], { cwd: root, stdio: 'inherit' }).status ?? 1;
    });

  return prog;
}

/** Runs the command line; resolves to the exit status. */
export async function main(argv: string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<number> {
  const io: Io = { out, status: 0 };
  try {
    await program(io).parseAsync(argv, { from: 'user' });
    return io.status;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : USAGE_EXIT; // commander printed the message
    if (e instanceof UsageError) {
      process.stderr.write(`error: ${e.message}\n`);
      return USAGE_EXIT;
    }
    process.stderr.write(`error: ${e instanceof Error ? (e instanceof NodeformerError ? e.message : e.stack) : String(e)}\n`);
    return 1;
  }
}

if (require.main === module) void main(process.argv.slice(2)).then((code) => (process.exitCode = code));
