package ephemeral

import (
	"fmt"

	"golang.org/x/sys/windows"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// createTemp creates a named file in dir that Windows deletes when its
// handle closes (FILE_FLAG_DELETE_ON_CLOSE, which os.OpenFile passes on to
// CreateFile): Windows refuses to remove a file that is open without
// FILE_SHARE_DELETE, so the create-then-unlink of other systems fails
// there. The name stays visible in dir until then, and no other open of it
// succeeds.
//
// The flag goes through the page cache only: ncw/directio, which opens
// with FILE_FLAG_NO_BUFFERING, takes no other flags. So Auto and DontCache
// open std-fs files, and a policy that demands O_DIRECT fails with an error
// matching direct.ErrNotSupported, as fallback.Direct does wherever direct
// I/O is refused.
func createTemp(dir string, p fallback.Policy) (fallback.File, error) {
	switch p {
	case fallback.Direct, fallback.DirectPwrite:
		return nil, fmt.Errorf("ephemeral: policy %v: %w: on windows a temporary file is deleted on close only through the page cache", p, direct.ErrNotSupported)
	case fallback.Auto:
		p = fallback.StdFS
	}
	return createNamed(dir, p, windows.O_FILE_FLAG_DELETE_ON_CLOSE, false)
}
