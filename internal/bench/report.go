package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteResults writes results.json (everything), results.csv (one row per
// measure), a PNG per chart and report.md (the tables, the charts and the
// checks) into opts.Out.
func WriteResults(rs []*Result, opts Options) error {
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(opts.Out, "results.csv"), rs); err != nil {
		return err
	}
	for _, r := range rs {
		for _, c := range r.Charts {
			if err := drawChart(filepath.Join(opts.Out, c.File), r, c); err != nil {
				return fmt.Errorf("chart %s: %w", c.File, err)
			}
		}
	}
	return os.WriteFile(filepath.Join(opts.Out, "report.md"), []byte(Report(rs, opts)), 0o644)
}

func writeCSV(path string, rs []*Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"experiment", "series", "x_label", "x", "metric", "unit", "n", "mean", "std", "values"})
	for _, r := range rs {
		for _, m := range r.Measures {
			vs := make([]string, len(m.Values))
			for i, v := range m.Values {
				vs[i] = num(v)
			}
			_ = w.Write([]string{r.Experiment, m.Series, r.XLabel, num(m.X), m.Metric, m.Unit,
				strconv.Itoa(len(m.Values)), num(m.Mean), num(m.Std), strings.Join(vs, ";")})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// Report is the Markdown report: per experiment its setup, a table of
// every metric (mean ± standard deviation over the repetitions), its
// charts and its checks.
func Report(rs []*Result, opts Options) string {
	var b strings.Builder
	b.WriteString("# roam benchmark report\n\n")
	fmt.Fprintf(&b, "Command: `%s`\n\n", opts.Command)
	if len(rs) > 0 {
		fmt.Fprintf(&b, "Started %s; repetitions per point: %d%s.\n\n", rs[0].Started.Format("2006-01-02 15:04:05"), rs[0].Reps,
			map[bool]string{true: " (quick: small work, for CI)"}[rs[0].Quick])
	}
	for _, r := range rs {
		fmt.Fprintf(&b, "## %s — %s\n\n", r.Experiment, r.Title)
		fmt.Fprintf(&b, "Reproduces: %s.\n\n%s\n\n", r.Seed, r.About)
		if r.Setup != "" {
			fmt.Fprintf(&b, "Setup: %s\n\n", r.Setup)
		}
		b.WriteString(Table(r))
		b.WriteString("\n")
		for _, c := range r.Charts {
			fmt.Fprintf(&b, "![%s](%s)\n\n", c.Title, c.File)
		}
		if len(r.Checks) > 0 {
			b.WriteString("Checks:\n\n")
			for _, c := range r.Checks {
				mark := "ok"
				if !c.OK {
					mark = "FAILED"
				}
				fmt.Fprintf(&b, "- %s: %s — %s\n", mark, c.Name, c.Detail)
			}
			b.WriteString("\n")
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "Note: %s\n\n", n)
		}
		fmt.Fprintf(&b, "Took %.0f s.\n\n", r.Seconds)
	}
	return b.String()
}

// Table is an experiment's measures as a Markdown table: a row per series
// and x, a column per metric.
func Table(r *Result) string {
	type key struct {
		series string
		x      float64
	}
	var keys []key
	seen := map[key]bool{}
	var metrics []string
	units := map[string]string{}
	for _, m := range r.Measures {
		if slices.Contains(r.Pivot, m.Metric) {
			continue
		}
		k := key{m.Series, m.X}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		if _, ok := units[m.Metric]; !ok {
			metrics = append(metrics, m.Metric)
			units[m.Metric] = m.Unit
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].series != keys[j].series {
			return seriesOrder(r, keys[i].series) < seriesOrder(r, keys[j].series)
		}
		return keys[i].x < keys[j].x
	})
	var b strings.Builder
	b.WriteString("| series | " + r.XLabel)
	for _, m := range metrics {
		if units[m] != "" {
			fmt.Fprintf(&b, " | %s (%s)", m, units[m])
		} else {
			fmt.Fprintf(&b, " | %s", m)
		}
	}
	b.WriteString(" |\n|---|---")
	for range metrics {
		b.WriteString("|---")
	}
	b.WriteString("|\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s", k.series, num(k.x))
		for _, m := range metrics {
			if ms := r.Get(k.series, k.x, m); ms != nil {
				fmt.Fprintf(&b, " | %s", cell(ms))
			} else {
				b.WriteString(" | ")
			}
		}
		b.WriteString(" |\n")
	}
	for _, m := range r.Pivot {
		b.WriteString("\n" + pivotTable(r, m))
	}
	return b.String()
}

// pivotTable is one metric's table: a row per series, a column per x.
func pivotTable(r *Result, metric string) string {
	var series []string
	var xs []float64
	unit := ""
	for _, m := range r.Measures {
		if m.Metric != metric {
			continue
		}
		unit = m.Unit
		if !slices.Contains(series, m.Series) {
			series = append(series, m.Series)
		}
		if !slices.Contains(xs, m.X) {
			xs = append(xs, m.X)
		}
	}
	if len(series) == 0 {
		return ""
	}
	slices.Sort(xs)
	var b strings.Builder
	fmt.Fprintf(&b, "| %s", metric)
	if unit != "" {
		fmt.Fprintf(&b, " (%s)", unit)
	}
	for _, x := range xs {
		fmt.Fprintf(&b, " | %s %s", r.XLabel, num(x))
	}
	b.WriteString(" |\n|---")
	for range xs {
		b.WriteString("|---")
	}
	b.WriteString("|\n")
	for _, s := range series {
		fmt.Fprintf(&b, "| %s", s)
		for _, x := range xs {
			if ms := r.Get(s, x, metric); ms != nil {
				fmt.Fprintf(&b, " | %s", cell(ms))
			} else {
				b.WriteString(" | ")
			}
		}
		b.WriteString(" |\n")
	}
	return b.String()
}

// cell is mean ± std with as many digits as the size asks for.
func cell(m *Measure) string {
	f := func(v float64) string {
		a := v
		if a < 0 {
			a = -a
		}
		switch {
		case a >= 100:
			return strconv.FormatFloat(v, 'f', 0, 64)
		case a >= 10:
			return strconv.FormatFloat(v, 'f', 1, 64)
		default:
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
	}
	if len(m.Values) < 2 {
		return f(m.Mean)
	}
	return f(m.Mean) + " ± " + f(m.Std)
}

// seriesOrder keeps series in the order they were first measured.
func seriesOrder(r *Result, s string) int {
	for i, m := range r.Measures {
		if m.Series == s {
			return i
		}
	}
	return len(r.Measures)
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
}

// drawChart draws one chart: a line with points and error bars (± one
// standard deviation) per series; a series named "ideal..." is drawn grey
// and dashed, without points.
func drawChart(path string, r *Result, c Chart) error {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(6)
	p.Add(plotter.NewGrid())
	// A tick at every measured x, labelled as measured.
	var ticks []plot.Tick
	xs := map[float64]bool{}
	for _, m := range r.Measures {
		if m.Metric == c.Metric && !xs[m.X] {
			xs[m.X] = true
			ticks = append(ticks, plot.Tick{Value: m.X, Label: num(m.X)})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	var series []string
	seen := map[string]bool{}
	for _, m := range r.Measures {
		if m.Metric == c.Metric && !seen[m.Series] && (c.Only == "" || strings.Contains(m.Series, c.Only)) {
			seen[m.Series] = true
			series = append(series, m.Series)
		}
	}
	if len(series) == 0 {
		return fmt.Errorf("no measure of %q", c.Metric)
	}
	ci := 0
	for _, s := range series {
		var pts plotter.XYs
		var errs plotter.YErrors
		for _, m := range r.Measures {
			if m.Metric == c.Metric && m.Series == s {
				pts = append(pts, plotter.XY{X: m.X, Y: m.Mean})
				errs = append(errs, struct{ Low, High float64 }{m.Std, m.Std})
			}
		}
		order := make([]int, len(pts))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return pts[order[a]].X < pts[order[b]].X })
		sp, se := make(plotter.XYs, len(pts)), make(plotter.YErrors, len(pts))
		for i, o := range order {
			sp[i], se[i] = pts[o], errs[o]
		}
		label := s
		if strings.HasPrefix(s, "ideal") {
			l, err := plotter.NewLine(sp)
			if err != nil {
				return err
			}
			l.Color = color.Gray{0x70}
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(4)}
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(label, l)
			continue
		}
		col := palette[ci%len(palette)]
		ci++
		l, pt, err := plotter.NewLinePoints(sp)
		if err != nil {
			return err
		}
		l.Color, l.Width = col, vg.Points(2)
		pt.Color, pt.Shape, pt.Radius = col, draw.CircleGlyph{}, vg.Points(3)
		p.Add(l, pt)
		if hasSpread(se) {
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYer
				plotter.YErrorer
			}{sp, se})
			if err == nil {
				eb.Color = col
				p.Add(eb)
			}
		}
		p.Legend.Add(label, l, pt)
	}
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

func hasSpread(e plotter.YErrors) bool {
	for _, x := range e {
		if x.Low > 0 {
			return true
		}
	}
	return false
}

// Rewrite reads the results.json in dir and writes its CSV, charts and
// report again (after a change to how they are drawn, or to look at a run
// that was stopped).
func Rewrite(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var rs []*Result
	if err := json.Unmarshal(b, &rs); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	cmd := ""
	if md, err := os.ReadFile(filepath.Join(dir, "report.md")); err == nil {
		if _, rest, ok := strings.Cut(string(md), "Command: `"); ok {
			cmd, _, _ = strings.Cut(rest, "`")
		}
	}
	return WriteResults(rs, Options{Out: dir, Command: cmd})
}
