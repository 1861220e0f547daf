// Experiment tracking's pages: the curves of a run or of several (the feed in data-curves-url
// answers {charts: [{key, runs, x, y, total}], moves: [{step, label}]}, downsampled on the
// server) drawn with uPlot, a job's moves (bursts) marked by a dashed line at their step,
// and the runs tables: sorted by a click on a heading, filtered by the text of their rows, and
// narrowed to the params that differ, a page of rows at a time for a comparison. The time the
// curves took is kept in data-drawn-ms, the time from the navigation to then in data-loaded-ms.
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
      root.dataset.loadedMs = String(Math.round(performance.now())); // since the navigation began
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

  // A table's rows, all of them (a comparison's past its first page come from an inert
  // template): sorted and filtered here, shown a page at a time when the table is paged (a
  // live table of 1,000 rows took seconds to lay out after each sort), otherwise all of them,
  // the filtered-out ones hidden (their checkboxes still belong to the form).
  function Rows(table) {
    const body = table.tBodies[0];
    const wide = table.closest(".wide");
    const more = wide.querySelector("template.more-rows");
    const pager = wide.nextElementSibling && wide.nextElementSibling.classList.contains("pager") ? wide.nextElementSibling : null;
    const size = more && pager ? Number(pager.dataset.pageRows) || 100 : Infinity;
    const all = Array.from(body.rows).concat(more ? Array.from(more.content.children) : []);
    const state = { all: all, view: all, page: 0, needle: "" };

    function show() {
      if (size === Infinity) {
        for (const row of state.all) row.hidden = state.needle !== "" && !row.textContent.toLowerCase().includes(state.needle);
        body.append(...state.all);
        return;
      }
      const pages = Math.max(1, Math.ceil(state.view.length / size));
      state.page = Math.min(state.page, pages - 1);
      const first = state.page * size;
      const shown = state.view.slice(first, first + size);
      body.replaceChildren(...shown);
      pager.querySelector(".pager-text").textContent = state.view.length ?
        `runs ${(first + 1).toLocaleString()}–${(first + shown.length).toLocaleString()} of ${state.view.length.toLocaleString()}` :
        "no run matches";
      pager.querySelector(".prev").disabled = state.page === 0;
      pager.querySelector(".next").disabled = state.page >= pages - 1;
    }

    function refilter() {
      if (size === Infinity) return;
      state.view = state.needle === "" ? state.all : state.all.filter((row) => row.textContent.toLowerCase().includes(state.needle));
    }

    if (pager) {
      pager.replaceChildren();
      const button = (name, label) => {
        const made = document.createElement("button");
        made.type = "button";
        made.className = name;
        made.textContent = label;
        return made;
      };
      const text = document.createElement("span");
      text.className = "pager-text";
      const prev = button("prev", "‹ previous"), next = button("next", "next ›");
      prev.addEventListener("click", () => { state.page -= 1; show(); });
      next.addEventListener("click", () => { state.page += 1; show(); });
      pager.append(prev, " ", text, " ", next);
      show();
    }

    return {
      sort(compare) {
        state.all.sort(compare);
        refilter();
        state.page = 0;
        show();
      },
      filter(needle) {
        state.needle = needle.trim().toLowerCase();
        refilter();
        state.page = 0;
        show();
      },
    };
  }

  function sortBy(rows, th) {
    const index = Array.prototype.indexOf.call(th.parentNode.children, th);
    const numeric = th.dataset.sort === "number";
    const ascending = !th.classList.contains("sorted-asc");
    for (const other of th.parentNode.children) other.classList.remove("sorted-asc", "sorted-desc");
    th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
    const sign = ascending ? 1 : -1;
    rows.sort((a, b) => {
      const x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
      if (numeric) {
        if (isNaN(x) || isNaN(y)) return isNaN(x) - isNaN(y); // missing last
        return sign * (x - y);
      }
      return sign * x.localeCompare(y);
    });
  }

  function setUpTable(table) {
    const tools = table.closest(".wide").previousElementSibling;
    const rows = Rows(table);
    for (const th of table.tHead.rows[0].cells) {
      if (th.dataset.sort) th.addEventListener("click", () => sortBy(rows, th));
    }
    const filter = tools && tools.querySelector(".row-filter");
    if (filter) filter.addEventListener("input", () => rows.filter(filter.value));
    const only = tools && tools.querySelector(".only-differing");
    if (only) only.addEventListener("change", () => table.classList.toggle("only-differing", only.checked));
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const table of document.querySelectorAll("table.sortable")) setUpTable(table);
    if (typeof uPlot === "undefined") return;
    for (const root of document.querySelectorAll("[data-curves-url]")) loadCurves(root);
  });
})();
