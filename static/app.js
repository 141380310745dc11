// Arbor's only hand-written script: what htmx cannot do by itself.
(function () {
  "use strict";

  // Every htmx request carries the session's CSRF token from the page's meta tag.
  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) {
      event.detail.headers["X-CSRF-Token"] = meta.content;
    }
  });

  // A refused form (4xx) that the server points at a place on the page (HX-Retarget) is shown
  // there; htmx leaves error responses unswapped otherwise.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.status >= 400 && xhr.status < 500 && xhr.getResponseHeader("HX-Retarget")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // A sent message clears the composer's error.
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (form && form.id === "composer" && event.detail.successful) {
      var box = document.getElementById("composer-error");
      if (box) {
        box.textContent = "";
      }
    }
  });

  // The sidebar is a drawer on phones.
  document.addEventListener("click", function (event) {
    var app = document.getElementById("app");
    if (!app) {
      return;
    }
    var toggle = event.target.closest(".drawer-toggle");
    if (toggle) {
      var open = app.classList.toggle("drawer-open");
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
      return;
    }
    if (app.classList.contains("drawer-open") && !event.target.closest(".sidebar")) {
      app.classList.remove("drawer-open");
      var button = app.querySelector(".drawer-toggle");
      if (button) {
        button.setAttribute("aria-expanded", "false");
      }
    }
  });

  document.addEventListener("keydown", function (event) {
    var app = document.getElementById("app");
    if (event.key === "Escape" && app && app.classList.contains("drawer-open")) {
      app.classList.remove("drawer-open");
    }
  });
})();
