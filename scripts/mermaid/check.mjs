#!/usr/bin/env node
// Parses every ```mermaid block of the given Markdown files (or of stdin,
// given as `-` or no file at all) with Mermaid's own parser, the one GitHub
// runs in the browser to draw them. A block that does not parse shows on
// GitHub as an error box where the chart should be.
//
//   node scripts/mermaid/check.mjs [FILE.md|FILE.snap|-]...
//
// Exit 0: every block parses. Exit 1: at least one does not; each is printed
// on stdout with its file, its first line, its text and Mermaid's error.
// Exit 2: a file cannot be read. The count of blocks checked goes to stderr.
//
// Which Mermaid: GitHub draws diagrams in the browser with a Mermaid 11
// release that it does not announce (a ```mermaid block holding just `info`
// shows it; 11.3.0 in January 2025). Within 11.x the xychart grammar only
// grew: 11.10 added the `xychart` keyword without `-beta`, 11.13 fixed
// `accDescr { }`, 11.16 added labelled data points. So every block is parsed
// twice, by 11.9.0 (the grammar of 11.0 to 11.9) and by 11.17.2 (the newest
// 11.x), both pinned in package-lock.json: a block that passes both parses on
// any 11.x GitHub may serve. (12.x needs Node 22 and is not GitHub's yet.)

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { JSDOM } from 'jsdom';
import { mermaidBlocks } from './blocks.mjs';

// Mermaid sanitises titles and labels with DOMPurify while it parses, and
// DOMPurify binds to `window` when it is first imported: give it one (jsdom)
// before importing Mermaid, or every parse fails with "addHook is not a function".
const { window } = new JSDOM('');
globalThis.window = window;
globalThis.document = window.document;
const require = createRequire(import.meta.url);
const parsers = [];
for (const pkg of ['mermaid-11-9', 'mermaid']) {
  const { default: mermaid } = await import(pkg);
  // As GitHub configures it: no scripts, no HTML labels; quiet, since a
  // parse failure is reported below, once, with its place in the file.
  mermaid.initialize({ startOnLoad: false, securityLevel: 'strict', logLevel: 'fatal' });
  parsers.push({ mermaid, version: require(`${pkg}/package.json`).version });
}
const versions = parsers.map((p) => p.version).join(' and ');

const args = process.argv.slice(2);
if (args.includes('-h') || args.includes('--help')) {
  process.stdout.write('usage: node check.mjs [FILE|-]...  (no FILE: read stdin)\n');
  process.exit(0);
}
const files = args.length === 0 ? ['-'] : args;

let checked = 0;
let failed = 0;
for (const file of files) {
  const name = file === '-' ? '<stdin>' : file;
  let text;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    process.stderr.write(`${name}: cannot read: ${e.message}\nhint: pass Markdown files, or - for stdin\n`);
    process.exit(2);
  }
  for (const block of mermaidBlocks(text)) {
    checked++;
    const errors = [];
    for (const { mermaid, version } of parsers) {
      try {
        await mermaid.parse(block.source);
      } catch (e) {
        errors.push({ version, message: String(e?.message ?? e).trimEnd() });
      }
    }
    if (errors.length > 0) {
      failed++;
      process.stdout.write(report(name, text, block, errors));
    }
  }
}
process.stderr.write(
  `mermaid ${versions}: ${checked} block${checked === 1 ? '' : 's'} in ${files.length} file${files.length === 1 ? '' : 's'}, ` +
    (failed === 0 ? 'all parse\n' : `${failed} do${failed === 1 ? 'es' : ''} not parse\n`),
);
process.exit(failed === 0 ? 0 : 1);

/** One failure: where, the block as it stands in the file (numbered), each version's error, a hint. */
function report(name, text, block, errors) {
  const lines = text.split(/\r\n|\n|\r/).slice(block.line - 1, block.endLine);
  const width = String(block.endLine).length;
  const numbered = lines.map((l, k) => `  ${String(block.line + k).padStart(width)} | ${l}`).join('\n');
  const said = errors.map(({ version, message }) => {
    // Mermaid counts lines from the diagram's first line, the one after the fence.
    const at = /on line (\d+)/.exec(message);
    const where = at ? ` (its line ${at[1]} is line ${block.line + Number(at[1])} of the file)` : '';
    return `  mermaid ${version}${where}:\n${message.split('\n').map((l) => `    ${l}`).join('\n')}\n`;
  });
  const which = errors.length === parsers.length ? versions : errors.map((e) => e.version).join(' and ');
  return (
    `${name}:${block.line}:1: this Mermaid block (lines ${block.line}-${block.endLine}) does not parse with mermaid ${which}\n` +
    `${numbered}\n${said.join('')}` +
    'hint: GitHub shows an error box instead of this chart; the syntax is at https://mermaid.js.org/syntax/\n\n'
  );
}
