// Experiment tracking's pages: the curves of a run or of several (the feed in data-curves-url
// answers {charts: [{key, runs, x, y, total}], moves: [{step, label}]}, downsampled on the
// server) drawn with uPlot, a job's moves (bursts) marked by a dashed line at their step,
// and the runs tables: sorted by a click on a heading, filtered by the text of their rows, and
// narrowed to the params that differ. The time the curves took is kept in data-drawn-ms.
"use strict";
(function () {
  const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d",
    "#4d7c0f", "#7c3aed", "#b45309"];

  // a dashed vertical line and its label at each move's step (where the next attempt resumed)
  function movesPlugin(moves) {
    return { hooks: { draw: [(u) => {
      const ctx = u.ctx, box = u.bbox, ratio = window.devicePixelRatio || 1;
      ctx.save();
      ctx.strokeStyle = "#6b7280";
      ctx.fillStyle = "#374151";
      ctx.lineWidth = ratio;
      ctx.setLineDash([4 * ratio, 4 * ratio]);
      ctx.font = `${Math.round(11 * ratio)}px sans-serif`;
      ctx.textAlign = "left"; // uPlot leaves the axes' alignment set
      ctx.textBaseline = "alphabetic";
      for (const move of moves) {
        const x = Math.round(u.valToPos(move.step, "x", true));
        if (x < box.left || x > box.left + box.width) continue;
        ctx.beginPath();
        ctx.moveTo(x, box.top);
        ctx.lineTo(x, box.top + box.height);
        ctx.stroke();
        ctx.fillText(move.label, x + 4 * ratio, box.top + 12 * ratio);
      }
      ctx.restore();
    }] } };
  }

  function chartOptions(chart, width, moves) {
    return {
      width: width,
      height: 240,
      plugins: moves.length ? [movesPlugin(moves)] : [],
      scales: { x: { time: false } },
      series: [{ label: "step" }].concat(chart.runs.map((label, i) => ({
        label: label, stroke: COLOURS[i % COLOURS.length], width: 1.5, spanGaps: true,
      }))),
      axes: [{ label: "step" }, {}],
    };
  }

  function drawChart(grid, chart, width, moves) {
    const box = document.createElement("div");
    box.className = "curve";
    box.dataset.key = chart.key;
    box.dataset.points = String(chart.x.length);
    box.dataset.moves = moves.map((move) => move.step).join(",");
    const title = document.createElement("h3");
    const stored = `${chart.total.toLocaleString()} points stored`;
    title.textContent = chart.runs.length > 1 ? `${chart.key} (${chart.runs.length} runs, ${stored})` : `${chart.key} (${stored})`;
    box.appendChild(title);
    grid.appendChild(box);
    if (!chart.x.length) {
      box.appendChild(document.createTextNode("no finite values"));
      return;
    }
    new uPlot(chartOptions(chart, width, moves), [chart.x].concat(chart.y), box);
  }

  async function loadCurves(root) {
    const started = performance.now();
    const status = root.querySelector(".curves-status");
    const grid = root.querySelector(".curve-grid");
    try {
      const response = await fetch(root.dataset.curvesUrl, { credentials: "same-origin" });
      if (!response.ok) {
        status.textContent = `curves: HTTP ${response.status}`;
        return;
      }
      const data = await response.json();
      // one width for all, measured once: reading a box's width after adding another would
      // lay the page out again (a table of 1,000 runs below it) for every chart
      const width = Math.max(360, Math.min(grid.clientWidth || 720, data.charts.length > 1 ? Math.floor(grid.clientWidth / 2) - 16 : 1200));
      for (const chart of data.charts) drawChart(grid, chart, width, data.moves || []);
      const drawn = performance.now() - started;
      root.dataset.drawnMs = String(Math.round(drawn));
      status.textContent = `${data.charts.length} chart${data.charts.length === 1 ? "" : "s"}, drawn in ${Math.round(drawn)} ms`;
    } catch (error) {
      status.textContent = "curves: connection lost; reload the page";
    }
  }

  function cellValue(row, index, numeric) {
    const cell = row.cells[index];
    if (!numeric) return cell.textContent; // params and names sort as text, as MLflow's do
    const raw = cell.dataset.sort || "";
    return raw === "" ? NaN : Number(raw);
  }

  function sortBy(table, th) {
    const index = Array.prototype.indexOf.call(th.parentNode.children, th);
    const numeric = th.dataset.sort === "number";
    const ascending = !th.classList.contains("sorted-asc");
    for (const other of th.parentNode.children) other.classList.remove("sorted-asc", "sorted-desc");
    th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const sign = ascending ? 1 : -1;
    rows.sort((a, b) => {
      const x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
      if (numeric) {
        if (isNaN(x) || isNaN(y)) return isNaN(x) - isNaN(y); // missing last
        return sign * (x - y);
      }
      return sign * x.localeCompare(y);
    });
    body.append(...rows);
  }

  function filterRows(table, needle) {
    const wanted = needle.trim().toLowerCase();
    for (const row of table.tBodies[0].rows) {
      row.hidden = wanted !== "" && !row.textContent.toLowerCase().includes(wanted);
    }
  }

  function setUpTable(table) {
    const tools = table.closest(".wide").previousElementSibling;
    for (const th of table.tHead.rows[0].cells) {
      if (th.dataset.sort) th.addEventListener("click", () => sortBy(table, th));
    }
    const filter = tools && tools.querySelector(".row-filter");
    if (filter) filter.addEventListener("input", () => filterRows(table, filter.value));
    const only = tools && tools.querySelector(".only-differing");
    if (only) only.addEventListener("change", () => table.classList.toggle("only-differing", only.checked));
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const table of document.querySelectorAll("table.sortable")) setUpTable(table);
    if (typeof uPlot === "undefined") return;
    for (const root of document.querySelectorAll("[data-curves-url]")) loadCurves(root);
  });
})();
