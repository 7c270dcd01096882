// Lanes of operations on a canvas: one row per fault kind, one per client lane, a time axis.
// Wheel or +/- zooms around the pointer, dragging pans, hovering names the op (or the ops one
// pixel holds). Bars thinner than a pixel are pooled per pixel column and drawn in the colour of
// the worst outcome among them, so every op is drawn at every scale. With `lin` (a counterexample)
// the linearized prefix is drawn in blue with its order, the op that cannot be placed in red, and
// stepping shows the model state after each linearized op.
"use strict";
function faultlineLanes(root, data) {
  const ops = data.ops, n = ops.s.length, lanes = data.lanes, kinds = data.kinds || [];
  const faults = data.faults || [];
  const COL = ["#3aa55d", "#d9483b", "#e0a526", "#e0a526"], NAMES = ["ok", "fail", "info", "open"];
  const RANK = [0, 2, 1, 1]; // worst first: fail, then info/open, then ok
  const FCOL = ["#5b8def", "#8e5bd8", "#3aa58f", "#c94f7c", "#e07b39", "#6c757d"];
  const LEFT = 96, AXIS = 26, ROWF = 16;
  const canvas = root.querySelector("canvas"), tip = root.querySelector(".tip");
  const info = root.querySelector(".range");
  const ctx = canvas.getContext("2d");
  const byLane = lanes.map(() => []);
  for (let j = 0; j < n; j++) byLane[ops.lane[j]].push(j);
  const maxDur = byLane.map((js) => {
    js.sort((a, b) => ops.s[a] - ops.s[b]);
    let m = 0;
    for (const j of js) m = Math.max(m, ops.e[j] - ops.s[j]);
    return m;
  });
  const lin = data.lin || null;
  const linPos = new Map(), byIndex = new Map();
  for (let j = 0; j < n; j++) byIndex.set(ops.i[j], j);
  if (lin) lin.i.forEach((idx, k) => linPos.set(idx, k));
  const badJ = data.bad != null && byIndex.has(data.bad) ? byIndex.get(data.bad) : -1;
  let step = lin ? lin.i.length - 1 : -1;
  const span = Math.max(data.t1 - data.t0, 1e-9);
  let v0 = data.t0, v1 = data.t1;
  if (data.view) { v0 = data.view[0]; v1 = data.view[1]; }
  // a link can name the view and the step: page.html#t=12.5,14&step=30
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("t")) {
    const [a, b] = hash.get("t").split(",").map(Number);
    if (isFinite(a) && isFinite(b) && b > a) { v0 = a; v1 = b; }
  }
  const laneH = Math.max(6, Math.min(22, Math.floor(560 / Math.max(1, lanes.length))));
  const H = AXIS + ROWF * kinds.length + laneH * lanes.length + 8;
  let W = 0;

  function resize() {
    const dpr = window.devicePixelRatio || 1;
    W = Math.max(300, root.clientWidth);
    canvas.width = W * dpr; canvas.height = H * dpr;
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    draw();
  }
  const X = (t) => LEFT + ((t - v0) / (v1 - v0)) * (W - LEFT - 8);
  const T = (x) => v0 + ((x - LEFT) / (W - LEFT - 8)) * (v1 - v0);
  const laneY = (l) => AXIS + ROWF * kinds.length + l * laneH;
  function fmt(t) { return data.unit === "s" ? t.toFixed(span < 10 ? 3 : 2) + " s" : "#" + Math.round(t); }

  function ticks() {
    const raw = (v1 - v0) / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const st = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    ctx.fillStyle = "#555"; ctx.strokeStyle = "#eee"; ctx.font = "11px system-ui,sans-serif";
    ctx.textAlign = "center";
    for (let t = Math.ceil(v0 / st) * st; t <= v1; t += st) {
      const x = X(t);
      ctx.beginPath(); ctx.moveTo(x, AXIS - 4); ctx.lineTo(x, H); ctx.stroke();
      ctx.fillText(data.unit === "s" ? +t.toFixed(6) + " s" : String(Math.round(t)), x, 12);
    }
    ctx.textAlign = "left";
  }

  function bar(x0, x1, y, h, fill, stroke) {
    ctx.fillStyle = fill; ctx.fillRect(x0, y, Math.max(1, x1 - x0), h);
    if (stroke) { ctx.strokeStyle = stroke; ctx.lineWidth = 2; ctx.strokeRect(x0, y, Math.max(3, x1 - x0), h); }
  }

  function opColour(j) {
    if (lin) {
      if (j === badJ) return "#ff3b30";
      if (linPos.has(ops.i[j])) return linPos.get(ops.i[j]) <= step ? "#3f7be0" : "#a9c4f2";
      return ops.k[j] === 0 ? "#d4d4d4" : COL[ops.k[j]];
    }
    return COL[ops.k[j]];
  }

  function draw() {
    const started = performance.now();
    ctx.clearRect(0, 0, W, H);
    ticks();
    let drawn = 0, last = -1;
    const cols = Math.ceil(W);
    ctx.font = "11px system-ui,sans-serif";
    kinds.forEach((kind, r) => {
      const y = AXIS + r * ROWF;
      ctx.fillStyle = "#333"; ctx.fillText(kind, 4, y + 12);
      for (const w of faults) {
        if (w.kind !== kind || w.e < v0 || w.s > v1) continue;
        bar(Math.max(LEFT, X(w.s)), Math.min(W, X(w.e)), y + 2, ROWF - 4, FCOL[r % FCOL.length]);
      }
    });
    const pool = new Int32Array(cols), worst = new Int8Array(cols), colour = new Array(cols);
    const marks = [];
    lanes.forEach((name, l) => {
      const y = laneY(l);
      ctx.fillStyle = "#333"; ctx.fillText(name, 4, y + Math.min(laneH - 2, 14));
      ctx.fillStyle = "#f2f2f2"; ctx.fillRect(LEFT, y + laneH - 1, W - LEFT, 1);
      pool.fill(0); worst.fill(-1);
      const js = byLane[l], lo = v0 - maxDur[l];
      let a = 0, b = js.length;
      while (a < b) { const m = (a + b) >> 1; if (ops.s[js[m]] < lo) a = m + 1; else b = m; }
      for (let q = a; q < js.length; q++) {
        const j = js[q];
        if (ops.s[j] > v1) break;
        if (ops.e[j] < v0) continue;
        const x0 = Math.max(LEFT, X(ops.s[j])), x1 = Math.min(W, X(ops.e[j]));
        drawn++; last = Math.max(last, ops.c[j], ops.i[j]);
        const special = j === badJ || (lin && linPos.get(ops.i[j]) === step);
        if (special) { marks.push([j, x0, x1, y]); continue; }
        if (x1 - x0 >= 2) {
          bar(x0, x1 - 1, y + 2, laneH - 4, opColour(j));
          if (x1 - x0 > 18 && laneH >= 14) label(j, x0, x1, y);
        } else {
          const c = Math.min(cols - 1, Math.floor(x0)), rk = RANK[ops.k[j]] + (lin && linPos.has(ops.i[j]) ? 3 : 0);
          pool[c]++;
          if (rk > worst[c]) { worst[c] = rk; colour[c] = opColour(j); }
        }
      }
      for (let c = LEFT; c < cols; c++) if (pool[c]) bar(c, c + 1, y + 2, laneH - 4, colour[c]);
    });
    if (lin) path();
    for (const [j, x0, x1, y] of marks) {
      bar(x0, Math.max(x1, x0 + 4), y, laneH, opColour(j), j === badJ ? "#7a0000" : "#f2b705");
      if (x1 - x0 > 18 && laneH >= 14) label(j, x0, x1, y);
      if (j === badJ) root.dataset.highlighted = String(ops.i[j]);
    }
    root.dataset.drawn = String(drawn);
    root.dataset.lastDrawn = String(last);
    root.dataset.drawMs = (performance.now() - started).toFixed(1);
    if (info) info.textContent = "showing " + fmt(v0) + " – " + fmt(v1) + " of " + fmt(data.t0) + " – " +
      fmt(data.t1) + "; " + drawn + " of " + n + " ops in view";
  }

  function label(j, x0, x1, y) {
    let s = x1 - x0 > 60 ? ops.l[j] : "";
    if (lin && linPos.has(ops.i[j])) s = "#" + (linPos.get(ops.i[j]) + 1) + " " + s;
    if (!s) return;
    ctx.save(); ctx.beginPath(); ctx.rect(x0, y, x1 - x0 - 2, laneH); ctx.clip();
    ctx.fillStyle = "#111"; ctx.font = "11px system-ui,sans-serif"; ctx.fillText(s, x0 + 3, y + laneH - 6); ctx.restore();
  }

  function path() {
    // the order of the linearized prefix, up to the current step: a line through the ops' middles
    ctx.save(); ctx.beginPath(); ctx.rect(LEFT, AXIS, W - LEFT, H - AXIS); ctx.clip();
    ctx.strokeStyle = "rgba(20,60,150,.55)"; ctx.lineWidth = 1.2; ctx.beginPath();
    let started = false;
    for (let k = 0; k <= step; k++) {
      const j = byIndex.get(lin.i[k]);
      if (j === undefined) continue;
      const mid = (ops.s[j] + Math.min(ops.e[j], data.t1)) / 2;
      if (mid < v0 - (v1 - v0) || mid > v1 + (v1 - v0)) { started = false; continue; }
      const x = X(mid), y = laneY(ops.lane[j]) + laneH / 2;
      if (started) ctx.lineTo(x, y); else { ctx.moveTo(x, y); started = true; }
    }
    ctx.stroke(); ctx.restore();
  }

  function hit(x, y) {
    if (x < LEFT) return null;
    const t = T(x), tol = (v1 - v0) / (W - LEFT) * 2;
    if (y >= AXIS && y < AXIS + ROWF * kinds.length) {
      const kind = kinds[Math.floor((y - AXIS) / ROWF)];
      const w = faults.find((w) => w.kind === kind && w.s - tol <= t && t <= w.e + tol);
      return w ? w.f + ": " + fmt(w.s) + " – " + fmt(w.e) + (w.healed ? "" : " (never healed)") : null;
    }
    const l = Math.floor((y - laneY(0)) / laneH);
    if (l < 0 || l >= lanes.length) return null;
    const near = byLane[l].filter((j) => ops.s[j] - tol <= t && t <= ops.e[j] + tol);
    const inside = near.filter((j) => ops.s[j] <= t && t <= ops.e[j]);
    const hits = inside.length ? inside : near;
    if (!hits.length) return null;
    if (hits.length > 1 && hits.every((j) => ops.e[j] - ops.s[j] < tol)) {
      const c = [0, 0, 0, 0];
      hits.forEach((j) => c[ops.k[j]]++);
      return hits.length + " ops in this pixel: " + c.map((v, k) => v ? v + " " + NAMES[k] : "").filter(Boolean).join(", ") +
        "\n" + hits.slice(0, 5).map(describe).join("\n") + (hits.length > 5 ? "\n…" : "");
    }
    return describe(hits.reduce((a, b) => (ops.e[b] - ops.s[b] < ops.e[a] - ops.s[a] ? b : a)));
  }

  function describe(j) {
    let s = "process " + ops.p[j] + ": " + ops.l[j] + " → " + NAMES[ops.k[j]] + "\n" + fmt(ops.s[j]) + " – " +
      (ops.k[j] === 3 ? "never completed" : fmt(ops.e[j])) + "  (index " + ops.i[j] + ")";
    if (lin) {
      if (j === badJ) s += "\ncannot be linearized here";
      else if (linPos.has(ops.i[j])) {
        const k = linPos.get(ops.i[j]);
        s += "\nlinearized #" + (k + 1) + ", state after: " + JSON.stringify(lin.states ? lin.states[k] : "?");
      } else s += "\nnot in the linearized prefix";
    }
    return s;
  }

  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    if (drag) { pan((drag - x) * (v1 - v0) / (W - LEFT)); drag = x; return; }
    const s = hit(x, y);
    if (!s) { tip.style.display = "none"; return; }
    tip.textContent = s; tip.style.display = "block";
    tip.style.left = Math.min(x + 14, W - 320) + "px"; tip.style.top = (y + 14) + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; drag = 0; });
  let drag = 0;
  canvas.addEventListener("mousedown", (ev) => { drag = ev.clientX - canvas.getBoundingClientRect().left; });
  window.addEventListener("mouseup", () => { drag = 0; });
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const x = ev.clientX - canvas.getBoundingClientRect().left;
    zoom(ev.deltaY < 0 ? 0.8 : 1.25, Math.max(v0, Math.min(v1, T(x))));
  }, { passive: false });

  function clampView() {
    const w = Math.min(span * 1.02, Math.max(v1 - v0, span * 1e-6));
    if (v0 < data.t0 - span * 0.01) v0 = data.t0 - span * 0.01;
    v1 = v0 + w;
    if (v1 > data.t1 + span * 0.01) { v1 = data.t1 + span * 0.01; v0 = v1 - w; }
  }
  function zoom(f, at) { v0 = at - (at - v0) * f; v1 = at + (v1 - at) * f; clampView(); draw(); }
  function pan(dt) { v0 += dt; v1 += dt; clampView(); draw(); }
  function whole() { v0 = data.t0; v1 = data.t1; draw(); }
  function show(j) {
    if (ops.s[j] >= v0 && ops.e[j] <= v1) return;
    const w = Math.max(v1 - v0, (ops.e[j] - ops.s[j]) * 1.5), mid = (ops.s[j] + ops.e[j]) / 2;
    v0 = mid - w / 2; v1 = mid + w / 2; clampView();
  }
  const buttons = {
    "zoom-in": () => zoom(0.5, (v0 + v1) / 2), "zoom-out": () => zoom(2, (v0 + v1) / 2), "whole": whole,
    "left": () => pan(-(v1 - v0) / 3), "right": () => pan((v1 - v0) / 3),
  };
  if (lin) {
    const stepTo = (k) => {
      step = Math.max(-1, Math.min(lin.i.length - 1, k));
      const st = root.querySelector(".step");
      root.dataset.step = String(step + 1);
      root.dataset.state = step >= 0 && lin.states ? JSON.stringify(lin.states[step]) : JSON.stringify(lin.init);
      if (step < 0) st.textContent = "before the first op: the initial state " + JSON.stringify(lin.init);
      else {
        const j = byIndex.get(lin.i[step]);
        st.textContent = "step " + (step + 1) + " of " + lin.i.length + ": " + (j === undefined ? "?" :
          "process " + ops.p[j] + " " + ops.l[j]) + "  ⇒  state " + JSON.stringify(lin.states ? lin.states[step] : "?");
        if (j !== undefined) show(j);
      }
      draw();
    };
    Object.assign(buttons, {
      "first": () => stepTo(-1), "prev": () => stepTo(step - 1), "next": () => stepTo(step + 1),
      "last": () => stepTo(lin.i.length - 1),
      "bad": () => { if (badJ >= 0) { show(badJ); draw(); } },
    });
    root._stepTo = stepTo;
  }
  for (const [name, fn] of Object.entries(buttons)) {
    const el = root.querySelector("button[data-do='" + name + "']");
    if (el) el.addEventListener("click", fn);
  }
  window.addEventListener("keydown", (ev) => {
    const key = { "+": "zoom-in", "=": "zoom-in", "-": "zoom-out", "0": "whole", "ArrowLeft": lin ? "prev" : "left",
      "ArrowRight": lin ? "next" : "right" }[ev.key];
    if (key && buttons[key]) { ev.preventDefault(); buttons[key](); }
  });
  // where an op (by invoke index) is drawn, in client coordinates: for links into the page and for tests
  root._locate = (idx) => {
    const j = byIndex.get(idx);
    if (j === undefined) return null;
    const r = canvas.getBoundingClientRect();
    const x = (Math.max(LEFT, X(ops.s[j])) + Math.min(W, X(ops.e[j]))) / 2;
    return [r.left + x, r.top + laneY(ops.lane[j]) + laneH / 2];
  };
  window.addEventListener("resize", resize);
  resize();
  if (lin) {
    const want = Number(hash.get("step"));
    root._stepTo(hash.get("step") !== null && isFinite(want) ? want - 1 : step);
    if (hash.get("t")) { const [a, b] = hash.get("t").split(",").map(Number); if (b > a) { v0 = a; v1 = b; draw(); } }
  }
}
