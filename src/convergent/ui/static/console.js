// convergent console: keeps a page live from its server-sent event stream.
// Each event carries changed fragments {id: [digest, html]}; the HTML was rendered
// (and escaped) by the server. A fragment the page already shows is left alone, and
// the keyboard focus is put back where it was when a fragment around it is replaced.
// Elapsed times of a running run count up by themselves between updates.
"use strict";

(function () {
  // durations that count up while the run goes on: [data-tick] holds the seconds at
  // the time the server rendered it; each element counts from when it first appeared
  function shown(seconds) {
    var whole = Math.floor(seconds);
    if (whole < 60) {
      return whole + " s";
    }
    var rest = whole % 60;
    return Math.floor(whole / 60) + "m " + (rest < 10 ? "0" : "") + rest + "s";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-tick]").forEach(function (element) {
      var since = Number(element.getAttribute("data-tick-since") || 0);
      if (!since) {
        since = now;
        element.setAttribute("data-tick-since", String(now));
      }
      var base = Number(element.getAttribute("data-tick"));
      element.textContent = shown(base + (now - since) / 1000);
    });
  }
  tick();
  window.setInterval(tick, 1000);

  var stream = document.body.getAttribute("data-stream");
  var badge = document.getElementById("live");
  if (!stream || !window.EventSource) {
    return;
  }

  function setState(text, cls) {
    if (badge) {
      badge.textContent = text;
      badge.className = "live " + cls;
    }
  }

  function replace(id, hash, html) {
    var element = document.getElementById(id);
    if (!element || element.getAttribute("data-hash") === hash) {
      return;
    }
    var active = document.activeElement;
    var focusId = active && element.contains(active) ? active.id : "";
    var value = focusId && "value" in active ? active.value : null;
    element.innerHTML = html;
    element.setAttribute("data-hash", hash);
    if (focusId) {
      var again = document.getElementById(focusId);
      if (again) {
        if (value !== null && "value" in again && !again.value) {
          again.value = value;
        }
        again.focus();
      }
    }
  }

  var source = new EventSource(stream);
  source.addEventListener("open", function () {
    setState("live", "on");
  });
  source.addEventListener("error", function () {
    setState("reconnecting", "off");
  });
  source.addEventListener("update", function (event) {
    var parts = JSON.parse(event.data);
    Object.keys(parts).forEach(function (id) {
      replace(id, parts[id][0], parts[id][1]);
    });
    document.body.setAttribute("data-updated", String(Date.now()));
  });
  window.addEventListener("pagehide", function () {
    source.close();
  });
})();
