// The sheetsync console's one script: pages refresh their figures by themselves.
//
// Every few seconds (the body's data-refresh-s) the page is fetched again and each of
// its data regions ([data-live]) is replaced by the fresh copy. Forms are never inside
// a region, so a filter or a confirmation being filled in stays as it is, focus
// included. The header's control shows the interval and pauses it; the choice is kept
// for the next pages. Without this script every page still works: it just stays put.
(() => {
  "use strict";
  const seconds = Number(document.body.dataset.refreshS || 0);
  const control = document.getElementById("refresh");
  if (!control || !(seconds > 0)) return;
  const state = document.getElementById("refresh-state");
  const toggle = document.getElementById("refresh-toggle");
  const KEY = "sheetsync-console-refresh-paused";
  const every = seconds < 10 ? `${seconds} s` : `${Math.round(seconds)} s`;

  const stored = (value) => {
    try {
      if (value === undefined) return window.localStorage.getItem(KEY) === "1";
      window.localStorage.setItem(KEY, value ? "1" : "0");
    } catch (_) {
      // Storage refused (a private window): the choice lasts for this page only.
    }
    return value;
  };
  let paused = stored();
  let timer = null;
  let running = false;

  const say = (text, failed) => {
    state.textContent = text;
    control.classList.toggle("failed", Boolean(failed));
    control.classList.toggle("paused", paused);
    toggle.textContent = paused ? "Resume" : "Pause";
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
  };
  const clock = () => new Date().toLocaleTimeString([], { hour12: false });

  const schedule = () => {
    window.clearTimeout(timer);
    if (!paused) timer = window.setTimeout(refresh, seconds * 1000);
  };

  async function refresh() {
    if (paused || running) return;
    if (document.hidden) return schedule();
    running = true;
    try {
      const answer = await fetch(window.location.href, {
        cache: "no-store",
        credentials: "same-origin",
        headers: { Accept: "text/html" },
      });
      if (!answer.ok) {
        say(`every ${every} · refresh failed (HTTP ${answer.status})`, true);
        return;
      }
      const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
      if (paused) return; // paused while the page was on its way
      for (const region of document.querySelectorAll("[data-live]")) {
        const next = fresh.querySelector(`[data-live="${region.dataset.live}"]`);
        if (next) region.replaceWith(document.adoptNode(next));
      }
      say(`every ${every} · updated ${clock()}`);
    } catch (_) {
      say(`every ${every} · refresh failed (console unreachable)`, true);
    } finally {
      running = false;
      schedule();
    }
  }

  toggle.addEventListener("click", () => {
    paused = !paused;
    stored(paused);
    if (paused) {
      window.clearTimeout(timer);
      say("paused");
    } else {
      say(`every ${every} · resuming…`);
      refresh();
    }
  });
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !paused && !running) refresh();
  });

  control.hidden = false;
  say(paused ? "paused" : `every ${every} · updated ${clock()}`);
  schedule();
})();
