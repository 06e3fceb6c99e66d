package blobio_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestScannerCloseReleases: a Scanner stopped midway by Close gives its
// read buffers back at once (each holds two of DefaultScanRead), over a
// Reader and over an ephemeral.File alike, while the Reader and the File
// stay open.
func TestScannerCloseReleases(t *testing.T) {
	const scanners = 24
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "scan.blob")
	writeMixed(t, path, nil)
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	f, err := ephemeral.Create(dir, nil)
	require.NoError(t, err)
	defer f.Close()
	for i := range 2000 {
		_, err := f.WriteBlob(content(i, 1000))
		require.NoError(t, err)
	}

	for _, c := range []struct {
		name string
		open func() *blobio.Scanner
	}{
		{"Reader", func() *blobio.Scanner { return blobio.NewScanner(r) }},
		{"ephemeral.File", func() *blobio.Scanner { return blobio.NewScannerReaderAt(f, 0, f.Size()) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A whole scan first, so that the read buffers of the File
			// (which stay until it closes) are counted in before.
			s := c.open()
			for s.Scan() {
			}
			require.NoError(t, s.Err())
			before := rssAnon(t)
			var ss []*blobio.Scanner
			for range scanners {
				s := c.open()
				for range 10 {
					require.True(t, s.Scan(), "%v", s.Err())
				}
				ss = append(ss, s)
			}
			held := rssAnon(t) - before
			want := int64(scanners * 2 * blobio.DefaultScanRead)
			require.Greater(t, held, want/2, "%d scanners midway hold %d KiB: is RssAnon counting their buffers?", scanners, held>>10)
			for _, s := range ss {
				require.NoError(t, s.Close())
			}
			left := rssAnon(t) - before
			t.Logf("%d scanners: %d KiB midway, %d KiB after Close", scanners, held>>10, left>>10)
			assert.Less(t, left, want/4, "Close kept the buffers")
		})
	}
}
