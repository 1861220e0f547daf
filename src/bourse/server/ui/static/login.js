// /ui/login#token=...: sign in with a token that never left the browser (a fragment is not sent
// to the server, so no proxy or access log sees it). The fragment is dropped from the address
// bar and history before the form is posted.
"use strict";
(function () {
  const match = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  if (!match) return;
  history.replaceState(null, "", window.location.pathname + window.location.search);
  const form = document.getElementById("login");
  form.elements.namedItem("token").value = decodeURIComponent(match[1]);
  form.submit();
})();
