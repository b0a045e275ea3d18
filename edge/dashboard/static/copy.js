// Copy buttons: the only part of the dashboard that needs script. They are hidden
// in the page and shown here, so without script nothing offers to copy.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var status = document.getElementById("copy-status");
  function announce(msg) {
    if (status) { status.textContent = ""; setTimeout(function () { status.textContent = msg; }, 50); }
  }
  function fallback(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.opacity = "0";
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(ta);
    return ok;
  }
  document.querySelectorAll("button.copy[data-copy]").forEach(function (btn) {
    btn.hidden = false;
    btn.addEventListener("click", function () {
      var el = document.getElementById(btn.getAttribute("data-copy"));
      if (!el) { return; }
      var text = el.textContent;
      function done(ok) {
        btn.textContent = ok ? "Copied" : "Copy failed";
        btn.classList.toggle("copied", ok);
        announce(ok ? "Copied to the clipboard." : "Could not copy; select the text and copy it by hand.");
        setTimeout(function () { btn.textContent = "Copy"; btn.classList.remove("copied"); }, 2000);
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallback(text)); });
      } else {
        done(fallback(text));
      }
    });
  });
  var result = document.querySelector(".result");
  if (result && location.hash === "#" + result.id) { result.focus(); }
});
