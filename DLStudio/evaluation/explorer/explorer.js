// The attention explorer's script: plain JavaScript, no library, nothing fetched (a live
// page posts a typed sentence to the server that served it, and gets a view back).
// DATA (the JSON above) holds the views explore.py made; every weight drawn here is one of
// them (an integer, weight x DATA.scale), never recomputed.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("explorer-data").textContent);
  const SCALE = DATA.scale;
  const GRID_LIMIT = 64;        // more maps than this: one layer's row at a time
  const TITLES = {
    encoder: "encoder self-attention (English to English)",
    decoder_self: "decoder self-attention, masked (Spanish to the Spanish before it)",
    cross: "cross-attention (Spanish queries, English keys)",
    self: "self-attention, causal (each token to the tokens before it)",
    bidirectional: "self-attention, both ways (each token to every token: BERT, no mask)",
    class: "the class token's attention over the patches",
  };
  const HINT = document.getElementById("hint").textContent;
  const state = { view: 0, kind: null, layer: 0, head: 0, allHeads: false };
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }
  const weight = (v) => (v / SCALE).toFixed(4);
  const fixed = (x) => x.toFixed(3).replace(/^-(0\.0+)$/, "$1");   // no "-0.000"
  const chance = (p) => (p >= 0.001 || p === 0 ? p.toFixed(3) : p.toExponential(1));
  const shade = (v) => `rgba(33, 102, 172, ${Math.min(1, v / SCALE).toFixed(3)})`;

  // ---- the checkpoint, and the list of inputs ------------------------------------------
  function drawHeader() {
    const h = DATA.header, list = el("dl");
    for (const [k, v] of Object.entries(h.facts || {}))
      list.append(el("div", {}, el("dt", {}, k), el("dd", {}, String(v))));
    $("header").append(el("h1", {}, h.title || "Attention explorer"), list);
  }
  function fillInputs() {
    const select = $("example");
    select.textContent = "";
    DATA.views.forEach((v, i) => select.append(el("option", { value: i },
      `${i + 1}. ${v.input}`)));
    select.value = state.view;
  }

  // ---- what the model said --------------------------------------------------------------
  function stepsTable(v) {
    const rows = v.steps.map((s, i) => el("tr", {},
      el("td", { class: "num" }, String(i + 1)), el("td", {}, s.token),
      el("td", { class: "num" }, chance(s.p)),
      el("td", {}, ...s.top.map(([t, p]) => el("span", { class: "alt" },
        `${t} ${chance(p)}`)))));
    return el("div", {}, el("h2", {}, "Each output token, its probability, and the five "
      + "likeliest alternatives"), el("table", { class: "list", id: "steps" },
      el("tr", {}, el("th", {}, "#"), el("th", {}, "token"), el("th", {}, "p"),
        el("th", {}, "alternatives")), ...rows));
  }
  function beamTable(v) {
    const rows = v.beam.map((b, i) => el("tr", {}, el("td", { class: "num" }, String(i + 1)),
      el("td", {}, b.text || "(empty)"), el("td", { class: "num" }, fixed(b.logp)),
      el("td", { class: "num" }, fixed(b.score))));
    return el("div", {}, el("h2", {}, `Beam search: ${v.beam.length} hypotheses`),
      el("table", { class: "list", id: "beam" }, el("tr", {}, el("th", {}, "#"),
        el("th", {}, "hypothesis"), el("th", {}, "log p"),
        el("th", {}, `log p / length^${v.length_penalty}`)), ...rows));
  }
  function drawSummary(v) {
    const box = $("summary"), said = $("said");
    box.textContent = said.textContent = "";
    const what = v.kind === "vision" ? "predicted" : v.kind === "gpt" ? "continuation"
      : v.kind === "bert" ? "filled in" : "translation";
    box.append(el("p", { class: "sentence" }, el("b", {}, "input"), v.input),
      el("p", { class: "sentence", id: "output" }, el("b", {}, `${what} (${v.decoding
        || "most likely class"})`), v.output || "(empty)"));
    const tables = el("div", { class: "tables" });
    if (v.steps) tables.append(stepsTable(v));
    if (v.beam) tables.append(beamTable(v));
    if (v.top) tables.append(el("div", {}, el("h2", {}, `Likeliest classes (true: ${v.label})`),
      el("table", { class: "list", id: "classes" }, ...v.top.map(([c, p]) => el("tr", {},
        el("td", {}, c), el("td", { class: "num" }, chance(p)))))));
    said.append(tables);
  }

  // ---- inside the model: the logit lens, every head switched off --------------------------
  function lensTable(v) {
    const lens = v.lens, axis = v.tokens.target || v.tokens.text;
    const next = v.kind !== "bert";
    return el("div", {}, el("h2", {}, next ? "The logit lens: the likeliest next token after "
      + "each layer" : "The logit lens: the likeliest token at each position after each layer"),
    el("p", { class: "hint" }, "Each row reads the residual stream there through the final "
      + "norm and the output layer, as the model reads its last one."),
    el("table", { class: "list", id: "lens" }, el("tr", {}, el("th", {}, "reads"),
      ...lens.positions.map((t) => el("th", {}, axis[t]))),
    ...lens.rows.map((name, r) => el("tr", {}, el("th", {}, name),
      ...lens.cells[r].map(([tok, p]) => el("td", { title: `p = ${chance(p)}` }, tok,
        el("span", { class: "pct" }, ` ${chance(p)}`)))))));
  }
  function ablationTables(v) {
    const box = el("div", { id: "ablation" }, el("h2", {}, "Each head switched off"),
      el("p", { class: "hint" }, "Each cell: with that head's output set to 0, the mean "
        + "change of the log-probability of the output's tokens (red: the head helped), and "
        + "at how many positions the likeliest token changes. Click a cell to see its "
        + "attention above."));
    for (const [kind, grid] of Object.entries(v.ablation)) {
      const worst = Math.max(1e-9, ...grid.layers.flat().map((c) => Math.abs(c.delta)));
      const heads = grid.layers[0].length;
      box.append(el("h3", {}, TITLES[kind]), el("table", { class: "list ablation",
        "data-kind": kind }, el("tr", {}, el("th"), ...Array.from({ length: heads },
        (_, h) => el("th", {}, `head ${h + 1}`))),
      ...grid.layers.map((row, l) => el("tr", {}, el("th", {}, `layer ${l + 1}`),
        ...row.map((c, h) => {
          const td = el("td", { class: "num", title: c.first ? `${c.changed} changed; the `
            + `first at position ${c.first[0] + 1}: ${c.first[1]}` : "no token changes",
          onclick: () => { state.kind = kind; state.layer = l; state.head = h; draw(); } },
          `${fixed(c.delta)} (${c.changed})`);
          const a = Math.min(1, Math.abs(c.delta) / worst).toFixed(3);
          td.style.background = c.delta < 0 ? `rgba(209, 36, 47, ${a})`
            : `rgba(33, 102, 172, ${a})`;
          return td;
        })))));
    }
    return box;
  }
  function drawInside(v) {
    const box = $("inside");
    box.textContent = "";
    if (v.lens) box.append(lensTable(v));
    if (v.ablation && Object.keys(v.ablation).length) box.append(ablationTables(v));
  }

  // ---- the grid of every layer and head ---------------------------------------------------
  function matrixOf(v, kind, layer, head) { return v.maps[kind].layers[layer][head]; }
  function thumb(v, kind, layer, head) {
    const m = matrixOf(v, kind, layer, head);
    let rows, cols, at;
    if (v.kind === "vision") {
      [rows, cols] = v.patches;
      at = (r, c) => m[1 + r * cols + c];
    } else {
      rows = m.length; cols = m[0].length;
      at = (r, c) => m[r][c];
    }
    const canvas = el("canvas", { width: cols, height: rows, "data-layer": layer,
      "data-head": head, title: `layer ${layer + 1}, head ${head + 1}` });
    const size = 72, k = size / Math.max(rows, cols);
    canvas.style.width = `${Math.round(cols * k)}px`;
    canvas.style.height = `${Math.round(rows * k)}px`;
    const ctx = canvas.getContext("2d"), top = v.kind === "vision"
      ? Math.max(1, ...m.slice(1)) : SCALE;
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
      ctx.fillStyle = `rgba(33, 102, 172, ${(at(r, c) / top).toFixed(3)})`;
      ctx.fillRect(c, r, 1, 1);
    }
    canvas.addEventListener("click", () => { choose(layer, head); });
    return canvas;
  }
  function drawGrid(v) {
    const box = $("grid");
    box.textContent = "";
    const map = v.maps[state.kind];
    if (map.missing) {
      box.append(el("p", { class: "missing", id: "missing" }, "This model's heads keep no "
        + `attention weights for the ${TITLES[state.kind]}: ${map.missing}`));
      return;
    }
    const heads = map.layers[0].length;
    const table = el("table", {}, el("tr", {}, el("th"),
      ...Array.from({ length: heads }, (_, h) => el("th", {}, `head ${h + 1}`))));
    // A real model (30 layers of 9 heads): the chosen layer's row only, picked above.
    const big = map.layers.length * heads > GRID_LIMIT;
    map.layers.forEach((layer, l) => {
      if (big && l !== state.layer) return;
      table.append(el("tr", {}, el("th", {}, `layer ${l + 1}`),
        ...layer.map((_, h) => el("td", {}, thumb(v, state.kind, l, h)))));
    });
    if (big) box.append(el("p", { id: "one-layer" }, `${map.layers.length} layers of ${heads} `
      + "heads: the layer chosen above is shown; choose another to see its heads"));
    box.append(table);
    markChosen();
  }
  function markChosen() {
    for (const c of document.querySelectorAll("#grid canvas"))
      c.classList.toggle("chosen", +c.dataset.layer === state.layer
        && (state.allHeads || +c.dataset.head === state.head));
  }

  // ---- the large view: one head, or every head of a layer -----------------------------
  function tokensOf(v, axis) { return v.tokens[v.axes[state.kind][axis]]; }
  function textPanel(v, layer, head) {
    const m = matrixOf(v, state.kind, layer, head);
    const queries = tokensOf(v, 0), keys = tokensOf(v, 1);
    const panel = el("div", { class: "panel", "data-layer": layer, "data-head": head },
      el("h3", {}, `layer ${layer + 1}, head ${head + 1}`));
    const strip = (role, words) => el("div", { class: `strip ${role}s` },
      el("span", { class: "label" }, role === "query" ? "queries" : "keys"),
      ...words.map((w, i) => el("span", { class: `tok ${role}`, "data-i": i, title: w }, w,
        el("span", { class: "pct" }))));          // room kept for its weight: nothing moves
    const qStrip = strip("query", queries), kStrip = strip("key", keys);
    const cell = Math.max(12, Math.min(30, Math.floor(440 / Math.max(keys.length, 1))));
    const table = el("table", { class: "matrix" }, el("thead", {}, el("tr", {}, el("th"),
      ...keys.map((w, k) => el("th", { "data-k": k, title: w }, w)))));
    m.forEach((row, q) => table.append(el("tr", {}, el("th", { "data-q": q, title:
      queries[q] }, queries[q]), ...row.map((w, k) => {
      const td = el("td", { class: "cell", "data-q": q, "data-k": k, "data-w": weight(w),
        title: `${queries[q]} \u2192 ${keys[k]}: ${weight(w)}` });
      td.style.background = shade(w);
      td.style.width = td.style.height = `${cell}px`;
      return td;
    }))));
    panel.append(qStrip, kStrip, table);
    const clear = () => {
      for (const t of panel.querySelectorAll(".tok")) {
        t.style.background = ""; t.classList.remove("pointed");
        t.removeAttribute("data-w");
        t.querySelector(".pct").textContent = "";
      }
      for (const td of panel.querySelectorAll("td.hl")) td.classList.remove("hl");
      $("readout").innerHTML = "&nbsp;";
    };
    const show = (target, values) => target.forEach((t, i) => {
      t.dataset.w = weight(values[i]);
      t.querySelector(".pct").textContent = `${Math.round(100 * values[i] / SCALE)}%`;
      t.style.background = shade(values[i]);
    });
    const pointQuery = (q) => {                  // its row: the keys it looks at
      clear();
      qStrip.querySelectorAll(".tok")[q].classList.add("pointed");
      show([...kStrip.querySelectorAll(".tok")], m[q]);
      for (const td of table.querySelectorAll(`td[data-q="${q}"]`)) td.classList.add("hl");
      const best = m[q].indexOf(Math.max(...m[q]));
      $("readout").textContent = `layer ${layer + 1}, head ${head + 1}: "${queries[q]}" `
        + `looks most at "${keys[best]}" (${weight(m[q][best])})`;
    };
    const pointKey = (k) => {                    // its column: the queries that look at it
      clear();
      kStrip.querySelectorAll(".tok")[k].classList.add("pointed");
      show([...qStrip.querySelectorAll(".tok")], m.map((row) => row[k]));
      for (const td of table.querySelectorAll(`td[data-k="${k}"]`)) td.classList.add("hl");
      $("readout").textContent = `layer ${layer + 1}, head ${head + 1}: the weights with `
        + `which each query looks at "${keys[k]}"`;
    };
    for (const t of qStrip.querySelectorAll(".tok"))
      t.addEventListener("mouseenter", () => pointQuery(+t.dataset.i));
    for (const t of kStrip.querySelectorAll(".tok"))
      t.addEventListener("mouseenter", () => pointKey(+t.dataset.i));
    for (const th of table.querySelectorAll("th[data-q]"))
      th.addEventListener("mouseenter", () => pointQuery(+th.dataset.q));
    for (const th of table.querySelectorAll("th[data-k]"))
      th.addEventListener("mouseenter", () => pointKey(+th.dataset.k));
    for (const td of table.querySelectorAll("td.cell")) td.addEventListener("mouseenter",
      () => { $("readout").textContent = td.title; });
    panel.addEventListener("mouseleave", clear);
    return panel;
  }
  function picturePanel(v, layer, head) {
    const w = matrixOf(v, "class", layer, head), [rows, cols] = v.patches;
    const top = Math.max(1, ...w.slice(1));
    const img = el("img", { src: v.image, alt: v.input });
    const side = 256;
    img.style.width = img.style.height = `${side}px`;
    const grid = el("div", { class: "patches" });
    grid.style.gridTemplateColumns = `repeat(${cols}, 1fr)`;
    grid.style.gridTemplateRows = `repeat(${rows}, 1fr)`;
    for (let i = 0; i < rows * cols; i++) {
      const p = el("div", { class: "patch", "data-i": i, "data-w": weight(w[1 + i]),
        title: `patch ${i} (row ${Math.floor(i / cols) + 1}, column ${i % cols + 1}): `
          + weight(w[1 + i]) });
      p.style.background = `rgba(0, 0, 0, ${(0.8 * (1 - w[1 + i] / top)).toFixed(3)})`;
      p.addEventListener("mouseenter", () => { $("readout").textContent = p.title; });
      grid.append(p);
    }
    return el("div", { class: "panel", "data-layer": layer, "data-head": head },
      el("h3", {}, `layer ${layer + 1}, head ${head + 1}`),
      el("div", { class: "picture" }, img, grid),
      el("p", { class: "scale-note" }, `darker: less attention; the brightest patch has `
        + `${weight(top)}, the class token on itself ${weight(w[0])}`));
  }
  function drawLarge(v) {
    const box = $("large");
    box.textContent = "";
    if (v.maps[state.kind].missing) return;
    const heads = state.allHeads
      ? Array.from({ length: v.maps[state.kind].layers[state.layer].length }, (_, h) => h)
      : [state.head];
    for (const h of heads)
      box.append(v.kind === "vision" ? picturePanel(v, state.layer, h)
        : textPanel(v, state.layer, h));
  }

  // ---- choosing ------------------------------------------------------------------------
  function fillControls(v) {
    const kind = $("kind");
    kind.textContent = "";
    for (const k of Object.keys(v.maps)) kind.append(el("option", { value: k }, TITLES[k]));
    if (!(state.kind in v.maps)) state.kind = Object.keys(v.maps)[0];
    kind.value = state.kind;
    const map = v.maps[state.kind];
    const layers = map.layers ? map.layers.length : 0;
    const heads = map.layers ? map.layers[0].length : 0;
    state.layer = Math.min(state.layer, Math.max(0, layers - 1));
    state.head = Math.min(state.head, Math.max(0, heads - 1));
    const fill = (select, n, value) => {
      select.textContent = "";
      for (let i = 0; i < n; i++) select.append(el("option", { value: i }, String(i + 1)));
      select.value = value;
      select.disabled = n === 0;
    };
    fill($("layer"), layers, state.layer);
    fill($("head"), heads, state.head);
    $("head").disabled = heads === 0 || state.allHeads;
  }
  function draw() {
    const v = DATA.views[state.view];
    if (!v) return;
    $("hint").textContent = v.kind === "vision" ? "Point at a patch for its weight: the "
      + "class token's attention to it, from the model's own forward pass." : HINT;
    drawSummary(v);
    drawInside(v);
    fillControls(v);
    drawGrid(v);
    drawLarge(v);
  }
  function choose(layer, head) {
    const redraw = layer !== state.layer;
    state.layer = layer;
    state.head = head;
    $("layer").value = layer;
    $("head").value = head;
    if (redraw) drawGrid(DATA.views[state.view]);
    markChosen();
    drawLarge(DATA.views[state.view]);
  }

  $("example").addEventListener("change", (e) => { state.view = +e.target.value; draw(); });
  $("kind").addEventListener("change", (e) => { state.kind = e.target.value; draw(); });
  $("layer").addEventListener("change", (e) => choose(+e.target.value, state.head));
  $("head").addEventListener("change", (e) => choose(state.layer, +e.target.value));
  $("all-heads").addEventListener("change", (e) => {
    state.allHeads = e.target.checked;
    $("head").disabled = state.allHeads;
    markChosen();
    drawLarge(DATA.views[state.view]);
  });

  // ---- the live page: a typed sentence goes to the server, its view comes back ----------
  if (DATA.live) {
    $("ask").hidden = false;
    const ask = DATA.header.ask;
    if (ask) $("sentence").placeholder = `type ${ask} and press Enter`;
    $("ask").addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = $("sentence").value.trim();
      if (!text) return;
      $("error").textContent = "";
      $("status").textContent = "running the model\u2026";
      try {
        const answer = await fetch("explore", { method: "POST", body: JSON.stringify({ text }),
          headers: { "Content-Type": "application/json" } });
        const reply = await answer.json();
        if (reply.error) throw new Error(reply.error);
        DATA.views.push(reply.view);
        state.view = DATA.views.length - 1;
        fillInputs();
        draw();
        $("status").textContent = "";
        document.body.dataset.answered = String(DATA.views.length);
      } catch (err) {
        $("status").textContent = "";
        $("error").textContent = String(err.message || err);
      }
    });
  }
  drawHeader();
  fillInputs();
  if (!DATA.views.length) $("summary").append(el("p", {}, "Type a sentence above."));
  draw();
  document.body.dataset.ready = "true";
})();
