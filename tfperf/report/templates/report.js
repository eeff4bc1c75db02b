// Draws the inlined figures and makes the trial table sortable and filterable. No network.
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("tfperf-charts").textContent);
  var config = { displaylogo: false, responsive: true };

  document.querySelectorAll("[data-chart]").forEach(function (element) {
    var figure = figures[element.dataset.chart];
    if (!figure) {
      element.textContent = "This chart's data is missing from the report.";
      element.className += " chart-error";
      console.error("tfperf: no figure named " + element.dataset.chart);
      return;
    }
    Plotly.newPlot(element, figure.data, figure.layout, config).then(function () {
      element.dataset.drawn = "true";
    });
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
