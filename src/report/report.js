// fabricsim report: draws the time series embedded in #data as zoomable
// line charts and hoverable heatmaps. No library, no network access.
(function () {
  "use strict";
  var errors = [];
  function showErrors() {
    var box = document.getElementById("errors");
    box.textContent = errors.join("\n");
    box.hidden = errors.length === 0;
    document.body.setAttribute("data-errors", String(errors.length));
  }
  window.addEventListener("error", function (e) {
    errors.push(String(e.message));
    showErrors();
  });

  var NS = "http://www.w3.org/2000/svg";
  function svgEl(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function niceTicks(lo, hi, n) {
    var raw = (hi - lo) / n;
    if (!(raw > 0)) return [lo];
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / mag;
    var step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }
  function fmt(v) {
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-2)) return v.toExponential(2);
    return String(+v.toFixed(2));
  }
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

  // White through blue to the hot colour.
  function heat(v, hot) {
    v = Math.max(0, Math.min(1, v));
    var cool = [49, 130, 189];
    var a, b, t;
    if (v < 0.5) { a = [255, 255, 255]; b = cool; t = v * 2; }
    else { a = cool; b = hot; t = (v - 0.5) * 2; }
    var c = [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * t); });
    return "rgb(" + c.join(",") + ")";
  }

  // A line chart over time: drag across it to zoom, double-click to reset;
  // the readout shows every series at the time under the mouse.
  function lineChart(box, spec) {
    var W = 900, H = 340, L = 70, R = 16, T = 12, B = 40;
    var svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, "class": "chart", role: "img" }, box);
    var readout = document.createElement("div");
    readout.className = "readout";
    box.appendChild(readout);
    var legend = document.createElement("div");
    legend.className = "legend";
    spec.series.forEach(function (s, i) {
      var item = document.createElement("span");
      item.innerHTML = "<i style=\"border-color:" + PALETTE[i % 8] + ";border-style:" +
        (s.dashed ? "dashed" : "solid") + "\"></i>";
      item.appendChild(document.createTextNode(s.name));
      legend.appendChild(item);
    });
    box.appendChild(legend);
    var dt = spec.interval_us, end = spec.end_us;
    var x0 = 0, x1 = end;
    var ymax = 1e-12;
    spec.series.forEach(function (s) { s.values.forEach(function (v) { if (v > ymax) ymax = v; }); });
    spec.marks.forEach(function (m) { if (m.y > ymax) ymax = m.y; });
    ymax *= 1.08;
    function X(t) { return L + (t - x0) / (x1 - x0) * (W - L - R); }
    function Y(v) { return H - B - v / ymax * (H - T - B); }
    function tOf(px) { return x0 + (px - L) / (W - L - R) * (x1 - x0); }
    var sel = null;
    function draw() {
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      var clipId = "clip-" + box.id;
      var defs = svgEl("defs", {}, svg);
      var cp = svgEl("clipPath", { id: clipId }, defs);
      svgEl("rect", { x: L, y: T, width: W - L - R, height: H - T - B }, cp);
      niceTicks(0, ymax, 6).forEach(function (v) {
        svgEl("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), "class": "grid" }, svg);
        svgEl("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end" }, svg).textContent = fmt(v);
      });
      niceTicks(x0, x1, 8).forEach(function (t) {
        svgEl("line", { x1: X(t), x2: X(t), y1: T, y2: H - B, "class": "grid" }, svg);
        svgEl("text", { x: X(t), y: H - B + 16, "text-anchor": "middle" }, svg).textContent = fmt(t);
      });
      svgEl("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", "class": "axis" }, svg).textContent = "time (us)";
      svgEl("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", "class": "axis",
        transform: "rotate(-90 14 " + (T + H - B) / 2 + ")" }, svg).textContent = spec.y;
      svgEl("rect", { x: L, y: T, width: W - L - R, height: H - T - B, "class": "frame" }, svg);
      var g = svgEl("g", { "clip-path": "url(#" + clipId + ")" }, svg);
      spec.marks.forEach(function (m) {
        svgEl("line", { x1: L, x2: W - R, y1: Y(m.y), y2: Y(m.y), "class": "mark" }, g);
        svgEl("text", { x: L + 6, y: Y(m.y) - 3, "class": "marklabel" }, g).textContent = m.name;
      });
      var first = Math.max(0, Math.floor(x0 / dt) - 1);
      var last = Math.min(spec.series.length ? spec.series[0].values.length : 0, Math.ceil(x1 / dt) + 1);
      spec.series.forEach(function (s, i) {
        var pts = [];
        for (var k = first; k < last; k++) {
          var t = Math.min((k + 0.5) * dt, end);
          pts.push(X(t).toFixed(1) + "," + Y(s.values[k]).toFixed(1));
        }
        svgEl("polyline", { points: pts.join(" "), fill: "none", stroke: PALETTE[i % 8],
          "stroke-width": 1.6, "stroke-dasharray": s.dashed ? "6 4" : "none", "class": "series" }, g);
      });
      if (sel) {
        var a = Math.min(sel[0], sel[1]), b = Math.max(sel[0], sel[1]);
        svgEl("rect", { x: X(a), y: T, width: X(b) - X(a), height: H - T - B, "class": "selection" }, svg);
      }
      box.setAttribute("data-x0", fmt(x0));
      box.setAttribute("data-x1", fmt(x1));
    }
    function pointer(ev) {
      var r = svg.getBoundingClientRect();
      return (ev.clientX - r.left) / r.width * W;
    }
    svg.addEventListener("mousedown", function (ev) { var t = tOf(pointer(ev)); sel = [t, t]; });
    svg.addEventListener("mousemove", function (ev) {
      var t = tOf(pointer(ev));
      if (sel) { sel[1] = t; draw(); }
      var k = Math.max(0, Math.min(Math.floor(t / dt), (spec.series[0] || { values: [0] }).values.length - 1));
      readout.textContent = fmt(k * dt) + " us: " + spec.series.map(function (s) {
        return s.name + " " + fmt(s.values[k] || 0);
      }).join(", ");
    });
    svg.addEventListener("mouseup", function () {
      if (!sel) return;
      var a = Math.max(0, Math.min(sel[0], sel[1])), b = Math.min(end, Math.max(sel[0], sel[1]));
      sel = null;
      if (b - a > (x1 - x0) / 200) { x0 = a; x1 = b; }
      draw();
    });
    svg.addEventListener("dblclick", function () { x0 = 0; x1 = end; draw(); });
    draw();
  }

  // Rows of cells over time; hovering a cell names its row, its time span
  // and its value.
  function heatmap(box, spec) {
    var L = 200, T = 8, B = 34, R = 12, W = 900;
    var rows = spec.rows.length, cols = rows ? spec.values[0].length : 0;
    var rowH = Math.max(3, Math.min(14, Math.floor(600 / Math.max(rows, 1))));
    var H = T + rows * rowH + B;
    var canvas = document.createElement("canvas");
    var ratio = window.devicePixelRatio || 1;
    canvas.width = W * ratio;
    canvas.height = H * ratio;
    canvas.style.width = "100%";
    canvas.style.maxWidth = W + "px";
    box.appendChild(canvas);
    var tip = document.createElement("div");
    tip.className = "readout";
    tip.textContent = "hover a cell";
    box.appendChild(tip);
    var ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    var colW = (W - L - R) / Math.max(cols, 1);
    var width = spec.interval_us * spec.span;
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    for (var r = 0; r < rows; r++) {
      for (var c = 0; c < cols; c++) {
        var v = spec.values[r][c] / spec.scale;
        if (v > 0) {
          ctx.fillStyle = heat(v, spec.hot);
          ctx.fillRect(L + c * colW, T + r * rowH, Math.ceil(colW), rowH);
        }
      }
      if (r > 0 && spec.groups[r] !== spec.groups[r - 1]) {
        ctx.fillStyle = "#000";
        ctx.fillRect(L, T + r * rowH - 0.5, W - L - R, 1);
      }
    }
    ctx.strokeStyle = "#444";
    ctx.strokeRect(L, T, W - L - R, rows * rowH);
    ctx.fillStyle = "#222";
    ctx.font = "10px sans-serif";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    var every = Math.ceil(11 / rowH);
    for (r = 0; r < rows; r += every) ctx.fillText(spec.rows[r], L - 4, T + (r + 0.5) * rowH);
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    niceTicks(0, spec.end_us, 8).forEach(function (t) {
      ctx.fillText(fmt(t), L + t / (cols * width) * (W - L - R), T + rows * rowH + 4);
    });
    ctx.fillText("time (us)", (L + W - R) / 2, H - 14);
    function cellAt(ev) {
      var b = canvas.getBoundingClientRect();
      var x = (ev.clientX - b.left) / b.width * W, y = (ev.clientY - b.top) / b.height * H;
      var c = Math.floor((x - L) / colW), r = Math.floor((y - T) / rowH);
      return r >= 0 && r < rows && c >= 0 && c < cols ? [r, c] : null;
    }
    canvas.addEventListener("mousemove", function (ev) {
      var rc = cellAt(ev);
      if (!rc) return;
      var t0 = rc[1] * width, t1 = Math.min(spec.end_us, t0 + width);
      tip.textContent = spec.rows[rc[0]] + " (" + spec.groups[rc[0]] + "), " + fmt(t0) + " to " +
        fmt(t1) + " us: " + spec.unit + " " + fmt(spec.values[rc[0]][rc[1]] / spec.scale);
    });
  }


  // The fabric map: the script colours its lines and boxes again for one
  // sampled interval (the slider; 0 is the whole run, as drawn), shows
  // figures on hover, and on a click lists a line's members and filters
  // the tables about links to it.
  function fabricMap(spec) {
    var root = document.getElementById("map");
    if (!root || !spec) return null;
    var svg = root.querySelector("svg");
    var links = Array.prototype.slice.call(root.querySelectorAll("g.link"));
    var boxes = Array.prototype.slice.call(root.querySelectorAll("[data-box]"));
    var readout = document.getElementById("map-readout");
    var slider = document.getElementById("map-time");
    var when = document.getElementById("map-when");
    var chosen = document.getElementById("map-selected");
    var live = svgEl("g", { "class": "live" }, svg);
    var col = -1, selected = -1, timer = null;
    // As fabric.rs: green through yellow to red.
    function lineHeat(x) {
      x = Math.max(0, Math.min(1, x));
      var r = x < 0.5 ? 2 * x : 1, g = x < 0.5 ? 1 : 2 * (1 - x);
      var h = function (v) { return ("0" + Math.floor(v).toString(16)).slice(-2); };
      return "#" + h(40 + 200 * r) + h(40 + 160 * g) + "30";
    }
    function boxFill(bytes) {
      var v = Math.floor(255 * (1 - Math.max(0, Math.min(1, bytes / Math.max(spec.buffer, 1)))));
      var h = ("0" + v.toString(16)).slice(-2);
      return "#ff" + h + h;
    }
    function at(v, c) { return v === 0 || !v ? 0 : v[c] || 0; }
    function ends(g) {
      var up = g.querySelector("line.up"), down = g.querySelector("line.down");
      return { a: [+up.getAttribute("x1"), +up.getAttribute("y1")],
        m: [+up.getAttribute("x2"), +up.getAttribute("y2")],
        b: [+down.getAttribute("x2"), +down.getAttribute("y2")], up: up, down: down };
    }
    var geo = links.map(ends);
    var still = geo.map(function (e) { return [e.up.getAttribute("stroke"), e.down.getAttribute("stroke")]; });
    var stillBox = boxes.map(function (b) { return b.querySelector("rect").getAttribute("fill"); });
    function span(c) {
      var w = spec.interval_us * spec.span;
      return fmt(c * w) + " to " + fmt(Math.min(spec.end_us, (c + 1) * w)) + " us";
    }
    function mark(p, text, faint) {
      var g = svgEl("g", { "class": "livepause" }, live);
      svgEl("circle", { cx: p[0], cy: p[1], r: 8, fill: "#f80", "fill-opacity": faint ? 0.45 : 1 }, g);
      svgEl("text", { x: p[0], y: p[1] + 3, "font-size": 7, "text-anchor": "middle" }, g).textContent = text;
    }
    function setTime(c) {
      col = c;
      while (live.firstChild) live.removeChild(live.firstChild);
      root.classList.toggle("interval", c >= 0);
      links.forEach(function (g, k) {
        var e = geo[k], l = spec.lines[+g.getAttribute("data-i")];
        if (c < 0) {
          e.up.setAttribute("stroke", still[k][0]);
          e.down.setAttribute("stroke", still[k][1]);
          return;
        }
        e.up.setAttribute("stroke", lineHeat(at(l.u, c) / 100));
        e.down.setAttribute("stroke", lineHeat(at(l.d, c) / 100));
        // An end that sent pauses in the interval, or whose neighbour
        // was still paused (faint), gets a mark with the pauses sent.
        [[at(l.na, c), at(l.pa, c), e.a], [at(l.nb, c), at(l.pb, c), e.b]].forEach(function (x) {
          var p = x[2];
          if (x[0] > 0 || x[1] > 0) mark([p[0] + 0.2 * (e.m[0] - p[0]), p[1] + 0.2 * (e.m[1] - p[1])], String(x[0]), x[0] === 0);
        });
      });
      boxes.forEach(function (b, i) {
        var q = spec.boxes[+b.getAttribute("data-box")];
        b.querySelector("rect").setAttribute("fill", c < 0 ? stillBox[i] : boxFill(at(q, c)));
      });
      if (when) when.textContent = c < 0 ? "whole run" : span(c) + " (interval " + (c + 1) + " of " + spec.cols + ")";
    }
    function describeLine(k) {
      var l = spec.lines[k], g = links[k];
      if (col < 0) return g.querySelector("title").textContent;
      return l.a + " \u2014 " + l.b + ", " + span(col) + ": busiest member " + at(l.u, col) + "% busy up, " +
        at(l.d, col) + "% down; PFC pauses sent by " + l.a + " " + at(l.na, col) + " (its neighbour paused " +
        at(l.pa, col) + "% of the interval), by " + l.b + " " + at(l.nb, col) + " (" + at(l.pb, col) + "%)";
    }
    function describeBox(b) {
      var title = b.querySelector("title").textContent;
      if (col < 0) return title;
      return title.split(":")[0].split(" (")[0] + ", " + span(col) + ": deepest queue " +
        fmt(at(spec.boxes[+b.getAttribute("data-box")], col) / 1e3) + " KB";
    }
    function select(k) {
      selected = selected === k ? -1 : k;
      root.classList.toggle("filtering", selected >= 0);
      links.forEach(function (g) { g.classList.toggle("selected", +g.getAttribute("data-i") === selected); });
      var tables = document.querySelectorAll("table.bylink");
      Array.prototype.forEach.call(tables, function (t) {
        var shown = 0;
        Array.prototype.forEach.call(t.querySelectorAll("tr"), function (tr) {
          if (!tr.querySelector("td")) return;
          var keep = selected < 0 || tr.getAttribute("data-line") === String(selected);
          tr.hidden = !keep;
          if (keep) shown++;
        });
        var note = t.nextElementSibling && t.nextElementSibling.classList.contains("filtered") ? t.nextElementSibling : null;
        if (selected >= 0 && !note) {
          note = document.createElement("p");
          note.className = "filtered hint";
          t.parentNode.insertBefore(note, t.nextSibling);
        }
        if (note) {
          note.hidden = selected < 0;
          note.textContent = shown ? "Filtered to the selected line: " + spec.lines[Math.max(selected, 0)].a +
            " \u2014 " + spec.lines[Math.max(selected, 0)].b + "." : "No row of this table is on the selected line.";
        }
      });
      chosen.textContent = "";
      if (selected < 0) return;
      var l = spec.lines[selected], m = l.members;
      var h = document.createElement("p");
      h.textContent = l.a + " \u2014 " + l.b + ": " + m.ports + " member ports" +
        (m.ports > m.rows.length ? ", the " + m.rows.length + " that sent most:" : ":");
      chosen.appendChild(h);
      var t = document.createElement("table");
      var head = ["port", "bytes", "utilization (%)", "deepest queue (B)", "drops", "pauses sent", "connections"];
      [head].concat(m.rows).forEach(function (r, i) {
        var tr = document.createElement("tr");
        r.forEach(function (v) {
          var td = document.createElement(i ? "td" : "th");
          td.textContent = String(v);
          tr.appendChild(td);
        });
        t.appendChild(tr);
      });
      chosen.appendChild(t);
    }
    links.forEach(function (g) {
      var k = +g.getAttribute("data-i");
      g.addEventListener("mouseover", function () { readout.textContent = describeLine(k); });
      g.addEventListener("click", function () { select(k); });
    });
    boxes.forEach(function (b) {
      b.addEventListener("mouseover", function () { readout.textContent = describeBox(b); });
    });
    if (slider) {
      slider.max = String(spec.cols);
      slider.addEventListener("input", function () { setTime(+slider.value - 1); });
      var play = document.getElementById("map-play");
      play.addEventListener("click", function () {
        if (timer) { clearInterval(timer); timer = null; play.textContent = "play"; return; }
        play.textContent = "pause";
        if (+slider.value >= spec.cols) slider.value = "0";
        timer = setInterval(function () {
          slider.value = String(+slider.value + 1);
          setTime(+slider.value - 1);
          if (+slider.value >= spec.cols) { clearInterval(timer); timer = null; play.textContent = "play"; }
        }, 200);
      });
    }
    return { setTime: setTime, select: select, links: links, geo: geo, slider: slider };
  }

  var data = JSON.parse(document.getElementById("data").textContent);
  var drawn = 0;
  data.lines.forEach(function (spec) {
    var box = document.getElementById(spec.id);
    if (box && spec.series.length) { lineChart(box, spec); drawn++; }
  });
  data.heatmaps.forEach(function (spec) {
    var box = document.getElementById(spec.id);
    if (box && spec.rows.length) { heatmap(box, spec); drawn++; }
  });
  var map = fabricMap(data.map);
  document.body.setAttribute("data-rendered", String(drawn));
  showErrors();

  // `report.html#selftest`: hovers the first heatmap's middle and zooms
  // the first line chart, as a user would, and notes what it saw.
  if (location.hash === "#selftest") {
    var out = document.getElementById("selftest");
    var canvas = document.querySelector(".heatmap canvas");
    if (canvas) {
      var b = canvas.getBoundingClientRect();
      canvas.dispatchEvent(new MouseEvent("mousemove",
        { clientX: b.left + b.width * 0.5, clientY: b.top + b.height * 0.3, bubbles: true }));
      out.setAttribute("data-hover", canvas.parentNode.querySelector(".readout").textContent);
    }
    var chart = document.querySelector(".lines svg");
    if (chart) {
      var r = chart.getBoundingClientRect();
      var at = function (f) { return { clientX: r.left + r.width * f, clientY: r.top + r.height / 2, bubbles: true }; };
      chart.dispatchEvent(new MouseEvent("mousedown", at(0.3)));
      chart.dispatchEvent(new MouseEvent("mousemove", at(0.6)));
      chart.dispatchEvent(new MouseEvent("mouseup", at(0.6)));
      var box = chart.parentNode;
      out.setAttribute("data-zoom", box.getAttribute("data-x0") + ".." + box.getAttribute("data-x1"));
    }
    // The map: the busiest link's line, moved to its busiest interval,
    // to the interval with the most pausing, back to the whole run,
    // hovered, clicked (filtering the tables) and clicked again.
    if (map) {
      var first = document.querySelector("table.bylink tr[data-line]");
      var k = first ? +first.getAttribute("data-line") : 0;
      var l = data.map.lines[k];
      out.setAttribute("data-map-lines", String(map.links.length));
      var best = 0, bestV = -1, pause = -1, pauseV = 0;
      for (var c = 0; c < data.map.cols; c++) {
        var v = Math.max(l.u ? l.u[c] : 0, l.d ? l.d[c] : 0);
        if (v > bestV) { bestV = v; best = c; }
        var p = 0;
        data.map.lines.forEach(function (x) { p += (x.na ? x.na[c] : 0) + (x.nb ? x.nb[c] : 0); });
        if (p > pauseV) { pauseV = p; pause = c; }
      }
      var strokes = function () {
        return map.geo.map(function (e) { return e.up.getAttribute("stroke") + "/" + e.down.getAttribute("stroke"); });
      };
      var move = function (c) { map.slider.value = String(c + 1); map.slider.dispatchEvent(new Event("input")); };
      var whole = strokes();
      if (map.slider && data.map.cols > 0) {
        move(best);
        var now = strokes();
        var changed = now.filter(function (x, i) { return x !== whole[i]; }).length;
        out.setAttribute("data-slider", best + ":" + changed + ":" + bestV + ":" + now[k]);
        if (pause >= 0) {
          move(pause);
          var sum = 0;
          Array.prototype.forEach.call(document.querySelectorAll("#map .livepause text"), function (t) { sum += +t.textContent; });
          out.setAttribute("data-map-pauses", pause + ":" + document.querySelectorAll("#map .livepause").length +
            ":" + sum + ":" + pauseV + ":" + (document.getElementById("map-when") || {}).textContent);
        }
        move(-1);
        var back = strokes();
        out.setAttribute("data-map-restored", String(back.every(function (x, i) { return x === whole[i]; })));
      }
      map.links[k].dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
      out.setAttribute("data-map-hover", document.getElementById("map-readout").textContent);
      var rows = function () {
        var all = document.querySelectorAll("table.bylink tr");
        var shown = 0, onit = 0, total = 0;
        Array.prototype.forEach.call(all, function (tr) {
          if (!tr.querySelector("td")) return;
          total++;
          if (tr.hidden) return;
          shown++;
          if (tr.getAttribute("data-line") === String(k)) onit++;
        });
        return shown + "," + onit + "," + total;
      };
      map.links[k].dispatchEvent(new MouseEvent("click", { bubbles: true }));
      out.setAttribute("data-filter", k + ":" + rows() + ":" +
        document.querySelectorAll("#map-selected tr").length);
      map.links[k].dispatchEvent(new MouseEvent("click", { bubbles: true }));
      out.setAttribute("data-unfilter", rows());
    }
  }
})();
