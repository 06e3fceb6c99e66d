package direct

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type nopInjector struct{}

func (nopInjector) Inject(Op, int64, int) (Fault, bool) { return Fault{}, false }

// TestWithKeepsTheOther checks that the two File copies compose: adding
// faults keeps the write flags and the alignment, adding flags keeps the
// injector, and neither changes the File it was made from.
func TestWithKeepsTheOther(t *testing.T) {
	o, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	f := Buffered(o)
	defer f.Close()
	var inj Injector = nopInjector{}

	g := f.WithWriteFlags(0x80).WithFaults(inj)
	assert.Equal(t, 0x80, g.writeFlags)
	assert.Equal(t, inj, g.faults)
	assert.Equal(t, f.Alignment(), g.Alignment())
	assert.Equal(t, f.AlignmentSource(), g.AlignmentSource())

	h := f.WithFaults(inj).WithWriteFlags(0x40).WithWriteFlags(0x80)
	assert.Equal(t, 0xc0, h.writeFlags, "flags add up")
	assert.Equal(t, inj, h.faults)

	assert.Zero(t, f.writeFlags, "the original keeps its flags")
	assert.Nil(t, f.faults, "and its injector")
}
