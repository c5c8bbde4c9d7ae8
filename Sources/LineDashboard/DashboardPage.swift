/// The dashboard's page, script and style, served as they are (no templating: the page holds no data; the script
/// fetches the snapshot and puts every value in the DOM as text).
enum DashboardPage {
    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <title>bledfu line</title>
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body>
        <header><h1>bledfu line</h1><span id="database"></span> <span id="live" class="live">connecting</span>
        <span>updated <span id="updated-at">-</span>, <span id="updates">0</span> update(s)</span></header>
        <section id="counts">
          <div class="count"><span class="label">done</span><span id="count-done">-</span></div>
          <div class="count"><span class="label">skipped</span><span id="count-skipped">-</span></div>
          <div class="count"><span class="label">failed</span><span id="count-failed">-</span></div>
          <div class="count"><span class="label">in flight</span><span id="count-running">-</span></div>
          <div class="count"><span class="label">pending</span><span id="count-pending">-</span></div>
          <div class="count"><span class="label">yield</span><span id="yield">-</span></div>
          <div class="count"><span class="label">devices/h</span><span id="rate">-</span></div>
        </section>
        <h2>Stations</h2>
        <table id="stations"><thead><tr><th>station</th><th>host</th><th>adapters</th><th>state</th><th>heartbeat</th>
        <th>in flight</th><th>finished</th></tr></thead><tbody></tbody></table>
        <h2>In flight</h2>
        <table id="inflight"><thead><tr><th>device</th><th>address</th><th>class</th><th>station</th><th>adapter</th>
        <th>attempt</th><th>stage</th><th>progress</th></tr></thead><tbody></tbody></table>
        <h2>Failures</h2>
        <table id="failures"><thead><tr><th>device</th><th>address</th><th>class</th><th>station</th><th>attempts</th>
        <th>cause</th></tr></thead><tbody></tbody></table>
        <h2>Recently finished</h2>
        <table id="recent"><thead><tr><th>device</th><th>address</th><th>class</th><th>status</th><th>station</th>
        <th>adapter</th><th>attempts</th><th>finished</th></tr></thead><tbody></tbody></table>
        <h2>Devices per hour</h2>
        <div id="overtime"></div>
        </body>
        </html>

        """

    static let script = """
        "use strict";
        // Every value from the line goes into the page with textContent: device names are data, never markup.
        let updates = 0;
        function cell(row, value) {
          const td = document.createElement("td");
          td.textContent = value === null || value === undefined ? "-" : String(value);
          row.appendChild(td);
          return td;
        }
        function fill(id, items, columns) {
          const body = document.querySelector("#" + id + " tbody");
          body.replaceChildren();
          for (const item of items) {
            const row = document.createElement("tr");
            for (const column of columns) {
              const value = column(item, row);
              if (value !== undefined) cell(row, value);
            }
            body.appendChild(row);
          }
        }
        function text(id, value) { document.getElementById(id).textContent = String(value); }
        function render(page) {
          const s = page.snapshot;
          updates += 1;
          text("database", page.database);
          text("updated-at", s.generatedAt);
          text("updates", updates);
          text("count-done", s.done);
          text("count-skipped", s.skipped);
          text("count-failed", s.failed);
          text("count-running", s.running);
          text("count-pending", s.pending);
          text("yield", s.yield === undefined || s.yield === null ? "-" : (s.yield * 100).toFixed(1) + " %");
          text("rate", s.devicesPerHour.toFixed(0));
          fill("stations", s.stations, [
            (x) => x.name, (x) => x.host, (x) => x.adapters,
            (x, row) => { row.className = x.alive ? "alive" : "dead"; return x.alive ? "alive" : (x.state === "stopped" ? "stopped" : "silent"); },
            (x) => x.secondsSinceHeartbeat.toFixed(1) + " s ago", (x) => x.inFlight, (x) => x.finished,
          ]);
          fill("inflight", s.inFlight, [
            (x) => x.name, (x) => x.address, (x) => x.className, (x) => x.station, (x) => x.adapter, (x) => x.attempt,
            (x) => x.stage,
            (x, row) => {
              const td = cell(row, x.percent + " %");
              const bar = document.createElement("div");
              bar.className = "bar";
              bar.style.width = Math.max(0, Math.min(100, x.percent)) + "%";
              td.appendChild(bar);
              return undefined;
            },
          ]);
          fill("failures", s.failures, [
            (x) => x.name, (x) => x.address, (x) => x.className, (x) => x.station, (x) => x.attempts,
            (x) => {
              const cause = x.error || "failed";
              const known = x.exitCode === undefined || x.exitCode === null || cause.includes("[exit ");
              return known ? cause : cause + " [exit " + x.exitCode + "]";
            },
          ]);
          fill("recent", s.recent || [], [
            (x) => x.name, (x) => x.address, (x) => x.className, (x) => x.status, (x) => x.station, (x) => x.adapter,
            (x) => x.attempts, (x) => x.finishedAt,
          ]);
          const chart = document.getElementById("overtime");
          chart.replaceChildren();
          const top = Math.max(1, ...s.overTime.map((b) => b.perHour));
          for (const b of s.overTime) {
            const column = document.createElement("div");
            column.className = "column";
            column.title = b.start + ": " + b.finished + " finished";
            const bar = document.createElement("div");
            bar.className = "rate";
            bar.style.height = Math.round((b.perHour / top) * 100) + "px";
            const label = document.createElement("span");
            label.textContent = b.perHour.toFixed(0);
            column.append(label, bar);
            chart.appendChild(column);
          }
        }
        fetch("/api/snapshot").then((r) => r.json()).then(render).catch(() => text("live", "no data"));
        const events = new EventSource("/events");
        events.addEventListener("snapshot", (e) => { text("live", "live"); render(JSON.parse(e.data)); });
        events.onerror = () => text("live", "reconnecting");

        """

    static let style = """
        body { font-family: sans-serif; margin: 1em 2em; color: #222; }
        header { display: flex; gap: 1em; align-items: baseline; }
        h1 { font-size: 1.4em; margin: 0; }
        h2 { font-size: 1.1em; margin-top: 1.4em; }
        #counts { display: flex; gap: 1em; flex-wrap: wrap; }
        .count { border: 1px solid #ccc; border-radius: 6px; padding: 0.4em 0.8em; min-width: 5em; }
        .count .label { display: block; font-size: 0.8em; color: #666; }
        .count span:last-child { font-size: 1.5em; }
        table { border-collapse: collapse; }
        th, td { border-bottom: 1px solid #ddd; padding: 0.2em 0.6em; text-align: left; }
        tr.dead td { color: #a00; }
        .live { color: #070; }
        .bar { height: 4px; background: #2a7; }
        #overtime { display: flex; align-items: flex-end; gap: 4px; min-height: 120px; }
        .column { display: flex; flex-direction: column; align-items: center; font-size: 0.7em; }
        .rate { width: 18px; background: #48c; }

        """
}
