// app.js — the chat page of braid serve: conversations kept in localStorage, replies streamed from this
// server's /v1/chat/completions (SSE read from fetch), a status line from /slots and /metrics. Model text only
// ever reaches the page as DOM text nodes (the Markdown renderer below builds elements itself), never as HTML.
// When /v1/models says the server has a vision projector (meta.vision), images can be attached to a message
// (the Image button or a paste): kept as data: URLs with the message, shown as thumbnails, and sent as
// OpenAI image_url parts (the CSP allows data: images; nothing is fetched from elsewhere).
'use strict';

const $ = (id) => document.getElementById(id);
const STORE = 'braid.conversations', CURRENT = 'braid.current', SETTINGS = 'braid.settings', KEY = 'braid.apikey';
const SAMPLING = ['temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'seed'];
const DEFAULTS = { system: '', temperature: 0.8, top_p: 0.95, top_k: 40, min_p: 0.05, max_tokens: 256, seed: '' };

let convs = load(STORE, []);
let current = localStorage.getItem(CURRENT);
let settings = Object.assign({}, DEFAULTS, load(SETTINGS, {}));
let busy = null; // {controller} while a reply streams
let vision = false; // the server accepts images (/v1/models meta.vision)
let pending = [];   // data: URLs of the images attached to the message being written

function load(key, dflt) {
  try { const v = JSON.parse(localStorage.getItem(key)); return v == null ? dflt : v; } catch (e) { return dflt; }
}
function save() {
  try {
    localStorage.setItem(STORE, JSON.stringify(convs));
  } catch (e) { // images make conversations large: the page keeps working, the storage is behind
    $('status').textContent = 'storage full: this conversation is not saved in the browser';
  }
  if (current) localStorage.setItem(CURRENT, current);
}
function conv() { return convs.find((c) => c.id === current); }
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

// ---- Markdown: fenced code blocks, inline code, bold, italic, bullet and numbered lists, paragraphs. -------
// Built as DOM nodes from the text, so no markup in the model's output is ever interpreted.
function renderInline(parent, text) {
  // `code` first (its inside is literal), then **bold** / __bold__, then *italic* / _italic_
  const re = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+?)\*\*|__([^_]+?)__|\*([^*\s][^*]*?)\*|\b_([^_\s][^_]*?)_\b/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
    if (m[2] != null) parent.appendChild(el('code', null, m[2]));
    else if (m[3] != null || m[4] != null) renderInline(parent.appendChild(el('strong')), m[3] != null ? m[3] : m[4]);
    else renderInline(parent.appendChild(el('em')), m[5] != null ? m[5] : m[6]);
    last = re.lastIndex;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
}
function renderMarkdown(text) {
  const root = el('div', 'md');
  const lines = text.split('\n');
  let para = [], list = null;
  const flushPara = () => {
    if (para.length) renderInline(root.appendChild(el('p')), para.join('\n'));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
    if (fence) {
      flushPara(); list = null;
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) code.push(lines[i]);
      const pre = root.appendChild(el('pre'));
      const c = pre.appendChild(el('code', null, code.join('\n')));
      if (fence[2]) c.dataset.lang = fence[2];
      continue;
    }
    const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
    if (item) {
      flushPara();
      const tag = /\d/.test(item[1]) ? 'ol' : 'ul';
      if (!list || list.tagName.toLowerCase() !== tag) list = root.appendChild(el(tag));
      renderInline(list.appendChild(el('li')), item[2]);
      continue;
    }
    if (!line.trim()) { flushPara(); list = null; continue; }
    list = null;
    para.push(line);
  }
  flushPara();
  return root;
}

// The reply's reasoning: the server's reasoning_content, or a <think>…</think> block at the start of the text.
function splitThink(content) {
  const m = content.match(/^\s*<think>([\s\S]*?)(<\/think>|$)([\s\S]*)$/);
  if (!m) return { reasoning: '', text: content };
  return { reasoning: m[1].trim(), text: m[3].replace(/^\s+/, ''), open: m[2] === '' };
}

// ---- the conversation list and the messages ---------------------------------------------------------------
function renderList() {
  const ul = $('convs');
  ul.replaceChildren();
  for (const c of [...convs].sort((a, b) => b.updated - a.updated)) {
    const li = el('li', c.id === current ? 'current' : null);
    const a = li.appendChild(el('a', null, c.title || 'New chat'));
    a.dataset.id = c.id;
    a.addEventListener('click', () => { if (!busy) { current = c.id; save(); renderAll(); } });
    const del = li.appendChild(el('button', 'del', '✕'));
    del.title = 'Delete';
    del.addEventListener('click', () => {
      if (busy) return;
      convs = convs.filter((x) => x !== c);
      if (current === c.id) current = convs.length ? convs[0].id : null;
      save(); renderAll();
    });
    ul.appendChild(li);
  }
}

function statsText(s) {
  if (!s) return '';
  const parts = [];
  if (s.cached != null) parts.push(`cached ${s.cached}`);
  if (s.computed != null) parts.push(`computed ${s.computed}`);
  if (s.predicted != null) parts.push(`${s.predicted} tokens`);
  if (s.tps != null) parts.push(`${s.tps.toFixed(1)} tok/s`);
  if (s.finish) parts.push(s.finish);
  return parts.join(' · ');
}

function renderMessage(m, idx) {
  const d = el('div', `msg ${m.role}${m.error ? ' error' : ''}`);
  d.dataset.index = idx;
  const tools = d.appendChild(el('span', 'tools'));
  d.appendChild(el('div', 'who', m.role));
  if (m.role === 'user') {
    const b = tools.appendChild(el('button', 'edit', 'Edit'));
    b.addEventListener('click', () => editTurn(idx, d));
  }
  if (m.images && m.images.length) {
    const box = d.appendChild(el('div', 'images'));
    for (const u of m.images) {
      const img = box.appendChild(el('img', 'thumb'));
      img.alt = 'attached image';
      img.src = u;
    }
  }
  const body = d.appendChild(el('div', 'body'));
  fillBody(body, m);
  if (m.role === 'assistant') d.appendChild(el('div', 'stats', statsText(m.stats)));
  return d;
}

function fillBody(body, m) {
  body.replaceChildren();
  if (m.error) { body.textContent = m.error; return; }
  let text = m.content || '', reasoning = m.reasoning || '';
  if (m.role === 'assistant') {
    const t = splitThink(text);
    if (t.reasoning) reasoning = reasoning ? reasoning + '\n' + t.reasoning : t.reasoning;
    text = t.text;
  }
  if (reasoning) {
    const det = body.appendChild(el('details', 'reasoning'));
    det.appendChild(el('summary', null, 'Reasoning'));
    det.appendChild(renderMarkdown(reasoning));
  }
  for (const tc of m.tool_calls || []) {
    const box = body.appendChild(el('div', 'tool-call'));
    box.appendChild(el('strong', null, `tool call: ${(tc.function && tc.function.name) || '?'}`));
    let args = (tc.function && tc.function.arguments) || '';
    try { args = JSON.stringify(JSON.parse(args), null, 2); } catch (e) { /* shown as it came */ }
    box.appendChild(el('pre', null, args));
  }
  body.appendChild(renderMarkdown(text));
}

function renderMessages() {
  const box = $('messages');
  box.replaceChildren();
  const c = conv();
  if (c) c.messages.forEach((m, i) => box.appendChild(renderMessage(m, i)));
  box.scrollTop = box.scrollHeight;
  const last = c && c.messages[c.messages.length - 1];
  $('regen').disabled = !!busy || !c || !c.messages.some((m) => m.role === 'user');
  void last;
}

function renderAll() {
  renderList();
  renderMessages();
  const c = conv();
  $('system').value = c ? c.system || '' : settings.system;
}

// ---- settings ---------------------------------------------------------------------------------------------
function initSettings() {
  for (const k of SAMPLING) {
    $(k).value = settings[k];
    $(k).addEventListener('change', () => {
      settings[k] = $(k).value;
      localStorage.setItem(SETTINGS, JSON.stringify(settings));
    });
  }
  $('system').addEventListener('change', () => {
    settings.system = $('system').value;
    localStorage.setItem(SETTINGS, JSON.stringify(settings));
    const c = conv();
    if (c) { c.system = settings.system; save(); }
  });
  $('settings-toggle').addEventListener('click', () => { $('settings').hidden = !$('settings').hidden; });
}

function samplingFields() {
  const o = {};
  for (const k of SAMPLING) {
    const v = String(settings[k]).trim();
    if (v === '') continue;
    const n = Number(v);
    if (Number.isFinite(n)) o[k] = ['top_k', 'max_tokens', 'seed'].includes(k) ? Math.trunc(n) : n;
  }
  return o;
}

// ---- talking to the server --------------------------------------------------------------------------------
function headers(json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  const k = localStorage.getItem(KEY);
  if (k) h.Authorization = 'Bearer ' + k;
  return h;
}

let keyWaiters = null;
function askKey() { // resolves once the user gave a key
  if (!keyWaiters) {
    keyWaiters = [];
    const dlg = $('keydlg');
    $('apikey').value = '';
    dlg.showModal();
    dlg.addEventListener('close', () => {
      const v = $('apikey').value.trim();
      if (v) localStorage.setItem(KEY, v);
      const w = keyWaiters; keyWaiters = null;
      w.forEach((f) => f());
    }, { once: true });
  }
  return new Promise((res) => keyWaiters.push(res));
}

async function api(path, opts) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(path, Object.assign({}, opts, { headers: headers(opts && opts.body) }));
    if (r.status !== 401 || attempt >= 3) return r;
    await askKey();
  }
}

function newConv() {
  const c = { id: 'c' + Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: '',
              system: $('system').value, messages: [], created: Date.now(), updated: Date.now() };
  convs.push(c);
  current = c.id;
  save();
  return c;
}

async function send(text, images) {
  let c = conv() || newConv();
  const m = { role: 'user', content: text };
  if (images && images.length) m.images = images;
  c.messages.push(m);
  if (!c.title) c.title = text.slice(0, 60) || 'Image';
  await reply(c);
}

// A message for the request: with images, OpenAI content parts (the images first, as `braid chat` places an
// /image before the text it goes with).
function apiMessage(x) {
  if (!x.images || !x.images.length) return { role: x.role, content: x.content };
  const parts = x.images.map((u) => ({ type: 'image_url', image_url: { url: u } }));
  if (x.content) parts.push({ type: 'text', text: x.content });
  return { role: x.role, content: parts };
}

// ---- attaching images ---------------------------------------------------------------------------------------
function renderAttachments() {
  const box = $('attachments');
  box.replaceChildren();
  pending.forEach((u, i) => {
    const a = box.appendChild(el('span', 'att'));
    const img = a.appendChild(el('img', 'thumb'));
    img.alt = 'image to send';
    img.src = u;
    const x = a.appendChild(el('button', null, '✕'));
    x.type = 'button';
    x.title = 'Remove';
    x.addEventListener('click', () => { pending.splice(i, 1); renderAttachments(); });
  });
}
function attachFiles(files) {
  for (const f of files) {
    if (!/^image\/(png|jpeg|webp)$/.test(f.type)) continue;
    const rd = new FileReader();
    rd.addEventListener('load', () => { pending.push(String(rd.result)); renderAttachments(); });
    rd.readAsDataURL(f);
  }
}
async function checkVision() {
  try {
    const r = await api('/v1/models');
    const j = r.ok ? await r.json() : null;
    vision = !!(j && j.data && j.data[0] && j.data[0].meta && j.data[0].meta.vision);
  } catch (e) { vision = false; }
  $('attach').hidden = !vision;
}

// Streams one assistant reply to the end of c.messages.
async function reply(c) {
  const m = { role: 'assistant', content: '', reasoning: '', tool_calls: [], stats: null };
  c.messages.push(m);
  c.updated = Date.now();
  save();
  renderAll();
  const node = $('messages').lastElementChild;
  const body = node.querySelector('.body'), stats = node.querySelector('.stats');
  const controller = new AbortController();
  busy = { controller };
  setBusy(true);
  const messages = [];
  const sys = (c.system || '').trim();
  if (sys) messages.push({ role: 'system', content: sys });
  for (const x of c.messages.slice(0, -1)) if (!x.error) messages.push(apiMessage(x));
  const req = Object.assign({ messages, stream: true, stream_options: { include_usage: true } }, samplingFields());
  const t0 = performance.now();
  let finish = null, timings = null, usage = null, redraw = 0;
  try {
    const r = await api('/v1/chat/completions', { method: 'POST', body: JSON.stringify(req), signal: controller.signal });
    if (!r.ok) {
      let msg = `HTTP ${r.status}`;
      try { const j = await r.json(); if (j.error && j.error.message) msg += ': ' + j.error.message; } catch (e) { /* */ }
      throw new Error(msg);
    }
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = '', done = false;
    while (!done) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, cut); buf = buf.slice(cut + 2);
        for (const line of ev.split('\n')) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') { done = true; break; }
          const j = JSON.parse(data);
          if (j.error) throw new Error(j.error.message || 'server error');
          if (j.usage) usage = j.usage;
          if (j.timings) timings = j.timings;
          const ch = j.choices && j.choices[0];
          if (!ch) continue;
          const dl = ch.delta || {};
          if (dl.content) m.content += dl.content;
          if (dl.reasoning_content) m.reasoning += dl.reasoning_content;
          for (const tc of dl.tool_calls || []) {
            const i = tc.index || 0;
            const t = m.tool_calls[i] || (m.tool_calls[i] = { id: tc.id, type: 'function', function: { name: '', arguments: '' } });
            if (tc.function && tc.function.name) t.function.name += tc.function.name;
            if (tc.function && tc.function.arguments) t.function.arguments += tc.function.arguments;
          }
          if (ch.finish_reason) finish = ch.finish_reason;
        }
      }
      const now = performance.now();
      if (now - redraw > 50) { redraw = now; fillBody(body, m); $('messages').scrollTop = $('messages').scrollHeight; }
    }
  } catch (e) {
    if (e.name === 'AbortError') finish = 'stopped';
    else { m.error = String(e.message || e); }
  }
  const secs = (performance.now() - t0) / 1000;
  m.stats = {
    cached: usage && usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : timings ? timings.cache_n : null,
    computed: timings ? timings.prompt_n : null,
    predicted: timings ? timings.predicted_n : usage ? usage.completion_tokens : null,
    tps: timings && timings.predicted_per_second ? timings.predicted_per_second : null,
    finish: finish || (m.error ? 'error' : null),
    seconds: secs,
  };
  if (!m.tool_calls.length) delete m.tool_calls;
  busy = null;
  c.updated = Date.now();
  save();
  setBusy(false);
  fillBody(body, m);
  stats.textContent = statsText(m.stats);
  node.classList.toggle('error', !!m.error);
  node.dataset.done = '1';
  renderList();
  refreshStatus();
}

function setBusy(on) {
  $('send').hidden = on;
  $('stop').hidden = !on;
  $('regen').disabled = on;
  document.body.classList.toggle('busy', on);
}

function regenerate() {
  const c = conv();
  if (busy || !c) return;
  while (c.messages.length && c.messages[c.messages.length - 1].role !== 'user') c.messages.pop();
  if (c.messages.length) reply(c);
}

function editTurn(idx, node) {
  const c = conv();
  if (busy || !c) return;
  const body = node.querySelector('.body');
  const ta = el('textarea');
  ta.value = c.messages[idx].content;
  ta.rows = 3;
  const ok = el('button', 'save', 'Save & regenerate'), cancel = el('button', null, 'Cancel');
  body.replaceChildren(ta, ok, cancel);
  ta.focus();
  cancel.addEventListener('click', renderMessages);
  ok.addEventListener('click', () => {
    c.messages[idx].content = ta.value;
    c.messages.length = idx + 1; // the turns after an edited one belong to another branch
    if (idx === 0 || !c.title) c.title = ta.value.slice(0, 60);
    reply(c);
  });
}

function exportAll() {
  const blob = new Blob([JSON.stringify({ exported: new Date().toISOString(), conversations: convs }, null, 2)],
                        { type: 'application/json' });
  const a = el('a');
  a.href = URL.createObjectURL(blob);
  a.download = 'braid-conversations.json';
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// ---- the status line: slots busy, queue, prompt-cache hit rate -------------------------------------------
function metric(text, name) {
  const m = text.match(new RegExp('^braid_' + name + ' ([0-9.eE+-]+)$', 'm'));
  return m ? Number(m[1]) : null;
}
async function refreshStatus() {
  try {
    const [rs, rm] = await Promise.all([api('/slots'), api('/metrics')]);
    if (!rs.ok || !rm.ok) { $('status').textContent = `status: HTTP ${rs.ok ? rm.status : rs.status}`; return; }
    const slots = await rs.json(), mt = await rm.text();
    const busyN = slots.filter((s) => s.is_processing).length;
    const held = slots.reduce((a, s) => a + (s.n_tokens_held > 0 ? s.n_tokens_held : 0), 0);
    // hit rate: the share of prompt tokens that were not computed again (slots and prompt cache together)
    const pt = metric(mt, 'prompt_tokens_total'), ct = metric(mt, 'prompt_tokens_cached_total');
    const hit = pt ? `${(100 * ct / pt).toFixed(0)}%` : '–';
    const q = metric(mt, 'queue_length'), bytes = metric(mt, 'prompt_cache_bytes');
    const cache = bytes == null ? `${held} tokens held` : `cache ${(bytes / 1048576).toFixed(1)} MiB`;
    $('status').textContent = `slots ${busyN}/${slots.length} busy · queue ${q == null ? '?' : q} · ` +
                              `hit ${hit} · ${cache}`;
  } catch (e) {
    $('status').textContent = 'status: server unreachable';
  }
}

// ---- wiring -----------------------------------------------------------------------------------------------
function init() {
  initSettings();
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('input').value.trim();
    if ((!t && !pending.length) || busy) return;
    $('input').value = '';
    const images = pending;
    pending = [];
    renderAttachments();
    send(t, images);
  });
  $('attach').addEventListener('click', () => $('attach-file').click());
  $('attach-file').addEventListener('change', () => { attachFiles($('attach-file').files); $('attach-file').value = ''; });
  $('input').addEventListener('paste', (e) => {
    if (!vision || !e.clipboardData) return;
    const files = [...e.clipboardData.files].filter((f) => f.type.startsWith('image/'));
    if (files.length) { e.preventDefault(); attachFiles(files); }
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('composer').requestSubmit(); }
  });
  $('stop').addEventListener('click', () => { if (busy) busy.controller.abort(); });
  $('regen').addEventListener('click', regenerate);
  $('new-chat').addEventListener('click', () => { if (!busy) { newConv(); renderAll(); $('input').focus(); } });
  $('export').addEventListener('click', exportAll);
  $('menu').addEventListener('click', () => document.body.classList.toggle('show-sidebar'));
  $('convs').addEventListener('click', () => document.body.classList.remove('show-sidebar'));
  if (!conv()) current = convs.length ? convs[0].id : null;
  renderAll();
  refreshStatus();
  checkVision();
  setInterval(() => { if (!document.hidden) refreshStatus(); }, 5000);
}
document.addEventListener('DOMContentLoaded', init);
