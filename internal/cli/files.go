package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/outfile"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The files rule. Every command follows it, and a new output must too
// (docs/scripting.md tells users; this is how):
//
//  1. Before anything runs, the command lists its file arguments in a
//     fileSet (inputs, output files, folders it fills and the files it
//     writes there) and calls check, which refuses with a usage error
//     (exit status 2) an output that names an input or another output, an
//     output file whose folder does not exist, an output that is a folder
//     and a folder that is a file. Paths are compared as the files they
//     name: relative paths, symbolic links and hard links resolved.
//  2. Every output is written with writeOutput (or, for figures, package
//     plots), that is through package internal/outfile: into a temporary
//     file beside it, renamed over it once complete, so an interrupted or
//     failed run never leaves half a file, and an older file there stays
//     as it was.
//  3. Only folders a command is asked to fill (--plots DIR, plot -o DIR,
//     bench -o OUTDIR, the demo's folder) are created; an output file's
//     folder must exist.
//  4. "-" names standard input or output where one file is read or
//     written (stdio). Standard input can be read once and standard output
//     written once: "-" twice is refused like any other collision, and
//     --json counts as an output to "-". When an output goes to standard
//     output, the summary goes to standard error.

// stdio names standard input (as an input) or standard output (as an
// output) on the command line.
const stdio = "-"

// stdinName is the name of standard input in messages (FILE:LINE errors)
// and in the report's file field.
const stdinName = "<stdin>"

// stdin is what "-" reads; a variable so that a test can give a command
// its own input without a child process.
var stdin io.Reader = os.Stdin

// A fileArg is one file of a command line: what names it (a flag such as
// "-o", or "FILE" for a positional argument) and its path.
type fileArg struct {
	what, path string
	// inFolder marks an output written inside a folder the command fills,
	// which may not exist yet.
	inFolder bool
}

// A fileSet collects a command's files for check. Empty paths (an output
// that was not asked for) are left out.
type fileSet struct {
	inputs, outputs, folders []fileArg
}

// input adds an input file; "-" is standard input.
func (s *fileSet) input(what, path string) {
	if path != "" {
		s.inputs = append(s.inputs, fileArg{what: what, path: path})
	}
}

// output adds an output file; "-" is standard output.
func (s *fileSet) output(what, path string) {
	if path != "" {
		s.outputs = append(s.outputs, fileArg{what: what, path: path})
	}
}

// folder adds a folder the command fills (and may create) and the files it
// writes in it.
func (s *fileSet) folder(what, dir string, names ...string) {
	if dir == "" {
		return
	}
	s.folders = append(s.folders, fileArg{what: what, path: dir})
	for _, n := range names {
		s.outputs = append(s.outputs, fileArg{what: what, path: filepath.Join(dir, n), inFolder: true})
	}
}

// toStdout reports whether an output goes to standard output.
func (s *fileSet) toStdout() bool {
	for _, o := range s.outputs {
		if o.path == stdio {
			return true
		}
	}
	return false
}

// check applies the files rule (above) and returns a usageError naming the
// first problem, or nil.
func (s *fileSet) check() error {
	ids := map[string]fileID{}
	id := func(path string) (fileID, error) {
		if v, ok := ids[path]; ok {
			return v, nil
		}
		v, err := identify(path)
		if err == nil {
			ids[path] = v
		}
		return v, err
	}
	stdinUser, stdoutUser := "", ""
	for _, in := range s.inputs {
		if in.path != stdio {
			continue
		}
		if stdinUser != "" {
			return usageError{fmt.Errorf("%s and %s both read standard input (-), which can be read only once", stdinUser, in.what)}
		}
		stdinUser = in.what
	}
	for _, f := range s.folders {
		if f.path == stdio {
			return usageError{fmt.Errorf("%s -: a folder cannot be standard output", f.what)}
		}
		v, err := id(f.path)
		if err != nil {
			return usageError{fmt.Errorf("%s %s: %v", f.what, f.path, err)}
		}
		if v.info != nil && !v.info.IsDir() {
			return usageError{fmt.Errorf("%s %s: not a folder: it is a file", f.what, f.path)}
		}
	}
	for _, o := range s.outputs {
		if o.path == stdio {
			if stdoutUser != "" {
				return usageError{fmt.Errorf("%s and %s both write to standard output (-): give one of them a file", stdoutUser, o.what)}
			}
			stdoutUser = o.what
			continue
		}
		v, err := id(o.path)
		if err != nil {
			return usageError{fmt.Errorf("%s %s: %v", o.what, o.path, err)}
		}
		if v.info != nil && v.info.IsDir() {
			return usageError{fmt.Errorf("%s %s is a folder; an output file needs a file name", o.what, o.path)}
		}
		if o.inFolder {
			continue
		}
		st, err := os.Stat(v.dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return usageError{fmt.Errorf("%s %s: the folder %s does not exist (an output file's folder is not created; make it first)", o.what, o.path, v.dir)}
		case err == nil && !st.IsDir():
			return usageError{fmt.Errorf("%s %s: %s is not a folder", o.what, o.path, v.dir)}
		case err != nil:
			return usageError{fmt.Errorf("%s %s: %v", o.what, o.path, err)}
		}
	}
	for _, o := range s.outputs {
		if o.path == stdio {
			continue
		}
		vo, _ := id(o.path)
		for _, in := range s.inputs {
			if in.path == stdio {
				continue
			}
			vi, err := id(in.path)
			if err != nil {
				return usageError{fmt.Errorf("%s %s: %v", in.what, in.path, err)}
			}
			if vo.same(vi) {
				what := "the input"
				if strings.HasPrefix(in.what, "-") { // a flag's file, not a positional FILE
					what = "the input " + in.what
				}
				return usageError{fmt.Errorf("%s %s would overwrite %s %s", o.what, o.path, what, in.path)}
			}
		}
	}
	for k, a := range s.outputs {
		if a.path == stdio {
			continue
		}
		va, _ := id(a.path)
		for _, b := range s.outputs[k+1:] {
			if b.path == stdio {
				continue
			}
			if vb, _ := id(b.path); va.same(vb) {
				return usageError{fmt.Errorf("%s %s and %s %s are the same file: each output needs a file of its own", a.what, a.path, b.what, b.path)}
			}
		}
		for _, f := range s.folders {
			if vf, _ := id(f.path); va.same(vf) {
				return usageError{fmt.Errorf("%s %s is the folder %s %s", a.what, a.path, f.what, f.path)}
			}
		}
	}
	return nil
}

// fileID identifies the file a path names, for check: the file itself
// where it exists (so hard links compare equal), and always the absolute
// path with every symbolic link resolved as far as the path exists.
type fileID struct {
	info fs.FileInfo // nil when nothing exists there
	path string      // absolute, links resolved
	dir  string      // the folder it is (or would be) in
}

func (a fileID) same(b fileID) bool {
	if a.info != nil && b.info != nil {
		return os.SameFile(a.info, b.info)
	}
	return a.path == b.path
}

// identify resolves path as package outfile would write it (Target: the
// symbolic links of its last element followed), then resolves the links
// of the longest existing prefix of its folder.
func identify(path string) (fileID, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fileID{}, err
	}
	target, _, err := outfile.Target(abs)
	if err != nil {
		return fileID{}, err
	}
	target = filepath.Clean(target)
	dir := resolveExisting(filepath.Dir(target))
	v := fileID{path: filepath.Join(dir, filepath.Base(target)), dir: dir}
	if st, err := os.Stat(v.path); err == nil {
		v.info = st
	}
	return v, nil
}

// resolveExisting resolves the symbolic links of the longest prefix of the
// absolute path dir that exists and appends the rest unchanged.
func resolveExisting(dir string) string {
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Join(dir, rest)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// notStdio refuses "-" for a file argument that cannot be standard input or
// output.
func notStdio(what, path, why string) error {
	if path == stdio {
		return usageError{fmt.Errorf("%s -: %s", what, why)}
	}
	return nil
}

// writeOutput writes the output path with write, whole or not at all:
// through package outfile for a file (its folder must exist), and for "-"
// into memory first and then to stdout, so a failed write leaves nothing
// half-written there either. Errors name path.
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == stdio {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			return fmt.Errorf("standard output: %w", err)
		}
		_, err := stdout.Write(b.Bytes())
		return err
	}
	var werr error
	err := outfile.Write(path, func(w io.Writer) error {
		werr = write(w)
		return werr
	})
	if werr != nil {
		return fmt.Errorf("%s: %w", path, werr) // outfile's own errors name path already
	}
	return err
}

// writeBytes is a writeOutput function that writes b.
func writeBytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// openInput opens the input path, standard input for "-", and returns it
// with the name messages use for it.
func openInput(path string) (io.ReadCloser, string, error) {
	if path == stdio {
		return io.NopCloser(stdin), stdinName, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	return f, path, nil
}

// readGraph reads the pose graph at path ("-": standard input) as
// g2o.ReadFile does; the graph's Source is the path, or stdinName.
func readGraph(path string, ro g2o.ReadOptions) (*posegraph.Graph, error) {
	r, name, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return g2o.Read(r, name, ro)
}

// outputName is the name of the output path in messages.
func outputName(path string) string {
	if path == stdio {
		return "standard output"
	}
	return path
}

// inputName is the name of the input path in messages and reports.
func inputName(path string) string {
	if path == stdio {
		return stdinName
	}
	return path
}

// readReport reads a JSON report written by solve --report ("-": standard
// input). A malformed one is an error naming the file and the line.
func readReport(path string) (*bsync.Report, error) {
	r, name, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rep, err := bsync.ReadReport(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (not a report written by bcmsync solve --report?)", jsonWhere(name, b, err), err)
	}
	return rep, nil
}

// jsonWhere is "FILE:LINE" for a JSON decoding error that knows its byte
// offset in b, else "FILE".
func jsonWhere(name string, b []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		off = int64(len(b))
	}
	if off < 0 || off > int64(len(b)) {
		return name
	}
	return fmt.Sprintf("%s:%d", name, 1+bytes.Count(b[:off], []byte{'\n'}))
}
