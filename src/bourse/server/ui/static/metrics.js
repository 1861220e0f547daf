// The job page's metrics charts: the feed /ui/jobs/{id}/metrics (columns: t, cpu, gpu,
// memory_mib, gpu_memory_mib, plus stalled and done) drawn with uPlot (vendored), polled every
// few seconds until the job ends. The number of points drawn is kept in data-points.
"use strict";
(function () {
  const POLL_MS = 3000;
  const CHARTS = {
    usage: {
      axis: "%",
      series: [
        { key: "cpu", label: "CPU % (100 = one core)", stroke: "#2563eb" },
        { key: "gpu", label: "GPU %", stroke: "#16a34a" },
      ],
    },
    memory: {
      axis: "MiB",
      series: [
        { key: "memory_mib", label: "Memory MiB", stroke: "#9333ea" },
        { key: "gpu_memory_mib", label: "GPU memory MiB", stroke: "#ea580c" },
      ],
    },
  };

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function options(spec, width) {
    return {
      width: width,
      height: 220,
      series: [{}].concat(spec.series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, spanGaps: false }))),
      axes: [{}, { label: spec.axis }],
    };
  }

  class Charts {
    constructor(root) {
      this.root = root;
      this.url = root.dataset.metricsUrl;
      this.status = root.querySelector(".metrics-status");
      this.stall = root.querySelector(".stall");
      this.plots = {};
      this.poll();
    }

    async poll() {
      for (;;) {
        let data = null;
        try {
          const response = await fetch(this.url, { credentials: "same-origin" });
          if (response.ok) data = await response.json();
          else this.status.textContent = `metrics: HTTP ${response.status}`;
        } catch (error) {
          this.status.textContent = "metrics: connection lost, retrying";
        }
        if (data) {
          this.draw(data);
          if (data.done) return;
        }
        await sleep(POLL_MS);
      }
    }

    draw(data) {
      const points = data.t.length;
      this.root.dataset.points = String(points);
      this.stall.hidden = !data.stalled;
      if (data.stalled) this.stall.querySelector(".stall-message").textContent = data.stalled.message;
      if (!points) return;
      this.status.textContent = `${points} sample${points === 1 ? "" : "s"}, the last at ${new Date(data.t[points - 1] * 1000).toLocaleTimeString()}`;
      for (const el of this.root.querySelectorAll(".chart")) {
        const spec = CHARTS[el.dataset.chart];
        const columns = [data.t].concat(spec.series.map((s) => data[s.key]));
        const plot = this.plots[el.dataset.chart];
        if (plot) plot.setData(columns);
        else this.plots[el.dataset.chart] = new uPlot(options(spec, el.clientWidth || 800), columns, el);
      }
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("metrics-charts");
    if (root && typeof uPlot !== "undefined") root.charts = new Charts(root);
  });
})();
