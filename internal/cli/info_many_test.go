package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestInfoCarriesOn: info describes every good file even when others are
// bad, reports each bad one on stderr with its FILE:LINE (and, with
// --json, as an object with an error on stdout, in file order), and exits
// 1 when any file was bad, 0 when none was.
func TestInfoCarriesOn(t *testing.T) {
	dir := t.TempDir()
	good1 := writeText(t, dir, "a.g2o", "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n")
	bad := writeText(t, dir, "b.g2o", "VERTEX_SE2 0 0 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0\n")
	good2 := writeText(t, dir, "c.g2o", "EDGE_SE2 5 6 1 0 0 1 0 0 1 0 1\nEDGE_SE2 6 7 1 0 0 1 0 0 1 0 1\n")
	missing := filepath.Join(dir, "none.g2o")
	unknown := writeText(t, dir, "p.g2o", "VERTEX_SE2 0 0 0 0\nROBOTLASER1 0 0 0\n")

	code, out, errs := runCmd("info", good1, bad, good2, missing, unknown)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{good1, good2} {
		if !strings.Contains(out, "file            "+want) {
			t.Errorf("stdout does not describe %s:\n%s", want, out)
		}
	}
	if strings.Count(out, "file            ") != 2 {
		t.Errorf("stdout describes other files than the two good ones:\n%s", out)
	}
	for _, want := range []string{bad + ":2:", missing, unknown + ":2:", "--lenient", "info: 3 of 5 files could not be read"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	// The order of the report follows the files.
	if strings.Index(errs, bad) > strings.Index(errs, missing) || strings.Index(errs, missing) > strings.Index(errs, unknown) {
		t.Errorf("errors out of order:\n%s", errs)
	}

	code, out, _ = runCmd("info", "--json", good1, bad, good2)
	if code != 1 {
		t.Errorf("--json: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("--json: %d lines, want one per file:\n%s", len(lines), out)
	}
	for k, want := range []string{good1, bad, good2} {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[k]), &m); err != nil {
			t.Fatalf("line %d: %v", k, err)
		}
		_, hasErr := m["error"]
		if m["file"] != want || hasErr != (want == bad) {
			t.Errorf("line %d: %v, want file %s with an error %v", k, m, want, want == bad)
		}
		if hasErr && !strings.Contains(m["error"].(string), bad+":2:") {
			t.Errorf("the error does not name the line: %v", m["error"])
		}
	}
	if code, _, errs := runCmd("info", good1, good2); code != 0 || errs != "" {
		t.Errorf("good files only: exit %d, stderr %q", code, errs)
	}
}
