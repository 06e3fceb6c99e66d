package direct_test

import (
	"strings"
	"testing"

	"github.com/dio-storage/dio/direct"
)

// TestErrorsNamePackage: every sentinel says where it comes from, as the
// standard library's do ("io: read/write on closed pipe"), so that an
// error wrapped three times still names its source.
func TestErrorsNamePackage(t *testing.T) {
	for _, err := range []error{
		direct.ErrUnaligned, direct.ErrNotSupported, direct.ErrNegativeOffset,
		direct.ErrQueueClosed, direct.ErrTooLarge, direct.ErrInvalidAlignment, direct.ErrInvalidQueueOptions,
	} {
		if !strings.HasPrefix(err.Error(), "direct: ") {
			t.Errorf("%q lacks the \"direct: \" prefix", err)
		}
	}
}
