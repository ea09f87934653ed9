// errkb support console: posts the paste to /v1/explain and draws the errkb.diagnosis/1 answer.
//
// Everything that comes from the paste or from a record is untrusted. It reaches the page only
// through textContent, element properties and createElement: no innerHTML, no eval, no inline
// handlers (the server's Content-Security-Policy forbids them anyway).
"use strict";

(function () {
  const TOKEN_KEY = "errkb.token";

  // How the terminal renderer names the sources of facts (errkb/render/_document.py).
  const SOURCE_LABELS = {
    message: "message",
    frame: "your code",
    gpu: "GPU",
    "model-config": "model config",
    flag: "given",
    probe: "probe",
    computed: "computed",
    default: "assumed",
    installed: "installed",
    paste: "the paste",
  };

  const $ = (id) => document.getElementById(id);
  const form = $("explain-form");
  const text = $("text");
  const submit = $("submit");
  const statusBox = $("status");
  const out = $("diagnosis");
  const shapeSelect = $("model_shape");
  const modelConfig = $("model_config");
  const shapeSource = $("shape-source");
  const tokenBox = $("token-box");
  const tokenLabel = $("token-label");
  const tokenInput = $("token");

  let shapes = [];
  let pending = null; // the request that a token would let through
  let tokenNeeded = false; // /healthz said so, or a request was refused with 401

  // -- building elements from data ---------------------------------------------------------

  function el(tag, className, content) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (content === undefined || content === null) return node;
    for (const part of Array.isArray(content) ? content : [content]) {
      if (part === null || part === undefined || part === false) continue;
      node.append(part instanceof Node ? part : document.createTextNode(String(part)));
    }
    return node;
  }

  // A fact's name, with a place to break after each underscore: a narrow column wraps
  // "gpu_memory_utilization_needed" between its words, never inside one.
  function breakable(name) {
    const parts = [];
    for (const piece of String(name).split(/(?<=_)/)) {
      if (parts.length) parts.push(document.createElement("wbr"));
      parts.push(piece);
    }
    return parts;
  }

  function section(title, className, body) {
    const box = el("section", "card " + (className || ""));
    box.append(el("h3", "card-title", title));
    for (const part of body) if (part) box.append(part);
    return box;
  }

  function safeLink(url, label) {
    // A record's URL is data: only http(s) becomes a link.
    let parsed = null;
    try {
      parsed = new URL(String(url));
    } catch (e) {
      parsed = null;
    }
    if (!parsed || (parsed.protocol !== "https:" && parsed.protocol !== "http:")) {
      return el("span", "mono", label || String(url));
    }
    const a = el("a", "", label || parsed.href);
    a.href = parsed.href;
    a.rel = "noopener noreferrer";
    a.target = "_blank";
    return a;
  }

  // -- numbers as the terminal shows them --------------------------------------------------

  function formatBytes(n) {
    const units = [["TiB", 2 ** 40], ["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
    for (const [unit, factor] of units) {
      if (Math.abs(n) >= factor) return (n / factor).toFixed(2).replace(/\.00$/, "") + " " + unit;
    }
    return Math.trunc(n) + " B";
  }

  function factValue(fact) {
    const v = fact.value;
    if (fact.unit === "bytes" && Number.isInteger(v) && Math.abs(v) >= 1024) {
      return formatBytes(v) + " (" + v.toLocaleString("en-US") + " bytes)";
    }
    const unit = fact.unit ? " " + fact.unit : "";
    if (Number.isInteger(v)) return v.toLocaleString("en-US") + unit;
    if (v !== null && typeof v === "object") return JSON.stringify(v) + unit;
    return String(v) + unit;
  }

  function settingValue(v) {
    return typeof v === "string" ? "'" + v + "'" : String(v);
  }

  // -- which solution is the fix (errkb/render/_document.py: short_solutions) --------------

  function namedSettings(s) {
    const names = new Set();
    const re = /(?<![\w-])(?:--)?([a-z][a-z0-9]*(?:[_-][a-z0-9]+)+)/g;
    for (const m of s.matchAll(re)) {
      if (m[1].includes("_") || m[0].startsWith("--")) names.add(m[1].replace(/-/g, "_"));
    }
    return names;
  }

  function shortSolutions(solutions) {
    const computed = solutions.filter((s) => Object.keys(s.settings || {}).length);
    const keys = new Set(computed.flatMap((s) => Object.keys(s.settings)));
    const kept = solutions.filter((s) => {
      if (Object.keys(s.settings || {}).length) return true;
      const names = namedSettings(s.text || "");
      return names.size === 0 || ![...names].every((n) => keys.has(n));
    });
    return kept.filter((s) => Object.keys(s.settings || {}).length)
      .concat(kept.filter((s) => !Object.keys(s.settings || {}).length));
  }

  // -- copy, with and without clipboard permission ----------------------------------------

  async function copyText(value, codeNode) {
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(value);
        return "clipboard";
      } catch (e) {
        // permission refused: fall through to the copy command
      }
    }
    const buffer = el("textarea", "copy-buffer");
    buffer.value = value;
    buffer.setAttribute("readonly", "");
    buffer.setAttribute("aria-hidden", "true");
    document.body.append(buffer);
    buffer.select();
    let copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (e) {
      copied = false;
    }
    buffer.remove();
    if (copied) return "command";
    const range = document.createRange();
    range.selectNodeContents(codeNode);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    return "selected";
  }

  function copyButton(value, codeNode) {
    const button = el("button", "copy", "Copy");
    button.type = "button";
    button.id = "copy";
    const said = el("span", "copy-said muted small");
    said.setAttribute("role", "status");
    button.addEventListener("click", async () => {
      const how = await copyText(value, codeNode);
      button.dataset.copied = how;
      if (how === "selected") {
        said.textContent = "Selected: press Ctrl+C (\u2318C on a Mac) to copy.";
        button.textContent = "Copy";
      } else {
        said.textContent = "";
        button.textContent = "Copied";
        window.setTimeout(() => { button.textContent = "Copy"; }, 1600);
      }
    });
    return [button, said];
  }

  // -- the diagnosis -----------------------------------------------------------------------

  function renderFix(match, answer) {
    const solutions = shortSolutions(answer.solutions || match.solutions || []);
    const parts = [];
    const best = solutions[0];
    if (best) {
      parts.push(el("p", "fix-text", best.text));
      const settings = Object.entries(best.settings || {});
      if (settings.length) {
        const list = el("ul", "settings");
        list.id = "fix-settings";
        for (const [name, value] of settings) {
          const item = el("li", "setting", [el("span", "name", name), el("span", "eq", " = "),
            el("span", "value", settingValue(value))]);
          item.dataset.name = name;
          item.dataset.value = JSON.stringify(value);
          list.append(item);
        }
        if (best.estimate) list.append(el("li", "badge estimate", "estimate"));
        parts.push(list);
      }
    }
    const fix = answer.example_fix || match.example_fix;
    if (fix && fix.after) {
      const code = el("code", "", fix.after);
      code.id = "fix-code";
      const pre = el("pre", "code", code);
      const said = [fix.location ? "rewritten at " + fix.location : null, fix.note]
        .filter(Boolean).join("; ");
      const [button, copied] = copyButton(fix.after, code);
      const head = el("div", "code-head", [el("span", "muted small", said || "the call, rewritten"),
        el("span", "code-actions", [copied, button])]);
      parts.push(el("div", "code-block", [head, pre]));
      if (fix.before) {
        const before = el("details", "before", [el("summary", "", "Before"),
          el("pre", "code dim", el("code", "", fix.before))]);
        parts.push(before);
      }
    }
    if (!parts.length) parts.push(el("p", "muted", "This record has no computed fix; see the solutions below."));
    const box = section("Fix", "fix", parts);
    box.id = "fix";
    return box;
  }

  function renderFacts(facts) {
    if (!facts || !facts.length) return null;
    const table = el("table", "facts");
    table.id = "facts";
    const head = el("tr", "", [el("th", "", "Source"), el("th", "", "Fact"), el("th", "", "Value"),
      el("th", "", "Note")]);
    table.append(el("thead", "", head));
    const body = el("tbody");
    for (const fact of facts) {
      const source = el("td", "", el("span", "src src-" + String(fact.source).replace(/[^a-z-]/g, ""),
        SOURCE_LABELS[fact.source] || String(fact.source)));
      const row = el("tr", "", [source, el("td", "mono", breakable(fact.name)), el("td", "mono num", factValue(fact)),
        el("td", "muted", fact.note || "")]);
      row.dataset.name = fact.name;
      row.dataset.source = fact.source;
      body.append(row);
    }
    table.append(body);
    return section("Facts, with where each came from", "facts-card", [el("div", "table-wrap", table)]);
  }

  function renderRest(match, answer) {
    const cards = [];
    if (match.documentation) {
      cards.push(section("Why", "why", [el("p", "prose", match.documentation)]));
    }
    const solutions = shortSolutions(answer.solutions || match.solutions || []).slice(1);
    if (solutions.length) {
      const list = el("ul", "solutions");
      for (const s of solutions) {
        const settings = Object.entries(s.settings || {});
        const tail = settings.length
          ? el("span", "mono small", " [" + settings.map(([k, v]) => k + "=" + settingValue(v)).join(", ") + "]")
          : null;
        list.append(el("li", "", [s.text, tail, s.estimate ? el("span", "badge estimate", "estimate") : null]));
      }
      cards.push(section("Other solutions", "others", [list]));
    }
    if (match.common_situations) {
      cards.push(section("Where it usually happens", "situations", [el("p", "prose", match.common_situations)]));
    }
    const up = match.upstream;
    if (up && (up.file || up.url)) {
      const where = (up.file || "") + (up.line ? ":" + up.line : "");
      cards.push(section("Raise site", "upstream", [el("p", "", up.url ? safeLink(up.url, where || up.url) : el("span", "mono", where))]));
    }
    const others = (answer.matches || []).slice(1);
    if (others.length) {
      const list = el("ul", "matches");
      for (const m of others) {
        list.append(el("li", "", [el("span", "", m.title), " ", el("span", "mono muted small", "(" + m.id + ", score " + m.score + ")")]));
      }
      cards.push(section("Other records that matched", "other-matches", [list]));
    }
    const read = renderRead(answer);
    if (read) cards.push(read);
    if (answer.notes && answer.notes.length) {
      cards.push(section("Notes", "notes", [el("ul", "", answer.notes.map((n) => el("li", "", n)))]));
    }
    const raw = el("details", "raw", [el("summary", "", "The JSON answer (errkb.diagnosis/1)"),
      el("pre", "code small", el("code", "", JSON.stringify(answer, null, 2)))]);
    cards.push(raw);
    return cards;
  }

  function renderRead(answer) {
    const list = el("ul", "read");
    list.id = "read";
    for (const exc of answer.exceptions || []) {
      const line = el("li", "", [el("span", "mono cls", exc["class"] ? exc["class"] + ": " : ""),
        el("span", "mono msg", exc.message)]);
      list.append(line);
    }
    if (!list.childElementCount) return null;
    return section("Read from the paste", "read-card", [list]);
  }

  function renderDiagnosis(answer) {
    out.replaceChildren();
    const match = (answer.matches || [])[0];
    if (!match) {
      out.append(section("No known error matched", "nomatch", [
        el("p", "", "errkb has no record for this text. Paste the whole traceback (the last lines matter most) or the log around the failure."),
      ]));
      const read = renderRead(answer);
      if (read) out.append(read);
      if (answer.notes && answer.notes.length) {
        out.append(section("Notes", "notes", [el("ul", "", answer.notes.map((n) => el("li", "", n)))]));
      }
      return;
    }
    const title = el("header", "finding", [
      el("span", "badge sev sev-" + String(match.severity).replace(/[^a-z]/g, ""), match.severity),
      el("h2", "finding-title", match.title),
      el("p", "muted small mono", match.library + " \u00b7 " + match.id),
    ]);
    out.append(title, renderFix(match, answer));
    const facts = renderFacts(answer.facts || match.facts);
    if (facts) out.append(facts);
    out.append(...renderRest(match, answer));
  }

  // -- talking to the server ---------------------------------------------------------------

  function setStatus(kind, message) {
    statusBox.className = "status " + (kind || "");
    statusBox.textContent = message || "";
  }

  function headers() {
    const h = { "Content-Type": "application/json", Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  async function showRefusal(response) {
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    const said = body && typeof body.error === "string" ? body.error : response.statusText || "request failed";
    const field = body && typeof body.field === "string" ? body.field : "";
    // "what_if.gpu_memory" is the form's gpu_memory field: mark it.
    const input = field ? $(field.replace(/^what_if\./, "")) : null;
    if (input && form.contains(input)) input.setAttribute("aria-invalid", "true");
    const named = field && !said.includes(field) ? " (field: " + field + ")" : "";
    setStatus("error", "The server answered " + response.status + ": " + said + named);
  }

  class InputError extends Error {
    constructor(field, message) {
      super(message);
      this.field = field;
    }
  }

  function number(id, integer) {
    const raw = $(id).value.trim();
    if (!raw) return undefined;
    const n = Number(raw);
    if (!Number.isFinite(n) || (integer && !Number.isInteger(n))) {
      throw new InputError(id, id + ": expected " + (integer ? "a whole number" : "a number") + ", got " + JSON.stringify(raw));
    }
    return n;
  }

  function payload() {
    const whatIf = {};
    const gpu = $("gpu_memory").value.trim();
    if (gpu) whatIf.gpu_memory = gpu;
    const util = number("gpu_memory_utilization", false);
    if (util !== undefined) whatIf.gpu_memory_utilization = util;
    const block = number("block_size", true);
    if (block !== undefined) whatIf.block_size = block;
    const dtype = $("kv_cache_dtype").value;
    if (dtype) whatIf.kv_cache_dtype = dtype;
    const tp = number("tensor_parallel_size", true);
    if (tp !== undefined) whatIf.tensor_parallel_size = tp;
    const config = modelConfig.value.trim();
    if (config) {
      let parsed;
      try {
        parsed = JSON.parse(config);
      } catch (e) {
        throw new InputError("model_config", "model_config: not valid JSON (" + e.message + ")");
      }
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new InputError("model_config", "model_config: expected a JSON object, the content of config.json");
      }
      whatIf.model_config = parsed;
    }
    const body = { text: text.value };
    if (Object.keys(whatIf).length) body.what_if = whatIf;
    return body;
  }

  function busy(on) {
    submit.disabled = on;
    submit.classList.toggle("loading", on);
    submit.textContent = on ? "Diagnosing\u2026" : "Diagnose";
    out.setAttribute("aria-busy", on ? "true" : "false");
    out.classList.toggle("stale", on);
  }

  // -- the token --------------------------------------------------------------------------

  // What the prompt says: a token is missing, or the one given was refused (a 401 with it).
  const TOKEN_WORDS = {
    missing: {
      label: "This server needs an access token",
      status: "This server needs an access token: enter it in the form",
    },
    refused: {
      label: "The token given was refused: enter the right one",
      status: "The token given was refused (401): enter the right one in the form",
    },
  };

  function askForToken(why, kind) {
    tokenNeeded = true;
    sessionStorage.removeItem(TOKEN_KEY);
    const words = TOKEN_WORDS[why];
    tokenLabel.textContent = words.label;
    tokenBox.classList.toggle("refused", why === "refused");
    tokenBox.dataset.why = why;
    tokenBox.hidden = false;
    tokenInput.focus();
    const then = pending ? ", and the request is sent with it." : " before you diagnose.";
    setStatus(kind || "error", words.status + then);
  }

  function refused(response, sent) {
    // A 401 after a request that carried a token: that token is wrong, not missing.
    if (response.status !== 401) return false;
    askForToken(sent.Authorization ? "refused" : "missing");
    return true;
  }

  async function explain(body) {
    busy(true);
    setStatus("", "");
    try {
      const sent = headers();
      const response = await fetch("/v1/explain", { method: "POST", headers: sent, body: JSON.stringify(body) });
      if (response.status === 401) pending = body;
      if (refused(response, sent)) return;
      if (!response.ok) {
        await showRefusal(response);
        return;
      }
      const answer = await response.json();
      renderDiagnosis(answer);
      const n = (answer.matches || []).length;
      setStatus(n ? "ok" : "warn", n ? "Diagnosed: " + n + " record" + (n === 1 ? "" : "s") + " matched." : "No record matched.");
      document.body.dataset.diagnosed = String(Date.now());
    } catch (e) {
      setStatus("error", "Could not reach the errkb server: " + e.message);
    } finally {
      busy(false);
    }
  }

  function run() {
    for (const bad of form.querySelectorAll("[aria-invalid]")) bad.removeAttribute("aria-invalid");
    if (!text.value.trim()) {
      text.setAttribute("aria-invalid", "true");
      setStatus("error", "text: paste a traceback, a log or an error message first.");
      text.focus();
      return;
    }
    let body;
    try {
      body = payload();
    } catch (e) {
      if (e instanceof InputError) {
        $(e.field).setAttribute("aria-invalid", "true");
        $(e.field).focus();
        setStatus("error", e.message);
        return;
      }
      throw e;
    }
    if (tokenNeeded && !sessionStorage.getItem(TOKEN_KEY)) {
      // Sent without the token it would only be refused: keep it for when the token comes.
      pending = body;
      askForToken(tokenBox.dataset.why || "missing");
      return;
    }
    explain(body);
  }

  function useToken() {
    const token = tokenInput.value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    tokenInput.value = "";
    tokenBox.hidden = true;
    setStatus("", "");
    if (!shapes.length) loadShapes();
    if (pending) {
      const body = pending;
      pending = null;
      explain(body);
    }
  }

  async function loadShapes() {
    try {
      const sent = headers();
      const response = await fetch("/v1/model-shapes", { headers: sent });
      if (refused(response, sent) || !response.ok) return;
      const body = await response.json();
      const list = Array.isArray(body) ? body : body && body.shapes;
      if (!Array.isArray(list)) return;
      shapes = list.filter((s) => s && typeof s.name === "string" && s.config && typeof s.config === "object");
      const custom = shapeSelect.querySelector('option[value="custom"]');
      shapes.forEach((shape, i) => {
        const option = el("option", "", shape.name);
        option.value = "shape-" + i;
        shapeSelect.insertBefore(option, custom);
      });
    } catch (e) {
      // no list: the config can still be pasted
    }
  }

  // -- wiring ------------------------------------------------------------------------------

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      if (!tokenBox.hidden && document.activeElement === tokenInput) useToken();
      else run();
    }
  });
  $("token-save").addEventListener("click", useToken);
  tokenInput.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      useToken();
    }
  });
  shapeSelect.addEventListener("change", () => {
    const value = shapeSelect.value;
    shapeSource.replaceChildren();
    if (value.startsWith("shape-")) {
      const shape = shapes[Number(value.slice(6))];
      modelConfig.value = JSON.stringify(shape.config, null, 2);
      if (shape.source) shapeSource.append("Figures from ", safeLink(shape.source, shape.source));
    } else if (value === "") {
      modelConfig.value = "";
    } else {
      modelConfig.focus();
    }
  });
  modelConfig.addEventListener("input", () => {
    shapeSource.replaceChildren();
    if (shapeSelect.value !== "custom") shapeSelect.value = modelConfig.value.trim() ? "custom" : "";
  });
  $("clear").addEventListener("click", () => {
    form.reset();
    setStatus("", "");
    text.focus();
  });

  // Whether this server wants a token comes from /healthz, which never does: the page asks
  // for it before its first /v1 request instead of learning it from a 401, which the browser
  // would log as an error. With a token kept from before, the shapes are asked for with it.
  async function start() {
    try {
      const response = await fetch("/healthz");
      const health = response.ok ? await response.json() : null;
      tokenNeeded = Boolean(health && health.token_required === true);
    } catch (e) {
      tokenNeeded = false; // a 401 will say so
    }
    if (tokenNeeded && !sessionStorage.getItem(TOKEN_KEY)) askForToken("missing", "warn");
    else await loadShapes();
  }

  start().finally(() => {
    document.documentElement.dataset.ready = "true";
  });
})();
