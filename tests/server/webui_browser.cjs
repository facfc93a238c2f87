// webui_browser.cjs — the chat page of `braid serve` in headless chromium (playwright-core): the CSP header,
// the API-key prompt on 401, a streamed reply, stopping a long reply (the server frees the slot), regenerate
// (the reply shows cached / computed tokens and tokens/s), editing a turn, reload (the conversation is still
// listed), export as JSON, the Markdown renderer never interpreting markup, an image attached with the file
// input and another pasted (thumbnails in the composer and in the turn, the request carries image_url parts,
// a reply arrives), then a phone-width pass. Screenshots of each step go to SHOT_DIR. Usage:
//   node webui_browser.cjs PLAYWRIGHT_CORE_DIR CHROMIUM PORT API_KEY SHOT_DIR PNG_FILE
// Prints one "ok ..." line per check; exits 1 at the first failure.
'use strict';
const [pkgDir, chromiumPath, port, key, shotDir, pngFile] = process.argv.slice(2);
const { chromium } = require(pkgDir);
const fs = require('fs');
const path = require('path');
const base = `http://127.0.0.1:${port}`;
const shots = [];
let browser = null;

async function fail(what) {
  console.error(`FAIL: ${what}`);
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}
async function check(cond, what) {
  if (!cond) await fail(what);
  console.log(`ok ${what}`);
}
async function shot(page, name) {
  const file = path.join(shotDir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: false });
  shots.push(file);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The last assistant message once the page marked it finished.
async function waitReply(page, count) {
  await page.waitForFunction((n) => {
    const a = document.querySelectorAll('.msg.assistant');
    return a.length === n && a[n - 1].dataset.done === '1';
  }, count, { timeout: 20000 });
  return page.evaluate(() => {
    const a = [...document.querySelectorAll('.msg.assistant')].pop();
    return { text: a.querySelector('.body').textContent, stats: a.querySelector('.stats').textContent,
             error: a.classList.contains('error') };
  });
}

async function slotsBusy() {
  const r = await fetch(`${base}/slots`, { headers: { Authorization: `Bearer ${key}` } });
  return (await r.json()).filter((s) => s.is_processing).length;
}

async function setSetting(page, id, value) {
  if (await page.isHidden('#settings')) await page.click('#settings-toggle');
  await page.fill(`#${id}`, String(value));
  await page.dispatchEvent(`#${id}`, 'change');
}

async function send(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

async function desktop() {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  const page = await ctx.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error' && !/401/.test(m.text())) problems.push(m.text()); });

  const resp = await page.goto(base + '/');
  const csp = resp.headers()['content-security-policy'] || '';
  await check(resp.status() === 200 && /default-src 'self'/.test(csp) && /script-src 'self'(;|$)/.test(csp),
              `desktop: / is served with a strict CSP (${csp.slice(0, 40)}...)`);

  // the status line asks /slots and /metrics at once: the server says 401, the page asks for the key
  await page.waitForSelector('#keydlg[open]', { timeout: 10000 });
  await shot(page, 'desktop-1-api-key');
  await page.fill('#apikey', key);
  await page.click('#keysave');
  await page.waitForFunction(() => /slots \d+\/\d+ busy/.test(document.getElementById('status').textContent),
                             null, { timeout: 10000 });
  await check(true, 'desktop: the key prompt appeared on 401 and the status line reads /slots and /metrics');
  const status0 = await page.textContent('#status');
  await check(/hit (\d+%|–) · (cache \d+\.\d MiB|\d+ tokens held)/.test(status0), `desktop: status "${status0}"`);

  // a streamed reply
  await setSetting(page, 'max_tokens', 48);
  await setSetting(page, 'seed', 7);
  await send(page, 'In the beginning');
  let r = await waitReply(page, 1);
  await check(!r.error && r.text.length > 0, `desktop: a reply arrived (${r.text.length} characters)`);
  await check(/computed \d+/.test(r.stats) && /tok\/s/.test(r.stats) && /48 tokens/.test(r.stats),
              `desktop: the reply shows its tokens (${r.stats})`);
  await shot(page, 'desktop-2-reply');

  // a long reply, stopped
  await setSetting(page, 'max_tokens', 3000);
  await send(page, 'Tell me everything');
  await page.waitForFunction(() => {
    const a = [...document.querySelectorAll('.msg.assistant')].pop();
    return document.querySelectorAll('.msg.assistant').length === 2 && a.querySelector('.body').textContent.length > 20;
  }, null, { timeout: 20000 });
  // while it is still running, the page shows more of it: the reply is rendered as it streams
  const partial = await page.evaluate(() => [...document.querySelectorAll('.msg.assistant')].pop()
    .querySelector('.body').textContent.length);
  await page.waitForFunction((n) => {
    const a = [...document.querySelectorAll('.msg.assistant')].pop();
    return !a.dataset.done && a.querySelector('.body').textContent.length > n;
  }, partial, { timeout: 20000 });
  await check(true, `desktop: the reply grows on the page while it streams (past ${partial} characters)`);
  await check(await slotsBusy() === 1, 'desktop: the long reply holds a slot while it streams');
  await page.click('#stop');
  r = await waitReply(page, 2);
  await check(/stopped/.test(r.stats) && r.text.length > 0, `desktop: stop keeps the partial reply (${r.stats})`);
  let freed = false;
  for (let i = 0; i < 50 && !freed; i++) { freed = (await slotsBusy()) === 0; if (!freed) await sleep(100); }
  await check(freed, 'desktop: the server freed the slot after stop');
  await shot(page, 'desktop-3-stopped');

  // regenerate: the same prompt again, its prefix now cached
  await setSetting(page, 'max_tokens', 32);
  await page.click('#regen');
  r = await waitReply(page, 2);
  const cached = Number((r.stats.match(/cached (\d+)/) || [])[1] || 0);
  await check(!r.error && cached > 0 && /32 tokens/.test(r.stats),
              `desktop: regenerate replaced the stopped reply and reused the cache (${r.stats})`);
  await shot(page, 'desktop-4-regenerated');

  // edit the first turn: the turns after it go, a new reply follows
  await page.click('.msg.user[data-index="0"] .edit');
  await page.fill('.msg.user[data-index="0"] textarea', 'In the beginning was the word');
  await page.click('.msg.user[data-index="0"] .save');
  r = await waitReply(page, 1);
  const nMsgs = await page.locator('.msg').count();
  await check(!r.error && nMsgs === 2, `desktop: editing turn 1 branched the chat (${nMsgs} messages, ${r.stats})`);
  await shot(page, 'desktop-5-edited');

  // Markdown: markup in text stays text; code, bold, lists become elements
  const md = await page.evaluate(() => {
    const n = renderMarkdown('<img src=x onerror="window.__pwned=1"> **bold** `a<b>`\n- one\n- two\n```\n<script>x</script>\n```');
    return { img: n.querySelectorAll('img,script').length, strong: n.querySelectorAll('strong').length,
             li: n.querySelectorAll('li').length, pre: n.querySelector('pre code').textContent, text: n.textContent };
  });
  await check(md.img === 0 && md.strong === 1 && md.li === 2 && md.pre === '<script>x</script>' && /<img/.test(md.text),
              'desktop: the Markdown renderer makes elements of Markdown only, never of markup');

  // reload: the conversation is listed and shown again
  await page.reload();
  await page.waitForSelector('#convs li');
  const title = await page.textContent('#convs li.current a');
  const after = await page.locator('.msg').count();
  await check(title === 'In the beginning was the word' && after === 2,
              `desktop: after reload the conversation is listed ("${title}", ${after} messages)`);
  await shot(page, 'desktop-6-reloaded');

  // export
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
  const exported = JSON.parse(fs.readFileSync(await dl.path(), 'utf8'));
  await check(exported.conversations.length === 1 && exported.conversations[0].messages.length === 2,
              'desktop: export downloads the conversations as JSON');

  // images: the server has a projector, so the page offers the Image button; attach one with the file input
  await page.click('#new-chat');
  await page.waitForSelector('#attach', { state: 'visible', timeout: 10000 });
  await page.setInputFiles('#attach-file', pngFile);
  await page.waitForSelector('#attachments img.thumb');
  // and one pasted into the message (a clipboard holding an image file)
  const png = fs.readFileSync(pngFile).toString('base64');
  await page.evaluate((b64) => {
    const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], 'pasted.png', { type: 'image/png' }));
    document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true,
                                                                                 cancelable: true }));
  }, png);
  await page.waitForFunction(() => document.querySelectorAll('#attachments img.thumb').length === 2, null,
                             { timeout: 10000 });
  await check(true, 'desktop: an image attached with the file input and one pasted show as thumbnails');
  await shot(page, 'desktop-7-image-attached');
  await setSetting(page, 'max_tokens', 12);
  const sent = page.waitForRequest((q) => q.url().endsWith('/v1/chat/completions'));
  await send(page, 'What is in these pictures?');
  const body = JSON.parse((await sent).postData());
  const last = body.messages[body.messages.length - 1];
  const kinds = Array.isArray(last.content) ? last.content.map((p) => p.type).join(',') : typeof last.content;
  await check(kinds === 'image_url,image_url,text' &&
              last.content[0].image_url.url === 'data:image/png;base64,' + png,
              `desktop: the message goes as image_url parts with data: URLs (${kinds})`);
  r = await waitReply(page, 1);
  await check(!r.error && r.text.length > 0 && /computed \d+/.test(r.stats),
              `desktop: a reply to the images arrived (${r.stats})`);
  const thumbs = await page.evaluate(() => [...document.querySelectorAll('.msg.user img.thumb')]
    .map((i) => i.complete && i.naturalWidth));
  await check(thumbs.length === 2 && thumbs.every((w) => w === 96) &&
              await page.locator('#attachments img').count() === 0,
              `desktop: the turn shows the images as thumbnails (${thumbs.join(', ')} px wide), the composer is empty`);
  await shot(page, 'desktop-8-image-reply');
  await check(problems.length === 0, `desktop: no page errors or CSP violations (${problems.join('; ')})`);
  await ctx.close();
}

async function phone() {
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const page = await ctx.newPage();
  await page.goto(base + '/');
  await page.waitForSelector('#keydlg[open]', { timeout: 10000 });
  await page.fill('#apikey', key);
  await page.click('#keysave');
  await setSetting(page, 'max_tokens', 40);
  await page.click('#settings-toggle');
  await send(page, 'Hello from a phone');
  const r = await waitReply(page, 1);
  await check(!r.error && r.text.length > 0, `phone: a streamed reply (${r.stats})`);
  await shot(page, 'phone-1-reply');
  await page.reload();
  await page.click('#menu');
  await page.waitForSelector('#sidebar', { state: 'visible' });
  const title = await page.textContent('#convs li.current a');
  await shot(page, 'phone-2-conversations');
  await check(title === 'Hello from a phone', 'phone: reloaded, the conversation is in the list');
  await ctx.close();
}

(async () => {
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
                                    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  await desktop();
  await phone();
  await browser.close();
  console.log('screenshots:\n  ' + shots.join('\n  '));
})().catch((e) => fail(e.stack || String(e)));
