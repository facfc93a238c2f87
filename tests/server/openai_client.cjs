// openai_client.cjs — drives `braid serve` with the official OpenAI JS client (npm `openai`), unchanged:
// models.list, chat (plain, streamed with include_usage, tools with both tool_choice forms, logprobs), text
// completions, and the client's own error classes for 404 model_not_found and 401. Usage:
//   node openai_client.cjs OPENAI_PACKAGE_DIR PORT API_KEY MODEL_ID
// Prints one "ok ..." line per check; exits 1 at the first failure.
'use strict';
const [pkgDir, port, key, modelId] = process.argv.slice(2);
const OpenAI = require(pkgDir);
const client = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0, timeout: 60000 });

function check(cond, what) {
  if (!cond) { console.error(`FAIL: ${what}`); process.exit(1); }
  console.log(`ok ${what}`);
}

const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }];
const tools = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather of a city',
              parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
}];

(async () => {
  const models = await client.models.list();
  check(models.data.length >= 1 && models.data[0].id === modelId, 'models.list lists the model');

  const chat = await client.chat.completions.create({ model: modelId, messages, max_tokens: 8, temperature: 0 });
  const text = chat.choices[0].message.content;
  check(chat.object === 'chat.completion' && typeof text === 'string' && text.length > 0, 'chat: content');
  check(chat.choices[0].finish_reason === 'length' && chat.usage.completion_tokens === 8 &&
        typeof chat.usage.prompt_tokens_details.cached_tokens === 'number', 'chat: finish_reason and usage');

  const stream = await client.chat.completions.create({ model: modelId, messages, max_tokens: 8, temperature: 0,
                                                        stream: true, stream_options: { include_usage: true } });
  let streamed = '', usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta && c.delta.content) streamed += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(streamed === text, 'stream: the deltas join to the non-streamed text');
  check(finish === 'length' && usage && usage.completion_tokens === 8, 'stream: finish_reason and the usage chunk');

  for (const tool_choice of ['auto', { type: 'function', function: { name: 'get_weather' } }]) {
    const t = await client.chat.completions.create({ model: modelId, max_tokens: 8, temperature: 0, tools, tool_choice,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }] });
    const c = t.choices[0];
    check(['stop', 'length', 'tool_calls'].includes(c.finish_reason) && c.message.role === 'assistant' &&
          (c.finish_reason !== 'tool_calls' || c.message.tool_calls.length > 0),
          `tools: completes with tool_choice ${JSON.stringify(tool_choice)} (finish ${c.finish_reason})`);
  }
  // a conversation that went through a tool call is accepted and rendered
  const after = await client.chat.completions.create({ model: modelId, max_tokens: 4, temperature: 0, tools,
    messages: [{ role: 'user', content: 'Weather in Paris?' },
               { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
                 function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
               { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' }] });
  check(typeof after.choices[0].message.content === 'string', 'tools: a tool result turn');

  const lp = await client.chat.completions.create({ model: modelId, messages, max_tokens: 5, temperature: 0,
                                                    logprobs: true, top_logprobs: 3 });
  const content = lp.choices[0].logprobs.content;
  check(content.length === 5 && content.every(e => typeof e.logprob === 'number' && e.top_logprobs.length === 3 &&
        e.top_logprobs[0].logprob === e.logprob), 'logprobs: per token, greedy token on top');

  const comp = await client.completions.create({ model: modelId, prompt: 'In the beginning', max_tokens: 5,
                                                 temperature: 0 });
  check(comp.object === 'text_completion' && typeof comp.choices[0].text === 'string', 'completions.create');

  try {
    await client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 2 });
    check(false, 'unknown model refused');
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found',
          'unknown model: NotFoundError 404 model_not_found');
  }
  try {
    const bad = new OpenAI({ apiKey: 'wrong', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
    await bad.models.list();
    check(false, 'bad key refused');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, 'bad key: AuthenticationError 401');
  }
})().catch(e => { console.error(`FAIL: ${e && e.stack || e}`); process.exit(1); });
