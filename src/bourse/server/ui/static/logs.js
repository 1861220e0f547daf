// The job page's live log: a feed read with a cursor, a virtualised view and a search.
//
// Lines are kept as strings in one array; only the rows in view (plus a margin) exist in the
// DOM, each ROW pixels high, under a spacer as tall as the whole log, so 100,000 lines cost what
// 60 do to draw. The feed is /ui/jobs/{id}/logs (the API's log page: base64 chunks after a
// cursor); once caught up it long-polls (wait=1) so new lines show as soon as they are stored.
// Bytes are decoded per (attempt, rank, stream) with a streaming TextDecoder, so a character or
// a line split across two chunks comes out whole, and a gang's members' lines never mix. A
// gang's page shows every member (each line prefixed "[rank N] ") or, with data-rank, one
// member's feed (?rank=N) as it is. Text only ever reaches the page as text nodes.
"use strict";
(function () {
  const ROW = 18; // px: .log-rows > div in ui.css
  const OVERSCAN = 30;
  const RETRY_MS = 2000;

  function decodeBase64(data) {
    const raw = atob(data);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  class LogView {
    constructor(root) {
      this.root = root;
      this.url = root.dataset.logsUrl;
      this.rank = root.dataset.rank || ""; // "": every member
      this.prefixed = Number(root.dataset.members || 1) > 1 && this.rank === "";
      this.viewport = root.querySelector(".log-viewport");
      this.spacer = root.querySelector(".log-spacer");
      this.rows = root.querySelector(".log-rows");
      this.search = root.querySelector(".log-search");
      this.count = root.querySelector(".log-count");
      this.status = root.querySelector(".log-status");
      this.follow = root.querySelector(".log-follow");
      this.lines = []; // the text of every line
      this.kinds = []; // per line: "" (stdout), "stderr" or "marker"
      this.lower = null; // lines in lower case, built at the first search
      this.streams = new Map(); // "attempt:rank:stream" -> {decoder, rest, kind, prefix}
      this.attempt = null;
      this.cursor = 0;
      this.done = false;
      this.needle = "";
      this.matches = []; // indexes of the lines that contain the needle
      this.current = -1; // index into matches
      this.drawQueued = false;
      this.stats = { fetches: 0, chunks: 0, loadMs: null, searchMs: null, drawMs: null };
      this.started = performance.now();
      this.bind();
      this.poll();
    }

    bind() {
      this.viewport.addEventListener("scroll", () => this.onScroll(), { passive: true });
      let timer = null;
      this.search.addEventListener("input", () => {
        clearTimeout(timer);
        timer = setTimeout(() => this.find(this.search.value), 120);
      });
      this.search.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          clearTimeout(timer);
          if (this.search.value !== this.needle) this.find(this.search.value);
          else this.step(event.shiftKey ? -1 : 1);
        } else if (event.key === "Escape") {
          this.search.value = "";
          this.find("");
        }
      });
      this.root.querySelector(".log-next").addEventListener("click", () => this.step(1));
      this.root.querySelector(".log-prev").addEventListener("click", () => this.step(-1));
      this.follow.addEventListener("change", () => {
        if (this.follow.checked) this.toBottom();
      });
    }

    async poll() {
      let wait = false;
      while (!this.done) {
        let page;
        try {
          const query = new URLSearchParams({ after: String(this.cursor) });
          if (this.rank !== "") query.set("rank", this.rank);
          if (wait) query.set("wait", "1");
          const url = `${this.url}?${query}`;
          const response = await fetch(url, { headers: { Accept: "application/json" },
                                               credentials: "same-origin", cache: "no-store" });
          if (response.status === 401) {
            window.location.assign("/ui/login?next=" + encodeURIComponent(window.location.pathname));
            return;
          }
          if (!response.ok) throw new Error(`HTTP ${response.status}`);
          page = await response.json();
        } catch (error) {
          this.setStatus(`reconnecting (${error.message})`);
          await sleep(RETRY_MS);
          continue;
        }
        this.stats.fetches++;
        this.append(page.chunks);
        this.cursor = page.cursor;
        if (page.done) this.finish(page.pruned);
        else this.setStatus(page.more ? "loading" : "live");
        wait = !page.more;
      }
    }

    append(chunks) {
      const first = this.lines.length;
      for (const chunk of chunks) {
        if (chunk.attempt !== this.attempt) {
          this.flush(); // an earlier attempt's unfinished line ends here
          if (this.attempt !== null || chunk.attempt > 1) this.push(`── attempt ${chunk.attempt} ──`, "marker");
          this.attempt = chunk.attempt;
        }
        const rank = chunk.rank || 0; // absent from an older coordinator's chunks
        const key = `${chunk.attempt}:${rank}:${chunk.stream}`;
        let stream = this.streams.get(key);
        if (!stream) {
          stream = { decoder: new TextDecoder("utf-8"), rest: "", kind: chunk.stream === "stderr" ? "stderr" : "",
                     prefix: this.prefixed ? `[rank ${rank}] ` : "" };
          this.streams.set(key, stream);
        }
        const parts = (stream.rest + stream.decoder.decode(decodeBase64(chunk.data), { stream: true })).split("\n");
        stream.rest = parts.pop();
        for (const part of parts) this.push(stream.prefix + part, stream.kind);
        this.stats.chunks++;
      }
      if (this.lines.length > first) this.grew(first);
    }

    push(text, kind) {
      this.lines.push(text.endsWith("\r") ? text.slice(0, -1) : text);
      this.kinds.push(kind);
    }

    flush() {
      const first = this.lines.length;
      for (const stream of this.streams.values()) {
        const tail = stream.rest + stream.decoder.decode();
        if (tail) this.push(stream.prefix + tail, stream.kind);
      }
      this.streams.clear();
      return first;
    }

    finish(pruned) {
      const first = this.flush();
      if (this.lines.length > first) this.grew(first);
      this.done = true;
      this.stats.loadMs = performance.now() - this.started;
      this.setStatus(pruned ? "ended · the exchange's log retention deleted this job's logs"
                            : `ended · ${this.lines.length.toLocaleString()} lines`);
      this.root.dataset.state = "ended";
    }

    grew(first) {
      if (this.lower) for (let i = first; i < this.lines.length; i++) this.lower.push(this.lines[i].toLowerCase());
      if (this.needle) {
        const before = this.matches.length;
        this.scan(first);
        if (before === 0 && this.matches.length) this.current = 0;
        this.showCount();
      }
      this.spacer.style.height = `${this.lines.length * ROW}px`;
      this.root.dataset.lines = String(this.lines.length);
      if (this.follow.checked) this.toBottom();
      this.queueDraw();
    }

    scan(from) {
      const needle = this.needle.toLowerCase();
      const lower = this.lower;
      for (let i = from; i < lower.length; i++) if (lower[i].includes(needle)) this.matches.push(i);
    }

    find(text) {
      const started = performance.now();
      this.needle = text;
      this.matches = [];
      this.current = -1;
      if (text) {
        if (!this.lower) this.lower = this.lines.map((line) => line.toLowerCase());
        this.scan(0);
        if (this.matches.length) this.current = 0;
      }
      this.stats.searchMs = performance.now() - started;
      this.showCount();
      if (this.current >= 0) this.reveal();
      else this.queueDraw();
    }

    step(by) {
      if (!this.matches.length) return;
      this.current = (this.current + by + this.matches.length) % this.matches.length;
      this.showCount();
      this.reveal();
    }

    reveal() {
      this.follow.checked = false;
      const line = this.matches[this.current];
      this.viewport.scrollTop = Math.max(0, line * ROW - this.viewport.clientHeight / 2);
      this.draw();
    }

    showCount() {
      const n = this.matches.length;
      this.count.textContent = !this.needle ? "" : n ? `${this.current + 1} / ${n.toLocaleString()}` : "no matches";
      this.root.dataset.matches = String(n);
    }

    toBottom() {
      this.viewport.scrollTop = this.viewport.scrollHeight;
    }

    onScroll() {
      const v = this.viewport;
      this.follow.checked = v.scrollTop + v.clientHeight >= v.scrollHeight - 2 * ROW;
      this.queueDraw();
    }

    queueDraw() {
      if (this.drawQueued) return;
      this.drawQueued = true;
      requestAnimationFrame(() => {
        this.drawQueued = false;
        this.draw();
      });
    }

    draw() {
      const started = performance.now();
      const v = this.viewport;
      const first = Math.max(0, Math.floor(v.scrollTop / ROW) - OVERSCAN);
      const last = Math.min(this.lines.length, Math.ceil((v.scrollTop + v.clientHeight) / ROW) + OVERSCAN);
      const currentLine = this.current >= 0 ? this.matches[this.current] : -1;
      const needle = this.needle.toLowerCase();
      const rows = document.createDocumentFragment();
      for (let i = first; i < last; i++) rows.appendChild(this.row(i, needle, i === currentLine));
      this.rows.style.transform = `translateY(${first * ROW}px)`;
      this.rows.replaceChildren(rows);
      this.stats.drawMs = performance.now() - started;
    }

    row(i, needle, isCurrent) {
      const div = document.createElement("div");
      div.className = `line ${this.kinds[i]}${isCurrent ? " current" : ""}`;
      div.dataset.line = String(i + 1);
      const number = document.createElement("span");
      number.className = "ln";
      number.textContent = String(i + 1);
      div.appendChild(number);
      const text = this.lines[i];
      const lower = needle ? (this.lower ? this.lower[i] : text.toLowerCase()) : "";
      let at = 0;
      for (let hit = needle ? lower.indexOf(needle) : -1; hit !== -1; hit = lower.indexOf(needle, at)) {
        if (hit > at) div.appendChild(document.createTextNode(text.slice(at, hit)));
        const mark = document.createElement("mark");
        mark.textContent = text.slice(hit, hit + needle.length);
        div.appendChild(mark);
        at = hit + needle.length;
      }
      div.appendChild(document.createTextNode(text.slice(at)));
      return div;
    }

    setStatus(text) {
      this.status.textContent = text;
      this.root.dataset.state = this.done ? "ended" : text;
    }
  }

  function start() {
    const root = document.getElementById("logview");
    if (root) window.bourseLogs = new LogView(root);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
