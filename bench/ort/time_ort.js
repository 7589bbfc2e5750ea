// ONNX Runtime's half of the side-by-side with tracemod (bench/ort/side_by_side.sh):
//   node time_ort.js <dir> <threads> <runs>
// loads <dir>/model.onnx on the CPU provider with every graph optimization, <threads> intra-op
// threads and one inter-op thread, feeds <dir>/input_<i>.npy, runs twice untimed, then <runs> times,
// and prints the median in ms and the largest absolute difference from <dir>/output.npy over its
// largest absolute value (as tracemod_ort does).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// A .npy file (format 1.x or 2.x, C order) as an ort.Tensor: float32 or bool.
function loadNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const headerLength = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLength);
  if (/'fortran_order': True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const descr = header.match(/'descr': '([^']*)'/)[1];
  const bytes = buf.subarray(start + headerLength);
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)), shape);
  if (descr === '|b1') return new ort.Tensor('bool', Uint8Array.from(bytes), shape);
  throw new Error(`${file}: dtype ${descr} (float32 or bool only)`);
}

function relativeError(got, expected) {
  if (got.data.length !== expected.data.length) throw new Error(`output has ${got.dims}, output.npy ${expected.dims}`);
  let diff = 0, scale = 0;
  for (let i = 0; i < got.data.length; ++i) {
    diff = Math.max(diff, Math.abs(got.data[i] - expected.data[i]));
    scale = Math.max(scale, Math.abs(expected.data[i]));
  }
  return diff / Math.max(scale, 1e-30);
}

async function main() {
  const [dir, threads, runs] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
  if (!dir || !(threads >= 1) || !(runs >= 1)) throw new Error('usage: node time_ort.js <dir> <threads> <runs>');
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: threads, interOpNumThreads: 1,
  });
  const feeds = {};
  session.inputNames.forEach((name, i) => { feeds[name] = loadNpy(path.join(dir, `input_${i}.npy`)); });
  let output;
  for (let i = 0; i < 2; ++i) output = (await session.run(feeds))[session.outputNames[0]];
  const ms = [];
  for (let i = 0; i < runs; ++i) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const expected = path.join(dir, 'output.npy');
  const error = fs.existsSync(expected) ? relativeError(output, loadNpy(expected)).toExponential(1).replace(/e([+-])(\d)$/, 'e$10$2') : '-';
  console.log(`${ms[Math.floor(runs / 2)].toFixed(3)} ${error}`);
}

main().catch(e => { console.error(`time_ort.js: ${e.message}`); process.exit(1); });
