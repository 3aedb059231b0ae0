// pride console: markdown to DOM nodes, safe for hostile text.
//
// A model's answer is written by whoever wrote the model's input: it may hold
// HTML, scripts, event handlers and javascript: links meant for this page. So
// nothing here ever parses HTML: the renderer builds elements with
// document.createElement and puts every piece of the text in text nodes, so
// `<script>` in an answer is shown as the characters `<script>`. Links keep
// only http, https and mailto targets (anything else is shown as text);
// images are never loaded (their alt text is shown), so an answer cannot make
// the browser fetch a tracking pixel. What is rendered: paragraphs with line
// breaks, headings, fenced and indented code, block quotes, lists, rules,
// and inline code, bold, italics and links.
"use strict";

// Bounded work for hostile text: a longer answer is shown as it is, and a block
// (a paragraph, a list item) longer than INLINE_LIMIT gets no inline markup,
// since an unclosed construct makes each search scan to the block's end.
const MARKDOWN_LIMIT = 100000;
const INLINE_LIMIT = 5000;
const LINK_SCHEMES = new Set(["http:", "https:", "mailto:"]);

// The earliest inline construct at or after `from` in `text`, or null.
const INLINE = [
  ["code", /(`+)([\s\S]+?)\1/g],
  ["image", /!\[([^\]\n]*)\]\(([^)\s]*)\)/g],
  ["link", /\[([^\]\n]+)\]\(([^)\s]+)\)/g],
  ["strong", /\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__/g],
  ["em", /\*(?=[^\s*])([^*]*?[^\s*])\*|\b_(?=[^\s_])([^_]*?[^\s_])_\b/g],
];

function safeHref(raw) {
  try {
    const url = new URL(raw, window.location.href);
    return LINK_SCHEMES.has(url.protocol) ? url.href : null;
  } catch (error) {
    return null;  // not a URL at all: shown as text
  }
}

// Inline markdown of `text` appended to `parent` (depth bounds nesting).
function renderInline(parent, text, depth) {
  if (text.length > INLINE_LIMIT) {
    appendText(parent, text);
    return;
  }
  let position = 0;
  // Each construct's next match (null: none left), kept while still ahead:
  // a search that found nothing from here finds nothing further on either.
  const ahead = new Map();
  while (position < text.length) {
    let best = null;
    for (const [kind, pattern] of INLINE) {
      if (depth > 8 && kind !== "code") continue;
      let match = ahead.get(kind);
      if (match === undefined || (match !== null && match.index < position)) {
        pattern.lastIndex = position;
        match = pattern.exec(text);
        ahead.set(kind, match);
      }
      if (match && (best === null || match.index < best.match.index)) best = {kind, match};
    }
    if (best === null) break;
    const {kind, match} = best;
    appendText(parent, text.slice(position, match.index));
    if (kind === "code") {
      const code = document.createElement("code");
      code.textContent = match[2];
      parent.append(code);
    } else if (kind === "image") {
      const alt = document.createElement("span");
      alt.className = "image-alt";
      alt.textContent = `[image${match[1] ? ": " + match[1] : ""}]`;
      parent.append(alt);
    } else if (kind === "link") {
      const href = safeHref(match[2]);
      if (href === null) {
        appendText(parent, match[0]);
      } else {
        const link = document.createElement("a");
        link.href = href;
        link.rel = "noopener noreferrer nofollow";
        link.target = "_blank";
        renderInline(link, match[1], depth + 1);
        parent.append(link);
      }
    } else {
      const element = document.createElement(kind);
      renderInline(element, match[1] !== undefined ? match[1] : match[2], depth + 1);
      parent.append(element);
    }
    position = match.index + match[0].length;
  }
  appendText(parent, text.slice(position));
}

// Text with its line breaks kept.
function appendText(parent, text) {
  const lines = text.split("\n");
  lines.forEach((line, index) => {
    if (index > 0) parent.append(document.createElement("br"));
    if (line) parent.append(document.createTextNode(line));
  });
}

function block(tag, text) {
  const element = document.createElement(tag);
  renderInline(element, text, 0);
  return element;
}

// The markdown `text` as a fragment of DOM nodes (see the top of this file).
function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  if (text.length > MARKDOWN_LIMIT) {
    const pre = document.createElement("pre");
    pre.textContent = text;
    fragment.append(pre);
    return fragment;
  }
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let index = 0;
  while (index < lines.length) {
    const line = lines[index];
    const fence = /^\s*(```+|~~~+)/.exec(line);
    if (fence) {
      const body = [];
      index += 1;
      while (index < lines.length && !lines[index].trim().startsWith(fence[1])) {
        body.push(lines[index]);
        index += 1;
      }
      index += 1;  // the closing fence (or the end)
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      code.textContent = body.join("\n");
      pre.append(code);
      fragment.append(pre);
      continue;
    }
    if (!line.trim()) {
      index += 1;
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      fragment.append(block(`h${Math.min(6, heading[1].length + 2)}`, heading[2]));
      index += 1;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      fragment.append(document.createElement("hr"));
      index += 1;
      continue;
    }
    if (/^>\s?/.test(line)) {
      const quoted = [];
      while (index < lines.length && /^>\s?/.test(lines[index])) {
        quoted.push(lines[index].replace(/^>\s?/, ""));
        index += 1;
      }
      const quote = document.createElement("blockquote");
      quote.append(renderMarkdown(quoted.join("\n")));
      fragment.append(quote);
      continue;
    }
    const item = /^\s*([-*+]|\d{1,9}[.)])\s+/;
    if (item.test(line)) {
      const ordered = /\d/.test(item.exec(line)[1]);
      const list = document.createElement(ordered ? "ol" : "ul");
      while (index < lines.length && item.test(lines[index])) {
        list.append(block("li", lines[index].replace(item, "")));
        index += 1;
      }
      fragment.append(list);
      continue;
    }
    if (/^( {4}|\t)/.test(line)) {
      const body = [];
      while (index < lines.length && (/^( {4}|\t)/.test(lines[index]) || !lines[index].trim())) {
        body.push(lines[index].replace(/^( {4}|\t)/, ""));
        index += 1;
      }
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      code.textContent = body.join("\n").replace(/\n+$/, "");
      pre.append(code);
      fragment.append(pre);
      continue;
    }
    const paragraph = [line];  // its first line always, so every pass moves on
    index += 1;
    while (index < lines.length && lines[index].trim()
           && !/^\s*(```|~~~|#{1,6}\s|>)/.test(lines[index])) {
      paragraph.push(lines[index]);
      index += 1;
    }
    fragment.append(block("p", paragraph.join("\n")));
  }
  return fragment;
}
