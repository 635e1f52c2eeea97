package sync

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// appendReportJSON appends r as WriteJSON writes it, byte for byte what
// encoding/json's Encoder makes of it with SetEscapeHTML(false) and
// SetIndent("", "  "), for a report without a robust or distributed
// account or method options; ok is false for any other report, and for
// one holding a value encoding/json refuses (NaN, an infinity), which
// WriteJSON then leaves to encoding/json.
//
// Why not encoding/json itself: a process writes one report, and
// encoding/json's first use of a type builds its encoders by reflection
// (the fields of Report, Level, Stage, Record, ...): in a small solve's
// process that took more instructions and first touches of code and memory
// than the solve's optimization (docs/tuning.md, "A small process, fourth
// pass"). TestReportJSONMatchesEncodingJSON holds the two to the same
// bytes on reports whose every field is set, so a field added to these
// types without its line here fails it.
func appendReportJSON(b []byte, r *Report) (_ []byte, ok bool) {
	if r.Robust != nil || r.Distributed != nil || r.Options.MethodOptions != nil {
		return b, false
	}
	w := jsonWriter{b: b, ok: true}
	w.begin('{')
	w.str("schema", r.Schema)
	w.str("file", r.File)
	w.str("problem", r.Problem)
	w.int("d", int64(r.D))
	w.int("n", int64(r.N))
	w.int("m", int64(r.M))
	w.optInt("landmarks", int64(r.Landmarks))
	w.optInt("observations", int64(r.Observations))
	w.optInt("priors", int64(r.Priors))
	w.optStr("frame", r.Frame)
	w.optBool("heading_free", r.HeadingFree)
	w.bool("raw_quaternions", r.RawQuaternions)
	w.str("init", r.Init)
	w.float("initial_objective", r.InitialObjective)
	w.float("objective", r.Objective)
	w.float("relaxation_objective", r.RelaxationObjective)
	w.floatPtr("dual_bound", r.DualBound)
	w.floatPtr("suboptimality_bound", r.SuboptimalityBound)
	w.floatPtr("relative_suboptimality_bound", r.RelativeGap)
	w.float("gap_allowed", r.GapAllowed)
	w.str("gap_allowed_by", r.GapAllowedBy)
	w.float("f_unit", r.FUnit)
	w.float("shift_floor", r.ShiftFloor)
	w.bool("certified", r.Certified)
	w.str("status", r.Status)
	w.optStr("error", r.Error)
	w.int("rank", int64(r.Rank))
	w.float("min_eigenvalue", r.MinEigenvalue)
	w.float("eta", r.Eta)
	w.optInt("eta_poses", int64(r.EtaPoses))
	w.str("estimate", r.Estimate)
	w.float("weight_spread", r.WeightSpread)
	w.float("expected_objective", r.ExpectedObjective)
	w.float("expected_objective_sd", r.ExpectedObjectiveSD)
	w.key("timings")
	w.begin('{')
	t := &r.Timings
	w.float("parse", t.Parse)
	w.float("init", t.Init)
	w.float("optimize", t.Optimize)
	w.float("certify", t.Certify)
	w.float("round", t.Round)
	w.float("total", t.Total)
	w.end('}')
	w.optInt("peak_rss_bytes", r.PeakRSSBytes)
	jsonArray(&w, "levels", r.Levels, w.level)
	jsonArray(&w, "stages", r.Stages, w.stage)
	jsonArray(&w, "history", r.History, w.record)
	w.key("options")
	w.options(&r.Options)
	w.end('}')
	w.b = append(w.b, '\n')
	return w.b, w.ok
}

// jsonArray writes the member name with the array s, each element by
// write, or null for a nil s.
func jsonArray[T any](w *jsonWriter, name string, s []T, write func(*T)) {
	w.key(name)
	if s == nil {
		w.null()
		return
	}
	w.begin('[')
	for i := range s {
		w.elem()
		write(&s[i])
	}
	w.end(']')
}

func (w *jsonWriter) stage(s *Stage) {
	w.begin('{')
	w.str("name", s.Name)
	w.optInt("rank", int64(s.Rank))
	w.float("start", s.Start)
	w.float("seconds", s.Seconds)
	w.end('}')
}

func (w *jsonWriter) level(l *Level) {
	w.begin('{')
	w.int("rank", int64(l.Rank))
	w.int("bcm_sweeps", int64(l.BCMSweeps))
	w.str("bcm_stop", l.BCMStop)
	w.float("bcm_seconds", l.BCMSeconds)
	w.int("rtr_iterations", int64(l.RTRIterations))
	w.int("rtr_inner_iterations", int64(l.RTRInner))
	w.str("rtr_stop", l.RTRStop)
	w.float("rtr_seconds", l.RTRSeconds)
	w.float("f", l.F)
	w.float("grad_norm", l.GradNorm)
	w.float("rel_grad_norm", l.RelGrad)
	w.floatPtr("dual_bound", l.DualBound)
	w.float("min_eigenvalue", l.MinEigenvalue)
	w.str("min_eigenvalue_method", l.EigMethod)
	w.bool("certified", l.Certified)
	w.optFloat("escape_decrease", l.EscapeDecrease)
	w.float("certify_seconds", l.CertifySeconds)
	w.optInt("proof_refinements", int64(l.ProofRefinements))
	w.optInt("rounds", int64(l.Rounds))
	w.optStr("round_stop", l.RoundStop)
	w.optFloat("round_seconds", l.RoundSeconds)
	w.end('}')
}

func (w *jsonWriter) record(h *Record) {
	w.begin('{')
	w.int("rank", int64(h.Rank))
	w.str("phase", h.Phase)
	w.int("iter", int64(h.Iter))
	w.float("seconds", h.Seconds)
	w.float("f", h.F)
	w.float("grad_norm", h.GradNorm)
	w.float("rel_grad_norm", h.RelGrad)
	w.optInt("inner", int64(h.Inner))
	w.optInt("factorizations", int64(h.Factorizations))
	w.optFloat("factor_seconds", h.FactorSeconds)
	w.optFloat("shift", h.Shift)
	w.optInt("raised", int64(h.Raised))
	w.optStr("precond", h.Precond)
	w.optBool("accepted", h.Accepted)
	w.end('}')
}

func (w *jsonWriter) options(o *ReportOpts) {
	w.begin('{')
	w.str("method", o.Method)
	w.optStr("rule", o.Rule)
	w.int("threads", int64(o.Threads))
	w.key("seed")
	w.b = strconv.AppendUint(w.b, o.Seed, 10)
	w.int("rank0", int64(o.Rank0))
	w.int("max_rank", int64(o.MaxRank))
	w.float("grad_tol", o.GradTol)
	w.float("eig_tol", o.EigTol)
	w.float("gap_tol", o.GapTol)
	w.float("gap_abs", o.GapAbs)
	w.optFloat("bcm_tol", o.BCMTol)
	w.optInt("bcm_sweeps", int64(o.BCMMax))
	w.optFloat("bcm_decrease_tol", o.BCMDecreaseTol)
	w.float("time_limit_seconds", o.Limit)
	w.optInt("max_iterations", int64(o.MaxIterations))
	w.optBool("largest_component", o.LargestComponent)
	w.end('}')
}

// jsonWriter appends indented JSON as encoding/json's Encoder does with
// SetIndent("", "  ") and SetEscapeHTML(false).
type jsonWriter struct {
	b     []byte
	empty []bool // per open object or array: nothing written in it yet
	ok    bool   // no value encoding/json would refuse was met
}

func (w *jsonWriter) begin(c byte) {
	w.b = append(w.b, c)
	w.empty = append(w.empty, true)
}

func (w *jsonWriter) end(c byte) {
	top := len(w.empty) - 1
	empty := w.empty[top]
	w.empty = w.empty[:top]
	if !empty {
		w.newline()
	}
	w.b = append(w.b, c)
}

// elem starts a member or an element of the innermost object or array.
func (w *jsonWriter) elem() {
	top := len(w.empty) - 1
	if !w.empty[top] {
		w.b = append(w.b, ',')
	}
	w.empty[top] = false
	w.newline()
}

func (w *jsonWriter) newline() {
	w.b = append(w.b, '\n')
	for range len(w.empty) {
		w.b = append(w.b, ' ', ' ')
	}
}

// key starts the member name, which needs no escaping.
func (w *jsonWriter) key(name string) {
	w.elem()
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':', ' ')
}

func (w *jsonWriter) null() { w.b = append(w.b, "null"...) }

// optInt, optFloat, optStr and optBool write a member tagged omitempty:
// nothing for a zero value (a float's -0 included, as encoding/json).
func (w *jsonWriter) optInt(name string, v int64) {
	if v != 0 {
		w.int(name, v)
	}
}

func (w *jsonWriter) optFloat(name string, v float64) {
	if v != 0 {
		w.float(name, v)
	}
}

func (w *jsonWriter) optStr(name, v string) {
	if v != "" {
		w.str(name, v)
	}
}

func (w *jsonWriter) optBool(name string, v bool) {
	if v {
		w.bool(name, true)
	}
}

func (w *jsonWriter) int(name string, v int64) {
	w.key(name)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *jsonWriter) bool(name string, v bool) {
	w.key(name)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *jsonWriter) floatPtr(name string, v *float64) {
	if v == nil {
		w.key(name)
		w.null()
		return
	}
	w.float(name, *v)
}

// float writes v as encoding/json does: ES6's number to string, the
// shortest decimal that reads back as v, in exponent form below 1e-6
// and from 1e21 on, the exponent without a leading zero.
func (w *jsonWriter) float(name string, v float64) {
	w.key(name)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		w.ok = false
		w.null()
		return
	}
	format := byte('f')
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, v, format, -1, 64)
	if format == 'e' {
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1]
			w.b = w.b[:n-1]
		}
	}
}

// str writes s as encoding/json does without HTML escaping: quotes,
// backslashes and control characters escaped, invalid UTF-8 as U+FFFD,
// and U+2028 and U+2029 escaped.
func (w *jsonWriter) str(name, s string) {
	w.key(name)
	const hex = "0123456789abcdef"
	b := append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	w.b = append(b, '"')
}
