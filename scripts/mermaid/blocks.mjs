// The fenced code blocks of a Markdown text whose info string is `mermaid`,
// found as CommonMark finds fences: an opening run of at least three ` or ~
// indented by at most three spaces, closed by a run of the same character at
// least as long (or by the end of the text). A ```mermaid line inside another
// fence (say a ````markdown example) is text, not a diagram, and is skipped.

const OPEN = /^( {0,3})(`{3,}|~{3,})(.*)$/;

/**
 * @param {string} text Markdown (an insta .snap works too: its header is not a fence)
 * @returns {{line: number, endLine: number, source: string}[]} 1-based line of the opening fence,
 *   1-based line of the closing fence (or of the last line when unclosed), and the diagram text
 */
export function mermaidBlocks(text) {
  const lines = text.split(/\r\n|\n|\r/);
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = OPEN.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, info] = open;
    // A backtick fence's info string may not contain a backtick (CommonMark 4.5).
    if (fence[0] === '`' && info.includes('`')) continue;
    const lang = info.trim().split(/\s+/)[0];
    const close = new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}[ \\t]*$`);
    let j = i + 1;
    while (j < lines.length && !close.test(lines[j])) j++;
    if (lang === 'mermaid') {
      // Content lines lose up to as many leading spaces as the fence had.
      const strip = new RegExp(`^ {0,${indent.length}}`);
      const body = lines.slice(i + 1, j).map((l) => l.replace(strip, ''));
      blocks.push({ line: i + 1, endLine: Math.min(j, lines.length - 1) + 1, source: body.join('\n') });
    }
    i = j;
  }
  return blocks;
}
