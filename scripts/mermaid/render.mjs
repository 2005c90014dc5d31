#!/usr/bin/env node
// Renders a Markdown comment to a PNG as GitHub shows it in a pull request:
// GitHub-flavoured Markdown (tables, <details>, > [!WARNING] alerts, line
// breaks kept as in comments), GitHub's own stylesheet (npm
// github-markdown-css, light theme), ```diff colouring and the Mermaid
// charts drawn by Mermaid 11.17.2, in headless Chromium.
//
//   node scripts/mermaid/render.mjs COMMENT.md|- OUT.png [options]
//     --collapsed     leave <details> folded, as a reader first sees it
//                     (default: every <details> open, so the charts show)
//     --document      render as a file (README.md) is rendered: a single
//                     newline is a space, no comment frame
//     --width PX      the comment's width (default 880, a PR's timeline)
//     --scale N       device pixels per CSS pixel (default 2, sharp on HiDPI)
//     --html FILE     also write the page that was photographed
//
// Chromium: /usr/bin/chromium (Debian's `chromium`), or $CHROMIUM. Exit 1
// when a Mermaid block fails to render (GitHub would show an error box
// there; the picture still shows it), 2 on bad usage or a missing browser.

import { existsSync, readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Marked } from 'marked';
import markedAlert from 'marked-alert';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);

function usage(message) {
  process.stderr.write(
    `${message}\nusage: node render.mjs COMMENT.md|- OUT.png [--collapsed] [--document] [--width PX] [--scale N] [--html FILE]\n`,
  );
  process.exit(2);
}

const positional = [];
const opts = { collapsed: false, document: false, width: 880, scale: 2, html: null };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--collapsed') opts.collapsed = true;
  else if (a === '--document') opts.document = true;
  else if (a === '--width' || a === '--scale' || a === '--html') {
    const v = argv[++i];
    if (v === undefined) usage(`${a} needs a value`);
    opts[a.slice(2)] = a === '--html' ? v : Number(v);
    if (a !== '--html' && !(opts[a.slice(2)] > 0)) usage(`${a} ${v}: expected a positive number`);
  } else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else positional.push(a);
}
if (positional.length !== 2) usage('expected the Markdown file (or -) and the PNG to write');
const [input, output] = positional;

const markdown = readFileSync(input === '-' ? 0 : input, 'utf8');
const browserPath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(browserPath)) {
  process.stderr.write(
    `${browserPath}: no Chromium there\nhint: apt-get install chromium (Debian), or set CHROMIUM to a Chrome or Chromium binary\n`,
  );
  process.exit(2);
}

const escapeHtml = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

// GitHub colours a ```diff block line by line with these classes.
function diffHtml(text) {
  return text
    .split('\n')
    .map((line) => {
      const cls = line.startsWith('+++') || line.startsWith('---') ? 'pl-mdr'
        : line.startsWith('@@') ? 'pl-mdr'
        : line.startsWith('+') ? 'pl-mi1'
        : line.startsWith('-') ? 'pl-md'
        : null;
      return cls ? `<span class="${cls}">${escapeHtml(line)}</span>` : escapeHtml(line);
    })
    .join('\n');
}

const marked = new Marked({ gfm: true, breaks: !opts.document });
marked.use(markedAlert());
marked.use({
  renderer: {
    code({ text, lang }) {
      const language = (lang || '').trim().split(/\s+/)[0];
      if (language === 'mermaid') return `<div class="mermaid-box"><pre class="mermaid">${escapeHtml(text)}</pre></div>\n`;
      const body = language === 'diff' ? diffHtml(text) : escapeHtml(text);
      return `<div class="highlight"><pre><code>${body}</code></pre></div>\n`;
    },
  },
});
let body = marked.parse(markdown);
if (!opts.collapsed) body = body.replace(/<details(?![^>]*\bopen\b)/g, '<details open');

const css = readFileSync(require.resolve('github-markdown-css/github-markdown-light.css'), 'utf8');
const frame = opts.document
  ? `<article class="markdown-body doc">${body}</article>`
  : `<div class="comment">
  <div class="comment-header"><strong>github-actions</strong> <span class="bot">bot</span> commented</div>
  <article class="markdown-body">${body}</article>
</div>`;
const page = `<!doctype html>
<html><head><meta charset="utf-8"><title>comment</title>
<style>${css}</style>
<style>
  /* The PR timeline around the comment: page, frame, header (github.com, light). */
  html, body { margin: 0; background: #ffffff; }
  body { padding: 16px; width: ${opts.width}px; font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
  .comment { border: 1px solid #d1d9e0; border-radius: 6px; overflow: hidden; }
  .comment-header { background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px; font-size: 14px; color: #59636e; }
  .comment-header strong { color: #1f2328; }
  .comment-header .bot { border: 1px solid #d1d9e0; border-radius: 2em; padding: 0 6px; font-size: 12px; }
  .comment .markdown-body { padding: 16px; }
  .markdown-body { font-size: 14px; }
  .markdown-body.doc { font-size: 16px; }
  /* GitHub draws a diagram centred in the width of the comment. */
  .mermaid-box { margin-bottom: 16px; text-align: center; }
  .mermaid-box pre.mermaid { background: transparent; padding: 0; margin: 0; white-space: pre; }
</style></head>
<body>${frame}</body></html>`;
if (opts.html) writeFileSync(opts.html, page);

const profile = mkdtempSync(join(tmpdir(), 'gate-render-'));
let context;
let failures = [];
try {
  // A fresh profile, deleted afterwards: nothing from an earlier run.
  context = await chromium.launchPersistentContext(profile, {
    executablePath: browserPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
    viewport: { width: opts.width + 32, height: 600 },
    deviceScaleFactor: opts.scale,
  });
  const tab = await context.newPage();
  // Nothing leaves the machine: the page and its scripts are all local.
  await tab.route('**/*', (route) => (route.request().url().startsWith('data:') ? route.continue() : route.abort()));
  await tab.setContent(page, { waitUntil: 'load' });
  await tab.addScriptTag({ path: require.resolve('mermaid/dist/mermaid.min.js') });
  failures = await tab.evaluate(async () => {
    const errors = [];
    // GitHub's Mermaid: default (light) theme, strict security.
    window.mermaid.initialize({ startOnLoad: false, theme: 'default', securityLevel: 'strict' });
    const nodes = [...document.querySelectorAll('pre.mermaid')];
    for (const [k, node] of nodes.entries()) {
      const source = node.textContent;
      try {
        const { svg } = await window.mermaid.render(`chart${k}`, source);
        node.innerHTML = svg;
      } catch (e) {
        errors.push({ index: k + 1, message: String(e?.message ?? e) });
        node.textContent = `Unable to render rich display\n\n${String(e?.message ?? e)}`;
        node.style.cssText = 'color:#d1242f;text-align:left;white-space:pre-wrap';
      }
    }
    return errors;
  });
  const box = await tab.locator('body').boundingBox();
  await tab.screenshot({ path: output, clip: { x: 0, y: 0, width: Math.ceil(box.width), height: Math.ceil(box.height) }, fullPage: true });
} finally {
  await context?.close();
  rmSync(profile, { recursive: true, force: true });
}
for (const f of failures) process.stderr.write(`${input}: Mermaid block ${f.index} did not render: ${f.message}\n`);
process.stderr.write(`wrote ${output}\n`);
process.exit(failures.length === 0 ? 0 : 1);
