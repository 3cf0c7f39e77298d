// Herald console: a little progressive enhancement. Every page works without it.
//
// Live updates: an element marked data-live="NAME" is fetched again every few seconds
// (the same URL, header X-Herald-Fragment: NAME, answered with that part only) and
// swapped in, so pages follow the engine without reloading. A part the operator is
// using (focus inside, a ticked checkbox) is left alone; opened <details> stay open;
// updates stop while the tab is hidden and can be paused with the footer's button.
(function () {
  "use strict";

  var body = document.body;
  var seconds = Math.max(1, Number(body.getAttribute("data-refresh")) || 5);
  var status = document.querySelector("[data-live-status]");
  var toggle = document.querySelector("[data-live-toggle]");
  var STORE = "herald-console-live-paused";
  var paused = false;
  try { paused = window.localStorage.getItem(STORE) === "1"; } catch (e) { paused = false; }

  // What needs the script to work is rendered hidden, and shown here.
  function enhance(root) {
    root.querySelectorAll("[data-select-all]").forEach(function (box) {
      var wrapper = box.closest("[hidden]");
      if (wrapper) { wrapper.hidden = false; }
    });
  }

  function inUse(element) {
    var active = document.activeElement;
    if (active && active !== document.body && element.contains(active)) { return true; }
    return element.querySelector("input[type=checkbox]:checked") !== null;
  }

  function swap(element, html) {
    var open = [];
    element.querySelectorAll("details[open][id]").forEach(function (d) { open.push(d.id); });
    var parsed = new DOMParser().parseFromString("<!doctype html><body>" + html, "text/html");
    element.replaceChildren.apply(element, Array.prototype.slice.call(parsed.body.childNodes));
    open.forEach(function (id) {
      var again = document.getElementById(id);
      if (again) { again.open = true; }
    });
    enhance(element);
  }

  function refresh(element) {
    var name = element.getAttribute("data-live");
    return fetch(window.location.href, {
      headers: { "X-Herald-Fragment": name },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (response) {
      if (response.status === 401) {  // signed out meanwhile: the page asks to sign in
        window.location.reload();
        return false;
      }
      if (!response.ok) { return false; }
      return response.text().then(function (html) {
        if (!inUse(element)) { swap(element, html); }
        return true;
      });
    });
  }

  function say(text) { if (status) { status.textContent = text; } }

  function tick() {
    var parts = Array.prototype.slice.call(document.querySelectorAll("[data-live]"));
    if (paused || document.hidden || parts.length === 0) { return Promise.resolve(); }
    var chain = Promise.resolve(true);
    parts.forEach(function (part) {
      chain = chain.then(function (allWell) {
        if (inUse(part)) { return allWell; }
        return refresh(part).then(function (ok) { return allWell && ok; });
      });
    });
    return chain.then(function (allWell) {
      say(allWell ? "Updated " + new Date().toLocaleTimeString() + "." :
        "A live update failed; trying again.");
    }, function () { say("A live update failed; trying again."); });
  }

  function loop() {
    tick().then(function () { window.setTimeout(loop, seconds * 1000); });
  }

  function showToggle() {
    if (!toggle || document.querySelector("[data-live]") === null) { return; }
    toggle.hidden = false;
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
    if (paused) { say("Live updates paused."); }
  }

  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      try { window.localStorage.setItem(STORE, paused ? "1" : "0"); } catch (e) { /* private mode */ }
      showToggle();
      if (!paused) { tick(); }
    });
  }
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { tick(); } });

  // "Select all" for bulk actions: a checkbox that ticks every target of its form.
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!(box instanceof HTMLInputElement) || box.form === null) { return; }
    var targets = box.form.querySelectorAll("input[name=target]");
    if (box.hasAttribute("data-select-all")) {
      targets.forEach(function (t) { t.checked = box.checked; });
    }
    var count = box.form.querySelector("[data-selected-count]");
    if (count) {
      var n = box.form.querySelectorAll("input[name=target]:checked").length;
      count.textContent = n === 1 ? "1 selected" : n + " selected";
    }
  });
  showToggle();
  enhance(document);
  window.setTimeout(loop, seconds * 1000);
})();
