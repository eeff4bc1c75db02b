var Plotly = require('plotly.js/lib/core');
Plotly.register([
  require('plotly.js/lib/bar'),
  require('plotly.js/lib/histogram'),
  require('plotly.js/lib/parcoords'),
]);
window.Plotly = Plotly;
