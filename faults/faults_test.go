package faults_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
)

func TestPlanPicksCalls(t *testing.T) {
	p := faults.NewPlan(
		faults.Fail(direct.OpSync, 2, syscall.EIO),         // the third sync and later
		faults.Short(direct.OpRead, 2, 100),                // the first two reads over 100 bytes
		faults.Transient(direct.OpWrite, 1, syscall.EINTR), // the first write
		faults.Late(0, 1, time.Millisecond),                // then the first call of anything left
	)
	var got []string
	call := func(op direct.Op, n int) {
		f, ok := p.Inject(op, 0, n)
		switch {
		case !ok:
			got = append(got, "-")
		case f.Err != 0:
			got = append(got, f.Err.Error())
		case f.Short > 0:
			got = append(got, "short")
		default:
			got = append(got, "late")
		}
	}
	call(direct.OpSync, 0)    // sync 0: passes rule 1, not a read, not a write; late
	call(direct.OpSync, 0)    // sync 1: nothing left
	call(direct.OpSync, 0)    // sync 2: EIO
	call(direct.OpSync, 0)    // sync 3: EIO
	call(direct.OpRead, 50)   // too small to shorten
	call(direct.OpRead, 4096) // short
	call(direct.OpWrite, 10)  // EINTR
	call(direct.OpWrite, 10)  // nothing
	assert.Equal(t, []string{"late", "-", "input/output error", "input/output error", "-", "short", "interrupted system call", "-"}, got)
	assert.Equal(t, map[string]int{"EIO": 2, "short": 1, "EINTR": 1, "late": 1}, p.Injected())
}
