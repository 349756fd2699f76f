package sim

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// WriteTimeFigure draws its panels with their titles, lines and axis, and
// refuses what it cannot draw.
func TestWriteTimeFigure(t *testing.T) {
	fig := TimeFigure{XLabel: "minutes from noon", XStep: 5, Panels: []TimePanel{
		{Title: "calls per 5 minutes", YLabel: "calls", Counts: true, Level: 40, LevelLabel: "limit 40",
			Lines: []TimeSeries{{Name: "tenant a", Values: []float64{1, 30, 2}}, {Name: "tenant b", Values: []float64{0, 0, 0}}}},
		{Title: "nothing", Lines: []TimeSeries{{Name: "empty"}}},
	}}
	svg, err := InlineSVG(func(w io.Writer) error { return WriteTimeFigure(w, fig, SVG) })
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "calls per 5 minutes", "minutes from noon", "tenant a", "tenant b (all 0)", "limit 40", "nothing — none in this figure", ">10<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the figure lacks %q", want)
		}
	}
	var png bytes.Buffer
	if err := WriteTimeFigure(&png, fig, PNG); err != nil || !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")) {
		t.Errorf("PNG: %v, %d bytes", err, png.Len())
	}
	for _, bad := range []TimeFigure{{}, {XStep: -1, Panels: fig.Panels}, {Panels: make([]TimePanel, maxFigurePanels+1)},
		{Panels: []TimePanel{{Lines: []TimeSeries{{Values: make([]float64, maxFigurePoints+1)}}}}}} {
		if err := WriteTimeFigure(&png, bad, SVG); err == nil {
			t.Errorf("%d panels, step %v: no error", len(bad.Panels), bad.XStep)
		}
	}
	if err := WriteTimeFigure(&png, fig, "gif"); err == nil {
		t.Error("gif: no error")
	}
}
