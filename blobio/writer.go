package blobio

import (
	"context"
	"fmt"
	"runtime"

	"github.com/klauspost/compress/zstd"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

// Options configure a Writer or Reader. A nil *Options means defaults.
type Options struct {
	BufferSize  int             // bytes per buffer, and per Scanner read; default 64 KiB (DefaultScanRead for a Scanner), rounded up to the file's alignment; at most fileio.MaxBufferSize (256 MiB), else ErrInvalidOptions
	Buffers     int             // buffers per writer; default with O_DIRECT: two merged 512 KiB writes, at least 4 (16 of 64 KiB); 4 through the page cache or a Pool; at most fileio.MaxBuffers, and Buffers × BufferSize bytes the system maps, else ErrInvalidOptions
	IO          fallback.Policy // default Auto
	Compression Compression     // default None

	// Pool, when set, supplies the buffers, so that many writers share one
	// memory budget. Its buffer size overrides BufferSize.
	//
	// What a Writer costs: without a Pool its Buffers×BufferSize bytes of
	// ring (1 MiB with O_DIRECT by default, 256 KiB through the page
	// cache) are mapped at Create and committed as the writer first fills
	// them, so an idle writer, or one that wrote a few small blobs, holds
	// a page or so (measured: 100 writers with one 150-byte blob each, 0.9
	// MB resident), and one that has written a ring's worth holds all of
	// it until Close. A Pool bounds the total for any number of writers:
	// each holds one buffer, and more only while the budget has them.
	Pool *aligned.Pool

	// NoSync makes Close skip the fdatasync, for a caller that makes many
	// files durable at once, or never needs them to be. Sync still syncs.
	NoSync bool

	// Context, for Create only, bounds its wait for the writer's first
	// buffer when a Pool's budget is spent: Create then fails with an
	// error matching the context's (context.DeadlineExceeded,
	// context.Canceled) and leaves no file. That is the only wait on the
	// Pool: the writer takes more buffers only when the Pool has them
	// free, and otherwise waits for its own writes, never for other
	// writers. A Context already done fails Create. nil:
	// context.Background().
	Context context.Context

	// Retry, when set, makes the writer retry a write or fdatasync that
	// failed with ENOSPC, EDQUOT or EIO, waiting with backoff, until the
	// policy's Context ends, telling OnRetry of each failure instead of
	// returning it (Neon's BufferedWriter does the same). nil: the call
	// returns the failure, holds on to every byte it acknowledged, and
	// the next call writes them again (see Failures in the package doc).
	Retry *RetryPolicy

	// Faults injects I/O errors into the file's system calls, for tests
	// (see package faults): a Writer's and a Reader's alike.
	Faults direct.Injector

	// Size, for Open only, makes the Reader read the file as if it were
	// Size bytes long: the logical size a service recorded (from
	// Writer.Synced) before a crash left an unspecified tail past it.
	// 0 means the file's size. Create refuses a non-zero Size with
	// ErrInvalidOptions (a new file's size is what is written to it, and
	// no preallocation or limit is implied), as fileio's does; OpenAppend
	// ignores it, as its size argument says where writing resumes.
	Size int64

	// Checksum makes a Writer end each blob with a CRC32C of its header
	// and stored bytes, inside the blob (see Checksums in the package
	// doc), and a Reader check it on every blob it returns: a mismatch
	// is an error matching ErrCorrupt, never data.
	//
	// A file must be read (and given to OpenAppend) with the Checksum it
	// was written with, which it does not record (Neon's format has no
	// file header). Written with it and opened without, it is refused:
	// Open finds its first blob sealed and fails with an error matching
	// ErrInvalidOptions that names Checksum (where the first blob lies
	// past the first 64 KiB, Open cannot look, and an uncompressed blob
	// comes back with its 4-byte CRC after the payload). Written without
	// it and read with it, every blob is an error matching ErrCorrupt
	// whose message says the file may have been written without
	// Checksum, but for a Scanner without Size over a file of one blob,
	// which takes it for a torn tail: no blobs, Torn true, a nil Err.
	// OpenAppend refuses either mismatch the same way, by the first
	// blob's seal, before it touches the file.
	Checksum bool

	// Slow, when set, reports a Writer's or Reader's read, write,
	// fdatasync or truncate still in flight past Slow.Threshold, with
	// the file, offset and length, once per operation, on a goroutine of
	// its own, never delaying the I/O (as Pebble's
	// vfs.WithDiskHealthChecks does). nil costs nothing. One without a
	// positive Threshold or a Report is refused with ErrInvalidOptions.
	Slow *SlowPolicy
}

// SlowPolicy is Options.Slow: Report is called once for an I/O still in
// flight past Threshold (direct.SlowPolicy, as fileio's).
type SlowPolicy = direct.SlowPolicy

// SlowIO is what SlowPolicy.Report is told: the file, operation, offset,
// length and time in flight so far.
type SlowIO = direct.SlowIO

func (o *Options) withDefaults() Options {
	var d Options
	if o != nil {
		d = *o
	}
	if d.BufferSize <= 0 {
		d.BufferSize = aligned.DefaultBufferSize
	}
	return d
}

// A Writer appends blobs to a new file (Create) or to an existing one
// (OpenAppend) through the writer core (internal/appender), as fileio's
// Writer does: it frames each blob and writes header and payload into
// the core's buffers. It is not safe for concurrent use.
//
// Close is owed: a Writer dropped without it is released by a cleanup when
// the garbage collector finds it unreachable, as an os.File is (its
// descriptor closed, its buffers freed or returned to their Pool, its
// writes in flight awaited), but nothing it buffered is written, nothing
// is synced, and the file is not cut back to its logical size: it may end
// in zeros grown ahead of the writes, or in a partial block. Only what
// the last Sync made durable (Synced) is sure to be there.
type Writer struct {
	ap      *appender.Appender
	comp    Compression
	enc     *zstd.Encoder
	zbuf    []byte // reused compression output
	hdr     [MaxHeaderSize]byte
	sum     bool                           // Options.Checksum
	seal    [zstdSkipHeader + crcSize]byte // a large blob's seal
	sealed  []byte                         // a small blob's stored bytes and seal, reused
	closed  bool
	cleanup runtime.Cleanup // releases an unclosed Writer's appender and encoder; stopped by Close
}

// writerParts are what an unclosed Writer's cleanup releases: the
// appender (its file and buffers, nothing written or synced) and the
// encoder. They do not refer to the Writer, or it would never be
// unreachable.
type writerParts struct {
	ap  *appender.Appender
	enc *zstd.Encoder
}

func (p writerParts) release() {
	p.ap.Discard()
	if p.enc != nil {
		p.enc.Close()
	}
}

// Create creates the file at path (failing if it exists) and returns a
// Writer that appends blobs to it. It fsyncs the directory, so that the
// file outlives a power cut once a Sync has returned. Options it refuses
// give an error matching ErrInvalidOptions, among them a non-zero
// Options.Size, which is Open's (a new file's size is what is written to
// it); a Create that fails leaves no file.
func Create(path string, o *Options) (*Writer, error) {
	return create(path, o, nil)
}

// create is Create with the directory's fsync as a parameter, for a test
// to count (nil: appender.SyncDir).
func create(path string, o *Options, dirSync func(dir string) error) (*Writer, error) {
	opts, ao, err := writerOptions(o)
	if err != nil {
		return nil, err
	}
	if opts.Size != 0 {
		return nil, fmt.Errorf("%w: Size %d is for Open: a new file's size is what is written to it", ErrInvalidOptions, opts.Size)
	}
	ao.DirSync = dirSync
	return newWriter(opts, func() (*appender.Appender, error) { return appender.Create(path, ao) })
}

// OpenAppend opens the blob file at path to append to it from logical
// size size, a size made durable before: the Synced a service recorded
// before a crash, or the file's size after a Close. It cuts off what the
// file holds past size (blobs written after the last Sync, the zeros grown
// ahead), reads the unaligned last block back into the first buffer, as
// Sync keeps it, and returns a Writer whose next blob's offset is size and
// whose Synced starts at size. The blobs before size must be whole: size
// is the end of a blob. A size below zero or past the file's end gives an
// error matching ErrInvalidOptions and leaves the file as it was; a
// missing file, one matching fs.ErrNotExist. Options are those of Create
// (Options.Size is ignored: size says where writing resumes).
func OpenAppend(path string, size int64, o *Options) (*Writer, error) {
	opts, ao, err := writerOptions(o)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		if err := checkSeal(path, size, opts); err != nil {
			return nil, err
		}
	}
	return newWriter(opts, func() (*appender.Appender, error) { return appender.OpenAppend(path, size, ao) })
}

// checkSeal refuses, with ErrInvalidOptions, to append to the first size
// bytes of the file at path with an Options.Checksum other than the one
// its first blob was written with, as Open refuses to read it so: sealed
// blobs appended to an unsealed file, or unsealed ones to a sealed file,
// would be read as torn or corrupt, acknowledged blobs lost. A file whose
// first blob it cannot see (past sealCheck bytes, or unreadable) passes.
func checkSeal(path string, size int64, opts Options) error {
	r, err := Open(path, &Options{Size: size, IO: opts.IO, Checksum: true}) // true: Open's own check is this one
	if err != nil {
		return err
	}
	sealed, known := r.firstSeal()
	r.Close()
	switch {
	case known && sealed && !opts.Checksum:
		return fmt.Errorf("%w: the first blob of %s carries a CRC32C seal: the file was written with Options.Checksum, and is appended to with it", ErrInvalidOptions, path)
	case known && !sealed && opts.Checksum:
		return fmt.Errorf("%w: the first blob of %s carries no CRC32C seal: the file was written without Options.Checksum, and is appended to without it", ErrInvalidOptions, path)
	}
	return nil
}

// newWriter returns a Writer with its encoder on the appender open makes,
// its cleanup armed.
func newWriter(opts Options, open func() (*appender.Appender, error)) (*Writer, error) {
	w := &Writer{comp: opts.Compression, sum: opts.Checksum}
	if w.comp == Zstd {
		var err error
		if w.enc, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)); err != nil {
			return nil, err
		}
	}
	ap, err := open()
	if err != nil {
		w.closeEncoder()
		return nil, appender.WrapInvalid(err, ErrInvalidOptions)
	}
	w.ap = ap
	w.cleanup = runtime.AddCleanup(w, writerParts.release, writerParts{ap, w.enc})
	return w, nil
}

func (w *Writer) closeEncoder() {
	if w.enc != nil {
		w.enc.Close()
	}
}

// writerOptions returns o (nil: defaults) and the appender's Options it
// makes, refusing them before any file is created, for Create and
// OpenAppend alike.
func writerOptions(o *Options) (Options, appender.Options, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	ao := appender.Options{BufferSize: opts.BufferSize, Buffers: opts.Buffers, Pool: opts.Pool, NoSync: opts.NoSync, Context: opts.Context, Retry: opts.Retry,
		IO: opts.IO, Faults: opts.Faults, Slow: opts.Slow}
	if opts.Compression != None && opts.Compression != Zstd {
		return opts, ao, fmt.Errorf("%w: unknown compression %v", ErrInvalidOptions, opts.Compression)
	}
	return opts, ao, appender.WrapInvalid(ao.Validate(), ErrInvalidOptions)
}

// Mode reports the I/O path the writer uses.
func (w *Writer) Mode() fallback.Mode { return w.ap.Mode() }

// Size returns the logical size of the file: the offset of the next blob.
func (w *Writer) Size() int64 { return w.ap.Size() }

// Synced returns the logical size made durable by the last successful
// Sync or Close (or a Log's commit): after a crash the file holds these bytes intact, then an
// unspecified tail. A service records it (in its index, as Neon does) to
// reopen the file with Options.Size. A Close with NoSync makes nothing
// durable and leaves it as it was. Synced is still valid after Close.
func (w *Writer) Synced() int64 { return w.ap.Synced() }

// WriteBlob appends p as one blob and returns its offset. A blob over
// MaxBlobSize (less its 4-byte seal with Options.Checksum) fails with
// ErrBlobTooLarge and leaves the writer usable
// (also with Zstd, whatever it would compress to, so that no blob decodes
// to more than MaxBlobSize). A write that failed with ENOSPC, EDQUOT or
// EIO appended nothing and the next call writes the held bytes again
// (see Failures in the package doc); any other I/O error is returned by
// every later call.
func (w *Writer) WriteBlob(p []byte) (off int64, err error) {
	if w.closed {
		return 0, ErrClosed
	}
	if err := w.ap.Err(); err != nil {
		return 0, err
	}
	if len(p) > w.maxPayload() {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", ErrBlobTooLarge, len(p), w.maxPayload())
	}
	data, c := p, None
	if w.comp == Zstd && len(p) >= minCompressedSize {
		w.zbuf = w.enc.EncodeAll(p, w.zbuf[:0])
		if w.storedLen(len(w.zbuf), Zstd) < w.storedLen(len(p), None) {
			data, c = w.zbuf, Zstd
		}
	}
	hdr, err := AppendHeader(w.hdr[:0], w.storedLen(len(data), c), c)
	if err != nil {
		return 0, err
	}
	if w.sum {
		off, err = w.writeSealed(hdr, data, c)
	} else {
		off, err = w.ap.WriteRecord(hdr, data)
	}
	// w must outlive the appender's work: its cleanup releases the
	// appender once w is unreachable, which could be mid-call.
	runtime.KeepAlive(w)
	return off, err
}

// Sync makes every blob written so far durable: it writes the buffered
// tail padded to the file's alignment and fdatasyncs. When it returns
// nil, Synced is Size. With O_DIRECT the file may stay longer than Size,
// grown ahead of the writes, zeros past the data, until Close cuts it
// back: a Reader opened meanwhile scans to the end of the data (see
// Crashes in the package doc).
func (w *Writer) Sync() error {
	if w.closed {
		return ErrClosed
	}
	err := w.ap.Sync()
	runtime.KeepAlive(w) // as in WriteBlob
	return err
}

// Close flushes, pads and writes the last block, truncates the file to its
// logical size, fdatasyncs (unless Options.NoSync) and closes it, so that
// both the data and the size are durable when it returns without error.
// A Close that fails leaves the file cut back to Synced. Every method
// called after Close returns ErrClosed.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	w.cleanup.Stop()
	w.closeEncoder()
	return w.ap.Close()
}

// WriterStats counts a Writer's work since Create or OpenAppend
// (direct.WriterStats, as fileio's): Writes and Bytes are its WriteBlob
// calls and their blobs' headers and stored bytes (compressed, sealed),
// DeviceBytes what the device wrote, padded tails and rewrites
// included; its fdatasyncs and their latencies; the writes and
// fdatasyncs it made again.
type WriterStats = direct.WriterStats

// Stats returns the Writer's counts; they stay readable after Close.
// The process's, by path, are direct.Stats.
func (w *Writer) Stats() WriterStats { return w.ap.Stats().Writer() }

// RetryPolicy is Options.Retry: retry failures that can pass (ENOSPC,
// EDQUOT, EIO) with backoff until Context ends, telling OnRetry of each.
type RetryPolicy = appender.RetryPolicy
