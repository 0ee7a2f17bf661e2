// wf ui: countdowns, counts that refresh themselves, and a workflow page that follows its
// workflow. Plain script, no build step; everything it writes is text (textContent), never HTML.
"use strict";
(function () {
  var serverNow = parseFloat(document.body.dataset.now || "0");
  var skew = serverNow ? serverNow - Date.now() / 1000 : 0; // this page's clock to the server's

  function span(d) {
    d = Math.abs(d);
    if (d < 60) return Math.floor(d) + "s";
    if (d < 3600) return Math.floor(d / 60) + "m " + String(Math.floor(d % 60)).padStart(2, "0") + "s";
    if (d < 86400) return Math.floor(d / 3600) + "h " + String(Math.floor(d % 3600 / 60)).padStart(2, "0") + "m";
    return Math.floor(d / 86400) + "d " + Math.floor(d % 86400 / 3600) + "h";
  }
  function tick() {
    var now = Date.now() / 1000 + skew;
    document.querySelectorAll(".countdown[data-due]").forEach(function (el) {
      var left = parseFloat(el.dataset.due) - now;
      el.textContent = left >= 0 ? "in " + span(left) : "due " + span(left) + " ago";
      el.classList.toggle("overdue", left < 0);
    });
  }
  tick();
  setInterval(tick, 1000);

  // The counts by status on the list, every 3 s.
  var counts = document.getElementById("counts");
  if (counts) {
    setInterval(function () {
      fetch("/api/counts", { cache: "no-store" }).then(function (r) { return r.ok ? r.json() : null; }).then(function (c) {
        if (!c) return;
        var x = 0;
        counts.querySelectorAll("rect[data-status]").forEach(function (rect) {
          var n = c.by_status[rect.dataset.status] || 0;
          var w = c.total ? 1000 * n / c.total : 0;
          rect.setAttribute("x", x); rect.setAttribute("width", w); x += w;
          var t = rect.querySelector("title"); if (t) t.textContent = rect.dataset.status + ": " + n;
        });
        counts.querySelectorAll("[data-count]").forEach(function (b) {
          var k = b.dataset.count;
          b.textContent = (k === "total" ? c.total : (c.by_status[k] || 0)).toLocaleString("en-US");
        });
      }).catch(function () {});
    }, 3000);
  }

  // A workflow's page reloads when its workflow has moved on (a step, a new status, a request
  // carried out), unless someone is typing into one of its forms or has sent one: the answer to
  // a form is a page of its own, which a reload would cancel (the action is taken all the same,
  // and its answer lost).
  var live = document.getElementById("live");
  if (live) {
    var seen = [live.dataset.steps, live.dataset.status, live.dataset.pending].join("|");
    var sending = false;
    document.addEventListener("submit", function () { sending = true; });
    window.addEventListener("pageshow", function () { sending = false; }); // back to this page
    setInterval(function () {
      var a = document.activeElement;
      if (sending || (a && (a.tagName === "INPUT" || a.tagName === "TEXTAREA") && a.value)) return;
      fetch("/api/state?id=" + encodeURIComponent(live.dataset.id), { cache: "no-store" })
        .then(function (r) { return r.json(); }).then(function (s) {
          if (s.gone || sending) return;
          var now = [s.steps, s.status, s.pending].join("|");
          if (now !== seen) {
            // Drop the answer of the last action from the address: it was about the old state.
            var url = new URL(window.location.href); url.searchParams.delete("outcome");
            window.location.replace(url.toString());
          }
        }).catch(function () {});
    }, 1500);
  }
})();
