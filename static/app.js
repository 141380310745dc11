// Arbor's only hand-written script: what htmx cannot do by itself.
(function () {
  "use strict";

  // Every htmx request carries the session's CSRF token from the page's meta tag.
  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) {
      event.detail.headers["X-CSRF-Token"] = meta.content;
    }
    // The session's watcher says which confirmation dialog this page shows, so that a run
    // paused from another tab (or before this page loaded) is noticed.
    if (event.detail.elt && event.detail.elt.id === "pending-watch") {
      // The workspace is no longer shared with this reader: the notice stays until they leave.
      if (document.getElementById("access-revoked")) {
        event.preventDefault();
        return;
      }
      var shown = document.querySelector(".confirm[data-call]");
      event.detail.headers["X-Arbor-Showing"] = shown ? shown.getAttribute("data-call") : "";
      // Whether it follows a live run: a streaming answer, or a message on its way.
      var following = document.querySelector('#thread [data-status="streaming"], #composer.htmx-request');
      event.detail.headers["X-Arbor-Following"] = following ? "1" : "";
      // The last message shown: when the session went on past it elsewhere (the sessions API,
      // another tab), the page reloads to show what came.
      var shown_messages = document.querySelectorAll('#thread article.msg[id^="m-"]');
      var last = shown_messages.length ? shown_messages[shown_messages.length - 1] : null;
      event.detail.headers["X-Arbor-Last"] = last ? last.id.slice(2) : "";
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

  // A sent message clears the composer's error and its saved draft. htmx fires this on the old
  // form's nearest connected ancestor when the form itself was swapped out, so detail.elt still works.
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (form && form.id === "composer" && event.detail.successful) {
      var box = document.getElementById("composer-error");
      if (box) {
        box.textContent = "";
      }
      var hint = document.getElementById("empty-thread");
      if (hint) {
        hint.remove();
      }
      storeDraft(draftKey(form), "");
    }
  });

  // The draft is dropped as the message leaves: the response may replace the composer (out of
  // band) or the page (a new session), and either would restore a stale draft. A failed send
  // keeps the text in the form, and it is stored again below.
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (form && form.id === "composer") {
      storeDraft(draftKey(form), "");
    }
  });

  document.addEventListener("htmx:responseError", keepUnsentDraft);
  document.addEventListener("htmx:sendError", keepUnsentDraft);

  function keepUnsentDraft(event) {
    var form = event.detail.elt;
    var area = form && form.id === "composer" ? form.querySelector("#composer-message") : null;
    if (area) {
      storeDraft(draftKey(form), area.value);
    }
  }

  // Composer drafts live in localStorage, one per session, so a reload or a slip of the finger
  // does not lose a long message. Storage can throw (private mode, quota, disabled), hence the trys.
  function draftKey(form) {
    return form && form.dataset && form.dataset.draftKey ? "arbor:draft:" + form.dataset.draftKey : null;
  }

  function loadDraft(key) {
    if (!key) {
      return "";
    }
    try {
      return window.localStorage.getItem(key) || "";
    } catch (e) {
      return "";
    }
  }

  function storeDraft(key, text) {
    if (!key) {
      return;
    }
    try {
      if (text.trim()) {
        window.localStorage.setItem(key, text);
      } else {
        window.localStorage.removeItem(key);
      }
    } catch (e) {
      // Not saving a draft is harmless.
    }
  }

  function composerText(target) {
    return target && target.id === "composer-message" && target.form && target.form.id === "composer";
  }

  // The composer is replaced by an out-of-band swap after each send, so these listeners are
  // delegated from the document rather than bound to the form.
  document.addEventListener("input", function (event) {
    if (composerText(event.target)) {
      storeDraft(draftKey(event.target.form), event.target.value);
    }
  });

  // Enter sends, Shift+Enter is a new line. Nothing happens mid IME composition (keyCode 229 is
  // what Safari reports there), where Enter confirms the composed text.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) {
      return;
    }
    if (!composerText(event.target)) {
      return;
    }
    event.preventDefault();
    var form = event.target.form;
    if (!event.target.value.trim()) {
      return;
    }
    if (typeof form.requestSubmit === "function") {
      form.requestSubmit();
    } else {
      var send = form.querySelector('[type="submit"]');
      if (send) {
        send.click();
      }
    }
  });

  function restoreDraft(root) {
    var form = root.id === "composer" ? root : root.querySelector("#composer");
    var area = form && form.querySelector("#composer-message");
    if (area && !area.value) {
      area.value = loadDraft(draftKey(form));
    }
  }

  // Copying: the Clipboard API needs a secure context; elsewhere a throwaway textarea and
  // execCommand still work. The textarea is hidden with a class because the CSP forbids inline styles.
  function copyWithTextarea(text) {
    var area = document.createElement("textarea");
    var previous = document.activeElement;
    area.value = text;
    area.setAttribute("readonly", "");
    area.setAttribute("aria-hidden", "true");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.focus({ preventScroll: true }); // the textarea sits at the end of the body
    area.select();
    area.setSelectionRange(0, text.length); // iOS ignores select() alone
    var ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (e) {
      ok = false;
    }
    document.body.removeChild(area);
    if (previous && previous.focus) {
      previous.focus({ preventScroll: true });
    }
    return ok;
  }

  function copyText(text, done) {
    if (navigator.clipboard && navigator.clipboard.writeText && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () {
          done(true);
        },
        function () {
          done(copyWithTextarea(text));
        }
      );
    } else {
      done(copyWithTextarea(text));
    }
  }

  // Brief feedback in the button itself; the label changes too so screen readers hear it.
  function showCopied(button, ok) {
    if (!button.arborCopyTimer) {
      // Keep the original nodes, not just the text: the button may hold an icon.
      button.arborCopyNodes = Array.prototype.slice.call(button.childNodes);
      button.arborCopyAria = button.getAttribute("aria-label");
    }
    var text = ok ? "Copied" : "Copy failed";
    button.textContent = text;
    button.setAttribute("aria-label", text);
    window.clearTimeout(button.arborCopyTimer);
    button.arborCopyTimer = window.setTimeout(function () {
      button.arborCopyTimer = null;
      button.textContent = "";
      button.arborCopyNodes.forEach(function (node) {
        button.appendChild(node);
      });
      if (button.arborCopyAria) {
        button.setAttribute("aria-label", button.arborCopyAria);
      } else {
        button.removeAttribute("aria-label");
      }
    }, 1500);
  }

  // The code's own text only: the copy button sits inside the <pre> too.
  function codeText(pre) {
    var code = pre.querySelector(":scope > code");
    if (code) {
      return code.textContent;
    }
    var clone = pre.cloneNode(true);
    var button = clone.querySelector(".code-copy");
    if (button) {
      clone.removeChild(button);
    }
    return clone.textContent;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy-target], button.code-copy");
    if (!button) {
      return;
    }
    var text = null;
    if (button.classList.contains("code-copy")) {
      var pre = button.closest("pre");
      text = pre ? codeText(pre) : null;
    } else {
      var source = null;
      try {
        source = document.querySelector(button.getAttribute("data-copy-target"));
      } catch (e) {
        source = null; // not a valid selector
      }
      if (source) {
        // innerText skips display:none, so this class keeps the code blocks' "Copy" labels out.
        source.classList.add("is-copying");
        text = source.innerText;
        source.classList.remove("is-copying");
      }
    }
    if (text !== null) {
      copyText(text, function (ok) {
        showCopied(button, ok);
      });
    }
  });

  // Rendered Markdown gets syntax colours, a copy button per code block and typeset maths. The
  // vendored libraries may be missing (blocked, failed to load); the plain HTML is readable then.
  function enhanceMarkdown(box) {
    if (typeof hljs !== "undefined") {
      box.querySelectorAll("pre > code").forEach(function (code) {
        try {
          hljs.highlightElement(code); // an unknown language-xxx class is left uncoloured
        } catch (e) {
          // Uncoloured code is fine.
        }
      });
    }
    box.querySelectorAll("pre").forEach(function (pre) {
      if (pre.querySelector(":scope > .code-copy")) {
        return;
      }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "btn-copy code-copy";
      button.setAttribute("aria-label", "Copy code");
      button.textContent = "Copy";
      pre.insertBefore(button, pre.firstChild);
    });
    if (typeof katex !== "undefined") {
      box.querySelectorAll("span.math.math-inline, span.math.math-display").forEach(function (el) {
        var tex = el.textContent;
        try {
          // render() builds DOM nodes and sets styles through the CSSOM, which the CSP allows
          // (renderToString + innerHTML would need inline style attributes).
          katex.render(tex, el, {
            displayMode: el.classList.contains("math-display"),
            throwOnError: false,
            output: "html"
          });
          // HTML output alone means nothing to a screen reader: let it read the TeX.
          el.setAttribute("role", "img");
          el.setAttribute("aria-label", tex);
        } catch (e) {
          el.textContent = tex;
        }
      });
    }
    box.setAttribute("data-enhanced", "");
  }

  function onLoad(root) {
    if (!root || !root.querySelectorAll) {
      return;
    }
    var boxes = Array.prototype.slice.call(root.querySelectorAll(".markdown:not([data-enhanced])"));
    if (root.matches(".markdown:not([data-enhanced])")) {
      boxes.unshift(root);
    }
    boxes.forEach(enhanceMarkdown);
    restoreDraft(root);
  }

  // htmx.onLoad runs for the first page and for every fragment htmx swaps in (out-of-band ones too).
  if (typeof htmx !== "undefined") {
    htmx.onLoad(onLoad);
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      onLoad(document.body);
    });
  }

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

  // Keyboard shortcuts, listed in the help dialog ("?"). Single keys act only when no field has
  // the focus, so they never take a letter someone is typing.
  function typingIn(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  function focusField(id) {
    var field = document.getElementById(id);
    if (!field) {
      return false;
    }
    var app = document.getElementById("app");
    if (id === "sidebar-q" && app && window.matchMedia("(max-width: 767.98px)").matches) {
      app.classList.add("drawer-open");
    }
    field.focus();
    return true;
  }
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing) {
      return;
    }
    if (event.key === "Escape" && event.shiftKey) {
      var stop = document.querySelector("#thread .is-streaming") && document.querySelector(".composer-stop");
      if (stop) {
        event.preventDefault();
        stop.click();
      }
      return;
    }
    if (typingIn(event.target)) {
      return;
    }
    var done = true;
    if (event.key === "?") {
      var help = document.getElementById("shortcuts");
      if (help && !help.open) {
        help.showModal();
      }
    } else if (event.key === "n") {
      window.location.href = "/";
    } else if (event.key === "c") {
      done = focusField("composer-message");
    } else if (event.key === "/") {
      done = focusField("sidebar-q");
    } else {
      done = false;
    }
    if (done) {
      event.preventDefault();
    }
  });

  // After a swap that removed the element holding the focus (a button that replaced its own
  // section, say), the focus goes to what came in instead of falling back to the page.
  // Kept per swap: another swap under way at the same time (the sidebar loading, say) must
  // neither forget this one nor take the focus that belongs to it.
  var focusWasIn = [];
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.contains(document.activeElement) && document.activeElement !== document.body) {
      focusWasIn.push(target);
      // A swap that never settles (cancelled by another handler) is forgotten after a few more.
      if (focusWasIn.length > 8) {
        focusWasIn.shift();
      }
    }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.target;
    var held = focusWasIn.indexOf(target);
    if (held < 0) {
      return;
    }
    focusWasIn.splice(held, 1);
    if (document.activeElement && document.activeElement !== document.body) {
      return;
    }
    // An outerHTML swap leaves `target` detached: what replaced it carries the same id.
    var landing = target && target.isConnected ? target : target && target.id && document.getElementById(target.id);
    landing = landing || document.getElementById("content");
    if (!landing) {
      return;
    }
    var wanted = landing.querySelector("[autofocus]");
    if (wanted) {
      wanted.focus();
      return;
    }
    if (!landing.hasAttribute("tabindex")) {
      landing.setAttribute("tabindex", "-1");
    }
    landing.focus({ preventScroll: true });
  });

  // ----- Attachments: upload each file as its own request (with progress), keep the ids in the
  // composer's hidden field; the server checks every id against the sender when the message goes.
  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  function attachmentIds(form) {
    var field = form.querySelector("#composer-attachments");
    return field && field.value ? field.value.split(",") : [];
  }

  function setAttachmentIds(form, ids) {
    var field = form.querySelector("#composer-attachments");
    if (field) {
      field.value = ids.join(",");
    }
  }

  function uploadFile(form, file) {
    var box = form.querySelector("#composer-files");
    if (!box) {
      return;
    }
    var chip = document.createElement("span");
    chip.className = "upload-chip is-uploading";
    var name = document.createElement("span");
    name.className = "upload-name";
    name.textContent = file.name || "pasted file";
    var bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    chip.appendChild(name);
    chip.appendChild(bar);
    box.appendChild(chip);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", "/uploads?name=" + encodeURIComponent(file.name || "pasted file"));
    xhr.setRequestHeader("X-CSRF-Token", csrfToken());
    xhr.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) {
        bar.value = Math.round((e.loaded / e.total) * 100);
      }
    });
    xhr.addEventListener("load", function () {
      if (xhr.status === 200) {
        var holder = document.createElement("div");
        holder.innerHTML = xhr.responseText;
        var done = holder.firstElementChild;
        if (done) {
          chip.replaceWith(done);
          var ids = attachmentIds(form);
          ids.push(done.getAttribute("data-upload"));
          setAttachmentIds(form, ids);
        }
      } else {
        chip.className = "upload-chip is-failed";
        bar.remove();
        var why = document.createElement("span");
        why.className = "small";
        var holder = document.createElement("div");
        holder.innerHTML = xhr.responseText;
        why.textContent = " " + (holder.textContent.trim() || "The upload failed.");
        chip.appendChild(why);
      }
    });
    xhr.addEventListener("error", function () {
      chip.className = "upload-chip is-failed";
      bar.remove();
      chip.appendChild(document.createTextNode(" The upload failed."));
    });
    xhr.send(file);
  }

  function uploadAll(form, files) {
    for (var i = 0; i < files.length; i++) {
      uploadFile(form, files[i]);
    }
  }

  // A download that must be a POST (it is recorded: an admin's export of a member's data):
  // fetched with the CSRF token, then handed to the browser as a file.
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-download-post]") : null;
    if (!button) {
      return;
    }
    button.disabled = true;
    fetch(button.getAttribute("data-download-post"), {
      method: "POST",
      headers: { "X-CSRF-Token": csrfToken() },
      credentials: "same-origin",
    })
      .then(function (res) {
        if (!res.ok) {
          return res.text().then(function (text) {
            throw new Error(text || "The export failed.");
          });
        }
        var name = /filename="([^"]+)"/.exec(res.headers.get("Content-Disposition") || "");
        return res.blob().then(function (blob) {
          var link = document.createElement("a");
          link.href = URL.createObjectURL(blob);
          link.download = name ? name[1] : "arbor-export.tar.gz";
          document.body.appendChild(link);
          link.click();
          link.remove();
          setTimeout(function () {
            URL.revokeObjectURL(link.href);
          }, 60000);
        });
      })
      .catch(function (err) {
        window.alert(err.message);
      })
      .then(function () {
        button.disabled = false;
      });
  });

  // Settings → Export and import: the file goes up as the request body (like an attachment),
  // and the job card that comes back follows the import's progress by itself.
  function uploadImport(input) {
    var form = input.closest("[data-import-form]");
    var file = input.files[0];
    var note = form.querySelector("#import-upload");
    var workspace = form.querySelector("#import-workspace");
    var xhr = new XMLHttpRequest();
    xhr.open(
      "POST",
      "/settings/imports?name=" + encodeURIComponent(file.name) + "&workspace=" +
        encodeURIComponent(workspace ? workspace.value : "")
    );
    xhr.setRequestHeader("X-CSRF-Token", csrfToken());
    note.textContent = "Sending " + file.name + "…";
    xhr.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) {
        note.textContent = "Sending " + file.name + ": " + Math.round((e.loaded / e.total) * 100) + "%";
      }
    });
    xhr.addEventListener("load", function () {
      if (xhr.status === 202) {
        note.textContent = "";
        var holder = document.createElement("div");
        holder.innerHTML = xhr.responseText;
        var card = holder.firstElementChild;
        var jobs = document.getElementById("import-jobs");
        if (card && jobs) {
          jobs.insertBefore(card, jobs.firstChild);
          if (window.htmx) {
            window.htmx.process(card);
          }
        }
      } else {
        var why = document.createElement("div");
        why.innerHTML = xhr.responseText;
        note.textContent = "Not imported: " + (why.textContent.trim() || "the upload failed.");
      }
    });
    xhr.addEventListener("error", function () {
      note.textContent = "Not imported: the upload failed.";
    });
    xhr.send(file);
    input.value = "";
  }

  document.addEventListener("change", function (event) {
    var input = event.target;
    if (input && input.id === "import-file" && input.files && input.files.length) {
      uploadImport(input);
      return;
    }
    if (input && input.id === "composer-file" && input.files) {
      uploadAll(input.closest("form"), input.files);
      input.value = "";
    }
  });

  document.addEventListener("click", function (event) {
    var remove = event.target.closest ? event.target.closest(".upload-remove") : null;
    if (!remove) {
      return;
    }
    var chip = remove.closest(".upload-chip");
    var form = remove.closest("form");
    var id = chip ? chip.getAttribute("data-upload") : null;
    if (!chip || !form || !id) {
      return;
    }
    setAttachmentIds(form, attachmentIds(form).filter(function (x) { return x !== id; }));
    chip.remove();
    var xhr = new XMLHttpRequest();
    xhr.open("POST", "/uploads/" + encodeURIComponent(id) + "/delete");
    xhr.setRequestHeader("X-CSRF-Token", csrfToken());
    xhr.send();
  });

  document.addEventListener("dragover", function (event) {
    if (event.target.closest && event.target.closest("#composer") && event.dataTransfer) {
      event.preventDefault();
    }
  });

  document.addEventListener("drop", function (event) {
    var form = event.target.closest ? event.target.closest("#composer") : null;
    if (form && event.dataTransfer && event.dataTransfer.files.length) {
      event.preventDefault();
      uploadAll(form, event.dataTransfer.files);
    }
  });

  document.addEventListener("paste", function (event) {
    var form = event.target.closest ? event.target.closest("#composer") : null;
    var data = event.clipboardData;
    if (form && data && data.files && data.files.length) {
      event.preventDefault();
      uploadAll(form, data.files);
    }
  });

  // An attached image opens full size in a dialog; Escape or a click closes it.
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a[data-lightbox]") : null;
    if (!link) {
      return;
    }
    event.preventDefault();
    var dialog = document.getElementById("lightbox");
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.id = "lightbox";
      dialog.className = "lightbox";
      dialog.addEventListener("click", function () {
        dialog.close();
      });
      document.body.appendChild(dialog);
    }
    dialog.textContent = "";
    var img = document.createElement("img");
    img.src = link.getAttribute("href");
    img.alt = link.getAttribute("title") || "";
    dialog.appendChild(img);
    dialog.showModal();
  });

  // The thread: a session opens at its latest turn (unless a link or search hit names a
  // message), follows an answer being written while the reader is at the bottom, stops following
  // when they scroll up, and then offers "Jump to latest". Older turns loaded above keep what is
  // on screen in place (the browser's scroll anchoring).
  var following = true;
  function pageRoot() {
    return document.scrollingElement || document.documentElement;
  }
  function nearBottom() {
    var root = pageRoot();
    return root.scrollHeight - root.scrollTop - window.innerHeight < 80;
  }
  function toLatest() {
    window.scrollTo(0, pageRoot().scrollHeight);
  }
  function showJump(show) {
    var button = document.getElementById("jump-latest");
    if (button) {
      button.hidden = !show;
    }
  }
  // Screen readers hear that an answer started and that it ended, not every token.
  var wasWriting = false;
  function announceRun() {
    var writing = !!document.querySelector("#thread .is-streaming");
    var status = document.getElementById("run-status");
    if (status && writing !== wasWriting) {
      status.textContent = writing ? "The answer is being written." : "The answer is complete.";
    }
    wasWriting = writing;
  }
  var threadObserver = new MutationObserver(function () {
    announceRun();
    if (following) {
      toLatest();
    } else {
      showJump(true);
    }
  });
  function watchThread() {
    var thread = document.getElementById("thread");
    if (!thread || thread.hasAttribute("data-watched")) {
      return;
    }
    thread.setAttribute("data-watched", "");
    // A thread that replaced the one being watched may end the answer that one was writing.
    announceRun();
    threadObserver.disconnect();
    // Classes too: htmx settles a swapped-in element's attributes after the swap, which is when
    // a finished answer loses `is-streaming`.
    threadObserver.observe(thread, {
      childList: true,
      subtree: true,
      characterData: true,
      attributes: true,
      attributeFilter: ["class"],
    });
    if (!thread.hasAttribute("data-focus")) {
      following = true;
      toLatest();
    }
    showJump(!nearBottom());
  }
  window.addEventListener(
    "scroll",
    function () {
      following = nearBottom();
      showJump(!following);
    },
    { passive: true }
  );
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("#jump-latest")) {
      following = true;
      toLatest();
      showJump(false);
    }
  });
  // Sending a message brings the reader to it, wherever they were.
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt && event.detail.elt.closest && event.detail.elt.closest(".composer")) {
      following = true;
    }
  });
  document.addEventListener("htmx:afterSettle", watchThread);

  // Older turns loaded above keep what is on screen in place, at the very top of the page too
  // (where browsers do not anchor scrolling).
  var olderAnchor = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.classList && target.classList.contains("older-loader")) {
      var next = target.nextElementSibling;
      olderAnchor = next ? { el: next, top: next.getBoundingClientRect().top } : null;
    }
  });
  document.addEventListener("htmx:afterSwap", function () {
    if (olderAnchor && olderAnchor.el.isConnected) {
      window.scrollBy(0, olderAnchor.el.getBoundingClientRect().top - olderAnchor.top);
    }
    olderAnchor = null;
  });

  // A search hit opens its session scrolled to the message (its branch already made active).
  function focusHit(root) {
    var thread = root.querySelector ? root.querySelector("[data-focus]") : null;
    var target = thread ? document.getElementById(thread.getAttribute("data-focus")) : null;
    if (target) {
      target.classList.add("is-focused");
      target.scrollIntoView({ block: "center" });
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      focusHit(document);
      watchThread();
    });
  } else {
    focusHit(document);
    watchThread();
  }
})();
