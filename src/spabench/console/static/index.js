// spabench console: the start page (a file, not an inline script: the console's CSP allows scripts from /static only).
"use strict";
api("/api/meta").then(m => { $("#campaign").textContent = m.campaign; });
