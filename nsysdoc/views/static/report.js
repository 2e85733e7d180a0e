/* nsysdoc report: optional interactivity. Everything is readable without it.
   - timeline: drawn on a canvas from the embedded data (#tl-data): wheel or buttons to zoom down to
     single operations, drag to pan, double-click to reset; a finding's "show on the timeline" link
     zooms to its range and highlights it. Without scripts the server-drawn SVG stays;
   - tables: click a header to sort. No network, no storage, no eval. */
(function () {
  "use strict";

  function niceStep(span, target) {
    if (!(span > 0)) { return 1; }
    var raw = span / target, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var ms = [1, 2, 5, 10];
    for (var i = 0; i < ms.length; i++) { if (raw <= ms[i] * mag) { return ms[i] * mag; } }
    return 10 * mag;
  }

  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a < 1e3) { return Math.round(ns) + " ns"; }
    if (a < 1e6) { return (ns / 1e3).toFixed(a < 1e4 ? 2 : 1) + " µs"; }
    if (a < 1e9) { return (ns / 1e6).toFixed(a < 1e7 ? 3 : 2) + " ms"; }
    return (ns / 1e9).toFixed(3) + " s";
  }

  function fmtOff(ns, step) {  // an axis label: ms from the window start, as many digits as the step needs
    var d = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / 1e6) + 1e-9)));
    return "+" + (ns / 1e6).toFixed(d) + " ms";
  }

  /* The interactive timeline: data from <script id="tl-data"> (nsysdoc/report/tldata.py), drawn on
     a canvas. Level of detail: an operation at least MIN_PX wide is drawn on its own; narrower
     neighbours closer than a pixel are drawn as one block (its tooltip says how many). */
  var MIN_PX = 1, HEAD_H = 18, LANE_H = 14, GAP_H = 10, PAD = 3, AXIS_H = 18;
  var KIND_VARS = { kernel: "--k-kernel", nccl: "--k-nccl", memcpy: "--k-memcpy", memset: "--k-memset",
    nvtx: "--k-nvtx", api: "--k-api", sync: "--k-sync", os_wait: "--k-os", mixed: "--k-mixed" };
  var CAUSE_VARS = { sync: "--i-sync", input: "--i-input", alloc: "--i-alloc", setup: "--i-setup",
    launch: "--i-launch", api: "--i-api", host: "--i-host", dependency: "--i-dep", tail: "--i-tail",
    unattributed: "--i-unattr" };

  function decodeLane(ln) {
    var n = ln.s ? ln.s.length : 0, st = new Float64Array(n), en = new Float64Array(n), reach = new Float64Array(n);
    var t = 0, r = -Infinity;
    for (var i = 0; i < n; i++) {
      t += ln.s[i]; st[i] = t; en[i] = t + ln.d[i];
      r = Math.max(r, en[i]); reach[i] = r;
    }
    ln.st = st; ln.en = en; ln.reach = reach; ln.len = n;
  }

  function initLive(live, data) {
    var canvas = live.querySelector(".tl-canvas"), wrap = live.querySelector(".tl-wrap");
    var tip = live.querySelector(".tl-tip"), hl = live.querySelector(".tl-highlight");
    var status = live.querySelector(".tl-status"), winBox = live.querySelector(".tl-windows");
    var ctx = canvas.getContext("2d");
    if (!ctx) { return null; }
    var css = getComputedStyle(document.documentElement);
    var kindCol = data.kinds.map(function (k) { return (css.getPropertyValue(KIND_VARS[k] || "--k-mixed") || "#888").trim(); });
    var causeCol = data.causes.map(function (c) { return (css.getPropertyValue(CAUSE_VARS[c] || "") || "#6b7280").trim() || "#6b7280"; });
    var win = null, v0 = 0, v1 = 1, rows = [], items = [], mark = null, W = 0, H = 0, LW = 160;
    var buttons = {};

    data.windows.forEach(function (w) {
      w.lanes.forEach(function (ln) { if (!ln.h) { decodeLane(ln); } });
      var b = document.createElement("button");
      b.type = "button"; b.textContent = w.title; b.setAttribute("data-window", w.id);
      b.addEventListener("click", function () { show(w.id); });
      winBox.appendChild(b); buttons[w.id] = b;
    });

    function layout() {
      rows = []; var y = AXIS_H;
      win.lanes.forEach(function (ln) {
        var h = ln.h ? HEAD_H : ln.gap ? GAP_H : LANE_H;
        rows.push({ y: y, h: h, ln: ln }); y += h + (ln.h ? 0 : PAD) + (ln.gap ? 4 : 0);
      });
      H = y + 2;
      W = Math.max(200, wrap.clientWidth);
      LW = Math.round(Math.max(110, Math.min(220, W * 0.16)));
      var dpr = window.devicePixelRatio || 1;
      canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
      canvas.style.width = W + "px"; canvas.style.height = H + "px";
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    }

    function show(id) {
      var w = data.windows.filter(function (x) { return x.id === id; })[0] || data.windows[0];
      win = w; v0 = 0; v1 = w.dur;
      Object.keys(buttons).forEach(function (k) { buttons[k].setAttribute("aria-pressed", String(k === w.id)); });
      live.setAttribute("data-window", w.id);
      if (mark && mark.w !== w.id) { mark = null; }
      layout(); redraw();
    }

    function ellipsize(text, width) {
      if (ctx.measureText(text).width <= width) { return text; }
      var lo = 0, hi = text.length;
      while (lo < hi) {
        var mid = (lo + hi + 1) >> 1;
        if (ctx.measureText(text.slice(0, mid) + "…").width <= width) { lo = mid; } else { hi = mid - 1; }
      }
      return lo > 0 ? text.slice(0, lo) + "…" : "";
    }

    function lower(arr, x, n) {  // first index with arr[i] > x
      var lo = 0, hi = n;
      while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] > x) { hi = m; } else { lo = m + 1; } }
      return lo;
    }

    function redraw() {
      var pw = W - LW, k = pw / (v1 - v0), ops = 0, blocks = 0;
      var X = function (t) { return LW + (t - v0) * k; };
      ctx.clearRect(0, 0, W, H);
      ctx.font = "10px system-ui, sans-serif"; ctx.textBaseline = "middle";
      // axis and grid
      var step = niceStep(v1 - v0, Math.max(3, Math.floor(pw / 110)));
      ctx.fillStyle = "#5b6475"; ctx.strokeStyle = "rgba(29,35,48,0.08)"; ctx.textAlign = "center";
      for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
        var x = X(t);
        ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS_H); ctx.lineTo(x + 0.5, H); ctx.stroke();
        if (x > LW + 30 && x < W - 30) { ctx.fillText(fmtOff(t, step), x, AXIS_H / 2); }
      }
      items = [];
      rows.forEach(function (r, ri) {
        var ln = r.ln, drawn = [];
        items.push(drawn);
        if (ln.h) {
          ctx.fillStyle = "#f3f5f8"; ctx.fillRect(0, r.y, W, r.h);
          ctx.fillStyle = "#1d2330"; ctx.textAlign = "left"; ctx.font = "600 12px system-ui, sans-serif";
          ctx.fillText(ellipsize(ln.h, W - 8), 4, r.y + r.h / 2 + 1);
          ctx.font = "10px system-ui, sans-serif";
          return;
        }
        ctx.fillStyle = "#fbfbfc"; ctx.fillRect(LW, r.y, pw, r.h);
        ctx.save(); ctx.beginPath(); ctx.rect(LW, r.y, pw, r.h); ctx.clip();
        var n = ln.len, i = lower(ln.reach, v0, n), kinds = ln.k, gap = !!ln.gap;
        var lane0 = gap ? 0 : data.kinds.indexOf(ln.kind);
        var laneCol = gap ? causeCol[data.causes.indexOf(ln.kind)] : kindCol[lane0 < 0 ? 0 : lane0];
        var blk = null;
        function colour(j) { return kinds ? (gap ? causeCol[kinds[j]] : kindCol[kinds[j]]) : laneCol; }
        function flush() {
          if (!blk) { return; }
          var w = Math.max(blk.x1 - blk.x0, 1);
          ctx.globalAlpha = Math.max(0.3, Math.min(1, blk.busy / Math.max(blk.t1 - blk.t0, 1)));
          ctx.fillStyle = colour(blk.main); ctx.fillRect(blk.x0, r.y, w, r.h);
          ctx.globalAlpha = 1;
          drawn.push({ x0: blk.x0, x1: blk.x0 + w, i0: blk.i0, i1: blk.i1, agg: true });
          blocks++; blk = null;
        }
        for (; i < n && ln.st[i] < v1; i++) {
          if (ln.en[i] <= v0) { continue; }
          var x0 = X(ln.st[i]), x1 = X(ln.en[i]), merged = ln.c && ln.c[i] > 1;
          if (x1 - x0 >= MIN_PX && !merged) {
            flush();
            ctx.fillStyle = colour(i); ctx.fillRect(x0, r.y, x1 - x0, r.h);
            if (x1 - x0 > 6) { ctx.strokeStyle = "rgba(255,255,255,0.7)"; ctx.strokeRect(x0 + 0.5, r.y + 0.5, x1 - x0 - 1, r.h - 1); }
            drawn.push({ x0: x0, x1: x1, i0: i, i1: i, agg: false });
            ops++;
            if (x1 - x0 > 34 && ln.n && !gap) {
              var a = Math.max(x0, LW) + 3, b = Math.min(x1, W) - 3;
              if (b - a > 20) {
                ctx.fillStyle = kinds && data.kinds[kinds[i]] === "nvtx" || ln.kind === "nvtx" ? "#0d3d39" : "#ffffff";
                ctx.textAlign = "left"; ctx.fillText(ellipsize(data.names[ln.n[i]] || "", b - a), a, r.y + r.h / 2 + 1);
              }
            }
            continue;
          }
          var busy = merged ? ln.b[i] : ln.en[i] - ln.st[i];
          if (blk && x0 <= blk.x1 + MIN_PX) {
            blk.x1 = Math.max(blk.x1, x1); blk.i1 = i; blk.t1 = Math.max(blk.t1, ln.en[i]); blk.busy += busy;
            if (ln.d[i] > blk.best) { blk.best = ln.d[i]; blk.main = i; }
          } else {
            flush();
            blk = { x0: x0, x1: x1, i0: i, i1: i, t0: ln.st[i], t1: ln.en[i], busy: busy, best: ln.d[i], main: i };
          }
        }
        flush();
        ctx.restore();
        // the label column
        ctx.fillStyle = gap ? "#5b6475" : "#1d2330"; ctx.textAlign = "left";
        ctx.font = (gap ? "italic " : "") + "11px system-ui, sans-serif";
        ctx.fillText(ellipsize(ln.label, LW - 18), 12, r.y + r.h / 2 + 1);
        ctx.font = "10px system-ui, sans-serif";
      });
      canvas.setAttribute("data-ops", String(ops));
      canvas.setAttribute("data-blocks", String(blocks));
      canvas.setAttribute("data-view", Math.round(v0) + "," + Math.round(v1));
      placeMark();
      status.textContent = win.title + " · window starts at " + win.t0s + " · showing +" + fmtDur(v0) + " → +" +
        fmtDur(v1) + " (" + fmtDur(v1 - v0) + "): " + ops.toLocaleString() + " operations drawn one by one" +
        (blocks ? ", " + blocks.toLocaleString() + " merged blocks (zoom in to split them)" : "") +
        (mark ? " · highlighted: " + mark.label : "");
    }

    // issue 49: the finding's other ranges in the shown window, highlighted with the followed one
    var extra = [];
    function placeOne(el, r) {
      var k = (W - LW) / (v1 - v0), a = LW + (r.s - v0) * k, b = LW + (r.e - v0) * k;
      a = Math.max(a, LW); b = Math.min(b, W);
      if (b <= a) { el.hidden = true; return; }
      el.hidden = false;
      el.style.left = a + "px"; el.style.width = Math.max(b - a, 2) + "px";
      el.style.top = AXIS_H + "px"; el.style.height = (H - AXIS_H) + "px";
      el.setAttribute("data-range", r.id); el.title = r.label;
    }
    function placeExtra() {
      var others = mark && mark.w === win.id ? data.ranges.filter(function (x) {
        return x.f && x.f === mark.f && x.w === mark.w && x.id !== mark.id; }) : [];
      while (extra.length < others.length) {
        var el = hl.cloneNode(false); el.classList.add("tl-also"); hl.parentNode.insertBefore(el, hl.nextSibling);
        extra.push(el);
      }
      extra.forEach(function (el, i) {
        if (i < others.length) { placeOne(el, others[i]); } else { el.hidden = true; el.removeAttribute("data-range"); }
      });
    }

    function placeMark() {
      placeExtra();
      if (!mark || mark.w !== win.id) { hl.hidden = true; return; }
      placeOne(hl, mark);
    }

    function setView(a, b) {
      var minW = 50;
      if (b - a < minW) { var c = (a + b) / 2; a = c - minW / 2; b = c + minW / 2; }
      var w = Math.min(b - a, win.dur);
      a = Math.max(0, Math.min(win.dur - w, a)); v0 = a; v1 = a + w;
      redraw();
    }

    function zoomAt(f, frac) { var c = v0 + frac * (v1 - v0), w = (v1 - v0) * f; setView(c - frac * w, c - frac * w + w); }

    canvas.addEventListener("wheel", function (e) {
      var r = canvas.getBoundingClientRect(), x = e.clientX - r.left;
      if (x < LW) { return; }
      e.preventDefault();
      zoomAt(e.deltaY < 0 ? 0.8 : 1.25, (x - LW) / (W - LW));
    }, { passive: false });
    var drag = null;
    canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, v0: v0, v1: v1 }; e.preventDefault(); });
    window.addEventListener("mousemove", function (e) {
      if (drag) {
        var dt = (e.clientX - drag.x) / (W - LW) * (drag.v1 - drag.v0);
        setView(drag.v0 - dt, drag.v1 - dt); return;
      }
    });
    window.addEventListener("mouseup", function () { drag = null; });
    canvas.addEventListener("dblclick", function () { setView(0, win.dur); });
    canvas.addEventListener("keydown", function (e) {
      var w = v1 - v0;
      if (e.key === "+" || e.key === "=") { zoomAt(0.5, 0.5); }
      else if (e.key === "-") { zoomAt(2, 0.5); }
      else if (e.key === "ArrowLeft") { setView(v0 - w / 4, v1 - w / 4); }
      else if (e.key === "ArrowRight") { setView(v0 + w / 4, v1 + w / 4); }
      else { return; }
      e.preventDefault();
    });
    live.querySelector(".tl-zoom").addEventListener("click", function (e) {
      var what = e.target && e.target.getAttribute("data-zoom");
      if (what === "in") { zoomAt(0.5, 0.5); } else if (what === "out") { zoomAt(2, 0.5); }
      else if (what === "reset") { setView(0, win.dur); }
    });

    function describe(r, it) {
      var ln = r.ln, i, parts;
      if (!it.agg) {
        i = it.i0;
        var d = ln.en[i] - ln.st[i], cnt = ln.c ? ln.c[i] : 1;
        if (ln.gap) {
          var cause = data.causes[ln.k ? ln.k[i] : data.causes.indexOf(ln.kind)];
          parts = ["idle " + fmtDur(d) + " — " + data.causeLabels[data.causes.indexOf(cause)]];
          var sp = ln.x && ln.x[String(i)];
          if (sp) { parts.push("split: " + sp.map(function (p) { return data.causes[p[0]] + " " + fmtDur(p[1]); }).join(", ")); }
          if (cnt > 1) { parts.push(cnt + " gaps merged in the data"); }
        } else {
          var kind = ln.k ? data.kinds[ln.k[i]] : ln.kind;
          parts = [data.names[ln.n[i]] || "(unnamed)", data.kindLabels[data.kinds.indexOf(kind)] + " · " + fmtDur(d)];
          if (cnt > 1) { parts.push(cnt + " operations merged in the data (over the page's size budget)"); }
        }
        parts.push("at +" + fmtDur(ln.st[i]) + " from the window start");
        return parts.join("\n");
      }
      var n = 0, busy = 0, byName = {}, top = null;
      for (i = it.i0; i <= it.i1; i++) {
        n += ln.c ? ln.c[i] : 1; busy += ln.c && ln.c[i] > 1 ? ln.b[i] : ln.d[i];
        var key = ln.gap ? data.causes[ln.k ? ln.k[i] : data.causes.indexOf(ln.kind)] : data.names[ln.n[i]];
        byName[key] = (byName[key] || 0) + ln.d[i];
        if (top === null || byName[key] > byName[top]) { top = key; }
      }
      var span = ln.en[it.i1] - ln.st[it.i0];
      return n.toLocaleString() + (ln.gap ? " idle gaps" : " operations") + " merged at this zoom (zoom in to split them)\n" +
        fmtDur(span) + ", " + (ln.gap ? "idle " : "busy ") + fmtDur(busy) + "\nmost time: " + top;
    }

    canvas.addEventListener("mousemove", function (e) {
      if (drag) { tip.hidden = true; return; }
      var rc = canvas.getBoundingClientRect(), x = e.clientX - rc.left, y = e.clientY - rc.top, text = null;
      for (var ri = 0; ri < rows.length; ri++) {
        var r = rows[ri];
        if (y < r.y || y >= r.y + r.h) { continue; }
        if (x < LW || r.ln.h) { text = r.ln.h || r.ln.title || r.ln.label; break; }
        var its = items[ri], best = null;
        for (var j = 0; j < its.length; j++) {
          if (x >= its[j].x0 - 2 && x <= its[j].x1 + 2) { best = its[j]; if (x >= its[j].x0 && x <= its[j].x1) { break; } }
        }
        if (best) { text = describe(r, best); }
        break;
      }
      if (!text) { tip.hidden = true; return; }
      tip.textContent = text; tip.hidden = false;
      var left = Math.min(x + 12, W - tip.offsetWidth - 4);
      tip.style.left = Math.max(0, left) + "px"; tip.style.top = (y + 16) + "px";
    });
    canvas.addEventListener("mouseleave", function () { tip.hidden = true; });
    window.addEventListener("resize", function () { if (win) { layout(); redraw(); } });

    function highlight(id) {
      var r = data.ranges.filter(function (x) { return x.id === id; })[0];
      if (!r) { return false; }
      if (!win || win.id !== r.w) { show(r.w); }
      mark = r;
      var pad = Math.max((r.e - r.s) * 0.15, 2000);
      setView(r.s - pad, r.e + pad);
      // issue 49: the legend above the timeline stays in view, below the sticky header (--head-h)
      var legend = live.previousElementSibling;
      (legend && legend.classList.contains("legend") ? legend : live).scrollIntoView({ block: "start" });
      return true;
    }
    document.addEventListener("click", function (e) {
      var a = e.target && e.target.closest ? e.target.closest("a[data-tl-range]") : null;
      if (a && highlight(a.getAttribute("data-tl-range"))) { e.preventDefault(); }
    });

    live.hidden = false;
    show(data.windows[0].id);
    // for tests and for the console: the view in ns from the window start
    live.nsysdocTimeline = { setView: setView, show: show, highlight: highlight,
      view: function () { return [v0, v1, win.id]; } };
    return live;
  }

  function initTimeline() {
    var live = document.getElementById("tl-live"), src = document.getElementById("tl-data");
    if (!live || !src) { return; }
    var data;
    try { data = JSON.parse(src.textContent); } catch (err) { return; }
    if (!data || !data.windows || !data.windows.length) { return; }
    if (initLive(live, data)) {
      Array.prototype.forEach.call(document.querySelectorAll(".tl-static"), function (el) { el.hidden = true; });
    }
  }

  function sortValue(td) {
    var v = td.getAttribute("data-sort");
    if (v === null || v === "" || v === "None") { return null; }
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }

  function initSort(table) {
    var ths = table.querySelectorAll("thead th");
    Array.prototype.forEach.call(ths, function (th, col) {
      th.addEventListener("click", function (e) {
        if (e.target && e.target.tagName === "A") { return; }
        // issue 49: a number column sorts largest first on the first click, a text column A→Z
        var was = th.getAttribute("aria-sort");
        var asc = was ? was !== "ascending" : !th.classList.contains("num");
        Array.prototype.forEach.call(ths, function (o) { o.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (ra, rb) {
          var a = sortValue(ra.cells[col]), b = sortValue(rb.cells[col]);
          if (a === null && b === null) { return 0; }
          if (a === null) { return 1; }
          if (b === null) { return -1; }
          if (typeof a !== typeof b) { a = String(a); b = String(b); }
          var c = a < b ? -1 : a > b ? 1 : 0;
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  // the glossary is collapsed; a link to one of its definitions opens it and scrolls there
  function openTarget(hash) {
    if (!hash || hash.length < 2) { return; }
    var el = document.getElementById(decodeURIComponent(hash.slice(1)));
    var d = el && el.closest ? el.closest("details") : null;
    if (d && !d.open) { d.open = true; el.scrollIntoView(); }
  }
  document.addEventListener("click", function (e) {
    var a = e.target && e.target.closest ? e.target.closest("a[href^='#']") : null;
    if (a) { openTarget(a.getAttribute("href")); }
  });
  window.addEventListener("hashchange", function () { openTarget(location.hash); });
  openTarget(location.hash);

  // issue 49: the sticky header's height, for scroll-margin-top (report.css), kept on resize
  function headHeight() {
    var head = document.querySelector(".page-head");
    var sticky = head && getComputedStyle(head).position === "sticky";
    document.documentElement.style.setProperty("--head-h", (sticky ? Math.ceil(head.getBoundingClientRect().height) : 0) + "px");
  }
  headHeight();
  window.addEventListener("resize", headHeight);

  initTimeline();
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), initSort);
  document.documentElement.setAttribute("data-js", "ready");
}());
