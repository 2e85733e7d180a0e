/* nsysdoc report: optional interactivity. Everything is readable without it.
   - timeline: wheel to zoom, drag to pan, double-click or "Reset" to reset (the SVG viewBox changes);
   - tables: click a header to sort. No network, no storage, no eval. */
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";

  function niceStep(span, target) {
    if (!(span > 0)) { return 1; }
    var raw = span / target, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var ms = [1, 2, 5, 10];
    for (var i = 0; i < ms.length; i++) { if (raw <= ms[i] * mag) { return ms[i] * mag; } }
    return 10 * mag;
  }

  function fmt(v) {
    var a = Math.abs(v);
    if (a === 0) { return "0"; }
    if (a >= 100) { return String(Math.round(v * 10) / 10); }
    return String(Number(v.toPrecision(4)));
  }

  function initTimeline(tl) {
    var plot = tl.querySelector(".tl-plot"), axis = tl.querySelector(".tl-axis"), over = tl.querySelector(".tl-over");
    if (!plot || !axis) { return; }
    var W = Number(tl.getAttribute("data-units")), ms = Number(tl.getAttribute("data-ms"));
    var H = plot.viewBox.baseVal.height, v0 = 0, vw = W;
    var grid = over ? over.querySelector(".grid") : null, names = over ? over.querySelector(".names") : null;

    function redraw() {
      plot.setAttribute("viewBox", v0 + " 0 " + vw + " " + H);
      var a = v0 / W * ms, b = (v0 + vw) / W * ms, step = niceStep(b - a, 8);
      while (axis.firstChild) { axis.removeChild(axis.firstChild); }
      if (grid) { while (grid.firstChild) { grid.removeChild(grid.firstChild); } }
      for (var t = Math.ceil(a / step) * step; t <= b + 1e-9; t += step) {
        var pct = ((t - a) / (b - a) * 100).toFixed(3) + "%";
        var txt = document.createElementNS(SVGNS, "text");
        txt.setAttribute("x", pct); txt.setAttribute("y", "14");
        if (t - a < step * 0.3) { txt.setAttribute("class", "first"); }
        else if (b - t < step * 0.3) { txt.setAttribute("class", "last"); }
        txt.textContent = "+" + fmt(t) + " ms";
        axis.appendChild(txt);
        if (grid) {
          var ln = document.createElementNS(SVGNS, "line");
          ln.setAttribute("x1", pct); ln.setAttribute("x2", pct); ln.setAttribute("y1", "0"); ln.setAttribute("y2", String(H));
          grid.appendChild(ln);
        }
      }
      if (names) { names.style.display = vw < W ? "none" : ""; }
    }

    function zoom(factor, frac) {
      var c = v0 + frac * vw;
      vw = Math.min(W, Math.max(W / 5000, vw * factor));
      v0 = Math.min(W - vw, Math.max(0, c - frac * vw));
      redraw();
    }

    plot.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = plot.getBoundingClientRect();
      zoom(e.deltaY < 0 ? 0.8 : 1.25, (e.clientX - r.left) / r.width);
    }, { passive: false });

    var drag = null;
    plot.addEventListener("mousedown", function (e) { drag = { x: e.clientX, v0: v0 }; e.preventDefault(); });
    window.addEventListener("mousemove", function (e) {
      if (!drag) { return; }
      var r = plot.getBoundingClientRect();
      v0 = Math.min(W - vw, Math.max(0, drag.v0 - (e.clientX - drag.x) / r.width * vw));
      redraw();
    });
    window.addEventListener("mouseup", function () { drag = null; });
    plot.addEventListener("dblclick", function () { v0 = 0; vw = W; redraw(); });

    var controls = tl.querySelector(".tl-controls");
    if (controls) {
      controls.hidden = false;
      controls.addEventListener("click", function (e) {
        var what = e.target && e.target.getAttribute("data-zoom");
        if (what === "in") { zoom(0.5, 0.5); }
        else if (what === "out") { zoom(2, 0.5); }
        else if (what === "reset") { v0 = 0; vw = W; redraw(); }
      });
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
        var asc = th.getAttribute("aria-sort") !== "ascending";
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

  Array.prototype.forEach.call(document.querySelectorAll(".tl"), initTimeline);
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), initSort);
  document.documentElement.setAttribute("data-js", "ready");
}());
