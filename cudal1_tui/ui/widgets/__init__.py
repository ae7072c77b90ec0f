"""The app's widgets: header, banner, progress strip, variants table, chart, detail tabs."""
