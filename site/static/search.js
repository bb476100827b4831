/*
 * errordb search: words of the message, class, repository, file or id, searched in the browser.
 *
 * The index is split into chunks (search/meta.json says how many; search/chunk-<n>.json holds
 * [slug, message, class, repo, file, id] rows), loaded one after the other and kept, so a first
 * search shows results before the whole index has arrived. Every query word must occur; results
 * whose message holds the whole query rank first. Without JavaScript the page shows a plain list.
 * Results are built with textContent only: record text is never parsed as HTML.
 */
(function () {
  "use strict";

  var MAX_RESULTS = 50;
  var chunks = [];      // loaded chunks, in order
  var meta = null;
  var loading = null;

  function fetchJson(url) {
    return fetch(url, { credentials: "same-origin" }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status + " for " + url);
      return response.json();
    });
  }

  function words(text) {
    return text.toLowerCase().split(/[^a-z0-9_]+/).filter(function (w) { return w.length > 0; });
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function start() {
    var form = document.getElementById("search-form");
    if (!form) return;
    var input = document.getElementById("search-input");
    var status = document.getElementById("search-status");
    var results = document.getElementById("search-results");
    var fallback = document.getElementById("search-fallback");
    var indexBase = new URL(form.getAttribute("data-index"), document.baseURI);
    var errorsBase = form.getAttribute("data-errors");
    var generation = 0;

    function loadAll(onChunk) {
      // Browsers refuse fetch() on file:// pages; the fallback list stays.
      if (location.protocol === "file:") return Promise.reject(new Error("file://"));
      if (!loading) {
        loading = fetchJson(new URL("meta.json", indexBase)).then(function (m) {
          meta = m;
          var next = Promise.resolve();
          for (var i = 0; i < m.chunks; i++) {
            (function (n) {
              next = next.then(function () {
                return fetchJson(new URL("chunk-" + n + ".json", indexBase)).then(function (rows) {
                  chunks[n] = rows;
                  if (onChunk) onChunk();
                });
              });
            })(i);
          }
          return next;
        });
        loading.catch(function () { loading = null; });
      } else if (onChunk) {
        loading.then(onChunk, function () {});
      }
      return loading;
    }

    function search(query) {
      var wanted = words(query);
      var phrase = query.trim().toLowerCase();
      var found = [];
      var total = 0;
      chunks.forEach(function (rows) {
        (rows || []).forEach(function (row) {
          var hay = (row[1] + " " + row[2] + " " + row[3] + " " + row[4] + " " + row[5] + " " + row[0]).toLowerCase();
          for (var i = 0; i < wanted.length; i++) if (hay.indexOf(wanted[i]) < 0) return;
          total++;
          var rank = row[1].toLowerCase().indexOf(phrase) >= 0 ? 0 : 1;
          found.push({ rank: rank, row: row });
        });
      });
      found.sort(function (a, b) {
        if (a.rank !== b.rank) return a.rank - b.rank;
        return a.row[0] < b.row[0] ? -1 : a.row[0] > b.row[0] ? 1 : 0;
      });
      return { total: total, rows: found.slice(0, MAX_RESULTS).map(function (f) { return f.row; }) };
    }

    function render(query) {
      var answer = search(query);
      results.textContent = "";
      answer.rows.forEach(function (row) {
        var link = el("a", { "class": "item-title", href: errorsBase + encodeURIComponent(row[0]) + "/index.html" }, [row[1] || row[2]]);
        var meta = el("span", { "class": "item-meta" }, [row[2] + " · " + row[3] + " · " + row[4]]);
        results.appendChild(el("li", { "class": "item", "data-record-id": row[5] }, [link, meta]));
      });
      var complete = meta && chunks.filter(Boolean).length >= meta.chunks;
      status.textContent = answer.total === 0
        ? (complete ? "No error matches “" + query + "”." : "Searching…")
        : answer.total + (answer.total === 1 ? " error matches" : " errors match") +
          (answer.total > answer.rows.length ? "; showing the first " + answer.rows.length : "") +
          (complete ? "." : " so far…");
      results.hidden = false;
      fallback.hidden = true;
      status.setAttribute("data-done", complete ? "true" : "false");
    }

    function run() {
      var query = input.value;
      var mine = ++generation;
      var url = new URL(location.href);
      if (query.trim()) url.searchParams.set("q", query); else url.searchParams.delete("q");
      history.replaceState(null, "", url);
      if (!query.trim()) {
        results.hidden = true;
        fallback.hidden = false;
        status.textContent = "";
        return;
      }
      render(query);
      loadAll(function () { if (mine === generation) render(query); }).then(function () {
        if (mine === generation) render(query);
      }, function () {
        status.textContent = location.protocol === "file:"
          ? "Search needs the site served over HTTP; browse the list below instead."
          : "The search index could not be loaded; browse the list below instead.";
        results.hidden = true;
        fallback.hidden = false;
      });
    }

    var timer = null;
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(run, 150);
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      clearTimeout(timer);
      run();
    });
    var initial = new URL(location.href).searchParams.get("q");
    if (initial) {
      input.value = initial;
      run();
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
