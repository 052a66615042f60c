// Renders the math that pymdownx.arithmatex (generic mode) leaves in the page:
// \( ... \) inside span.arithmatex (inline) and \[ ... \] inside div.arithmatex
// (display), with the KaTeX copy vendored under assets/katex/ (no network needed).
(function () {
  "use strict";
  // MathJax macros the docs use that KaTeX lacks, or spells differently.
  var macros = {};
  function render() {
    if (typeof renderMathInElement !== "function") {
      return;
    }
    var nodes = document.querySelectorAll(".arithmatex");
    for (var i = 0; i < nodes.length; i++) {
      renderMathInElement(nodes[i], {
        delimiters: [
          { left: "\\[", right: "\\]", display: true },
          { left: "\\(", right: "\\)", display: false },
          { left: "$$", right: "$$", display: true }
        ],
        macros: macros,
        throwOnError: false
      });
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
