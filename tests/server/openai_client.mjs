// openai_client.mjs: talks to `specdec serve` through the official `openai` npm package, the
// way real applications do. Prints one JSON object: the texts of completions / chat, streamed
// and not, for each sampling case, plus the outcome of a few calls that must fail.
// usage: node openai_client.mjs BASE_URL MODEL API_KEY PROMPT CHAT_USER_MESSAGE MAX_TOKENS
import OpenAI from "openai";

const [baseURL, model, apiKey, prompt, userMsg, maxTok] = process.argv.slice(2);
const max_tokens = Number(maxTok);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
const cases = {
  greedy: { temperature: 0 },
  seeded: { temperature: 0.8, top_p: 0.9, seed: 42 },
};
const out = {};

async function completion(params, stream) {
  if (!stream) {
    const r = await client.completions.create({ model, prompt, max_tokens, ...params });
    return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
  }
  const s = await client.completions.create({ model, prompt, max_tokens, stream: true,
                                             stream_options: { include_usage: true }, ...params });
  let text = "", finish = null, usage = null;
  for await (const c of s) {
    if (c.choices.length) { text += c.choices[0].text; if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason; }
    if (c.usage) usage = c.usage;
  }
  return { text, finish, usage };
}

async function chat(params, stream) {
  const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: userMsg }];
  if (!stream) {
    const r = await client.chat.completions.create({ model, messages, max_tokens, ...params });
    return { text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage,
             role: r.choices[0].message.role };
  }
  const s = await client.chat.completions.create({ model, messages, max_tokens, stream: true, ...params });
  let text = "", finish = null, role = null;
  for await (const c of s) {
    const d = c.choices[0]?.delta ?? {};
    if (d.role) role = d.role;
    if (d.content) text += d.content;
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
  }
  return { text, finish, role };
}

async function expectError(fn) {
  try { await fn(); return { ok: true }; }
  catch (e) { return { status: e.status ?? null, param: e.param ?? null, code: e.code ?? null, type: e.type ?? null }; }
}

try {
  for (const [name, params] of Object.entries(cases)) {
    out[name] = {
      completion: await completion(params, false),
      completion_stream: await completion(params, true),
      chat: await chat(params, false),
      chat_stream: await chat(params, true),
    };
  }
  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);
  out.err_model = await expectError(() => client.completions.create({ model: "no-such-model", prompt, max_tokens: 2 }));
  out.err_temp = await expectError(() => client.completions.create({ model, prompt, max_tokens: 2, temperature: 7 }));
  out.err_msgs = await expectError(() => client.chat.completions.create({ model, messages: [{ role: "wizard", content: "x" }] }));
  const bad = new OpenAI({ baseURL, apiKey: "wrong-key", maxRetries: 0 });
  out.err_key = await expectError(() => bad.completions.create({ model, prompt, max_tokens: 2 }));
  console.log(JSON.stringify(out));
} catch (e) {
  console.error("openai client failed:", e);
  process.exit(1);
}
