package distributed

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

func testGraph(t *testing.T, d int) *posegraph.Graph {
	t.Helper()
	cfg := datasets.Config{Kappa: 30, Tau: 4, LoopProb: 0.4, Seed: 9}
	var g *posegraph.Graph
	var err error
	if d == 2 {
		g, _, err = datasets.Manhattan(80, 6, cfg)
	} else {
		g, _, err = datasets.Cube(3, 3, 3, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Each agent's rows of Q, assembled from its incident edges only, equal
// the rows of the whole graph's Laplacian to the bit; its public poses are exactly
// the other parts' poses it shares an edge with.
func TestLocalRowsMatchLaplacian(t *testing.T) {
	for _, d := range []int{2, 3} {
		for _, kind := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
			g := testGraph(t, d)
			q := g.Laplacian(kind)
			p, _ := BFS(g, 3)
			for k := 0; k < p.K; k++ {
				l, err := newLocal(g, p, k, kind, d, true)
				if err != nil {
					t.Fatal(err)
				}
				b := l.b
				for li, gi := range l.own {
					for pp := l.q.RowPtr[li]; pp < l.q.RowPtr[li+1]; pp++ {
						lj := l.q.ColIdx[pp]
						gj := 0
						if lj < len(l.own) {
							gj = l.own[lj]
						} else {
							gj = l.pub[lj-len(l.own)]
							if p.Part[gj] == k {
								t.Fatalf("public pose %d is the agent's own", gj)
							}
						}
						blk := l.q.Block(pp)
						for a := 0; a < b; a++ {
							for c := 0; c < b; c++ {
								want := q.At(gi*b+a, gj*b+c)
								if math.Float64bits(blk[a*b+c]) != math.Float64bits(want) {
									t.Fatalf("d=%d %v part %d: Q(%d,%d)[%d,%d] = %g, want %g", d, kind, k, gi, gj, a, c, blk[a*b+c], want)
								}
							}
						}
					}
					// Row nonzeros: the local row has every block of Q's row.
					if got, want := l.q.RowPtr[li+1]-l.q.RowPtr[li], q.RowPtr[gi+1]-q.RowPtr[gi]; got != want {
						t.Fatalf("part %d pose %d: %d blocks in the row, Q has %d", k, gi, got, want)
					}
				}
			}
		}
	}
}

// The agents' shares of F add up to F, and their shares of the gradient
// norm to the Riemannian gradient norm computed centrally.
func TestStatsShares(t *testing.T) {
	for _, d := range []int{2, 3} {
		g := testGraph(t, d)
		poses := rounding.Random(g, 4)
		x := g.Lift(poses, posegraph.Poses, d)
		q := g.Laplacian(posegraph.Poses)
		work := sparse.NewBlocks(x.R, x.B, x.N)
		fWant := posegraph.TraceCost(q, x, work)
		p, _ := BFS(g, 4)
		var f, g2 float64
		for k := 0; k < p.K; k++ {
			l, err := newLocal(g, p, k, posegraph.Poses, d, true)
			if err != nil {
				t.Fatal(err)
			}
			for gi, li := range l.globalToLocal {
				copy(l.x.Block(li), x.Block(gi))
			}
			fk, gk, _ := l.stats()
			f += fk
			g2 += gk
		}
		if math.Abs(f-fWant) > 1e-9*fWant {
			t.Errorf("d=%d: shares of F add up to %.12g, F = %.12g", d, f, fWant)
		}
		// Central Riemannian gradient: 2 (N_Y - Y sym(Y^T N_Y), N_p).
		q.MulBlocks(work, x)
		b := x.B
		var gc float64
		for i := 0; i < x.N; i++ {
			xi, ni := x.Block(i), work.Block(i)
			for rr := 0; rr < d; rr++ {
				for c := 0; c < d; c++ {
					s := ni[rr*b+c]
					for a := 0; a < d; a++ {
						var sym float64
						for kk := 0; kk < d; kk++ {
							sym += (xi[kk*b+a]*ni[kk*b+c] + xi[kk*b+c]*ni[kk*b+a]) / 2
						}
						s -= xi[rr*b+a] * sym
					}
					gc += 4 * s * s
				}
				gc += 4 * ni[rr*b+d] * ni[rr*b+d]
			}
		}
		if math.Abs(g2-gc) > 1e-9*gc {
			t.Errorf("d=%d: shares of ||grad||^2 add up to %.12g, central %.12g", d, g2, gc)
		}
	}
}

// Each local step lowers F (the terms at the own poses; the rest does not
// change), from a random start, for every part: pose passes, translation
// steps and trust-region steps alike.
func TestImproveDescends(t *testing.T) {
	for _, d := range []int{2, 3} {
		g := testGraph(t, d)
		poses := rounding.Random(g, 5)
		p, _ := BFS(g, 3)
		for k := 0; k < p.K; k++ {
			l, err := newLocal(g, p, k, posegraph.Poses, d, true)
			if err != nil {
				t.Fatal(err)
			}
			for gi, li := range l.globalToLocal {
				l.setPose(li, poses[gi])
			}
			if err := l.improve(0, 0); err != nil { // makes nothing but translations exact
				t.Fatal(err)
			}
			f := l.block.Cost(l.x)
			for it := 0; it < 6; it++ {
				if err := l.improve(1, 1); err != nil {
					t.Fatal(err)
				}
				fn := l.block.Cost(l.x)
				if fn > f+1e-12*math.Abs(f) {
					t.Fatalf("d=%d part %d step %d: local F rose from %.15g to %.15g", d, k, it, f, fn)
				}
				f = fn
			}
		}
	}
}

func TestWireRoundTripAndRejects(t *testing.T) {
	m := &message{Kind: kindPoses, Part: 3, Run: 77, Seq: 9, Rank: 3, B: 4, Round: 5, F: 1.5,
		Needs: []need{{1, 4}, {2, 8}}, Index: []uint32{10, 11}, Text: "hi"}
	for k := 0; k < 2*3*4; k++ {
		m.Values = append(m.Values, float64(k)/3)
	}
	m.Ints, m.Extra = []uint32{7, 8, 9}, []float64{0.25, -1}
	data := encode(nil, m)
	// One allocation, of the record's size (encodedSize), not a buffer
	// grown by doubling.
	if allocs := testing.AllocsPerRun(10, func() { encode(nil, m) }); len(data) != encodedSize(m) || allocs != 1 {
		t.Fatalf("a record of %d bytes in %v allocations; encodedSize says %d", len(data), allocs, encodedSize(m))
	}
	// Extra sent in two pieces is the same record.
	split := *m
	split.Extra, split.extraTail = m.Extra[:1], m.Extra[1:]
	if two := encode(nil, &split); !slices.Equal(two, data) {
		t.Fatal("Extra sent in two pieces makes another record")
	}
	got, err := decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Part != 3 || got.Run != 77 || got.Seq != 9 || got.Rank != 3 || got.B != 4 || got.Round != 5 || got.F != 1.5 ||
		len(got.Needs) != 2 || got.Needs[1] != (need{2, 8}) || len(got.Index) != 2 || got.Index[1] != 11 ||
		len(got.Values) != 24 || got.Values[23] != 23.0/3 || got.Text != "hi" || !slices.Equal(got.Ints, m.Ints) || !slices.Equal(got.Extra, m.Extra) {
		t.Fatalf("round trip: %+v", got)
	}
	// Every single flipped byte, and every truncation, is rejected.
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x20
		if _, err := decode(bad); err == nil {
			t.Fatalf("byte %d flipped: accepted", i)
		}
	}
	for n := 0; n < len(data); n++ {
		if _, err := decode(data[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	// A well-formed message with a non-finite value is rejected.
	m.Values[0] = math.NaN()
	if _, err := decode(encode(nil, m)); err == nil || !strings.Contains(err.Error(), "non-finite") {
		t.Fatalf("NaN: %v", err)
	}
}

func TestPartitions(t *testing.T) {
	g := testGraph(t, 2)
	n := g.N()
	c, err := Contiguous(n, 3)
	if err != nil || c.Validate(n) != nil || c.Part[0] != 0 || c.Part[n-1] != 2 {
		t.Fatalf("contiguous: %v %v", err, c)
	}
	b, err := BFS(g, 4)
	if err != nil || b.Validate(n) != nil {
		t.Fatalf("bfs: %v", err)
	}
	for _, k := range []int{0, n + 1} {
		if _, err := BFS(g, k); err == nil {
			t.Errorf("BFS with %d parts accepted", k)
		}
	}
	// Colours: no two neighbouring parts share one.
	nb := b.AgentGraph(g)
	color := map[int]int{}
	for c, cls := range Colors(nb) {
		for _, k := range cls {
			color[k] = c
		}
	}
	for k, ns := range nb {
		for _, q := range ns {
			if color[k] == color[q] {
				t.Errorf("parts %d and %d share an edge and colour %d", k, q, color[k])
			}
		}
	}
	// Robot prefixes: GTSAM Symbol keys (which need a 64-bit int).
	if strconv.IntSize == 64 {
		rg := *g
		rg.IDs = make([]int, n)
		for i := range rg.IDs {
			robot := int64('a' + i%2*('c'-'a')) // robots 'a' and 'c'
			rg.IDs[i] = int(robot<<56 | int64(i))
		}
		rp, err := ByRobot(&rg)
		if err != nil || rp.K != 2 || rp.Part[0] != 0 || rp.Part[1] != 1 {
			t.Fatalf("by robot: %v %+v", err, rp)
		}
	}
	if _, err := ByRobot(g); err == nil || !strings.Contains(err.Error(), "no robot prefix") {
		t.Errorf("plain ids: %v", err)
	}
	// Partition files: parts renumbered densely; errors name file and line.
	var sb strings.Builder
	for i, id := range g.IDs {
		sb.WriteString(strings.Repeat(" ", i%2))
		sb.WriteString(strconv.Itoa(id) + " " + strconv.Itoa(10*(i%3)) + " # comment\n")
	}
	fp, err := ReadPartition(strings.NewReader(sb.String()), "parts.txt", g)
	if err != nil || fp.K != 3 || fp.Part[1] != 1 || fp.Part[2] != 2 {
		t.Fatalf("file: %v %+v", err, fp)
	}
	for _, c := range []struct{ text, want string }{
		{"0 0\n1\n", "parts.txt:2: want \"id part\""},
		{"0 0\n0 1\n", "parts.txt:2: pose id 0 listed twice"},
		{"0 -1\n", "parts.txt:1: part \"-1\""},
		{"999999 0\n", "parts.txt:1: pose id 999999 is not in"},
		{"0 0\n", "has no part"},
	} {
		if _, err := ReadPartition(strings.NewReader(c.text), "parts.txt", g); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}
