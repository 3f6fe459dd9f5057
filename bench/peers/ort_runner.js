'use strict';
/* ONNX Runtime peer for `mixrt bench llm`: a persistent Node process that mixrt spawns and
 * drives over its stdin/stdout with one request per line and one reply line per request.
 * Tensors travel as .npy files in a directory both sides can read. Every session runs on the
 * CPU execution provider with one intra-op thread (unless `load` asks for more), one inter-op thread and sequential
 * execution. Step times are measured here, around `await session.run(feeds)`, with
 * process.hrtime.bigint(), so they contain what a Node caller of ONNX Runtime pays per step
 * (the binding included) and nothing of the pipe protocol.
 *
 * Requests (names are words without spaces; paths may not contain spaces):
 *   load NAME MODEL.onnx [THREADS]
 *                          create a session (THREADS intra-op threads, default 1; `mixrt bench
 *                          models` asks for 1 and 2) -> ok INPUT,INPUT,... OUTPUT,OUTPUT,...
 *   feed NAME DIR          read DIR/<input>.npy for every input and keep them as the feeds -> ok
 *   run NAME N             run N times with the kept feeds -> ok NS NS ... (one time per run)
 *   decode NAME N          N greedy decode steps: after each run the outputs present_X become the
 *                          feeds past_X and the argmax of logits the feed input_ids -> ok NS NS ...
 *   save NAME DIR          run once, write DIR/<output>.npy for every output -> ok
 *   drop NAME              release the session -> ok
 *   quit                   exit (no reply)
 * A failed request is answered with `err MESSAGE` and the process keeps serving. On start the
 * process prints `ready ORT_VERSION NODE_VERSION`, or `err MESSAGE` and exits with status 1
 * when onnxruntime-node cannot be loaded. */

const fs = require('fs');
const path = require('path');
const readline = require('readline');

function reply(text) {
  process.stdout.write(text.replace(/\n/g, ' ') + '\n');
}

let ort;
let ortVersion = 'unknown';
try {
  ort = require('onnxruntime-node');
  const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(require.resolve('onnxruntime-node')), '..',
                                                   'package.json'), 'utf8'));
  ortVersion = pkg.version;
} catch (e) {
  reply('err cannot load onnxruntime-node (run make bench-deps): ' + e.message);
  process.exit(1);
}

const SESSION_OPTIONS = {
  executionProviders: ['cpu'],
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
};

/* .npy element types <-> ONNX Runtime tensor types and typed arrays. */
const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '<i2': ['int16', Int16Array], '|i1': ['int8', Int8Array],
  '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
};
const ORT_TO_NPY = {};
for (const [descr, [type]] of Object.entries(NPY_TYPES)) ORT_TO_NPY[type] = descr;

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(file + ': not a .npy file');
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape || /'fortran_order':\s*True/.test(header)) throw new Error(file + ': unsupported header ' + header);
  const kind = NPY_TYPES[descr[1]];
  if (!kind) throw new Error(file + ': unsupported element type ' + descr[1]);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const data = buf.subarray(start + headerLen);
  const copy = new Uint8Array(count * kind[1].BYTES_PER_ELEMENT);
  copy.set(data.subarray(0, copy.length));
  let values = new kind[1](copy.buffer);
  if (kind[0] === 'bool') values = Uint8Array.from(values, (v) => (v ? 1 : 0));
  return new ort.Tensor(kind[0], values, dims);
}

function writeNpy(file, tensor) {
  const descr = ORT_TO_NPY[tensor.type];
  if (!descr) throw new Error(file + ': cannot write element type ' + tensor.type);
  const shape = tensor.dims.length === 1 ? '(' + tensor.dims[0] + ',)' : '(' + tensor.dims.join(', ') + ')';
  let header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ', }';
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'),
                                        Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

/* The feeds of the next decode step: past_X <- present_X, input_ids <- argmax(logits). */
function nextFeeds(session, feeds, out) {
  const next = {};
  for (const input of session.inputNames) {
    if (input === 'input_ids') {
      const logits = out.logits.data;
      let best = 0;
      for (let k = 1; k < logits.length; k++) if (logits[k] > logits[best]) best = k;
      next[input] = new ort.Tensor('int64', BigInt64Array.from([BigInt(best)]), feeds[input].dims);
    } else if (input.startsWith('past_') && out['present_' + input.slice(5)]) {
      next[input] = out['present_' + input.slice(5)];
    } else {
      throw new Error('decode: no output feeds input ' + input);
    }
  }
  return next;
}

const sessions = new Map(); /* NAME -> { session, feeds } */

function get(name) {
  const entry = sessions.get(name);
  if (!entry) throw new Error('no session named ' + name);
  return entry;
}

async function handle(words) {
  const [cmd, name, arg] = words;
  if (cmd === 'load') {
    const threads = words.length > 3 ? Number(words[3]) : 1;
    if (!Number.isInteger(threads) || threads < 1) throw new Error('load needs a thread count >= 1, not ' + words[3]);
    const session = await ort.InferenceSession.create(arg, { ...SESSION_OPTIONS, intraOpNumThreads: threads });
    sessions.set(name, { session, feeds: null });
    return 'ok ' + session.inputNames.join(',') + ' ' + session.outputNames.join(',');
  }
  if (cmd === 'feed') {
    const entry = get(name);
    const feeds = {};
    for (const input of entry.session.inputNames) feeds[input] = readNpy(path.join(arg, input + '.npy'));
    entry.feeds = feeds;
    return 'ok';
  }
  if (cmd === 'run') {
    const entry = get(name);
    if (!entry.feeds) throw new Error(name + ': no feeds yet');
    const n = Number(arg);
    if (!Number.isInteger(n) || n < 1) throw new Error('run needs a count >= 1, not ' + arg);
    const times = new Array(n);
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint();
      await entry.session.run(entry.feeds);
      times[i] = process.hrtime.bigint() - t0;
    }
    return 'ok ' + times.join(' ');
  }
  if (cmd === 'decode') {
    const entry = get(name);
    if (!entry.feeds) throw new Error(name + ': no feeds yet');
    const n = Number(arg);
    if (!Number.isInteger(n) || n < 1) throw new Error('decode needs a count >= 1, not ' + arg);
    const times = new Array(n);
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint();
      const out = await entry.session.run(entry.feeds);
      times[i] = process.hrtime.bigint() - t0;
      entry.feeds = nextFeeds(entry.session, entry.feeds, out);
    }
    return 'ok ' + times.join(' ');
  }
  if (cmd === 'save') {
    const entry = get(name);
    if (!entry.feeds) throw new Error(name + ': no feeds yet');
    const out = await entry.session.run(entry.feeds);
    for (const output of entry.session.outputNames) writeNpy(path.join(arg, output + '.npy'), out[output]);
    return 'ok';
  }
  if (cmd === 'drop') {
    const entry = get(name);
    await entry.session.release();
    sessions.delete(name);
    return 'ok';
  }
  throw new Error('unknown request ' + cmd);
}

const lines = readline.createInterface({ input: process.stdin, terminal: false });
let queue = Promise.resolve();
lines.on('line', (line) => {
  const words = line.trim().split(/\s+/);
  if (words[0] === 'quit') {
    queue = queue.then(() => process.exit(0));
    return;
  }
  queue = queue.then(() => handle(words).then(reply, (e) => reply('err ' + (e && e.message ? e.message : String(e)))));
});
lines.on('close', () => {
  queue.then(() => process.exit(0));
});

reply('ready ' + ortVersion + ' ' + process.version);
