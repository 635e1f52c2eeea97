package plots

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// rot2 is the 2-D rotation by angle a.
func rot2(a float64) [9]float64 {
	c, s := math.Cos(a), math.Sin(a)
	return [9]float64{c, -s, s, c}
}

// rot3 is the 3-D rotation by angle a about the unit axis u (Rodrigues).
func rot3(u [3]float64, a float64) [9]float64 {
	c, s := math.Cos(a), math.Sin(a)
	var r [9]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			r[i*3+j] = (1 - c) * u[i] * u[j]
			if i == j {
				r[i*3+j] += c
			}
		}
	}
	r[1] -= s * u[2]
	r[2] += s * u[1]
	r[3] += s * u[2]
	r[5] -= s * u[0]
	r[6] -= s * u[1]
	r[7] += s * u[0]
	return r
}

func randomRot3(rng *rand.Rand) [9]float64 {
	u := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	l := math.Sqrt(u[0]*u[0] + u[1]*u[1] + u[2]*u[2])
	return rot3([3]float64{u[0] / l, u[1] / l, u[2] / l}, rng.Float64()*math.Pi)
}

// EdgeCosts against a hand computation: in 2-D, pose 0 at the origin
// facing +x, pose 1 at (1, 2) turned by 90 degrees; the edge measures a
// turn of 60 degrees and a step (1, 0). Then
//
//	R_1 - R_0 R_e = rot(90) - rot(60): ||.||_F^2 = 2 ||(cos 90 - cos 60, sin 90 - sin 60)||^2
//	             = 2 ((0 - 1/2)^2 + (1 - sqrt3/2)^2) = 2 (2 - sqrt3) = 4 - 2 sqrt3
//	t_1 - t_0 - R_0 t_e = (1, 2) - (1, 0) = (0, 2): ||.||^2 = 4
//
// so with kappa = 3, tau = 0.5 the cost is 3 (4 - 2 sqrt3) + 2.
func TestEdgeCostsByHand(t *testing.T) {
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1}, Edges: []posegraph.Edge{
		{I: 0, J: 1, R: rot2(math.Pi / 3), T: [3]float64{1, 0}, Kappa: 3, Tau: 0.5},
	}}
	x := []posegraph.Pose{posegraph.Identity(2), {R: rot2(math.Pi / 2), T: [3]float64{1, 2}}}
	c, err := EdgeCosts(nil, g, x, posegraph.Poses)
	if err != nil {
		t.Fatal(err)
	}
	want := 3*(4-2*math.Sqrt(3)) + 0.5*4
	if math.Abs(c[0]-want) > 1e-12 {
		t.Errorf("SE(2) cost %.15g, want %.15g", c[0], want)
	}
	c, err = EdgeCosts(c, g, x, posegraph.Rotations)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * (4 - 2*math.Sqrt(3)); math.Abs(c[0]-want) > 1e-12 {
		t.Errorf("SO(2) cost %.15g, want %.15g", c[0], want)
	}

	// 3-D: pose 1 turned by 90 degrees about z at (0, 0, 1), seen from an
	// identity pose 0 through an identity measurement with step (0, 0, 3):
	// ||rot_z(90) - I||_F^2 = 2 ((0 - 1)^2 + 1^2) = 4 and ||(0, 0, 1 - 3)||^2 = 4.
	g3 := &posegraph.Graph{D: 3, IDs: []int{0, 1}, Edges: []posegraph.Edge{
		{I: 0, J: 1, R: posegraph.Identity(3).R, T: [3]float64{0, 0, 3}, Kappa: 2, Tau: 5},
	}}
	x3 := []posegraph.Pose{posegraph.Identity(3), {R: rot3([3]float64{0, 0, 1}, math.Pi/2), T: [3]float64{0, 0, 1}}}
	c, err = EdgeCosts(nil, g3, x3, posegraph.Poses)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*4.0 + 5*4.0; math.Abs(c[0]-want) > 1e-12 {
		t.Errorf("SE(3) cost %.15g, want %.15g", c[0], want)
	}
}

// The costs of a random graph sum to posegraph's Cost, which evaluates the
// whole objective independently.
func TestEdgeCostsSumToCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, d := range []int{2, 3} {
		const n = 12
		g := &posegraph.Graph{D: d}
		x := make([]posegraph.Pose, n)
		for i := range x {
			g.IDs = append(g.IDs, i)
			if d == 2 {
				x[i].R = rot2(rng.Float64() * 6)
			} else {
				x[i].R = randomRot3(rng)
			}
			for a := 0; a < d; a++ {
				x[i].T[a] = rng.NormFloat64() * 3
			}
		}
		for k := 0; k < 30; k++ {
			i, j := rng.IntN(n), rng.IntN(n)
			if i == j {
				continue
			}
			e := posegraph.Edge{I: i, J: j, Kappa: 0.5 + rng.Float64(), Tau: 0.5 + rng.Float64()}
			if d == 2 {
				e.R = rot2(rng.Float64() * 6)
			} else {
				e.R = randomRot3(rng)
			}
			for a := 0; a < d; a++ {
				e.T[a] = rng.NormFloat64()
			}
			g.Edges = append(g.Edges, e)
		}
		for _, p := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
			c, err := EdgeCosts(nil, g, x, p)
			if err != nil {
				t.Fatal(err)
			}
			sum := 0.0
			for _, v := range c {
				if v < 0 {
					t.Fatalf("negative cost %g", v)
				}
				sum += v
			}
			if want := g.Cost(x, p); math.Abs(sum-want) > 1e-10*want {
				t.Errorf("d=%d %v: costs sum to %.15g, Cost is %.15g", d, p, sum, want)
			}
		}
	}
}

func TestEdgeCostsErrors(t *testing.T) {
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1}, Edges: []posegraph.Edge{{I: 0, J: 5, Kappa: 1, Tau: 1}}}
	if _, err := EdgeCosts(nil, g, make([]posegraph.Pose, 1), posegraph.Poses); err == nil {
		t.Error("1 pose for a graph of 2: no error")
	}
	if _, err := EdgeCosts(nil, g, make([]posegraph.Pose, 2), posegraph.Poses); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("edge to pose 5 of 2: %v", err)
	}
	if _, err := EdgeCosts(nil, nil, nil, posegraph.Poses); err == nil {
		t.Error("nil graph: no error")
	}
}

var dataRE = regexp.MustCompile(`(?s)<script type="application/json" id="viewer-data">(.*?)</script>`)

// pageJSON writes v's page and returns the page and its data, decoded.
func pageJSON(t *testing.T, v Viewer) (string, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, v); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	m := dataRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no data element in the page")
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(m[1]), &data); err != nil {
		t.Fatalf("data element: %v", err)
	}
	return page, data
}

// A title that tries to end the data element, or the page's script, or
// to look like one of the template's markers, reaches the page as text.
func TestWriteHTMLEscaping(t *testing.T) {
	g, truth, _ := helixGraph(2, 20)
	for _, title := range []string{
		`evil</script><script>alert(1)</script>.g2o`,
		`a</SCRIPT >&<!--b-->.g2o`,
		"{{DATA}} {{JS}} \u2028\u2029 \"quoted\" 'single'.g2o",
	} {
		page, data := pageJSON(t, Viewer{Title: title, Graph: g, Estimates: []Trajectory{{Label: "x</script>", Poses: truth}}})
		if data["title"] != title {
			t.Errorf("title %q came back as %q", title, data["title"])
		}
		// The page has exactly its two script elements: the data and the code.
		if got := strings.Count(strings.ToLower(page), "</script"); got != 2 {
			t.Errorf("title %q: the page has %d script ends, want 2", title, got)
		}
		if got := strings.Count(page, "<script"); got != 2 {
			t.Errorf("title %q: the page has %d script starts, want 2", title, got)
		}
		if !strings.Contains(page, "<title>") || strings.Contains(page, "<title>"+title) {
			t.Errorf("title %q is not escaped in <title>", title)
		}
	}
}

// The style sheet and the script are inlined verbatim, so neither may
// contain what would end its element, nor any reference to the network.
func TestPageIsSelfContained(t *testing.T) {
	for name, text := range map[string]string{"viewer.js": pageJS, "viewer.css": pageCSS, "page.html": pageTemplate} {
		low := strings.ToLower(text)
		if name != "page.html" && (strings.Contains(low, "</script") || strings.Contains(low, "</style")) {
			t.Errorf("%s would end its element early", name)
		}
		for _, bad := range []string{"http://", "https://", "//cdn", "@import", "fetch(", "xmlhttprequest", "src="} {
			if strings.Contains(low, bad) {
				t.Errorf("%s contains %q: the page must not need the network", name, bad)
			}
		}
	}
	for _, marker := range []string{"{{TITLE}}", "{{CSS}}", "{{JS}}", "{{DATA}}"} {
		if strings.Count(pageTemplate, marker) != 1 {
			t.Errorf("page.html has %d %s markers, want 1", strings.Count(pageTemplate, marker), marker)
		}
	}
}

// The data holds what the page draws: loop-closure flags, positions,
// headings and costs per estimate, and the history.
func TestPageData(t *testing.T) {
	g, truth, guess := helixGraph(3, 40)
	gap := 0.5
	v := Viewer{
		Title: "helix.g2o", Graph: g,
		Estimates: []Trajectory{{Label: "initial", Poses: guess}, {Label: "optimized", Poses: truth}},
		Run: &Run{Status: "certified", Certified: true, Objective: 12.5, SuboptimalityBound: &gap, Rank: 3,
			History: []Step{
				{Rank: 3, Phase: "bcm", Iter: 0, Seconds: 0.1, F: 20, RelGrad: 1e-2},
				{Rank: 3, Phase: "rtr", Iter: 1, Seconds: 0.2, F: math.NaN(), RelGrad: 1e-3}, // dropped
				{Rank: 3, Phase: "rtr", Iter: 2, Seconds: 0.3, F: 12.5, RelGrad: 1e-9},
			},
			Levels: []LevelCheck{{Rank: 3, Certified: true}}},
	}
	_, data := pageJSON(t, v)
	if data["d"].(float64) != 3 || data["n"].(float64) != 40 || data["m"].(float64) != float64(g.M()) || data["problem"] != "SE(3)" {
		t.Errorf("header fields: d=%v n=%v m=%v problem=%v", data["d"], data["n"], data["m"], data["problem"])
	}
	loop := data["loop"].([]any)
	edges := data["edges"].([]any)
	for k, e := range g.Edges {
		want := 0.0
		if e.J-e.I != 1 {
			want = 1
		}
		if loop[k].(float64) != want || edges[2*k].(float64) != float64(e.I) || edges[2*k+1].(float64) != float64(e.J) {
			t.Fatalf("edge %d (%d, %d): page has (%v, %v) loop %v", k, e.I, e.J, edges[2*k], edges[2*k+1], loop[k])
		}
	}
	ests := data["estimates"].([]any)
	if len(ests) != 2 {
		t.Fatalf("%d estimates", len(ests))
	}
	for k, tr := range v.Estimates {
		e := ests[k].(map[string]any)
		pos, head, cost := e["pos"].([]any), e["head"].([]any), e["cost"].([]any)
		if len(pos) != 3*40 || len(head) != 3*40 || len(cost) != g.M() {
			t.Fatalf("estimate %d: %d positions, %d headings, %d costs", k, len(pos), len(head), len(cost))
		}
		for i, p := range tr.Poses {
			for a := 0; a < 3; a++ {
				if got := pos[3*i+a].(float64); math.Abs(got-p.T[a]) > 1e-6*math.Max(1, math.Abs(p.T[a])) {
					t.Fatalf("estimate %d pose %d coordinate %d: %v, want %v", k, i, a, got, p.T[a])
				}
				// Heading: R e_1, the first column.
				if got := head[3*i+a].(float64); math.Abs(got-p.R[3*a]) > 1e-3 {
					t.Fatalf("estimate %d pose %d heading %d: %v, want %v", k, i, a, got, p.R[3*a])
				}
			}
		}
		want, _ := EdgeCosts(nil, g, tr.Poses, posegraph.Poses)
		total := 0.0
		for j, c := range want {
			total += c
			if got := cost[j].(float64); math.Abs(got-c) > 5e-4*math.Abs(c) { // 4 significant digits
				t.Fatalf("estimate %d edge %d cost %v, want %v", k, j, got, c)
			}
		}
		if got := e["total"].(float64); math.Abs(got-total) > 1e-12*math.Max(1, total) {
			t.Errorf("estimate %d total %v, want %v", k, got, total)
		}
	}
	run := data["run"].(map[string]any)
	h := run["history"].(map[string]any)
	if f := h["f"].([]any); len(f) != 2 || f[1].(float64) != 12.5 {
		t.Errorf("history F %v, want the two finite records", f)
	}
	if b := h["bcm"].([]any); b[0].(float64) != 1 || b[1].(float64) != 0 {
		t.Errorf("history phases %v", b)
	}
	if run["dual_bound"] != nil || run["gap"].(float64) != 0.5 || run["certified"] != true {
		t.Errorf("run: dual %v gap %v certified %v", run["dual_bound"], run["gap"], run["certified"])
	}
}

// For rotations the page lays poses out by composing the edges'
// translations with the estimate's rotations: with the true rotations of
// a noise-free graph that is the true trajectory.
func TestRotationLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{2, 3} {
		const n = 30
		g := &posegraph.Graph{D: d}
		x := make([]posegraph.Pose, n)
		for i := range x {
			g.IDs = append(g.IDs, 100+i)
			if d == 2 {
				x[i].R = rot2(rng.Float64() * 6)
			} else {
				x[i].R = randomRot3(rng)
			}
			for a := 0; a < d; a++ {
				x[i].T[a] = rng.NormFloat64() * 4
			}
		}
		// Exact measurements: a chain plus random closures, some of them
		// pointing backwards.
		add := func(i, j int) {
			e := posegraph.Edge{I: i, J: j, Kappa: 1, Tau: 1}
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					for k := 0; k < d; k++ {
						e.R[a*d+c] += x[i].R[k*d+a] * x[j].R[k*d+c]
					}
					e.T[a] += x[i].R[c*d+a] * (x[j].T[c] - x[i].T[c])
				}
			}
			g.Edges = append(g.Edges, e)
		}
		for i := 1; i < n; i++ {
			add(i-1, i)
		}
		for k := 0; k < 10; k++ {
			i, j := rng.IntN(n), rng.IntN(n)
			if i != j {
				add(i, j)
			}
		}
		// Anchor at pose 5, which keeps its VERTEX position.
		g.Fixed = []int{5}
		g.Initial = make([]posegraph.Pose, n)
		g.HasInitial = make([]bool, n)
		g.Initial[5], g.HasInitial[5] = x[5], true
		pos, how := RotationLayout(g, x)
		if !strings.Contains(how, "spanning tree") {
			t.Errorf("layout %q", how)
		}
		for i := range pos {
			for a := 0; a < d; a++ {
				if math.Abs(pos[i][a]-x[i].T[a]) > 1e-9 {
					t.Fatalf("d=%d pose %d: layout %v, want %v", d, i, pos[i], x[i].T)
				}
			}
		}
	}
	// No translations and no VERTEX lines: a circle.
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1, 2}, Edges: []posegraph.Edge{{I: 0, J: 1, Kappa: 1, Tau: 1}, {I: 1, J: 2, Kappa: 1, Tau: 1}}}
	x := []posegraph.Pose{posegraph.Identity(2), posegraph.Identity(2), posegraph.Identity(2)}
	pos, how := RotationLayout(g, x)
	if !strings.Contains(how, "circle") || math.Abs(math.Hypot(pos[1][0], pos[1][1])-1) > 1e-12 {
		t.Errorf("layout %q %v", how, pos)
	}
}

func TestWriteHTMLErrors(t *testing.T) {
	g, truth, _ := helixGraph(2, 10)
	bad := append([]posegraph.Pose(nil), truth...)
	bad[3].T[1] = math.Inf(1)
	badR := append([]posegraph.Pose(nil), truth...)
	badR[4].R[0] = math.NaN()
	for name, v := range map[string]Viewer{
		"no graph":           {Estimates: []Trajectory{{Poses: truth}}},
		"no estimate":        {Graph: g},
		"short estimate":     {Graph: g, Estimates: []Trajectory{{Poses: truth[:5]}}},
		"infinite position":  {Graph: g, Estimates: []Trajectory{{Poses: bad}}},
		"non-finite heading": {Graph: g, Estimates: []Trajectory{{Poses: badR}}},
	} {
		var buf bytes.Buffer
		err := WriteHTML(&buf, v)
		if err == nil || !strings.HasPrefix(err.Error(), "plots: ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// A single pose without edges is a valid page: nothing to colour, no
// loop closures, no history.
func TestWriteHTMLSinglePose(t *testing.T) {
	g := &posegraph.Graph{D: 3, IDs: []int{42}}
	_, data := pageJSON(t, Viewer{Title: "one.g2o", Graph: g, Estimates: []Trajectory{{Label: "x", Poses: []posegraph.Pose{posegraph.Identity(3)}}}})
	if data["n"].(float64) != 1 || len(data["edges"].([]any)) != 0 || data["run"] != nil {
		t.Errorf("n %v edges %v run %v", data["n"], data["edges"], data["run"])
	}
}

// TestPagePositionsFarFromOrigin: a trajectory in a georeferenced frame
// (UTM northings are millions of metres) keeps its centimetres on the
// page. Seven significant digits, enough near the origin, would round
// 5000000.37 to 5000000 and draw a 1-metre staircase.
func TestPagePositionsFarFromOrigin(t *testing.T) {
	const n = 5
	g := &posegraph.Graph{D: 2, IDs: make([]int, n)}
	poses := make([]posegraph.Pose, n)
	for i := range poses {
		g.IDs[i] = i
		poses[i] = posegraph.Identity(2)
		poses[i].T = [3]float64{5e6 + 0.37*float64(i), -4e5 - 0.11*float64(i)}
		if i > 0 {
			g.Edges = append(g.Edges, posegraph.Edge{I: i - 1, J: i, R: posegraph.Identity(2).R, Kappa: 1, Tau: 1})
		}
	}
	_, data := pageJSON(t, Viewer{Title: "utm", Graph: g, Estimates: []Trajectory{{Label: "x", Poses: poses}}})
	pos := data["estimates"].([]any)[0].(map[string]any)["pos"].([]any)
	for i := 0; i < n; i++ {
		for a := 0; a < 2; a++ {
			got, want := pos[2*i+a].(float64), poses[i].T[a]
			// A micrometre: far below a pixel of the 1.5 m trajectory.
			if math.Abs(got-want) > 1e-6 {
				t.Errorf("pose %d coordinate %d: %.10g on the page, %.10g given", i, a, got, want)
			}
		}
	}
}

// TestPageRejected: a robust solve's rejected edges are drawn but left out
// of each estimate's F (a robust solve's F is over the edges it kept), and
// the page counts them; a list naming a missing edge, or one twice, is an
// error.
func TestPageRejected(t *testing.T) {
	g, truth, guess := helixGraph(2, 30)
	rejected := []int{3, g.M() - 1}
	v := Viewer{Graph: g, Rejected: rejected,
		Estimates: []Trajectory{{Label: "initial", Poses: guess}, {Label: "optimized", Poses: truth}}}
	_, data := pageJSON(t, v)
	if data["rejected"].(float64) != 2 || len(data["edges"].([]any)) != 2*g.M() {
		t.Fatalf("rejected %v, %d edge ends", data["rejected"], len(data["edges"].([]any)))
	}
	for k, e := range data["estimates"].([]any) {
		cost, err := EdgeCosts(nil, g, v.Estimates[k].Poses, posegraph.Poses)
		if err != nil {
			t.Fatal(err)
		}
		want := 0.0
		for j, c := range cost {
			if j != rejected[0] && j != rejected[1] {
				want += c
			}
		}
		if got := e.(map[string]any)["total"].(float64); math.Abs(got-want) > 1e-12*want || want == g.Cost(v.Estimates[k].Poses, posegraph.Poses) {
			t.Errorf("estimate %d: F %.15g, want %.15g without the rejected edges", k, got, want)
		}
	}
	for _, bad := range [][]int{{g.M()}, {-1}, {2, 2}} {
		v.Rejected = bad
		if err := WriteHTML(io.Discard, v); err == nil {
			t.Errorf("rejected %v: no error", bad)
		}
	}
}
