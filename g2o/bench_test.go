package g2o

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func benchRead(b *testing.B, file string) {
	data, err := os.ReadFile(filepath.Join(dataDir(b), file))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), file, ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadTorus3D parses torus3D.g2o (3.2 MB, 5000 poses, 9048 edges)
// from memory.
func BenchmarkReadTorus3D(b *testing.B) { benchRead(b, "torus3D.g2o") }

// BenchmarkReadCity10000 parses city10000.g2o (1.7 MB, 2-D).
func BenchmarkReadCity10000(b *testing.B) { benchRead(b, "city10000.g2o") }

// BenchmarkWriteTorus3D writes torus3D.g2o back out.
func BenchmarkWriteTorus3D(b *testing.B) {
	g, err := ReadFile(filepath.Join(dataDir(b), "torus3D.g2o"), ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(io.Discard, g, nil); err != nil {
			b.Fatal(err)
		}
	}
}
