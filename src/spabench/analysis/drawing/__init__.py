"""spabench's figure renderer: a canvas of rectangles, lines and text in points (canvas.py), the
font that measures and draws them (fonts.py), and one writer per format (png.py, pdf.py, svg.py)."""
