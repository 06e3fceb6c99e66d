package fileio_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// Benchmarks against what a Go service writes and reads with otherwise:
// bufio.Writer over os.File with an fdatasync at the end, pread on
// os.File with a cold page cache, and fio's O_DIRECT sequential read.
// They run on DIO_TEST_DIR, or the system's temporary directory.
//
//	go test -run '^$' -bench . -count 5 ./fileio

// benchWriteSize is what each Write benchmark op writes.
const benchWriteSize = 64 << 20

// BenchmarkWrite writes 64 MiB in records of one size and makes it
// durable: fileio's Writer (Close truncates and fdatasyncs) with its
// defaults and with 40 buffers (the ring then holds five merged writes,
// four in flight while one fills), and bufio.Writer (64 KiB, the
// Writer's buffer size) over os.File, Flush and fdatasync.
func BenchmarkWrite(b *testing.B) {
	dir := testenv.Dir(b)
	for _, rec := range []int{100, 4 << 10, 64 << 10} {
		p := content(1, rec)
		for _, w := range []string{"fileio", "fileio-qd4", "bufio+fdatasync"} {
			b.Run(fmt.Sprintf("record=%s/writer=%s", testenv.SizeName(rec), w), func(b *testing.B) {
				b.SetBytes(benchWriteSize)
				for i := 0; b.Loop(); i++ {
					path := filepath.Join(dir, fmt.Sprint("w", i))
					switch w {
					case "fileio":
						writeFileio(b, path, p, nil)
					case "fileio-qd4": // four merged 512 KiB writes in flight, not two
						writeFileio(b, path, p, &fileio.Options{Buffers: 40})
					default:
						writeBufio(b, path, p)
					}
					os.Remove(path)
				}
			})
		}
	}
}

func writeFileio(b *testing.B, path string, p []byte, o *fileio.Options) {
	w, err := fileio.Create(path, o)
	if err != nil {
		b.Fatal(err)
	}
	for n := 0; n < benchWriteSize; n += len(p) {
		if _, err := w.Write(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func writeBufio(b *testing.B, path string, p []byte) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	for n := 0; n < benchWriteSize; n += len(p) {
		if _, err := bw.Write(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// readBench is the file the read benchmarks share: 1 GiB, so that random
// reads of a run rarely meet a block an earlier one brought into the page
// cache.
var readBench struct {
	once sync.Once
	dir  string
	path string
	err  error
}

const readBenchSize = 1 << 30

// benchFileEnv names a file the read benchmarks use, and make if it is
// missing, instead of a temporary one: for runs that alternate
// benchmarks in separate processes, side by side.
const benchFileEnv = "FILEIO_BENCH_FILE"

func benchFile(b *testing.B) string {
	if path := os.Getenv(benchFileEnv); path != "" {
		if st, err := os.Stat(path); err == nil && st.Size() == readBenchSize {
			return path
		}
		os.Remove(path)
		writeBenchFile(b, path)
		return path
	}
	readBench.once.Do(func() {
		root := os.Getenv(testenv.DirEnv)
		readBench.dir, readBench.err = os.MkdirTemp(root, "fileio-bench-")
		if readBench.err != nil {
			return
		}
		readBench.path = filepath.Join(readBench.dir, "read")
		writeBenchFile(b, readBench.path)
	})
	if readBench.err != nil {
		b.Fatal(readBench.err)
	}
	return readBench.path
}

// writeBenchFile writes the read benchmarks' file at path.
func writeBenchFile(b *testing.B, path string) {
	w, err := fileio.Create(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	p := content(2, 1<<20)
	for n := 0; n < readBenchSize; n += len(p) {
		if _, err := w.Write(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if readBench.dir != "" {
		os.RemoveAll(readBench.dir)
	}
	os.Exit(code)
}

// dropCache drops the file's pages from the page cache, so that a read
// through it starts cold.
func dropCache(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReadRandom reads random blocks at 4 KiB (or 64 KiB) aligned
// offsets of a 1 GiB file from 16 goroutines: one fileio.Reader, and
// pread on one os.File (FADV_RANDOM, its pages dropped before each run).
func BenchmarkReadRandom(b *testing.B) {
	path := benchFile(b)
	par := (16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, rd := range []string{"fileio", "pread"} {
			b.Run(fmt.Sprintf("size=%s/goroutines=16/reader=%s", testenv.SizeName(size), rd), func(b *testing.B) {
				var ra io.ReaderAt
				if rd == "fileio" {
					r, err := fileio.Open(path, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer r.Close()
					ra = r
				} else {
					dropCache(b, path)
					f, err := os.Open(path)
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
					ra = f
				}
				b.SetBytes(int64(size))
				b.SetParallelism(par)
				var seed sync.Mutex
				next := uint64(0)
				b.RunParallel(func(pb *testing.PB) {
					seed.Lock()
					next++
					r := rand.New(rand.NewPCG(next, uint64(size)))
					seed.Unlock()
					p := make([]byte, size)
					blocks := int64(readBenchSize / size)
					for pb.Next() {
						if _, err := ra.ReadAt(p, r.Int64N(blocks)*int64(size)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkReadSequential reads the 1 GiB file from front to back: a
// fileio Sequential through io.Copy, os.File through io.Copy with a
// cold page cache (the kernel's own read-ahead), and fio's sequential
// O_DIRECT read at QD4 in 512 KiB reads on io_uring, whose bandwidth is
// reported as fio-MB/s.
func BenchmarkReadSequential(b *testing.B) {
	path := benchFile(b)
	b.Run("reader=fileio", func(b *testing.B) { benchSequential(b, path, nil) })
	b.Run("reader=os.File", func(b *testing.B) {
		b.SetBytes(readBenchSize)
		buf := make([]byte, 1<<20)
		for b.Loop() {
			b.StopTimer()
			dropCache(b, path)
			b.StartTimer()
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("reader=fio", func(b *testing.B) {
		if _, err := exec.LookPath("fio"); err != nil {
			b.Skip(err)
		}
		var bw float64
		for b.Loop() {
			out, err := exec.Command("fio", "--name=seq", "--filename="+path, "--readonly", "--rw=read",
				"--bs=512k", "--iodepth=4", "--direct=1", "--ioengine=io_uring", fmt.Sprintf("--size=%d", readBenchSize),
				"--output-format=json").Output()
			if err != nil {
				b.Fatalf("fio: %v: %s", err, out)
			}
			var res struct {
				Jobs []struct {
					Read struct {
						BwBytes float64 `json:"bw_bytes"`
					} `json:"read"`
				} `json:"jobs"`
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
				b.Fatalf("fio's output: %v: %s", err, out)
			}
			bw += res.Jobs[0].Read.BwBytes
		}
		b.ReportMetric(bw/float64(b.N)/1e6, "fio-MB/s")
	})
}

// benchSequential reads the file at path through a Sequential, with o.
func benchSequential(b *testing.B, path string, o *fileio.Options) {
	b.SetBytes(readBenchSize)
	r, err := fileio.Open(path, o)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for b.Loop() {
		s, err := r.NewSequential(0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, s); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
