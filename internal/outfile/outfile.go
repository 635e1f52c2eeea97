package outfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
)

// File is an output file being written: a temporary file beside the
// destination until Commit renames it into place.
type File struct {
	path string   // the destination, symbolic links resolved
	tmp  string   // the temporary file; "" when writing in place
	f    *os.File // nil once committed or aborted
	err  error    // the first write error, which Commit reports
}

// maxLinks bounds the symbolic links Create follows from a destination, as
// the kernel bounds them (ELOOP).
const maxLinks = 40

// beforeCreate, when set, runs first in each Create (SetBeforeCreate).
var beforeCreate atomic.Pointer[func()]

// SetBeforeCreate makes each later Create call f first, before it touches
// the file system. The command line waits there for its interrupt
// handling (internal/cli, watchSignals), which it sets up beside its first
// work: an interrupt turns into an Abort that removes the temporary file,
// where the signal's default action would leave it behind.
func SetBeforeCreate(f func()) { beforeCreate.Store(&f) }

// Create starts writing the file path. Nothing at path changes until
// Commit. The folder path is in must exist (see the package documentation
// for links, devices and permissions).
func Create(path string) (*File, error) {
	if f := beforeCreate.Load(); f != nil {
		(*f)()
	}
	dest, info, err := Target(path)
	if err != nil {
		return nil, err
	}
	if info != nil && !info.Mode().IsRegular() {
		if info.IsDir() {
			return nil, &fs.PathError{Op: "write", Path: path, Err: errors.New("is a folder")}
		}
		// A device or a pipe: write in place.
		f, err := os.OpenFile(dest, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, err
		}
		return &File{path: dest, f: f}, nil
	}
	dir := filepath.Dir(dest)
	if st, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, &fs.PathError{Op: "write", Path: path, Err: fmt.Errorf("the folder %s does not exist", dir)}
	} else if errors.Is(err, syscall.ENOTDIR) || err == nil && !st.IsDir() {
		return nil, &fs.PathError{Op: "write", Path: path, Err: fmt.Errorf("%s is not a folder", dir)}
	} else if err != nil {
		return nil, err
	}
	perm := fs.FileMode(0o666) // less the umask, which OpenFile applies
	if info != nil {
		perm = info.Mode().Perm()
	}
	for try := 0; ; try++ {
		// A dot file, so a listing of the folder does not show it while it
		// is written, named after the destination, so a leftover (after a
		// kill -9) says where it came from.
		tmp := filepath.Join(dir, "."+filepath.Base(dest)+".tmp"+strconv.FormatUint(rand.Uint64()%1e9, 10))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		if err != nil {
			return nil, err
		}
		if info != nil {
			// OpenFile applied the umask; the destination's own bits win.
			if err := f.Chmod(perm); err != nil {
				f.Close()
				os.Remove(tmp)
				return nil, err
			}
		}
		return &File{path: dest, tmp: tmp, f: f}, nil
	}
}

// Target returns the file that writing path writes: path with the symbolic
// links of its last element followed (a dangling link names its target,
// which writing creates), and that file's FileInfo, nil when it does not
// exist. A command that checks its outputs against its inputs compares
// these.
func Target(path string) (string, fs.FileInfo, error) {
	for k := 0; ; k++ {
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			// Create's check of the folder says what is missing.
			return path, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			return path, info, nil
		}
		if k == maxLinks {
			return "", nil, &fs.PathError{Op: "write", Path: path, Err: errors.New("too many levels of symbolic links")}
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
}

// Name returns the path the file will have once committed (symbolic links
// resolved).
func (f *File) Name() string { return f.path }

// Write writes p to the temporary file. After a failed write, Commit fails
// too.
func (f *File) Write(p []byte) (int, error) {
	if f.f == nil {
		return 0, &fs.PathError{Op: "write", Path: f.path, Err: fs.ErrClosed}
	}
	n, err := f.f.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// Commit makes the written contents the destination's: it flushes them to
// disk and renames the temporary file over the destination. On any failure
// it removes the temporary file and leaves the destination as it was.
// Commit after Commit or Abort is an error.
func (f *File) Commit() error {
	if f.f == nil {
		return &fs.PathError{Op: "commit", Path: f.path, Err: fs.ErrClosed}
	}
	file := f.f
	f.f = nil
	if f.tmp == "" {
		err := f.err
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		return err
	}
	err := f.err
	if err == nil {
		// Without it a crash soon after the rename can leave an empty
		// destination on some file systems (ext4 with delayed allocation).
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.tmp, f.path)
	}
	if err != nil {
		os.Remove(f.tmp)
		return fmt.Errorf("writing %s: %w", f.path, err)
	}
	return nil
}

// Abort discards what was written: it removes the temporary file and leaves
// the destination as it was. It does nothing after Commit or Abort, so it
// can be deferred. (A device or pipe written in place keeps what it got.)
func (f *File) Abort() {
	if f.f == nil {
		return
	}
	f.f.Close()
	f.f = nil
	if f.tmp != "" {
		os.Remove(f.tmp)
	}
}

// Write writes the file path with write, whole or not at all: it creates
// the file, lets write fill it and commits it, or aborts it if write fails.
// write's error is returned as it is (the caller's message names the
// path); Create's and Commit's name it themselves.
func Write(path string, write func(w io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(f); err != nil {
		return err
	}
	return f.Commit()
}
