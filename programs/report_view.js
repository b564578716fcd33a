/* The report view's only script (programs/report_view.py): citations show their passage in the pane, j/k move
   between citations, Esc closes the pane. It reads the page's own elements and writes text only. */
(function () {
  "use strict";
  var VERDICTS = {
    supported: "the cited passages support this sentence",
    partially: "the cited passages support part of this sentence",
    unsupported: "the cited passages do not support this sentence",
    unchecked: "the passages' text was not known, so this sentence was not checked"
  };
  function make(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function init(root) {
    root.setAttribute("data-ready", "1");
    var embedded = root.classList.contains("dr-embedded");
    var body = root.querySelector(".dr-pane-body");
    var cites = Array.prototype.slice.call(root.querySelectorAll("a.dr-cite"));
    var active = null;

    function show(a) {
      if (active) active.classList.remove("dr-active");
      active = a;
      a.classList.add("dr-active");
      var ref = document.getElementById(a.getAttribute("href").slice(1));
      var src = document.getElementById(a.getAttribute("data-src"));
      while (body.firstChild) body.removeChild(body.firstChild);
      var title = make("p", "dr-pane-title");
      var link = make("a", null, "[" + a.getAttribute("data-number") + "] " + (ref ? ref.getAttribute("data-title") : ""));
      link.setAttribute("href", a.getAttribute("href"));
      title.appendChild(link);
      body.appendChild(title);
      var sentence = a.closest(".dr-s");
      var verdict = sentence && sentence.getAttribute("data-verdict");
      var line = make("p", "dr-verdict");
      if (verdict) {
        var known = Object.prototype.hasOwnProperty.call(VERDICTS, verdict);
        line.appendChild(make("span", "dr-badge dr-badge-" + (known ? verdict : "other"), verdict));
        line.appendChild(document.createTextNode(" " + (known ? VERDICTS[verdict] : "") + " (judge: " +
          sentence.getAttribute("data-judge") + "; " + sentence.getAttribute("data-action") + ")"));
      } else {
        line.textContent = "No verdict: the verify stage did not check this sentence.";
      }
      body.appendChild(line);
      if (src) {
        var copy = src.cloneNode(true);
        copy.removeAttribute("id");
        copy.classList.add("dr-pane-passage");
        var mark = copy.querySelector('[data-i="' + parseInt(a.getAttribute("data-mark"), 10) + '"]');
        if (mark) mark.classList.add("dr-mark");
        body.appendChild(copy);
        copy.scrollTop = mark ? Math.max(0, mark.offsetTop - 32) : 0;
      } else {
        body.appendChild(make("p", "dr-missing", "The passage's text is not in this report."));
      }
      root.classList.add("dr-pane-open");
    }
    function hide() {
      root.classList.remove("dr-pane-open");
      if (active) active.classList.remove("dr-active");
    }
    function step(by) {
      var i = cites.indexOf(document.activeElement);
      if (i < 0) i = active ? cites.indexOf(active) : (by > 0 ? -1 : 0);
      var next = cites[(i + by + cites.length) % cites.length];
      if (next) next.focus();
    }
    cites.forEach(function (a) {
      a.addEventListener("mouseenter", function () { show(a); });
      a.addEventListener("focus", function () { show(a); });
      a.addEventListener("click", function (e) {
        var ref = document.getElementById(a.getAttribute("href").slice(1));
        if (!ref) return;
        e.preventDefault();
        var old = root.querySelector(".dr-target");
        if (old) old.classList.remove("dr-target");
        ref.classList.add("dr-target");
        var box = ref.querySelector("details");
        if (box) box.open = true;
        ref.focus();
        ref.scrollIntoView({block: "center"});
      });
    });
    root.querySelector(".dr-close").addEventListener("click", hide);
    (embedded ? root : document).addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey || !cites.length) return;
      var t = e.target && e.target.tagName;
      if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT") return;
      if (e.key === "j") { step(1); e.preventDefault(); }
      else if (e.key === "k") { step(-1); e.preventDefault(); }
      else if (e.key === "Escape") { hide(); }
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll(".dr-view:not([data-ready])"), init);
})();
