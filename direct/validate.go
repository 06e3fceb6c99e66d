package direct

import (
	"fmt"
)

// validate rejects a request before it is queued, so that an alignment or
// usage error surfaces at Submit, naming its values.
func (x *xfer) validate(r Request) error {
	if r.Done == nil {
		return fmt.Errorf("direct: %v request without a Done channel", r.Op)
	}
	switch r.Op {
	case OpWrite, OpRead:
		return x.checkRW(r.Op.syscall(), r.Buf, r.Off)
	case OpSync:
		return nil
	}
	return fmt.Errorf("direct: unknown operation %v", r.Op)
}
