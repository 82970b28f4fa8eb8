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
  function age(seconds) {
    var units = [["d", 86400], ["h", 3600], ["m", 60]];
    for (var i = 0; i < units.length; i++) {
      if (seconds >= units[i][1]) {
        return Math.floor(seconds / units[i][1]) + units[i][0];
      }
    }
    return Math.floor(seconds) + "s";
  }
  function took(seconds) {
    if (seconds < 1) {
      return Math.round(seconds * 1000) + " ms";
    }
    return seconds < 60 ? seconds.toFixed(2) + " s" : shown(seconds);
  }
  // seconds since the element appeared (it was rendered with the value of that moment)
  function elapsed(element, now) {
    var since = Number(element.getAttribute("data-tick-since") || 0);
    if (!since) {
      since = now;
      element.setAttribute("data-tick-since", String(now));
    }
    return (now - since) / 1000;
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-tick]").forEach(function (element) {
      var base = Number(element.getAttribute("data-tick"));
      element.textContent = shown(base + elapsed(element, now));
    });
    document.querySelectorAll("[data-age]").forEach(function (element) {
      var base = Number(element.getAttribute("data-age"));
      element.textContent = age(base + elapsed(element, now));
    });
    // the bar of a request going on grows to now (the axis leaves it room to)
    document.querySelectorAll("[data-grow]").forEach(function (step) {
      var bar = step.querySelector("rect");
      var label = step.querySelector("tspan.took");
      var svg = step.ownerSVGElement;
      if (!bar || !svg) {
        return;
      }
      var seconds = Number(step.getAttribute("data-seconds")) + elapsed(step, now);
      var x = Number(bar.getAttribute("x"));
      var room = svg.viewBox.baseVal.width - 8 - x;
      var width = Math.min(room, Math.max(2, seconds * Number(step.getAttribute("data-grow"))));
      bar.setAttribute("width", width.toFixed(2));
      if (label) {
        label.textContent = took(seconds);
      }
    });
  }
  tick();
  window.setInterval(tick, 1000);

  // the span panel: a bar of the timeline or a card, clicked, shows its request or call
  var panel = document.getElementById("span-panel");
  var panelBody = document.getElementById("span-body");
  var opener = null;
  function closePanel() {
    if (!panel || panel.hidden) {
      return;
    }
    panel.hidden = true;
    document.querySelectorAll(".span-link.selected").forEach(function (link) {
      link.classList.remove("selected");
    });
    if (opener && document.contains(opener)) {
      opener.focus();
    }
  }
  function openSpan(url, from) {
    var address = url + (url.indexOf("?") < 0 ? "?" : "&") + "panel=1";
    opener = from;
    window.fetch(address, { credentials: "same-origin" }).then(function (response) {
      return response.text();
    }).then(function (html) {
      panelBody.innerHTML = html;
      panel.hidden = false;
      document.querySelectorAll(".span-link.selected").forEach(function (link) {
        link.classList.remove("selected");
      });
      if (from && from.classList.contains("span-link")) {
        from.classList.add("selected");
      }
      var title = document.getElementById("span-title");
      (title || panel).focus();
    });
  }
  if (panel && panelBody && window.fetch) {
    document.addEventListener("click", function (event) {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
        return;
      }
      var target = event.target;
      var link = target.closest ? target.closest("a") : null;
      var url = "";
      var from = null;
      if (link && link.hasAttribute("data-span")) {
        url = link.getAttribute("href");
        from = link;
      } else if (!link && !target.closest("button, input, textarea, select, label, summary")) {
        var card = target.closest("[data-span-card]");
        if (!card || String(window.getSelection()) !== "") {
          return;
        }
        url = card.getAttribute("data-span-card");
        from = card.querySelector("a[data-span]");
      }
      if (!url || panel.contains(target)) {
        return;
      }
      event.preventDefault();
      openSpan(url, from);
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape") {
        closePanel();
      }
    });
    var close = panel.querySelector("button.close");
    if (close) {
      close.addEventListener("click", closePanel);
    }
  }

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
    // boxes ticked in a fragment stay ticked when it is replaced (runs chosen to compare)
    var ticked = {};
    element.querySelectorAll("input[data-keep]:checked").forEach(function (box) {
      ticked[box.name + "=" + box.value] = true;
    });
    element.innerHTML = html;
    element.querySelectorAll("input[data-keep]").forEach(function (box) {
      if (ticked[box.name + "=" + box.value]) {
        box.checked = true;
      }
    });
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
