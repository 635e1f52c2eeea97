package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The README's transcripts and its results table are checked, so that
// what it shows cannot drift from what the commands print: a code block
// after a line "<!-- checked -->" is a transcript, "$ " lines commands and
// the lines after each its output (stdout, then stderr); the table after
// "<!-- checked: results -->" is the benchmark table.

// readmePath is the README, from this package's folder.
const readmePath = "../../README.md"

// readmeCommand is one command of a transcript with the output shown.
type readmeCommand struct {
	line int      // in the README
	args []string // after the program name
	exit int      // from a comment "# exit status N"; else 0
	want []string // the output's lines
}

// readmeTranscripts returns the commands of the README's checked blocks,
// in order.
func readmeTranscripts(t *testing.T, readme string) []readmeCommand {
	t.Helper()
	lines := strings.Split(readme, "\n")
	var cmds []readmeCommand
	for k := 0; k < len(lines); k++ {
		if strings.TrimSpace(lines[k]) != "<!-- checked -->" {
			continue
		}
		if k+1 >= len(lines) || !strings.HasPrefix(lines[k+1], "```") {
			t.Fatalf("README.md:%d: a checked block must follow its marker", k+1)
		}
		k += 2
		for ; k < len(lines) && !strings.HasPrefix(lines[k], "```"); k++ {
			line := lines[k]
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				cmds = append(cmds, parseReadmeCommand(t, k+1, cmd))
				continue
			}
			if len(cmds) == 0 {
				t.Fatalf("README.md:%d: output before any command", k+1)
			}
			c := &cmds[len(cmds)-1]
			c.want = append(c.want, line)
		}
	}
	return cmds
}

var exitComment = regexp.MustCompile(`exit status (\d+)`)

// parseReadmeCommand reads "bcmsync ARGS [# comment]" or "go run
// ./cmd/bcmsync ARGS".
func parseReadmeCommand(t *testing.T, line int, cmd string) readmeCommand {
	t.Helper()
	c := readmeCommand{line: line}
	if k := strings.Index(cmd, " #"); k >= 0 {
		if m := exitComment.FindStringSubmatch(cmd[k:]); m != nil {
			c.exit, _ = strconv.Atoi(m[1])
		}
		cmd = cmd[:k]
	}
	f := strings.Fields(cmd)
	switch {
	case len(f) >= 1 && f[0] == "bcmsync":
		c.args = f[1:]
	case len(f) >= 3 && f[0] == "go" && f[1] == "run" && f[2] == "./cmd/bcmsync":
		c.args = f[3:]
	default:
		t.Fatalf("README.md:%d: %q is not a bcmsync command", line, cmd)
	}
	return c
}

// readmeTimes are what the README's outputs may differ in: times.
var readmeTimes = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`time [0-9.]+s: parse [0-9.]+, init [0-9.]+, optimize [0-9.]+, certify [0-9.]+, round [0-9.]+`), "time T"},
	{regexp.MustCompile(`\bin [0-9.]+s\b`), "in Ts"},
}

func maskTimes(s string) string {
	for _, m := range readmeTimes {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return s
}

// matchLines reports whether got matches want, where a want line "..."
// stands for any lines (none too) and "..." inside a line for any text.
func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for k := 0; k <= len(got); k++ {
			if matchLines(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && matchLine(want[0], got[0]) && matchLines(want[1:], got[1:])
}

func matchLine(want, got string) bool {
	if !strings.Contains(want, "...") {
		return want == got
	}
	parts := strings.Split(want, "...")
	for k := range parts {
		parts[k] = regexp.QuoteMeta(parts[k])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// readREADME returns the README's text, skipping a -short run, since
// checking it runs commands.
func readREADME(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the commands the README shows")
	}
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestREADME runs the README's transcripts in order in one folder and
// compares what each command prints, times masked, with what the README
// shows, and its exit status with 0 or the one a comment names.
func TestREADME(t *testing.T) {
	cmds := readmeTranscripts(t, readREADME(t))
	if len(cmds) < 10 {
		t.Fatalf("%d checked commands in the README: the markers are gone?", len(cmds))
	}
	t.Chdir(t.TempDir())
	for _, c := range cmds {
		code, stdout, stderr := runCmd(c.args...)
		got := strings.Split(strings.TrimSuffix(maskTimes(stdout+stderr), "\n"), "\n")
		want := make([]string, len(c.want))
		for k, w := range c.want {
			want[k] = maskTimes(w)
		}
		if code != c.exit || !matchLines(want, got) {
			t.Errorf("README.md:%d: bcmsync %s: exit %d (want %d); it prints\n%s\nand the README shows\n%s",
				c.line, strings.Join(c.args, " "), code, c.exit, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestREADMEMatch: the wildcards of the transcripts.
func TestREADMEMatch(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a\nb", "a\nb", true},
		{"a\nb", "a\nc", false},
		{"a\n...\nd", "a\nb\nc\nd", true},
		{"a\n...\nd", "a\nd", true},
		{"a\n...\nd", "a\nb", false},
		{"x ...z", "x yyz", true},
		{"x ...z", "x yy", false},
		{"F 88.07...", "F 88.0712", true},
		{"a", "a\nb", false},
		{"time 0.025s: parse 0.000, init 0.012, optimize 0.008, certify 0.002, round 0.002", "time 1.5s: parse 0.1, init 0.2, optimize 0.3, certify 0.4, round 0.5", true},
	} {
		got := matchLines(strings.Split(maskTimes(c.want), "\n"), strings.Split(maskTimes(c.got), "\n"))
		if got != c.ok {
			t.Errorf("%q against %q: %v", c.want, c.got, got)
		}
	}
}

// TestREADMEResults solves every graph of the README's results table as
// its bench did (solve --raw-quaternions, each read the way SE-Sync reads
// it) and checks d, n, m, the certificate, F to the digits shown and the
// relative error to REFERENCE.tsv's f*. Times are not checked.
func TestREADMEResults(t *testing.T) {
	_, table, ok := strings.Cut(readREADME(t), "<!-- checked: results -->\n")
	if !ok {
		t.Fatal("no results table marker in the README")
	}
	var rows [][]string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Fatal("the results table has no rows")
	}
	col := map[string]int{}
	for k, h := range rows[0] {
		col[h] = k
	}
	for _, h := range []string{"graph", "d", "n", "m", "certified", "F", "(F − f*)/f*"} {
		if _, ok := col[h]; !ok {
			t.Fatalf("the results table has no column %q: %v", h, rows[0])
		}
	}
	dir := datasets.SuiteOrSkip(t)
	refs, err := datasets.ReadReference(filepath.Join(dir, "REFERENCE.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	fstar := map[string]float64{}
	for _, r := range refs {
		fstar[r.File] = r.FStar
	}
	for _, row := range rows[1:] {
		file := row[col["graph"]]
		code, stdout, stderr := runCmd("solve", "--json", "--quiet", "--raw-quaternions", filepath.Join(dir, file))
		var rep bsync.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Errorf("%s: exit %d, %v: %s", file, code, err, stderr)
			continue
		}
		cert := "no"
		if rep.Certified {
			cert = "yes"
		}
		fs, ok := fstar[file]
		if !ok {
			t.Errorf("%s: not in REFERENCE.tsv", file)
			continue
		}
		got := []string{fmt.Sprint(rep.D), fmt.Sprint(rep.N), fmt.Sprint(rep.M), cert,
			fmt.Sprintf("%.12g", rep.Objective), fmt.Sprintf("%.2e", (rep.Objective-fs)/fs)}
		for k, h := range []string{"d", "n", "m", "certified", "F", "(F − f*)/f*"} {
			if row[col[h]] != got[k] {
				t.Errorf("%s: %s is %s, the README says %s", file, h, got[k], row[col[h]])
			}
		}
	}
}
