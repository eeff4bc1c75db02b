// Unpacks plotly.js, draws the inlined figures, and makes the trial table sortable and
// filterable from mouse and keyboard. Nothing is fetched from the network.
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("tfperf-charts").textContent);
  var config = { displaylogo: false, responsive: true };
  var NARROW = window.matchMedia("(max-width: 640px)");
  var PRINT_WIDTH = 680; // px: A4 or Letter, portrait, within default margins

  // plotly.js travels gzipped and base64-encoded (a quarter of its size); the browser's own
  // DecompressionStream unpacks it, so the report needs no network and no extra library.
  function loadPlotly() {
    var packed = document.getElementById("tfperf-plotly");
    if (window.Plotly || !packed) { return Promise.resolve(); }
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot unpack the charts (it lacks " +
        "DecompressionStream: use Chrome 80, Firefox 113, Safari 16.4 or later)"));
    }
    var text = atob(packed.textContent.trim());
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (code) { (0, eval)(code); });
  }

  // On a phone: legends below the plot, tighter margins. Titles are drawn as HTML above each
  // chart everywhere, so they wrap instead of being cut at the plot's edge.
  function fitLayout(element, layout) {
    var title = layout.title && layout.title.text;
    if (title && !element.previousElementSibling?.classList.contains("chart-title")) {
      var caption = document.createElement("p");
      caption.className = "chart-title";
      caption.textContent = title;
      element.parentNode.insertBefore(caption, element);
    }
    var fitted = Object.assign({}, layout, { title: { text: "" } });
    // A figure that keeps its margins (parallel coordinates) needs them for its axis names.
    var keep = layout.meta && layout.meta.keep_margin;
    if (!keep) { fitted.margin = Object.assign({}, layout.margin || {}, { t: 30 }); }
    if (NARROW.matches) {
      fitted.legend = { orientation: "h", x: 0, xanchor: "left", y: -0.25, yanchor: "top" };
      if (!keep) { fitted.margin = { l: 50, r: 10, t: 20, b: 90 }; }
      fitted.height = Math.max(layout.height || 360, 320);
    }
    return fitted;
  }

  // On a phone the toolbar would sit over the legend and axis labels, and a finger cannot
  // hover to reveal it only when wanted: the page's own pinch-zoom replaces it there.
  function configFor() {
    return Object.assign({}, config, { displayModeBar: !NARROW.matches && "hover" });
  }

  function draw() {
    document.querySelectorAll("[data-chart]").forEach(function (element) {
      var figure = figures[element.dataset.chart];
      if (!figure) {
        fail(element, "This chart's data is missing from the report.");
        console.error("tfperf: no figure named " + element.dataset.chart);
        return;
      }
      Plotly.newPlot(element, figure.data, fitLayout(element, figure.layout), configFor()).then(
        function () { element.dataset.drawn = "true"; });
    });
  }

  function fail(element, message) {
    element.textContent = message;
    element.className += " chart-error";
  }

  // Charts are drawn at the screen's width; a printed page is narrower, so redraw them to fit.
  function plotted() { return document.querySelectorAll(".js-plotly-plot"); }
  function forPrint() {
    plotted().forEach(function (element) { Plotly.relayout(element, { width: PRINT_WIDTH }); });
  }
  function forScreen() {
    plotted().forEach(function (element) {
      Plotly.relayout(element, { width: null }).then(function () { Plotly.Plots.resize(element); });
    });
  }

  loadPlotly().then(function () {
    draw();
    window.addEventListener("beforeprint", forPrint);
    window.addEventListener("afterprint", forScreen);
    window.matchMedia("print").addEventListener("change", function (query) {
      if (query.matches) { forPrint(); } else { forScreen(); }
    });
  }, function (error) {
    document.querySelectorAll("[data-chart]").forEach(function (element) {
      fail(element, "The charts cannot be drawn: " + error.message + ". Each chart's data is in the table below it.");
    });
    console.error("tfperf: " + error.message);
  });

  function cellValue(row, column) {
    var cell = row.children[column];
    return cell ? cell.getAttribute("data-value") || cell.textContent : "";
  }

  function sortBy(table, header) {
    var column = Array.prototype.indexOf.call(header.parentNode.children, header);
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var numeric = header.dataset.sort === "number";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, column), y = cellValue(b, column);
      var order = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y, undefined, { numeric: true });
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    header.parentNode.querySelectorAll("th").forEach(function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th[data-sort]").forEach(function (header) {
      header.addEventListener("click", function () { sortBy(table, header); });
      header.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          sortBy(table, header);
        }
      });
    });
  });

  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var text = document.getElementById(button.dataset.copy).textContent;
      navigator.clipboard.writeText(text).then(function () { button.textContent = "Copied"; });
    });
  });

  var filter = document.getElementById("host-filter");
  if (filter) {
    filter.addEventListener("change", function () {
      document.querySelectorAll("#trial-table tbody tr").forEach(function (row) {
        row.hidden = filter.value !== "" && row.dataset.host !== filter.value;
      });
    });
  }
})();
